"""The student edition (book/student/, written by `make generate`).

It is committed, so Colab can open it from the repository (tests/test_generated.py
holds it to what `make generate` writes today). Run as shipped, only the
exercise checks fail; with the book's answers put back, every check passes.
Both runs share one kernel per chapter (the book's one runner, tools.run): each check is
run once after the student's stub (it must fail) and once more right after
the book's answer is put back (it must pass).
"""
import copy
import re

import nbformat
import pytest

from tools import student as student_edition
from tools.book import ROOT, toc_notebooks
from tools.run import run_alone

CHAPTERS = toc_notebooks()


def tags(cell):
    return cell.metadata.get("tags", [])


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_student_edition_hides_every_answer_and_keeps_the_rest(path):
    book = nbformat.read(path, as_version=4)
    student = nbformat.read(student_edition.STUDENT / path.name, as_version=4)
    start = student_edition.exercises_start(book)
    assert student.cells[:start] == book.cells[:start], "text before the exercises"
    rest = student.cells[start:]
    answers = [c for c in rest if "answer" in tags(c)]
    checks = [c for c in rest if "exercise-check" in tags(c)]
    solutions = [c for c in book.cells if "solution" in tags(c)]
    assert len(answers) == len(checks) == len(solutions) > 0
    for answer in answers:
        assert 'raise NotImplementedError("your answer here")' in answer.source \
            or "= ...  # your answer" in answer.source
        assert "cellView" not in answer.metadata and "hide-input" not in tags(answer)
    for cell in answers + checks:
        assert cell.outputs == [] and cell.execution_count is None
    text = nbformat.writes(student)
    assert "<summary>Solution" not in text and "@title Solution" not in text
    for answer, solution in zip(answers, solutions):
        # what the stub shares with the answer: signatures and imports only
        shared = set(answer.source.splitlines()) & set(solution.source.splitlines())
        assert all(not line.strip() or line.lstrip().startswith(
            ("def ", "import ", "from ", '"""')) or line.endswith((",", "):"))
            for line in shared), shared


def test_stub_keeps_signatures_and_names_only():
    source = ('# @title Solution 2 (double-click to show)\nimport math\n'
              'def f(a,\n      b):\n    """Doc."""\n    return a\n'
              'x, y = 1, 2\nprint(x)\n')
    assert student_edition.stub(source, 2) == (
        "# Exercise 2: your answer here, then run the check below.\n"
        "import math\n\n"
        'def f(a,\n      b):\n    """Doc."""\n'
        '    raise NotImplementedError("your answer here")\n\n'
        "x = ...  # your answer\ny = ...  # your answer\n")
    with pytest.raises(ValueError, match="nothing to leave"):
        student_edition.stub("print(1)\n", 1)


def test_chapter_pages_link_the_student_edition_in_colab():
    from book._ext.book_html import student_docname
    assert student_docname("book/01_reproduce_the_error") == (
        "book/student/01_reproduce_the_error")
    for path in CHAPTERS:
        assert (ROOT / f"{student_docname(f'book/{path.stem}')}.ipynb").is_file()


def with_answers_put_back(student, book):
    """The student notebook with, after each check, the book's answer and the
    check again (tagged `restored`)."""
    solutions = iter([c for c in book.cells if "solution" in tags(c)])
    cells = []
    for cell in student.cells:
        cells.append(cell)
        if "exercise-check" in tags(cell):
            answer = copy.deepcopy(next(solutions))
            again = copy.deepcopy(cell)
            for extra in (answer, again):
                extra.metadata["tags"] = ["restored"]
                extra["id"] = f"restored-{len(cells)}"
                cells.append(extra)
    combined = copy.deepcopy(student)
    combined.cells = cells
    return combined


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_student_edition_runs_only_checks_fail_and_book_answers_pass(path, tmp_path):
    book = nbformat.read(path, as_version=4)
    student = nbformat.read(student_edition.STUDENT / path.name, as_version=4)
    notebook = with_answers_put_back(student, book)
    nbformat.validate(notebook)
    result, notebook = run_alone(notebook, name=path.name, keep_going=True)
    assert result["files_written"] == [], "the student notebook wrote files"
    failed = [i for i, c in enumerate(notebook.cells) if c.cell_type == "code"
              and any(o.output_type == "error" for o in c.outputs)]
    expected = [i for i, c in enumerate(notebook.cells)
                if {"raises-exception", "exercise-check"} & set(tags(c))]
    assert failed == expected, "as shipped, exactly the exercise checks fail"
    verdicts = ["".join(o.get("text", "") for o in c.outputs).strip().splitlines()[-1:]
                for c in notebook.cells
                if "restored" in tags(c) and "Exercise" in c.source]
    numbers = range(1, len(verdicts) + 1)
    assert verdicts == [[f"Exercise {n}: passed"] for n in numbers], verdicts
    stubs = [c for c in notebook.cells if "answer" in tags(c)]
    checks = [c for c in notebook.cells if "exercise-check" in tags(c)]
    assert len(stubs) == len(checks) == len(verdicts)
    for check in checks:
        error = next(o for o in check.outputs if o.output_type == "error")
        assert re.match(r"(NotImplementedError|AssertionError|AttributeError|TypeError)$",
                        error.ename), (error.ename, error.evalue)
