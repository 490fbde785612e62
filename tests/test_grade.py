"""`make grade` (tools/grade.py, nbgrader): one class folder with every kind of
submission a teacher gets, graded once; each case is asserted on its rows.

The class (chapter 1, the fastest to run, and one chapter 2 notebook):
ana   every answer of the book put back: full marks
bob   the shipped student notebook: zero, each check naming its exercise
cy    a file that is not JSON
dee   an empty folder
eve   a notebook that raises in its first code cell
fay   a notebook that loops forever, deaf to interrupts (nbgrader's cell time-out)
gil   a notebook whose cells each end in time, but never all (the notebook time-out)
gus   the book's answers, and a cell that deletes every file in its folder
hal   the book's answers, renamed as Colab saves a copy
ivy   chapter 2's notebook under chapter 1's file name, and a notebook from
      elsewhere
"""
import copy
import csv
import hashlib
import tempfile
from pathlib import Path

import nbformat
import pytest

from tools import grade as grader
from tools.book import BOOK
from tools.student import STUDENT

ONE = "01_reproduce_the_error"
TWO = "02_where_the_error_is_raised"
TIMEOUT, CELL_TIMEOUT = 45, 15


def tags(cell):
    return cell.metadata.get("tags", [])


def answered(stem):
    """The student notebook of `stem` with the book's answers put back."""
    book = nbformat.read(BOOK / f"{stem}.ipynb", as_version=4)
    student = nbformat.read(STUDENT / f"{stem}.ipynb", as_version=4)
    solutions = iter([c.source for c in book.cells if "solution" in tags(c)])
    for cell in student.cells:
        if "answer" in tags(cell):
            cell.source = next(solutions)
    return student


def with_code_first(notebook, source):
    """`notebook` with a code cell of `source` right after its setup cell."""
    notebook = copy.deepcopy(notebook)
    setup = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
    cell = nbformat.v4.new_code_cell(source)
    cell["id"] = f"planted-{len(notebook.cells)}"
    notebook.cells.insert(setup + 1, cell)
    return notebook


