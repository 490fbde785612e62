"""Facts about torch releases, read from their wheels without installing them.

    python -m tools.wheel_facts                       # every release below
    python -m tools.wheel_facts --versions "1.10.0 2.2.2"

For each release, `pip download --no-deps torch==X` fetches the wheel (for
releases without a wheel for this Python, the wheel for an older Python on
the same platform: the files read here do not depend on the Python version).
The wheel is opened as a zip file, the few members below are read, and the
wheel is deleted. Results are cached in book/_data/wheel_facts.json (a
release's wheel never changes); the table book/versions.md includes is
written to book/_generated/wheel_facts.md. The releases read are those of
torch_releases.txt and, before them, the older ones of BEFORE_FLOOR.

Read from each wheel:
- Functions.h: is the transpose's backward node `TBackward0` or `TBackward`?
- variable.h: the type of the cached accumulator field `grad_accumulator_`,
  and the overloads of `try_get_grad_accumulator`;
- input_metadata.h: whether `InputMetadata::maybe_reduce` (the shape check) exists;
- derivatives.yaml: where it is shipped, and the `t` entry's formula;
- torch/autograd/graph.py: `def get_gradient_edge`, `def register_prehook`;
- libtorch_python.so: the attribute name `_input_metadata` of backward nodes;
- libtorch_cpu.so: whether the engine has a `validate_outputs_impl` function.

And, for the releases of CONVOLUTION_RELEASES only (those chapter 6 names,
two of 2019 among them), the convolution's backward nodes declared in
Functions.h (`CudnnConvolutionBackward`, `ConvolutionBackward0`, ...), in a
table of their own.

A fact read from a file the wheel does not have is recorded as null and shown
as "file not in wheel"; "no" means the file is there without the feature.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from tools.book import DATA, GENERATED, torch_releases, version_tuple
from tools.pip_config import pip_environment

RESULTS = DATA / "wheel_facts.json"
TABLE = GENERATED / "wheel_facts.md"
# Releases before the book's floor (the first line of torch_releases.txt),
# one per minor release: they date the facts the chapters rely on.
BEFORE_FLOOR = ["1.9.1", "1.10.0", "1.11.0", "1.12.1", "1.13.1", "2.0.1", "2.1.2",
                "2.2.2", "2.3.1", "2.4.1"]
# Releases whose convolution nodes are read (chapter 6 dates the name
# `CudnnConvolutionBackward` of a 2019 report with them); 1.1.0 and 1.2.0
# are read for that table only.
CONVOLUTION_RELEASES = ["1.1.0", "1.2.0", "1.10.0", "1.11.0"]
INCLUDE = "torch/include/torch/csrc/autograd/"
MISSING = "file not in wheel"


def releases():
    """Every release read: those before the floor, then the supported ones."""
    supported = torch_releases()
    floor = version_tuple(supported[0])
    if any(version_tuple(r) >= floor for r in BEFORE_FLOOR):
        raise ValueError(f"BEFORE_FLOOR must hold releases before {supported[0]}")
    return BEFORE_FLOOR + supported


def download(release, folder):
    env = pip_environment(release)
    base = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--dest", str(folder), f"torch=={release}"]
    if version_tuple(release) < (2, 5):  # not in pip's cache: keep it out of it
        base.append("--no-cache-dir")
    done = subprocess.run(base, env=env, capture_output=True, text=True)
    if done.returncode != 0:  # no wheel for this Python: take one for an older one
        for python in ("3.10", "3.9", "3.8", "3.7"):
            done = subprocess.run(base + ["--only-binary=:all:", "--python-version", python,
                                          "--platform", "manylinux2014_x86_64",
                                          "--platform", "manylinux1_x86_64"],
                                  env=env, capture_output=True, text=True)
            if done.returncode == 0:
                break
    if done.returncode != 0:
        raise RuntimeError(f"no wheel of torch {release}: {done.stderr.strip()[-300:]}")
    return next(Path(folder).glob("torch-*.whl"))


def member(wheel, suffix):
    names = [n for n in wheel.namelist() if n.endswith(suffix)]
    return names[0] if names else None


def read_text(wheel, suffix):
    name = member(wheel, suffix)
    return None if name is None else wheel.read(name).decode("utf-8", "replace")


def contains_bytes(wheel, suffix, needle):
    """Whether the member ending in `suffix` contains `needle`, read in chunks."""
    name = member(wheel, suffix)
    if name is None:
        return None
    tail = b""
    with wheel.open(name) as stream:
        while chunk := stream.read(1 << 24):
            if needle in tail + chunk:
                return True
            tail = chunk[-len(needle):]
    return False


def declarations(header, name):
    """Each declaration in `header` of a function called `name`, on one line."""
    lines = header.splitlines()
    found = []
    for index, line in enumerate(lines):
        if re.search(rf"\b{name}\(", line) and "TORCH_API" in line:
            text, end = line.strip(), index
            while not text.rstrip().endswith((";", "{")) and end + 1 < len(lines):
                end += 1
                text += " " + lines[end].strip()
            found.append(re.sub(r"\s+", " ", re.sub(r"/\*.*?\*/", "", text)).strip())
    return found


def found(pattern, text, group=0):
    """The match of `pattern` in `text` (its `group`; '' when there is none),
    or None when `text` is None (its file is not in the wheel)."""
    if text is None:
        return None
    match = re.search(pattern, text, re.M)
    return match.group(group).strip() if match else ""


def has(pattern, text):
    """Whether `pattern` is in `text`; None when `text` is None."""
    return None if text is None else bool(re.search(pattern, text, re.M))


def convolution_nodes(functions):
    """The convolution backward nodes (`struct TORCH_API
    [Cudnn]ConvolutionBackward[N]`) declared in Functions.h's text, in order;
    None when the file is not in the wheel."""
    if functions is None:
        return None
    return re.findall(r"^struct TORCH_API ((?:Cudnn)?ConvolutionBackward\d*) ",
                      functions, re.M)


def facts(path, convolution=False, only_convolution=False):
    """The facts of the wheel at `path`: each None where its file is missing;
    with `convolution`, its convolution nodes too; with `only_convolution`,
    those alone."""
    with zipfile.ZipFile(path) as wheel:
        functions = read_text(wheel, INCLUDE + "generated/Functions.h")
        if convolution:
            nodes = {"wheel": Path(path).name,
                     "convolution_nodes": convolution_nodes(functions)}
            if only_convolution:
                return nodes
        variable = read_text(wheel, INCLUDE + "variable.h")
        metadata = read_text(wheel, INCLUDE + "input_metadata.h")
        graph = read_text(wheel, "torch/autograd/graph.py")
        derivatives = read_text(wheel, "autograd/derivatives.yaml")
        return {
            "wheel": Path(path).name,
            "transpose_node": found(r"^struct TORCH_API (TBackward\d*) ", functions, 1),
            "accumulator_field": found(r"^\s*(\S.*?)\s+grad_accumulator_;", variable, 1),
            "try_get_grad_accumulator": (None if variable is None else
                                         declarations(variable, "try_get_grad_accumulator")),
            "maybe_reduce": has(r"maybe_reduce\(", metadata),
            "derivatives_yaml": member(wheel, "autograd/derivatives.yaml"),
            "t_formula": found(r"^- name: t\(Tensor.*\n\s+self: (.+)", derivatives, 1),
            "get_gradient_edge": has(r"^def get_gradient_edge\(", graph),
            "register_prehook": has(r"^\s+def register_prehook\(", graph),
            "_input_metadata": contains_bytes(wheel, "lib/libtorch_python.so",
                                              b"_input_metadata\x00"),
            "validate_outputs_impl": contains_bytes(wheel, "lib/libtorch_cpu.so",
                                                    b"validate_outputs_impl"),
            **(nodes if convolution else {}),
        }


def first(data, releases, test):
    """The first release (in order) for which `test` holds, if it holds for
    every later release too, with the release before it."""
    ordered = sorted(releases, key=version_tuple)
    for index, release in enumerate(ordered):
        if all(test(data[r]) for r in ordered[index:]):
            return release, (ordered[index - 1] if index else None)
    return None, ordered[-1] if ordered else None


def yes(value):
    """A yes/no fact: 'yes', 'no', or MISSING when its file is not in the wheel."""
    return MISSING if value is None else "yes" if value else "no"


def code(value, empty):
    """A text fact in backticks; `empty` where the file has none, MISSING
    where the file is not in the wheel."""
    return MISSING if value is None else f"`{value}`" if value else empty


def overload_kinds(declared):
    """`try_get_grad_accumulator`'s overloads by their argument's type."""
    if declared is None:
        return MISSING
    kinds = [re.search(r"\(\s*(?:const )?([\w:]+)", d).group(1) for d in declared]
    return " + ".join(f"`{k}`" for k in kinds) or "none"


def short_type(field):
    """'c10::weak_intrusive_ptr<Node>' -> 'weak_intrusive_ptr'."""
    if not field:
        return field
    return field.replace("std::", "").replace("c10::", "").split("<")[0]


def cpp_row(release, f):
    return (f"| {release} | {code(f['transpose_node'], 'none found')} | "
            f"{code(short_type(f['accumulator_field']), 'none found')} | "
            f"{overload_kinds(f['try_get_grad_accumulator'])} | "
            f"{yes(f['maybe_reduce'])} | {yes(f['validate_outputs_impl'])} |")


def python_row(release, f):
    return (f"| {release} | {yes(f['get_gradient_edge'])} | {yes(f['_input_metadata'])} | "
            f"{yes(f['register_prehook'])} | {code(f['t_formula'], 'no `t` entry')} |")


def tables(data, releases):
    cpp = ["| torch | transpose's node | `grad_accumulator_` | `try_get_grad_accumulator` "
           "| `maybe_reduce` | `validate_outputs_impl` |",
           "| --- |" + " --- |" * 5]
    python = ["| torch | `get_gradient_edge` | `_input_metadata` | `register_prehook` "
              "| `t` in `derivatives.yaml` |",
              "| --- |" + " --- |" * 4]
    cpp += [cpp_row(r, data[r]) for r in releases]
    python += [python_row(r, data[r]) for r in releases]
    return (["C++ (headers under `torch/include`, strings of the shared libraries):", ""]
            + cpp + ["", "Python (`torch/autograd/graph.py`, `libtorch_python.so`) and "
                     "the shipped `torchgen/packaged/autograd/derivatives.yaml`:", ""]
            + python)


# What the summary dates, and the test of each wheel's facts for it.
FIRSTS = [
    ("numbered node names (`TBackward0`)", lambda f: f["transpose_node"] == "TBackward0"),
    ("`torch.autograd.graph.get_gradient_edge`", lambda f: f["get_gradient_edge"]),
    ("`Node._input_metadata`", lambda f: f["_input_metadata"]),
    ("`Node.register_prehook`", lambda f: f["register_prehook"]),
    ("`InputMetadata::maybe_reduce`", lambda f: f["maybe_reduce"]),
    ("`validate_outputs_impl`", lambda f: f["validate_outputs_impl"]),
    ("two `try_get_grad_accumulator` overloads",
     lambda f: len(f["try_get_grad_accumulator"] or []) == 2),
    ("`grad_accumulator_` held as a `c10::weak_intrusive_ptr<Node>` "
     "(a `std::weak_ptr<Node>` before)",
     lambda f: "weak_intrusive_ptr" in (f["accumulator_field"] or "")),
]


def summary(data, releases):
    lines = []
    for what, test in FIRSTS:
        release, before = first(data, releases, test)
        if release is None:
            lines.append(f"- {what}: not in the newest wheel read ({before}).")
        elif before is None:
            lines.append(f"- {what}: in every wheel read, from {release} on.")
        else:
            minor = ".".join(release.split(".")[:2])
            lines.append(f"- {what}: first in **torch {minor}** (the {release} "
                         f"wheel has it, the {before} wheel has not).")
    return lines


def convolution_table(data):
    """The convolution nodes of the releases read for them."""
    read = sorted((r for r in data if "convolution_nodes" in data[r]), key=version_tuple)
    if not read:
        return ""
    rows = [f"| {r} | " + (MISSING if data[r]["convolution_nodes"] is None else
                           ", ".join(f"`{n}`" for n in data[r]["convolution_nodes"])
                           or "none") + " |" for r in read]
    return ("\n\nThe convolution's backward nodes: each `struct TORCH_API "
            "[Cudnn]ConvolutionBackward[N]` that the wheel's "
            "`torch/include/torch/csrc/autograd/generated/Functions.h` declares, read "
            f"for {', '.join(read)} only (chapter 6 dates a 2019 report's node name "
            "with them):\n\n| torch | convolution nodes in `Functions.h` |\n| --- | --- |\n"
            + "\n".join(rows))


def table_text(data):
    releases = sorted((r for r in data if "transpose_node" in data[r]), key=version_tuple)
    wheels = sorted(data, key=version_tuple)
    return ("\n".join(summary(data, releases)) + "\n\n" + "\n".join(tables(data, releases))
            + convolution_table(data)
            + "\n\nRead by `tools/wheel_facts.py` from each release's Linux x86-64 wheel "
            "on PyPI: " + ", ".join(f"`{data[r]['wheel']}`" for r in wheels) + ".\n"
            f"\n*{MISSING}*: the wheel has no file to read that fact from.\n")


def generated():
    """{the table's path: its text}, from the facts stored (`make generate`)."""
    return {TABLE: table_text(json.loads(RESULTS.read_text()))}


def save(data, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", default=os.environ.get("WHEEL_VERSIONS")
                        or " ".join(releases()),
                        help="torch releases, separated by spaces (default: those "
                             "before the floor and those of torch_releases.txt)")
    args = parser.parse_args(argv)
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    wanted = args.versions.split()
    wanted += [r for r in CONVOLUTION_RELEASES if r not in wanted]
    every = releases()
    for release in wanted:
        convolution = release in CONVOLUTION_RELEASES
        if release in data and (not convolution or "convolution_nodes" in data[release]):
            continue
        with tempfile.TemporaryDirectory(prefix="torch-wheel-") as folder:
            data[release] = facts(download(release, folder), convolution,
                                  only_convolution=release not in every)
        print(release, json.dumps(data[release]), flush=True)
        save(data, RESULTS)
    TABLE.write_text(table_text(data))
    print(TABLE.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
