"""Cells written from one source: each chapter's setup cell, and the copies
of helpers that a chapter needs from the chapter that explains them.

A chapter must run alone in Colab, so it cannot import another chapter's
code: it carries a copy. The copy is never edited by hand. A copy cell says
where its code comes from in its metadata,

    "copy_of": ["04_every_way_out.ipynb#prune-linear-pair", ...],
    "copy_title": "prune_linear_pair, the pair surgery"

naming a source cell by notebook and cell id (a copy cell naming several
becomes one copy cell per source, in that order: `one_copy_per_source`);
`make generate` writes its source (under a folded title that says where it
is explained), its tags (`generated`, `hide-input`), its form view and its
`copy_hash`, the hash of the text it wrote: a copy whose text no longer
matches its hash was edited by hand, one that matches it but not its source
is merely stale (`make generate --check` says which). Each source cell gets
a first comment line (under its `# @title`, if any) that names the chapters
copying it ("# Copied into chapters 5 and 7 by ..."), which copies leave out.

The first code cell of each chapter is its setup cell, marked
`"setup": {"install": [...]}`: its source comes from SETUP below, with the
packages Colab lacks pinned as in requirements.txt; its `install` list is
written too: the packages of INSTALLABLE that the chapter's other code cells
import. A cell marked `"study": "<chapter>"` holds the stored study of that
chapter (tools.study writes its source from the study's file), and one
marked `"bench": "<name>"` the stored result of `make bench` (tools.bench).
A cell tagged `generated` must carry one of these sources (SOURCES).

`names_defined_twice` is the rule of one name, one meaning across chapters.
"""
import ast
import copy
import difflib
import hashlib
from pathlib import Path

import nbformat

from tools.bench import bench_cell_source
from tools.book import BOOK, chapter_number, pins, tags
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
# What a cell tagged `generated` is generated from: one of these metadata.
SOURCES = ("copy_of", "study", "bench", "setup")
# The first line (under a `# @title`) of a cell that other chapters copy.
COPIED_INTO = "# Copied into chapter"


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


def _numbers(numbers):
    words = [str(n) for n in sorted(numbers)]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def copied_into_line(numbers):
    """The comment `make generate` writes at the top of a source cell (under
    its `# @title`) to say which chapters carry a copy of it."""
    if not numbers:
        raise ValueError("copied_into_line: no chapter copies this cell")
    plural = len(numbers) > 1
    return (f"{COPIED_INTO}{'s' * plural} {_numbers(numbers)} by `make generate`: "
            f"edit {'it here, not in the copies' if plural else 'it here, not in the copy'}.")


def _split_head(source):
    """(the `# @title` line or None, the copied-into line or None, the rest)."""
    lines = source.split("\n")
    title = lines.pop(0) if lines and lines[0].startswith("# @title") else None
    marker = lines.pop(0) if lines and lines[0].startswith(COPIED_INTO) else None
    return title, marker, "\n".join(lines)


def with_copied_into(source, numbers):
    """`source` with the copied-into line for chapters `numbers` (none:
    without the line)."""
    title, _, rest = _split_head(source)
    head = [title] if title is not None else []
    if numbers:
        head.append(copied_into_line(numbers))
    return "\n".join(head + [rest]) if head else rest


def body(source):
    """What a copy takes of a source cell: all but its title and the line
    that names the chapters copying it."""
    return _split_head(source)[2]


def copy_source(cell, notebooks):
    """The source a copy cell must have, from the one cell it names."""
    references = cell.metadata["copy_of"]
    title = cell.metadata.get("copy_title")
    if not isinstance(references, list) or len(references) != 1 or not title:
        raise ValueError("a copy cell needs copy_of (a list of one cell) and copy_title")
    name = references[0].partition("#")[0]
    number = chapter_number(name)
    return "\n".join([f"# @title {title} (copied from chapter {number})",
                      f"# Copied from chapter {number} ({name}), where it is explained.",
                      "# Written by `make generate`: edit the original, not this copy.",
                      body(find_source(references[0], notebooks).source).strip("\n")])


def one_copy_per_source(path, notebook, notebooks):
    """`notebook` with each copy cell that names several source cells made
    into one copy cell per source, in order (each under 150 lines as its
    source is): id `copy-<source id>`, titled by the source's `# @title`,
    or by the copy's own title if the source has none."""
    cells = []
    for cell in notebook.cells:
        references = cell.metadata.get("copy_of") or []
        if not isinstance(references, list):
            raise ValueError(f"{Path(path).name}: copy_of must be a list of cells "
                             f"('NN_name.ipynb#cell-id'), not {references!r}")
        if len(references) < 2:
            cells.append(cell)
            continue
        for reference in references:
            part = nbformat.v4.new_code_cell(metadata=copy.deepcopy(cell.metadata))
            part["id"] = f"copy-{reference.partition('#')[2]}"
            title = find_source(reference, notebooks).source.split("\n")[0]
            part.metadata.update(copy_of=[reference], copy_title=(
                title.removeprefix("# @title ") if title.startswith("# @title ")
                else cell.metadata.get("copy_title")))
            part.metadata.pop("copy_hash", None)
            cells.append(part)
    ids = [cell.get("id") for cell in cells]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{Path(path).name}: two cells share an id after splitting its copies")
    notebook.cells = cells
    return notebook


