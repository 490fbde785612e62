"""Load a chapter's helper code from its cells tagged `export`.

The book's helpers live in its notebooks, so a notebook still runs alone in
Colab. Tests and benchmarks import them from there: they run the very same
code as the book.
"""
import types

import nbformat

from tools.book import BOOK, ROOT


def export_cells(notebook_name, text=None):
    """The source of each `export` cell of book/<notebook_name>, in order
    (of the notebook `text`, one version of that file, if given)."""
    path = BOOK / notebook_name
    if text is None:
        if not path.is_file():
            raise FileNotFoundError(f"no notebook {path}")
        text = path.read_text()
    notebook = nbformat.reads(text, as_version=4)
    cells = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code" and "export" in cell.metadata.get("tags", []):
            for line in cell.source.splitlines():
                if line.lstrip().startswith(("%", "!")):
                    raise ValueError(
                        f"{path.name} cell {index}: an export cell must be plain "
                        f"Python, found IPython syntax: {line.strip()!r}")
            cells.append((index, cell.source))
    if not cells:
        raise LookupError(f"{path.name} has no cell tagged 'export'")
    return cells


def load_exports(notebook_name, text=None):
    """Run the `export` cells of a notebook in a new module and return it
    (of the notebook `text`, one version of that file, if given)."""
    module = types.ModuleType(notebook_name.removesuffix(".ipynb"))
    module.__file__ = str(BOOK / notebook_name)
    for index, source in export_cells(notebook_name, text):
        code = compile(source, f"{notebook_name}[cell {index}]", "exec")
        exec(code, module.__dict__)
    return module


DOCTOR_CHAPTER = "06_any_layer_any_node.ipynb"


def doctor_module(text=None):
    """pruning_doctor.py: chapter 6's export cells as one module, for `%load_ext
    pruning_doctor` (its load_ipython_extension) in the reader's own notebook."""
    parts = [f'"""The helpers of chapter 6 ({DOCTOR_CHAPTER}), as one module: `doctor`,\n'
             "`diagnose_invalid_gradient`, `read_message`, `check_module_shapes`, ...\n\n"
             "In a notebook: `%load_ext pruning_doctor`; in a script:\n"
             "`print(pruning_doctor.doctor(error, globals()))`.\n\n"
             f"Generated from the chapter's cells tagged `export` by tools/exports.py\n"
             '(`make generate`): edit the chapter, not this file."""\n']
    for index, source in export_cells(DOCTOR_CHAPTER, text):
        parts.append(f"# --- {DOCTOR_CHAPTER}, cell {index} ---\n{source.rstrip()}\n")
    return "\n\n".join(parts)


def generated():
    """{path: text} of the files written from the chapters' export cells."""
    return {ROOT / "pruning_doctor.py": doctor_module()}
