"""Write the student edition: book/student/NN_name.ipynb from each chapter.

Written by `make generate` (tools.generate) with the book's other generated
files, from the chapters as generated (copies, setup cells and links
included).

From each chapter of _toc.yml, as its class edition (`class_chapter`): the
chapter's cells before its exercises, then the graded exercises of
book/graded/NN_name.ipynb in their place. That folder is no page of the
book (not in _toc.yml, excluded in _config.yml): its exercises, drawn per
student id (each a `graded-N-variant` cell, which the grader runs with the
roster's id), their solutions and hidden tests appear on no public page;
the chapter's own exercises stay in the book with their solutions, for
practice. Then:
- the first Markdown cell says, under the title, that this is the student
  edition, where the answers go, and to save a copy in Drive first;
- each prediction waits for the student: the cell that reveals a
  `**Predict.**` paragraph's answer (the first code cell after it with a
  stored output) and the code cells right after it (its reveal group) lose
  their outputs, their `assert` lines (the book keeps them: they state the
  answer) and any figure caption or alt text (which describe the output),
  and a Markdown cell "Your prediction" comes before it; the paragraphs
  that explain the result, from the Markdown cell after the group up to a
  heading or the paragraph that leads to the next prediction, are folded
  under "Explanation (after you ran the cell)";
in the exercises only:
- each answer cell (tagged `solution`) becomes a stub: the functions it
  defines keep their signature and docstring and raise NotImplementedError
  naming the exercise, and are marked `unanswered`; the names it assigns
  are set to `...`; it is tagged `answer` instead, unfolded, its output
  cleared, and marked as an nbgrader solution cell;
- each check cell (tagged `exercise-check`) first stops, naming the
  exercise, while the answer above is still a stub; its output is cleared,
  and it is marked as an nbgrader test cell worth one point, locked (the
  grader, tools.grade, runs the shipped check, not a student's edit of it);
  its last line says "form ok; graded later", not "passed": what it tests
  without its hidden tests is the answer's form, and the point is the
  grader's;
- each check cell's hidden tests (the lines from `### BEGIN HIDDEN TESTS`
  to `### END HIDDEN TESTS`: they call the student's answer on inputs the
  notebook never shows) are removed; `grading_notebook(stem)` is the same
  student notebook with them kept, the source the grader (tools.grade)
  runs;
A folded plotting cell loses its figure (the student's run draws it again:
the chapters with a study would otherwise carry their plots twice).
Every other cell, outputs included, is copied unchanged. The output is a
function of the chapter alone, so the committed files can be checked.

nbgrader's own generator (`nbgrader generate_assignment`) is not used for
this: it needs `### BEGIN SOLUTION` markers in the source notebook, which
here is the book's chapter, read as it is in the book and in Colab; and it
does neither the predictions nor the stubs' guards. The grader
(tools.grade) reads its checks, hidden tests included, from `grading_notebook`.
"""
import ast
import copy
import re

import nbformat

from tools.book import BOOK, chapter_number, render, tags, toc_notebooks

STUDENT = BOOK / "student"
# the graded exercises of each chapter's class edition: on no public page
GRADED = BOOK / "graded"
PREDICT = "**Predict.**"
BANNER = (
    "> **Student edition.** Your answers go in the cells that start with "
    "`# Exercise N: your answer here`; the cell after each one checks it. "
    "The predictions wait for you too: write yours where it says *Your "
    "prediction*, then run the cell below it. In Colab, first *File > Save a "
    "copy in Drive*, so that your work is kept.")
HIDDEN_TESTS = re.compile(
    r"^[ \t]*### BEGIN HIDDEN TESTS[ \t]*\n.*?^[ \t]*### END HIDDEN TESTS[ \t]*(?:\n|\Z)",
    re.S | re.M)
EXPLAINED = ("<details>\n<summary>Explanation (after you ran the cell)</summary>\n\n"
             "{}\n\n</details>")
# metadata of a reveal cell that describes its output (myst-nb's figure
# caption, the image's alt text): dropped with the output
DESCRIBES_OUTPUT = ("mystnb", "image")
FORM_OK = 'print("Exercise {}: form ok; graded later")'
PREDICTION = ("**Your prediction** (write it here, double-click to edit, "
              "before you run the next cell): ...")


def stub_error(number):
    return (f'raise NotImplementedError("Exercise {number} is not answered yet: '
            'write your answer here")')


def stub(source, number):
    """The student's starting point for the answer cell `source`."""
    code = source
    tree = ast.parse(code)
    out = [f"# Exercise {number}: your answer here, then run the check below."]
    names, functions = [], []
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
            out += ["", *header, f"{indent}{stub_error(number)}"]
            functions.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name) and name.id not in names:
                        names.append(name.id)
    if functions:
        out += [""] + [f"{name}.unanswered = True  # your own def replaces this stub"
                       for name in functions]
    if names:
        out += [""] + [f"{name} = ...  # your answer" for name in names]
    if len(out) == 1:
        raise ValueError(f"answer {number}: nothing to leave to the student:\n{source}")
    return "\n".join(out).replace("\n\n\n", "\n\n").strip() + "\n"


