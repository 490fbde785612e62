"""Print, as one line of JSON, a few facts read live from the torch installed.

    VENV/bin/python -I tools/probe_torch.py

A program, not a module of the `tools` package: `tools.versions` runs it with
the interpreter of the venv under test, whose environment has torch but not
this repository. It prints the torch and Python versions, the CUDA version
torch was built for (null for a CPU build), whether three APIs the chapters use
exist (one of them `torch.batch_norm_update_stats`, which chapter 5's
statistics hook calls), the chain of backward nodes of `nn.Linear` on a 1-D input, and the C++
function that raises anomaly mode's NaN error (null where the error names
none, false where none is raised).
"""
import json
import os
import platform
import re
import warnings

# Read by torch when it is imported: C++ errors then say where they were raised.
os.environ["TORCH_SHOW_CPP_STACKTRACES"] = "1"

import torch  # noqa: E402
import torch.autograd.graph as graph  # noqa: E402


class ReturnsNaN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad * float("nan")


def nan_raise_site():
    """The C++ function anomaly mode's NaN check raises from: None where the
    error names none, False where no error is raised."""
    try:
        with torch.autograd.set_detect_anomaly(True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ReturnsNaN.apply(torch.ones(3, requires_grad=True)).sum().backward()
    except RuntimeError as error:
        found = re.search(r"Exception raised from (\S+) at", str(error))
        return found[1] if found else None
    return False


def chain(node):
    """'A -> B -> ...': the node and, at each step, its last next function."""
    names = []
    while node is not None:
        names.append(type(node).__name__)
        edges = [n for n, _ in node.next_functions if n is not None]
        node = edges[-1] if edges else None
    return " -> ".join(names)


def main():
    node = (torch.ones(2, requires_grad=True) * 2).grad_fn
    print(json.dumps({
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda_build": torch.version.cuda,
        "get_gradient_edge": hasattr(graph, "get_gradient_edge"),
        "_input_metadata": hasattr(node, "_input_metadata"),
        "batch_norm_update_stats": hasattr(torch, "batch_norm_update_stats"),
        "linear_1d": chain(torch.nn.Linear(3, 2)(torch.ones(3)).grad_fn),
        "nan_raise_site": nan_raise_site(),
    }))


if __name__ == "__main__":
    main()