def digest(text):
    """What a copy's `copy_hash` holds: the hash of the text written."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def cell_name(path, cell, index):
    return f"{Path(path).name}#{cell.get('id') or f'cell {index}'}"


def check_generated_tags(path, notebook):
    """A cell tagged `generated` names what it is generated from: a cell
    without its source would never be compared with anything again."""
    for index, cell in enumerate(notebook.cells):
        if ("generated" in cell.metadata.get("tags", [])
                and not any(key in cell.metadata for key in SOURCES)):
            raise ValueError(
                f"{cell_name(path, cell, index)} is tagged `generated` but names no "
                f"source ({', '.join(SOURCES)} in its metadata), so nothing checks it. "
                "Put back its copy_of (then run `make generate`: it rewrites the cell), "
                "or, if it is now written by hand, remove the `generated` tag.")


def copies_of(notebooks):
    """{(source chapter name, cell id): {numbers of the chapters copying it}}."""
    found = {}
    for path, notebook in notebooks.items():
        for cell in notebook.cells:
            for reference in cell.metadata.get("copy_of", []) or []:
                name, _, cell_id = reference.partition("#")
                found.setdefault((name, cell_id), set()).add(chapter_number(path))
    return found


def with_generated_cells(notebooks):
    """{path: notebook} with every copy, setup cell, stored study and
    copied-into line rewritten from its source; the notebooks given are not
    changed."""
    for path, notebook in notebooks.items():
        check_generated_tags(path, notebook)
    copied = copies_of(notebooks)
    result = {}
    for path, notebook in notebooks.items():
        notebook = one_copy_per_source(path, copy.deepcopy(notebook), notebooks)
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
            if "bench" in cell.metadata:           # the stored benchmark: short
                cell.source = bench_cell_source(cell.metadata["bench"])
                cell.metadata["tags"] = ["generated", "hide-input"]
                cell.metadata["cellView"] = "form"
                continue
            if "study" in cell.metadata:           # the stored study's data
                cell.source = study_cell_source(cell.metadata["study"])
                # data, not code to read: left out of the book's page (tens
                # of kilobytes of highlighted numbers on a phone), folded in Colab
                cell.metadata["tags"] = ["generated", "remove-input"]
                cell.metadata["cellView"] = "form"
                continue
            if "copy_of" not in cell.metadata:
                cell.source = with_copied_into(
                    cell.source, copied.get((path.name, cell.get("id")), ()))
                continue
            sources = [find_source(r, notebooks) for r in cell.metadata["copy_of"]]
            exported = any("export" in tags(source) for source in sources)
            cell.metadata["tags"] = ["export"] * exported + ["generated", "hide-input"]
            cell.metadata["cellView"] = "form"
            cell.metadata["copy_hash"] = digest(cell.source)
        result[path] = notebook
    return result


# What `make generate --check` says of a cell that differs ------------------

DIFF_LINES = 80   # a longer diff (a stored study's data) is cut, saying so


def _diff(old, new, name):
    lines = list(difflib.unified_diff(
        old.splitlines(), new.splitlines(), lineterm="",
        fromfile=f"{name} (in the notebook)", tofile=f"{name} (as `make generate` writes it)"))
    if len(lines) > DIFF_LINES:
        lines = lines[:DIFF_LINES] + [f"... ({len(lines) - DIFF_LINES} more lines of diff)"]
    return lines


def cell_report(path, index, disk, wanted, notebooks):
    """What to say of cell `index` of chapter `path` whose text or metadata
    on disk (`disk`) differs from what `make generate` writes (`wanted`):
    (kind, lines). kind is "stale" (`make generate` fixes it, losing
    nothing), "edited" (a copy edited by hand: `make generate` would throw
    the edit away), "unknown" (a copy without copy_hash: stale or edited)
    or "rewritten" (a setup cell, a stored study: rewritten from its source)."""
    name = cell_name(path, wanted, index)
    if disk.source == wanted.source:
        changed = sorted(key for key in set(disk.metadata) | set(wanted.metadata)
                         if disk.metadata.get(key) != wanted.metadata.get(key))
        return "stale", [f"{name}: metadata written by `make generate` differs "
                         f"({', '.join(changed) or 'cell type or outputs'}): run `make generate`"]
    diff = _diff(disk.source, wanted.source, name)
    if "copy_of" in wanted.metadata:
        stored = disk.metadata.get("copy_hash")
        if stored and stored == digest(disk.source):
            return "stale", [f"{name}: stale copy (its source changed since `make generate` "
                             "wrote it): run `make generate`"] + diff
        where = wanted.metadata["copy_of"][0]
        if stored:
            return "edited", [
                f"{name}: copy edited by hand: move your edit into the source cell "
                f"{where}, then run `make generate` (it rewrites this copy: an edit left "
                "here is lost)"] + diff
        return "unknown", [
            f"{name}: copy differs from its source, and holds no copy_hash to tell "
            f"a stale copy from a hand edit: if you edited it, move your edit into "
            f"{where} first; `make generate` rewrites this copy (an edit left here "
            "is lost)"] + diff
    if "setup" in wanted.metadata:
        origin = "tools/copies.py (SETUP) and the pins of requirements.txt"
    elif "study" in wanted.metadata:
        origin = (f"book/_data/study/{wanted.metadata['study']}.json "
                  "(`make study`)")
    elif "bench" in wanted.metadata:
        origin = (f"book/_data/bench/{wanted.metadata['bench']}.json "
                  "(`make bench`)")
    elif body(disk.source) == body(wanted.source):
        return "stale", [f"{name}: the line naming the chapters that copy this cell is "
                         "out of date: run `make generate` (it rewrites only that line)"] + diff
    elif wanted.cell_type == "markdown":
        return "stale", [f"{name}: links to the book's pages are made absolute "
                         "(tools/links.py): run `make generate`"] + diff
    else:
        origin = "its source"
    return "rewritten", [f"{name}: written by `make generate` from {origin}: if you edited "
                       "it, make the change there; `make generate` rewrites this cell "
                       "(an edit made here is lost)"] + diff


def chapter_report(path, disk, wanted, notebooks):
    """[(kind, lines)] for each cell of chapter `path` that `make generate`
    would change."""
    if len(disk.cells) != len(wanted.cells):
        return [("rewritten", [f"{Path(path).name}: cells differ in number"])]
    found = []
    for index, (old, new) in enumerate(zip(disk.cells, wanted.cells)):
        if old != new:
            found.append(cell_report(path, index, old, new, notebooks))
    return found


# One name, one meaning --------------------------------------------------------

def bound_names(node):
    """The names an assignment statement binds (`a, b = ...` binds a, b)."""
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = []
    for target in targets:
        for sub in ast.walk(target):
            if isinstance(sub, ast.Name):
                names.append(sub.id)
    return names


def top_level_names(source):
    """[(name, kind, statement)] for each name a cell binds at its top level
    by `def`, `class` ("def") or assignment ("assign"), the statement
    unparsed (comments left out)."""
    python = "\n".join(line for line in source.splitlines()
                       if not line.lstrip().startswith(("%", "!")))
    found = []
    for node in ast.parse(python).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.name, "def", ast.unparse(node)))
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            found += [(name, "assign", ast.unparse(node)) for name in bound_names(node)]
    return found


def names_defined_twice(notebooks, own=()):
    """{name: [(cell, 'copy' or 'by hand', statement)]} for each name that
    the chapters give more than one meaning, or write by hand twice.

    The rule: a name is written by hand in one chapter, and any other
    chapter that has it carries a copy of that very statement.
    - It holds for every function and class (`def`, `class`).
    - It holds for an assignment (`NAME = ...`) of a name that a copy binds
      (a constant of a copied cell, or a copied function): a copy's
      assignment is its source's, and no chapter assigns the name otherwise.
    - A name that only hand-written cells assign (CONFIG, DATA, a result)
      is each chapter's own, as are the names of `own` (those a study asks
      each chapter to define for itself)."""
    places, copied = {}, set()
    for path, notebook in notebooks.items():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code":
                continue
            how = "copy" if "copy_of" in cell.metadata else "by hand"
            for name, kind, statement in top_level_names(cell.source):
                places.setdefault(name, []).append(
                    (Path(path).name, cell_name(path, cell, index), how, kind, statement))
                if how == "copy":
                    copied.add(name)
    problems = {}
    for name, found in sorted(places.items()):
        if name in own:
            continue
        found = [place for place in found if place[3] == "def" or name in copied]
        chapters = {chapter for chapter, *_ in found}
        by_hand = {chapter for chapter, _, how, _, _ in found if how == "by hand"}
        statements = {statement for *_, statement in found}
        if len(chapters) > 1 and (len(statements) > 1 or len(by_hand) > 1):
            problems[name] = [(cell, how, statement) for _, cell, how, _, statement in found]
    return problems
