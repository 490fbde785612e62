"""Cells written from one source: each chapter's setup cell, and the copies
of helpers that a chapter needs from the chapter that explains them.

A chapter must run alone in Colab, so it cannot import another chapter's
code: it carries a copy. The copy is never edited by hand. A copy cell says
where its code comes from in its metadata,

    "copy_of": ["04_every_way_out.ipynb#prune-linear-pair", ...],
    "copy_title": "prune_linear_pair, the pair surgery"

naming source cells by notebook and cell id; `make generate` writes its
source (the sources in that order, under a folded title that says where they
are explained), its tags and its form view. The first code cell of each
chapter is its setup cell, marked `"setup": {"install": [...]}`: its source
comes from SETUP below, with the packages Colab lacks pinned as in
requirements.txt; its `install` list is written too: the packages of
INSTALLABLE that the chapter's other code cells import. A cell marked `"study": "<chapter>"` holds the stored
study of that chapter (tools.study writes its source from the study's file).
"""
import ast
import copy

from tools.book import BOOK, chapter_number, pins
from tools.study import study_cell_source

SETUP_INSTALL = '''try:
    import {module}  # noqa: F401  (Colab lacks it)
except ModuleNotFoundError:
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "{spec}"],
                   check=True)
'''
SETUP = '''import torch

torch.manual_seed(0)
torch.set_num_threads(1)
%xmode Minimal
print("torch", torch.__version__)
if tuple(int(part) for part in torch.__version__.split(".")[:2]) < (2, 5):
    raise RuntimeError(f"This chapter needs torch 2.5 or newer; this runtime has "
                       f"torch {torch.__version__}. Upgrade it: pip install -U torch")'''
# What a setup cell may install: pip name -> the module it provides.
INSTALLABLE = {"torchviz": "torchviz", "torch-pruning": "torch_pruning"}


def setup_source(install):
    """The setup cell's code: install each package of `install` if missing
    (pinned as in requirements.txt), seed, one thread, short tracebacks,
    and stop on a torch older than the book supports."""
    unknown = [name for name in install if name not in INSTALLABLE]
    if unknown:
        raise ValueError(f"setup cell: cannot install {unknown}; known: "
                         f"{sorted(INSTALLABLE)}")
    pinned = pins()
    parts = [SETUP_INSTALL.format(module=INSTALLABLE[name],
                                  spec=f"{name}=={pinned[name]}")
             for name in install]
    return "\n".join(parts + [SETUP])


def tags(cell):
    return list(cell.metadata.get("tags", []))


def imported_installables(code_cells):
    """The packages of INSTALLABLE that `code_cells` import, in INSTALLABLE's
    order: what a chapter's setup cell must install, and nothing more."""
    modules = set()
    for cell in code_cells:
        source = "\n".join(line for line in cell.source.splitlines()
                           if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    return [name for name, module in INSTALLABLE.items() if module in modules]


def find_source(reference, notebooks):
    """The cell that `reference` ('NN_name.ipynb#cell-id') names."""
    name, _, cell_id = reference.partition("#")
    notebook = notebooks.get(BOOK / name)
    if notebook is None:
        raise LookupError(f"copy_of {reference!r}: no chapter {name} in the toc")
    found = [cell for cell in notebook.cells if cell.get("id") == cell_id]
    if not found:
        raise LookupError(f"copy_of {reference!r}: {name} has no cell with id {cell_id!r}")
    if found[0].metadata.get("copy_of"):
        raise ValueError(f"copy_of {reference!r} names a copy: name its source")
    return found[0]


def without_title(source):
    lines = source.splitlines()
    return "\n".join(lines[1:] if lines and lines[0].startswith("# @title") else lines)


def copy_source(cell, notebooks):
    """The source a copy cell must have, from the cells it names."""
    references = cell.metadata["copy_of"]
    title = cell.metadata.get("copy_title")
    if not references or not title:
        raise ValueError("a copy cell needs copy_of (a list) and copy_title")
    chapters = {reference.partition("#")[0] for reference in references}
    if len(chapters) != 1:
        raise ValueError(f"one copy cell copies from one chapter, got {sorted(chapters)}")
    name = chapters.pop()
    number = chapter_number(name)
    header = [f"# @title {title} (copied from chapter {number})",
              f"# Copied from chapter {number} ({name}), where it is explained.",
              "# Written by `make generate`: edit the original, not this copy."]
    bodies = [without_title(find_source(reference, notebooks).source).strip("\n")
              for reference in references]
    return "\n".join(header) + "\n" + "\n\n\n".join(bodies)


def with_generated_cells(notebooks):
    """{path: notebook} with every copy and setup cell rewritten from its
    source; the notebooks given are not changed."""
    result = {}
    for path, notebook in notebooks.items():
        notebook = copy.deepcopy(notebook)
        code = [cell for cell in notebook.cells if cell.cell_type == "code"]
        if not code or "setup" not in code[0].metadata:
            raise ValueError(f"{path.name}: the first code cell must be the setup "
                             'cell, marked "setup": {"install": [...]}')
        # the chapter's cells as they will be (copies included) say what it imports
        for cell in code[1:]:
            if "copy_of" in cell.metadata:
                cell.source = copy_source(cell, notebooks)
        code[0].metadata["setup"] = {"install": imported_installables(code[1:])}
        code[0].source = setup_source(code[0].metadata["setup"]["install"])
        for cell in code[1:]:
            if "setup" in cell.metadata:
                raise ValueError(f"{path.name}: only the first code cell is a setup cell")
            if "study" in cell.metadata:           # the stored study's data
                cell.source = study_cell_source(cell.metadata["study"])
                # data, not code to read: left out of the book's page (tens
                # of kilobytes of highlighted numbers on a phone), folded in Colab
                cell.metadata["tags"] = ["generated", "remove-input"]
                cell.metadata["cellView"] = "form"
                continue
            if "copy_of" not in cell.metadata:
                continue
            sources = [find_source(r, notebooks) for r in cell.metadata["copy_of"]]
            cell.source = copy_source(cell, notebooks)
            exported = any("export" in tags(source) for source in sources)
            cell.metadata["tags"] = ["export"] * exported + ["generated", "hide-input"]
            cell.metadata["cellView"] = "form"
        result[path] = notebook
    return result
