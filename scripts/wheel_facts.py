"""Facts about torch releases, read from their wheels without installing them.

    python scripts/wheel_facts.py                       # every release below
    python scripts/wheel_facts.py --versions "1.10.0 2.2.2"

For each release, `pip download --no-deps torch==X` fetches the wheel (for
releases without a wheel for this Python, the wheel for an older Python on
the same platform: the files read here do not depend on the Python version).
The wheel is opened as a zip file, the few members below are read, and the
wheel is deleted. Results are cached in book/_generated/wheel_facts.json (a
release's wheel never changes); the table book/versions.md includes is
written to book/_generated/wheel_facts.md.

Read from each wheel:
- Functions.h: is the transpose's backward node `TBackward0` or `TBackward`?
- variable.h: the type of the cached accumulator field `grad_accumulator_`,
  and the overloads of `try_get_grad_accumulator`;
- input_metadata.h: whether `InputMetadata::maybe_reduce` (the shape check) exists;
- derivatives.yaml: where it is shipped, and the `t` entry's formula;
- torch/autograd/graph.py: `def get_gradient_edge`, `def register_prehook`;
- libtorch_python.so: the attribute name `_input_metadata` of backward nodes;
- libtorch_cpu.so: whether the engine has a `validate_outputs_impl` function.
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

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "book" / "_generated"
RESULTS = GENERATED / "wheel_facts.json"
TABLE = GENERATED / "wheel_facts.md"
RELEASES = ["1.9.1", "1.10.0", "1.11.0", "1.12.1", "1.13.1", "2.0.1", "2.1.2",
            "2.2.2", "2.3.1", "2.4.1", "2.5.1", "2.6.0", "2.7.1", "2.8.0", "2.9.1",
            "2.10.0", "2.11.0", "2.12.1", "2.13.0", "2.14.1", "2.15.0"]
PIP_CAP = Path("/etc/xdg/pip/constraints.txt")
INCLUDE = "torch/include/torch/csrc/autograd/"


def version_tuple(text):
    return tuple(int(p) for p in re.findall(r"\d+", text)[:3])


def download(release, folder):
    env = dict(os.environ)
    if PIP_CAP.is_file():  # a local cap on torch in pip's configuration
        cap = re.search(r"^torch<=(\S+)", PIP_CAP.read_text(), re.M)
        if cap and version_tuple(release) > version_tuple(cap.group(1)):
            env["PIP_CONFIG_FILE"] = os.devnull
    base = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--dest", str(folder), f"torch=={release}"]
    if version_tuple(release) < (2, 5):  # not in pip's cache: keep it out of it
        base.append("--no-cache-dir")
    done = subprocess.run(base, env=env, capture_output=True, text=True)
    if done.returncode != 0:  # no wheel for this Python: take one for an older one
        for python in ("3.10", "3.9", "3.8"):
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


def facts(path):
    with zipfile.ZipFile(path) as wheel:
        functions = read_text(wheel, INCLUDE + "generated/Functions.h") or ""
        variable = read_text(wheel, INCLUDE + "variable.h") or ""
        metadata = read_text(wheel, INCLUDE + "input_metadata.h") or ""
        graph = read_text(wheel, "torch/autograd/graph.py") or ""
        yaml_name = member(wheel, "autograd/derivatives.yaml")
        derivatives = read_text(wheel, "autograd/derivatives.yaml") or ""
        names = re.findall(r"^struct TORCH_API (TBackward\d*) ", functions, re.M)
        field = re.search(r"^\s*(\S.*?)\s+grad_accumulator_;", variable, re.M)
        t_entry = re.search(r"^- name: t\(Tensor.*\n\s+self: (.+)", derivatives, re.M)
        return {
            "wheel": path.name,
            "transpose_node": names[0] if names else None,
            "accumulator_field": field.group(1) if field else None,
            "try_get_grad_accumulator": declarations(variable, "try_get_grad_accumulator"),
            "maybe_reduce": "maybe_reduce(" in metadata,
            "derivatives_yaml": yaml_name,
            "t_formula": t_entry.group(1).strip() if t_entry else None,
            "get_gradient_edge": bool(re.search(r"^def get_gradient_edge\(", graph, re.M)),
            "register_prehook": bool(re.search(r"^\s+def register_prehook\(", graph, re.M)),
            "_input_metadata": contains_bytes(wheel, "lib/libtorch_python.so",
                                              b"_input_metadata\x00"),
            "validate_outputs_impl": contains_bytes(wheel, "lib/libtorch_cpu.so",
                                                    b"validate_outputs_impl"),
        }


def first(data, releases, test):
    """The first release (in order) for which `test` holds, if it holds for
    every later release too, with the release before it."""
    ordered = sorted(releases, key=version_tuple)
    for index, release in enumerate(ordered):
        if all(test(data[r]) for r in ordered[index:]):
            return release, (ordered[index - 1] if index else None)
    return None, ordered[-1] if ordered else None


def write_table(data, path):
    releases = sorted(data, key=version_tuple)
    yes = lambda value: "yes" if value else "no"
    cpp = ["| torch | transpose's node | `grad_accumulator_` | `try_get_grad_accumulator` "
           "| `maybe_reduce` | `validate_outputs_impl` |",
           "| --- |" + " --- |" * 5]
    python = ["| torch | `get_gradient_edge` | `_input_metadata` | `register_prehook` "
              "| `t` in `derivatives.yaml` |",
              "| --- |" + " --- |" * 4]
    for release in releases:
        f = data[release]
        overloads = f["try_get_grad_accumulator"]
        kinds = [re.search(r"\(\s*(?:const )?([\w:]+)", d).group(1) for d in overloads]
        field = (f["accumulator_field"] or "").replace("std::", "").replace("c10::", "")
        cpp.append(f"| {release} | `{f['transpose_node']}` | `{field.split('<')[0]}` | "
                   + " + ".join(f"`{k}`" for k in kinds) + " | "
                   f"{yes(f['maybe_reduce'])} | {yes(f['validate_outputs_impl'])} |")
        python.append(f"| {release} | {yes(f['get_gradient_edge'])} | "
                      f"{yes(f['_input_metadata'])} | {yes(f['register_prehook'])} | "
                      + (f"`{f['t_formula']}`" if f["t_formula"] else "not shipped") + " |")
    lines = (["C++ (headers under `torch/include`, strings of the shared libraries):", ""]
             + cpp + ["", "Python (`torch/autograd/graph.py`, `libtorch_python.so`) and "
                      "the shipped `torchgen/packaged/autograd/derivatives.yaml`:", ""]
             + python)
    summary = []
    for what, test in [
            ("numbered node names (`TBackward0`)", lambda f: f["transpose_node"] == "TBackward0"),
            ("`torch.autograd.graph.get_gradient_edge`", lambda f: f["get_gradient_edge"]),
            ("`Node._input_metadata`", lambda f: f["_input_metadata"]),
            ("`Node.register_prehook`", lambda f: f["register_prehook"]),
            ("`InputMetadata::maybe_reduce`", lambda f: f["maybe_reduce"]),
            ("`validate_outputs_impl`", lambda f: f["validate_outputs_impl"]),
            ("two `try_get_grad_accumulator` overloads",
             lambda f: len(f["try_get_grad_accumulator"]) == 2),
            ("`grad_accumulator_` held as a `c10::weak_intrusive_ptr<Node>` "
             "(a `std::weak_ptr<Node>` before)",
             lambda f: "weak_intrusive_ptr" in (f["accumulator_field"] or ""))]:
        release, before = first(data, releases, test)
        minor = lambda r: ".".join(r.split(".")[:2])
        if release is None:
            summary.append(f"- {what}: not in the newest wheel read ({before}).")
        elif before is None:
            summary.append(f"- {what}: in every wheel read, from {release} on.")
        else:
            summary.append(f"- {what}: first in **torch {minor(release)}** (the {release} "
                           f"wheel has it, the {before} wheel has not).")
    text = ("\n".join(summary) + "\n\n" + "\n".join(lines) + "\n\n"
            "Read by `scripts/wheel_facts.py` from each release's Linux x86-64 wheel on "
            "PyPI: " + ", ".join(f"`{data[r]['wheel']}`" for r in releases) + ".\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--versions", default=os.environ.get("WHEEL_VERSIONS")
                        or " ".join(RELEASES))
    args = parser.parse_args()
    data = json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}
    for release in args.versions.split():
        if release in data:
            continue
        with tempfile.TemporaryDirectory(prefix="torch-wheel-") as folder:
            wheel = download(release, folder)
            data[release] = facts(wheel)
        print(release, json.dumps(data[release]), flush=True)
        GENERATED.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    write_table(data, TABLE)
    print(TABLE.read_text())


if __name__ == "__main__":
    main()