def stub_names(source):
    """The names a stub (from `stub`) leaves to the student, in order."""
    return re.findall(r"^(\w+)(?:\.unanswered = True| = \.\.\.  # your answer)",
                      source, re.M)


def guard(names, number):
    """The lines a check cell starts with in the student edition: stop, naming
    the exercise, while any of `names` is still the stub's."""
    listed = ", ".join(names) + ("," if len(names) == 1 else "")
    return (f"for _answer in ({listed}):  # stops here while Exercise {number} "
            "is a stub\n"
            "    if _answer is ... or getattr(_answer, \"unanswered\", False):\n"
            f"        raise NotImplementedError(\"Exercise {number} is not answered "
            "yet: write your answer in the cell above, run it, then run this "
            "check again\")\n")


def grade_id(chapter, number, kind):
    """nbgrader's id of a cell: 'ch01-exercise-2-check'. The chapter in it
    lets the grader recognise a notebook whatever its file is called."""
    return f"ch{chapter:02d}-exercise-{number}-{kind}"


def nbgrader_metadata(chapter, number, kind):
    graded = kind == "check"
    data = {"grade": graded, "grade_id": grade_id(chapter, number, kind),
            "locked": graded, "schema_version": 3, "solution": not graded,
            "task": False}
    if graded:
        data["points"] = 1
    return data


def exercises_start(notebook):
    return next(i for i, c in enumerate(notebook.cells)
                if c.cell_type == "markdown"
                and re.search(r"^## Exercises", c.source, re.M))


def reveal_cells(notebook):
    """{index of a `**Predict.**` Markdown cell: index of the code cell that
    reveals its answer}, the first code cell after it with a stored output
    (in the student edition, the first code cell after its prediction cell)."""
    found = {}
    cells = notebook.cells
    for index, cell in enumerate(cells):
        if cell.cell_type != "markdown" or PREDICT not in cell.source:
            continue
        for later in range(index + 1, len(cells)):
            if cells[later].cell_type == "markdown" and PREDICT in cells[later].source:
                break
            if cells[later].cell_type == "code" and (
                    cells[later].outputs or "reveals-prediction" in tags(cells[later])):
                found[index] = later
                break
    return found


def without_hidden_tests(source):
    """`source` without its nbgrader hidden tests."""
    return HIDDEN_TESTS.sub("", source).rstrip("\n")


def without_asserts(source):
    """`source` without its `assert` statements (a block left with none
    gets `pass`). IPython's `%` and `!` lines are kept as they are."""
    lines = source.split("\n")
    magic = re.compile(r"(\s*)[%!]")
    parsable = "\n".join(magic.match(line).group(1) + "pass" if magic.match(line) else line
                         for line in lines)
    tree = ast.parse(parsable)
    drop, to_pass = set(), {}
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list) or not body or not isinstance(body[0], ast.stmt):
                continue
            asserts = [n for n in body if isinstance(n, ast.Assert)]
            if not asserts:
                continue
            if len(asserts) == len(body) and not isinstance(node, ast.Module):
                first = asserts[0]
                to_pass[first.lineno - 1] = " " * first.col_offset + "pass"
                asserts = asserts[1:]
                drop.update(range(first.lineno, first.end_lineno))
            for a in asserts:
                drop.update(range(a.lineno - 1, a.end_lineno))
    out = [to_pass.get(i, line) for i, line in enumerate(lines)
           if i in to_pass or i not in drop]
    return "\n".join(out).strip("\n")


def paragraphs(markdown):
    """The blocks of `markdown` separated by blank lines (a fenced block is one)."""
    blocks, current, fenced = [], [], False
    for line in markdown.split("\n"):
        if line.strip().startswith("```"):
            fenced = not fenced
        if not line.strip() and not fenced:
            if current:
                blocks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    if current:
        blocks.append("\n".join(current))
    return blocks


def folded_explanation(markdown):
    """The Markdown cell after a reveal group with its explanation folded:
    the paragraphs before the first heading, or before the paragraph that
    leads to the next prediction (the one right before it), go inside a
    <details> box. Unchanged when there is nothing to fold."""
    blocks = paragraphs(markdown)
    end = len(blocks)
    for index, block in enumerate(blocks):
        if block.startswith("#"):
            end = index
            break
        if block.startswith(PREDICT) or f"\n{PREDICT}" in block:
            end = max(index - 1, 0)
            break
    if end == 0:
        return markdown
    return "\n\n".join([EXPLAINED.format("\n\n".join(blocks[:end]))] + blocks[end:])


def reveal_groups(notebook):
    """{index of a reveal cell: indices of it and of the code cells right
    after it, up to the next Markdown cell}."""
    groups = {}
    cells = notebook.cells
    for reveal in reveal_cells(notebook).values():
        group = [reveal]
        while group[-1] + 1 < len(cells) and cells[group[-1] + 1].cell_type == "code":
            group.append(group[-1] + 1)
        groups[reveal] = group
    return groups


