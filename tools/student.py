"""Write the student edition: book/student/NN_name.ipynb from each chapter.

Written by `make generate` (tools.generate) with the book's other generated
files, from the chapters as generated (copies and setup cells included).

From each chapter of _toc.yml, in the exercises only:
- each answer cell (tagged `solution`) becomes a stub: the functions it
  defines keep their signature and docstring and raise
  NotImplementedError("your answer here"); the names it assigns are set to
  `...`; it is tagged `answer` instead, unfolded, its output cleared;
- each check cell (tagged `exercise-check`) keeps its code, output cleared;
- each `<details><summary>Solution N</summary> ... </details>` explanation is
  removed (a Markdown cell left empty is dropped).
Every other cell, outputs included, is copied unchanged. The output is a
function of the chapter alone, so the committed files can be checked.
"""
import ast
import copy
import re

import nbformat

from tools.book import BOOK, render

STUDENT = BOOK / "student"
STUB_ERROR = 'raise NotImplementedError("your answer here")'
EXPLANATION = re.compile(
    r"\n*<details>\n<summary>Solution \d+</summary>\n.*?</details>\n*", re.S)


def tags(cell):
    return cell.metadata.get("tags", [])


def stub(source, number):
    """The student's starting point for the answer cell `source`."""
    lines = source.splitlines()
    if lines and lines[0].startswith("# @title"):
        lines = lines[1:]
    code = "\n".join(lines)
    tree = ast.parse(code)
    out = [f"# Exercise {number}: your answer here, then run the check below."]
    names = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.append(ast.get_source_segment(code, node))
        elif isinstance(node, ast.FunctionDef):
            header = code.splitlines()[node.lineno - 1:node.body[0].lineno - 1]
            body = node.body
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                header = code.splitlines()[node.lineno - 1:body[0].end_lineno]
            indent = " " * (body[0].col_offset)
            out += ["", *header, f"{indent}{STUB_ERROR}"]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id not in names:
                        names.append(name.id)
    if names:
        out += [""] + [f"{name} = ...  # your answer" for name in names]
    if len(out) == 1:
        raise ValueError(f"answer {number}: nothing to leave to the student:\n{source}")
    return "\n".join(out).replace("\n\n\n", "\n\n").strip() + "\n"


def exercises_start(notebook):
    return next(i for i, c in enumerate(notebook.cells)
                if c.cell_type == "markdown"
                and re.search(r"^## Exercises", c.source, re.M))


def student_notebook(notebook):
    """A new notebook: the chapter with its answers left to the student."""
    student = nbformat.from_dict(nbformat.v4.new_notebook())
    student.metadata = nbformat.from_dict(dict(notebook.metadata))
    student.nbformat, student.nbformat_minor = notebook.nbformat, notebook.nbformat_minor
    start = exercises_start(notebook)
    answers = 0
    for index, original in enumerate(notebook.cells):
        cell = copy.deepcopy(original)
        if index >= start:
            if cell.cell_type == "markdown":
                cell.source = EXPLANATION.sub("\n\n", cell.source).strip("\n")
                if not cell.source.strip():
                    continue
            elif "solution" in tags(cell):
                answers += 1
                cell.source = stub(cell.source, answers).rstrip("\n")
                cell.metadata.pop("cellView", None)
                cell.metadata["tags"] = [t for t in tags(cell)
                                         if t not in ("solution", "hide-input")] + ["answer"]
                cell.outputs, cell.execution_count = [], None
            elif "exercise-check" in tags(cell):
                cell.outputs, cell.execution_count = [], None
        student.cells.append(cell)
    if answers == 0:
        raise ValueError("no cell tagged 'solution' in the exercises")
    return student


def editions(chapters):
    """{student path: file text} for each chapter of `chapters` ({path: notebook})."""
    return {STUDENT / path.name: render(student_notebook(notebook))
            for path, notebook in chapters.items()}
