"""Where the book's files are, and the facts that live in one file each.

- the chapters and pages: _toc.yml, in reading order;
- the torch the stored outputs were made with: requirements.txt's pin;
- the torch releases the book supports: torch_releases.txt.

Run as a program it prints the toc's notebooks, one per line (for nbval):
    python -m tools.book
or the CPU-kernel variables of the stored outputs (for the Makefile):
    python -m tools.book --cpu-kernels
"""
import importlib.util
import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"


def book_extension(name):
    """The module book/_ext/NAME.py, loaded from its file as Sphinx loads it
    (the extensions are no package: they are copied into the class site's
    and the teacher's pack's sources, and import nothing of tools/); a new
    module each call, so that what one caller changes in it stays there."""
    path = BOOK / "_ext" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no book extension {name!r}: {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"book_ext_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
GENERATED = BOOK / "_generated"     # derived files only: `make generate` writes each
DATA = BOOK / "_data"               # inputs: the plan, and what was measured
REQUIREMENTS = ROOT / "requirements.txt"
RELEASES = ROOT / "torch_releases.txt"


# The error the book answers, as PyTorch prints it (the tests check that the
# chapters, the intro and the site search show exactly this text).
THE_ERROR = ("RuntimeError: Function TBackward0 returned an invalid gradient at "
             "index 0 - got [10, 90] but expected shape compatible with [10, 100]")


# PyTorch's CPU kernels, held at the AVX2 level where the stored outputs were
# made (an AVX-512 machine rounds differently): the variables `make test`,
# `make execute` and `make study` set. `python -m tools.book --cpu-kernels`
# prints them for the Makefile.
CPU_KERNELS = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
               "ONEDNN_MAX_CPU_ISA": "AVX2"}


def toc_entries():
    """Every `root`/`file` entry of _toc.yml, in reading order, as strings."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [toc["root"]]

    def walk(items):
        for item in items or []:
            if "file" in item:
                entries.append(item["file"])
            walk(item.get("sections"))

    walk(toc.get("chapters"))
    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return entries


def tags(cell):
    """A notebook cell's tags, as a new list."""
    return list(cell.metadata.get("tags", []))


def toc_notebooks():
    """Paths of the toc's notebooks, in reading order."""
    paths = []
    for entry in toc_entries():
        path = ROOT / entry
        if path.suffix != ".ipynb":
            path = path.with_name(path.name + ".ipynb")
        if path.is_file():
            paths.append(path)
    return paths


def render(notebook):
    """A notebook's file text, as nbformat.write writes it."""
    import nbformat  # here: `python -m tools.book`, which make runs, never needs it (1 s)

    text = nbformat.writes(notebook)
    return text if text.endswith("\n") else text + "\n"


def chapter_number(path):
    """`book/05_variance_pruning.ipynb` -> 5."""
    match = re.match(r"(\d\d)_", Path(path).name)
    if not match:
        raise ValueError(f"{Path(path).name} is not a chapter (NN_name.ipynb)")
    return int(match[1])


def pins():
    """{package name, lower case with '-': version} from requirements.txt."""
    found = {}
    for line in REQUIREMENTS.read_text().splitlines():
        line = line.split("#")[0].strip()
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)==(\S+)", line)
        if match:
            found[match[1].lower().replace("_", "-")] = match[2]
    return found


def torch_pin():
    """The torch release the stored outputs were made with, e.g. '2.13.0'."""
    return pins()["torch"]


def torch_releases():
    """The supported torch releases, oldest first (one minor release each)."""
    releases = [line.split("#")[0].strip()
                for line in RELEASES.read_text().splitlines()]
    releases = [r for r in releases if r]
    if not releases or any(not re.fullmatch(r"\d+\.\d+\.\d+", r) for r in releases):
        raise ValueError(f"{RELEASES.name}: one release like 2.5.1 per line")
    return releases


def version_tuple(text):
    """'2.10.0+cpu' -> (2, 10, 0)."""
    return tuple(int(p) for p in re.findall(r"\d+", text.split("+")[0])[:3])


if __name__ == "__main__":
    import sys
    if sys.argv[1:] == ["--cpu-kernels"]:
        print(" ".join(f"{name}={value}" for name, value in CPU_KERNELS.items()))
    elif sys.argv[1:] == ["--floor"]:
        print(torch_releases()[0])
    else:
        for notebook in toc_notebooks():
            print(notebook.relative_to(ROOT))