def tree(folder):
    """{relative path: sha256} of every file under `folder`."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    folder = root / "submissions"
    outside = root / "beside.txt"
    outside.write_text("a file beside the submissions: it must survive")
    students = {name: folder / name for name in
                ["ana", "bob", "cy", "dee", "eve", "fay", "gil", "gus", "hal", "ivy"]}
    for path in students.values():
        path.mkdir(parents=True)
    right = answered(ONE)
    nbformat.write(right, students["ana"] / f"{ONE}.ipynb")
    (students["bob"] / f"{ONE}.ipynb").write_bytes((STUDENT / f"{ONE}.ipynb").read_bytes())
    (students["cy"] / f"{ONE}.ipynb").write_text('{"cells": [ this is not JSON')
    nbformat.write(with_code_first(right, 'raise RuntimeError("a typo at the top")'),
                   students["eve"] / f"{ONE}.ipynb")
    nbformat.write(with_code_first(right, (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)  # deaf to interrupts\n"
        "while True:\n    time.sleep(0.1)")), students["fay"] / f"{ONE}.ipynb")
    slow = right
    for _ in range(5):
        slow = with_code_first(slow, "import time\ntime.sleep(12)")
    nbformat.write(slow, students["gil"] / f"{ONE}.ipynb")
    nbformat.write(with_code_first(right, (
        "import os, shutil\n"
        "for name in os.listdir('.'):\n"
        "    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)")),
        students["gus"] / f"{ONE}.ipynb")
    (students["gus"] / "notes.txt").write_text("the student's own notes")
    nbformat.write(right, students["hal"] / f"Copy of {ONE}.ipynb")
    nbformat.write(answered(TWO), students["ivy"] / f"{ONE}.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]),
                   students["ivy"] / "scratch.ipynb")
    before = tree(folder)
    scratch = Path(tempfile.gettempdir())
    scratch_before = sorted(scratch.glob("grading-*"))
    grader.grade(folder, timeout=TIMEOUT, cell_timeout=CELL_TIMEOUT)
    assert sorted(scratch.glob("grading-*")) == scratch_before, "scratch folders left"
    with open(folder / "grades.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return dict(folder=folder, rows=rows, before=before, outside=outside)


def rows_of(graded, student):
    return [r for r in graded["rows"] if r["student"] == student]


def test_columns_and_one_feedback_file_per_student(graded):
    assert list(graded["rows"][0]) == grader.COLUMNS
    names = {path.stem for path in (graded["folder"] / "feedback").glob("*.md")}
    assert names == {"ana", "bob", "cy", "dee", "eve", "fay", "gil", "gus", "hal", "ivy"}
    assert "Total: 3 of 3 points." in (graded["folder"] / "feedback/ana.md").read_text()


def test_nothing_but_the_grades_and_feedback_is_written(graded):
    folder = graded["folder"]
    after = {k: v for k, v in tree(folder).items()
             if k != "grades.csv" and not k.startswith("feedback/")}
    assert after == graded["before"], "a student's folder changed"
    assert graded["outside"].read_text().endswith("must survive")
    assert sorted(p.name for p in folder.parent.iterdir()) == ["beside.txt", "submissions"]


def test_all_correct_gets_full_marks(graded):
    rows = rows_of(graded, "ana")
    assert [(r["notebook"], r["exercise"], r["points"], r["max_points"], r["failure"])
            for r in rows] == [(f"{ONE}.ipynb", str(n), "1", "1", "") for n in (1, 2, 3)]


def test_the_shipped_student_notebook_gets_zero_naming_each_exercise(graded):
    rows = rows_of(graded, "bob")
    assert [r["points"] for r in rows] == ["0"] * 3
    for n, row in enumerate(rows, 1):
        assert row["failure"].startswith(
            f"NotImplementedError: Exercise {n} is not answered yet"), row


def test_not_json_and_empty_folder_each_get_a_row_saying_so(graded):
    [cy] = rows_of(graded, "cy")
    assert cy["failure"].startswith("not a notebook, not graded: NotJSONError")
    assert rows_of(graded, "dee") == [dict(student="dee", notebook="", exercise="",
                                           points="0", max_points="0",
                                           failure="no notebook submitted")]


def test_a_notebook_raising_at_the_top_is_graded_cell_by_cell(graded):
    rows = rows_of(graded, "eve")
    # errors are allowed: the answers below the typo still run and pass, and
    # a row says what raised
    assert [r["points"] for r in rows] == ["0", "1", "1", "1"], rows
    assert rows[0]["exercise"] == "" and rows[0]["failure"] == (
        "outside the exercises, code cell 2 raised RuntimeError: a typo at the top "
        "(the checks ran anyway)")
    assert all(r["failure"] == "" for r in rows_of(graded, "ana"))


def test_a_cell_that_never_ends_is_stopped_and_says_so(graded):
    rows = rows_of(graded, "fay")
    assert [r["points"] for r in rows] == ["0"] * 3
    assert all(r["failure"] == f"stopped: a cell ran longer than {CELL_TIMEOUT} s and "
               "did not stop when interrupted (CellTimeoutError)" for r in rows), rows


def test_a_notebook_that_never_ends_is_stopped_and_says_so(graded):
    rows = rows_of(graded, "gil")
    assert [r["points"] for r in rows] == ["0"] * 3
    assert all(r["failure"] == f"timed out: the notebook ran longer than {TIMEOUT} s "
               "and was stopped" for r in rows), rows


def test_a_notebook_deleting_its_folder_deletes_only_its_copy(graded):
    rows = rows_of(graded, "gus")
    assert [r["points"] for r in rows] == ["1", "1", "1"], rows
    assert (graded["folder"] / "gus" / "notes.txt").is_file()


def test_a_renamed_notebook_is_recognised_by_its_exercises(graded):
    rows = rows_of(graded, "hal")
    assert [r["notebook"] for r in rows] == [
        f"{ONE}.ipynb (file: Copy of {ONE}.ipynb)"] * 3
    assert [r["points"] for r in rows] == ["1", "1", "1"]


def test_another_chapter_is_graded_as_that_chapter_and_a_stranger_is_not(graded):
    rows = rows_of(graded, "ivy")
    chapter_two = [r for r in rows if r["notebook"].startswith(TWO)]
    assert [r["exercise"] for r in chapter_two] == ["1", "2", "3"]
    assert all(r["points"] == "1" and r["notebook"].endswith(f"(file: {ONE}.ipynb)")
               for r in chapter_two), chapter_two
    [stranger] = [r for r in rows if r["notebook"] == "scratch.ipynb"]
    assert stranger["failure"].startswith("not a student notebook of this book")


def test_chapter_is_read_from_the_exercise_cells():
    notebook = nbformat.read(STUDENT / f"{TWO}.ipynb", as_version=4)
    assert grader.chapter_of(notebook) == 2
    for cell in notebook.cells:
        cell.metadata.pop("nbgrader", None)
    assert grader.chapter_of(notebook) is None
