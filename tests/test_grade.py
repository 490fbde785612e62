"""`make grade` (tools/grade.py, nbgrader): class folders with every kind of
submission a teacher gets, each graded once (the two about time-outs with
short ones, in threads while the first is graded); each case is asserted
on its rows. Chapter 1 is the fastest to run; cases that do not
interfere share a notebook.

The class:
ana   every answer of the book put back: full marks
bob   the shipped student notebook: zero, each check naming its exercise
cy    a file that is not JSON
dee   an empty folder
eve   the book's answers renamed as Colab saves a copy, a first code cell that
      raises, and a cell that deletes every file in its folder
ivy   chapter 2's notebook under chapter 1's file name, and a notebook from
      elsewhere
Each alone, with short time-outs:
fay   a notebook that loops forever, deaf to interrupts (nbgrader's cell time-out)
gil   a notebook whose cells each end in time, but never all (the notebook time-out)
"""
import copy
import csv
import hashlib
import threading

import nbformat
import pytest

from tools import grade as grader
from tools.book import BOOK
from tools.student import STUDENT

ONE = "01_reproduce_the_error"
TWO = "02_where_the_error_is_raised"
# (timeout, cell timeout) of each class: the class's are never reached; fay's
# cell is interrupted after 4 s; gil's notebook of 1 s cells is stopped at 20 s
LIMITS = dict(submissions=(300, 120), fay=(300, 4), gil=(20, 10))


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


def read_rows(folder):
    with open(folder / "grades.csv", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    folder = root / "submissions"
    outside = root / "beside.txt"
    outside.write_text("a file beside the submissions: it must survive")
    students = {name: folder / name for name in ["ana", "bob", "cy", "dee", "eve", "ivy"]}
    students |= {name: root / name / name for name in ["fay", "gil"]}
    for path in students.values():
        path.mkdir(parents=True)
    right = answered(ONE)
    nbformat.write(right, students["ana"] / f"{ONE}.ipynb")
    (students["bob"] / f"{ONE}.ipynb").write_bytes((STUDENT / f"{ONE}.ipynb").read_bytes())
    (students["cy"] / f"{ONE}.ipynb").write_text('{"cells": [ this is not JSON')
    eve = with_code_first(right, (
        "import os, shutil\n"
        "for name in os.listdir('.'):\n"
        "    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)"))
    nbformat.write(with_code_first(eve, 'raise RuntimeError("a typo at the top")'),
                   students["eve"] / f"Copy of {ONE}.ipynb")
    (students["eve"] / "notes.txt").write_text("the student's own notes")
    nbformat.write(answered(TWO), students["ivy"] / f"{ONE}.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]),
                   students["ivy"] / "scratch.ipynb")
    nbformat.write(with_code_first(right, (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)  # deaf to interrupts\n"
        "while True:\n    time.sleep(0.1)")), students["fay"] / f"{ONE}.ipynb")
    slow = right
    for _ in range(2 * LIMITS["gil"][0]):
        slow = with_code_first(slow, "import time\ntime.sleep(1)")
    nbformat.write(slow, students["gil"] / f"{ONE}.ipynb")
    before = tree(folder)
    scratches = {name: root / f"scratch-{name}" for name in LIMITS}
    for path in scratches.values():
        path.mkdir()
    classes = [threading.Thread(target=grader.grade, args=(root / name,), kwargs=dict(
        timeout=timeout, cell_timeout=cell_timeout, scratch_root=scratches[name]))
        for name, (timeout, cell_timeout) in LIMITS.items() if name != "submissions"]
    for thread in classes:
        thread.start()
    try:
        timeout, cell_timeout = LIMITS["submissions"]
        grader.grade(folder, timeout=timeout, cell_timeout=cell_timeout,
                     scratch_root=scratches["submissions"])
    finally:
        for thread in classes:
            thread.join()
    for path in scratches.values():
        assert list(path.iterdir()) == [], f"scratch folders left in {path}"
        path.rmdir()
    rows = [row for name in LIMITS for row in read_rows(root / name)]
    return dict(folder=folder, rows=rows, before=before, outside=outside)


def rows_of(graded, student):
    return [r for r in graded["rows"] if r["student"] == student]


def test_columns_and_one_feedback_file_per_student(graded):
    assert list(graded["rows"][0]) == grader.COLUMNS
    names = {path.stem for path in (graded["folder"] / "feedback").glob("*.md")}
    assert names == {"ana", "bob", "cy", "dee", "eve", "ivy"}
    assert "Total: 3 of 3 points." in (graded["folder"] / "feedback/ana.md").read_text()


def test_nothing_but_the_grades_and_feedback_is_written(graded):
    folder = graded["folder"]
    after = {k: v for k, v in tree(folder).items()
             if k != "grades.csv" and not k.startswith("feedback/")}
    assert after == graded["before"], "a student's folder changed"
    assert graded["outside"].read_text().endswith("must survive")
    assert sorted(p.name for p in folder.parent.iterdir()) == [
        "beside.txt", "fay", "gil", "submissions"]


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
    assert rows[0]["notebook"] == f"{ONE}.ipynb (file: Copy of {ONE}.ipynb)"
    assert all(r["failure"] == "" for r in rows_of(graded, "ana"))


def test_a_cell_that_never_ends_is_stopped_and_says_so(graded):
    rows = rows_of(graded, "fay")
    assert [r["points"] for r in rows] == ["0"] * 3
    assert all(r["failure"] == f"stopped: a cell ran longer than {LIMITS['fay'][1]} s and "
               "did not stop when interrupted (CellTimeoutError)" for r in rows), rows


def test_a_notebook_that_never_ends_is_stopped_and_says_so(graded):
    rows = rows_of(graded, "gil")
    assert [r["points"] for r in rows] == ["0"] * 3
    assert all(r["failure"] == f"timed out: the notebook ran longer than {LIMITS['gil'][0]} s "
               "and was stopped" for r in rows), rows


def test_a_notebook_deleting_its_folder_deletes_only_its_copy(graded):
    rows = rows_of(graded, "eve")[1:]
    assert [r["points"] for r in rows] == ["1", "1", "1"], rows
    assert (graded["folder"] / "eve" / "notes.txt").is_file()


def test_a_renamed_notebook_is_recognised_by_its_exercises(graded):
    rows = rows_of(graded, "eve")[1:]
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