def redraws_a_figure(cell):
    """A folded plotting cell (`hide-input`) with a figure: the student's run
    draws it again, so the student edition does not carry it."""
    return (cell.cell_type == "code" and "hide-input" in tags(cell)
            and any(kind.startswith("image/") for output in cell.get("outputs", [])
                    for kind in output.get("data", {})))


def with_banner(source):
    """The first Markdown cell with the student-edition note under its title."""
    lines = source.split("\n")
    title = next((i for i, line in enumerate(lines) if line.startswith("# ")), -1)
    return "\n".join(lines[:title + 1] + ["", BANNER] + lines[title + 1:])


def class_chapter(notebook, path):
    """The chapter `notebook` (at `path`) as its student edition starts from:
    its cells before its exercises (which stay in the book, with their
    solutions), then the graded exercises of book/graded/ (with theirs)."""
    start = exercises_start(notebook)
    head = copy.deepcopy(notebook.cells[start])
    head.source = head.source[:re.search(r"^## Exercises", head.source, re.M).start()].rstrip()
    graded = nbformat.read(GRADED / path.name, as_version=4)
    out = copy.deepcopy(notebook)
    out.cells = out.cells[:start] + ([head] if head.source else []) + graded.cells
    return out


def student_notebook(notebook, chapter=0, hidden_tests=False):
    """A new notebook: the chapter with its answers left to the student.
    With `hidden_tests`, the check cells keep their hidden tests (the
    grader's source notebook); without, they lose them (the student's)."""
    student = nbformat.from_dict(nbformat.v4.new_notebook())
    student.metadata = nbformat.from_dict(dict(notebook.metadata))
    student.nbformat, student.nbformat_minor = notebook.nbformat, notebook.nbformat_minor
    start = exercises_start(notebook)
    groups = reveal_groups(notebook)
    reveals = set(groups)
    revealing = {index for group in groups.values() for index in group}
    explained = {group[-1] + 1 for group in groups.values()
                 if group[-1] + 1 < len(notebook.cells)
                 and notebook.cells[group[-1] + 1].cell_type == "markdown"}
    answers, names = 0, []
    first_markdown = next(i for i, c in enumerate(notebook.cells)
                          if c.cell_type == "markdown")
    for index, original in enumerate(notebook.cells):
        cell = copy.deepcopy(original)
        if index == first_markdown:
            cell.source = with_banner(cell.source)
        if index in reveals:
            prediction = nbformat.v4.new_markdown_cell(PREDICTION)
            prediction["id"] = f"prediction-{cell.get('id', index)}"[:64]
            student.cells.append(prediction)
            cell.metadata["tags"] = list(tags(cell)) + ["reveals-prediction"]
        if index in revealing:
            cell.source = without_asserts(cell.source)
        if index in revealing or redraws_a_figure(cell):
            cell.outputs, cell.execution_count = [], None
            for key in DESCRIBES_OUTPUT:
                cell.metadata.pop(key, None)
        if index in explained and index < start:
            cell.source = folded_explanation(cell.source)
        if index >= start:
            if "solution" in tags(cell):
                answers += 1
                cell.source = stub(cell.source, answers).rstrip("\n")
                names = stub_names(cell.source)
                cell.metadata["tags"] = [t for t in tags(cell) if t != "solution"] + ["answer"]
                cell.metadata["nbgrader"] = nbgrader_metadata(chapter, answers, "answer")
                cell.outputs, cell.execution_count = [], None
            elif "exercise-check" in tags(cell):
                if not hidden_tests:  # the grader decides: this check sees the form only
                    cell.source = without_hidden_tests(cell.source).replace(
                        f'print("Exercise {answers}: passed")', FORM_OK.format(answers))
                if names:
                    cell.source = guard(names, answers) + cell.source
                cell.metadata["nbgrader"] = nbgrader_metadata(chapter, answers, "check")
                cell.outputs, cell.execution_count = [], None
        student.cells.append(cell)
    if answers == 0:
        raise ValueError("no cell tagged 'solution' in the exercises")
    return student


def chapter_path(stem):
    """The chapter `stem` ('01_reproduce_the_error') of the toc, or a clear error."""
    if not isinstance(stem, str):
        raise TypeError(f"a chapter's stem is a string, got {stem!r}")
    chapters = {path.stem: path for path in toc_notebooks()}
    if stem.endswith(".ipynb"):
        stem = stem[:-len(".ipynb")]
    if stem not in chapters:
        raise ValueError(f"no chapter {stem!r} in the toc; chapters: {', '.join(chapters)}")
    return chapters[stem]


def grading_notebook(stem):
    """nbgrader's source notebook for chapter `stem`: the student notebook
    (book/student/) with the hidden tests of its checks kept. Made from the
    chapter as committed (generated: copies, setup cell and links in place)."""
    path = chapter_path(stem)
    return student_notebook(class_chapter(nbformat.read(path, as_version=4), path),
                            chapter_number(path), hidden_tests=True)


def editions(chapters):
    """{student path: file text} for each chapter of `chapters` ({path: notebook})."""
    return {STUDENT / path.name: render(student_notebook(class_chapter(notebook, path),
                                                         chapter_number(path)))
            for path, notebook in chapters.items()}
