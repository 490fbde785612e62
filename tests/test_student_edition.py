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


def as_in_the_book(student):
    """The student notebook's cells with what the edition adds taken out
    again: the note under the title, the prediction cells, the tag of a
    reveal cell (its outputs stay cleared)."""
    cells = []
    for cell in copy.deepcopy(student.cells):
        if cell.cell_type == "markdown" and cell.source == student_edition.PREDICTION:
            continue
        cell.source = cell.source.replace("\n\n" + student_edition.BANNER, "")
        if "reveals-prediction" in tags(cell):
            cell.metadata["tags"] = [t for t in tags(cell) if t != "reveals-prediction"]
            if not cell.metadata["tags"]:
                del cell.metadata["tags"]
        cells.append(cell)
    return cells


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_student_edition_hides_every_answer_and_keeps_the_rest(path):
    book = nbformat.read(path, as_version=4)
    student = nbformat.read(student_edition.STUDENT / path.name, as_version=4)
    start = student_edition.exercises_start(book)
    reveals = set(student_edition.reveal_cells(book).values())
    kept = as_in_the_book(student)
    for index, (theirs, ours) in enumerate(zip(kept[:start], book.cells[:start])):
        if index in reveals:
            ours = copy.deepcopy(ours)
            ours.outputs, ours.execution_count = [], None
        assert theirs == ours, f"cell {index} before the exercises differs"
    rest = kept[start:]
    answers = [c for c in rest if "answer" in tags(c)]
    checks = [c for c in rest if "exercise-check" in tags(c)]
    solutions = [c for c in book.cells if "solution" in tags(c)]
    assert len(answers) == len(checks) == len(solutions) > 0
    for number, answer in enumerate(answers, 1):
        assert student_edition.stub_error(number) in answer.source \
            or "= ...  # your answer" in answer.source
        assert "cellView" not in answer.metadata and "hide-input" not in tags(answer)
        assert answer.metadata["nbgrader"]["solution"] is True
    for number, check in enumerate(checks, 1):
        assert check.source.startswith(student_edition.guard(
            student_edition.stub_names(answers[number - 1].source), number))
        assert check.metadata["nbgrader"] == student_edition.nbgrader_metadata(
            int(path.name[:2]), number, "check")
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


def stored_reveals(notebook):
    """Problems: reveal cells that store an output, or have no prediction cell before."""
    problems = []
    for predict, reveal in student_edition.reveal_cells(notebook).items():
        if notebook.cells[reveal].get("outputs"):
            problems.append(f"cell {reveal} stores the answer to the prediction of cell {predict}")
        if notebook.cells[reveal - 1].source != student_edition.PREDICTION:
            problems.append(f"cell {reveal} has no prediction cell before it")
    return problems


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_every_prediction_waits_for_the_student(path):
    student = nbformat.read(student_edition.STUDENT / path.name, as_version=4)
    predictions = [c for c in student.cells if c.cell_type == "markdown"
                   and student_edition.PREDICT in c.source]
    assert predictions, "a chapter has at least one prediction"
    assert len(student_edition.reveal_cells(student)) == len(predictions)
    assert stored_reveals(student) == []


def test_a_stored_reveal_output_is_found():
    """The check above, on a planted case: the book's own chapter 1, whose
    reveal cells store their outputs and have no prediction cell."""
    book = nbformat.read(CHAPTERS[0], as_version=4)
    problems = stored_reveals(book)
    assert any("stores the answer" in p for p in problems), problems


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_student_notebook_says_what_it_is(path):
    student = nbformat.read(student_edition.STUDENT / path.name, as_version=4)
    first = next(c for c in student.cells if c.cell_type == "markdown")
    assert first.source.startswith("# ")
    assert "**Student edition.**" in first.source
    assert "*File > Save a copy in Drive*" in first.source


# Each exercise's expected value, as a check or an output would spell it. None
# of them may appear in a student notebook's exercises, code and outputs
# (EXPECTED), nor in the exercises' prompts (IN_PROMPTS: a prompt may offer
# both answers, "[10, 90] or [10, 100]?", but not state the one that holds).
IN_PROMPTS = {"05_variance_pruning": ["must be unchanged"]}
# ... nor anywhere in a notebook's text (IN_TEXT: what would answer an
# exercise before the student reaches it).
IN_TEXT = {"07_tnvp_language_model": ["uniformly among the", "scores 34"]}
EXPECTED = {
    "01_reproduce_the_error": ['"works"', "'works'"],
    "02_where_the_error_is_raised": ["AddmmBackward0", "PermuteBackward0"],
    "03_what_holds_the_old_shape": ["[10, 100]", "(True, False)", "['bias', 'weight']",
                                    '["bias", "weight"]'],
    "06_any_layer_any_node": ["2.weight"],
    "07_tnvp_language_model": ["len(VOCAB)", "vocabulary:"],
}


def leaked_answers(notebook, stem):
    """The expected values of `stem` found in the exercises of `notebook`:
    in code cells, their outputs, and the exercises' Markdown prompts."""
    found = [(index, value) for index, cell in enumerate(notebook.cells)
             for value in IN_TEXT.get(stem, [])
             if cell.cell_type == "markdown" and value in cell.source]
    start = student_edition.exercises_start(notebook)
    for index, cell in enumerate(notebook.cells[start:], start):
        text = cell.source
        if cell.cell_type == "markdown":
            text = text[text.find("## Exercises"):] if "## Exercises" in text else text
            values = IN_PROMPTS.get(stem, [])
        else:
            text += "".join(str(o.get("text", "")) + str(o.get("data", {}))
                            + str(o.get("evalue", "")) for o in cell.outputs)
            values = EXPECTED.get(stem, [])
        found += [(index, value) for value in values if value in text]
    return found


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_no_student_notebook_holds_an_exercise_answer(path):
    student = nbformat.read(student_edition.STUDENT / path.name, as_version=4)
    assert leaked_answers(student, path.stem) == []


def test_a_planted_answer_is_found():
    """The scan above, on planted cases: the old check of chapter 3's exercise
    1, and an output that prints chapter 1's answer."""
    student = nbformat.read(student_edition.STUDENT / CHAPTERS[2].name, as_version=4)
    check = next(c for c in student.cells if "exercise-check" in tags(c))
    check.source += "\nassert recorded_after_rebinding() == [10, 100]"
    assert leaked_answers(student, CHAPTERS[2].stem) != []
    student = nbformat.read(student_edition.STUDENT / CHAPTERS[0].name, as_version=4)
    check = next(c for c in student.cells if "exercise-check" in tags(c))
    check.outputs = [nbformat.v4.new_output("stream", text="keep_all: 'works'\n")]
    assert leaked_answers(student, CHAPTERS[0].stem) != []
    student = nbformat.read(student_edition.STUDENT / CHAPTERS[4].name, as_version=4)
    prompt = next(c for c in student.cells if c.source.startswith("**2.**"))
    prompt.source += " The output must be unchanged."
    assert leaked_answers(student, CHAPTERS[4].stem) != []


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_setup_cell_installs_only_what_the_chapter_imports(path):
    from tools.copies import INSTALLABLE
    book = nbformat.read(path, as_version=4)
    code = [c for c in book.cells if c.cell_type == "code"]
    imported = "\n".join(c.source for c in code[1:])
    used = [name for name, module in INSTALLABLE.items()
            if f"import {module}" in imported or f"from {module}" in imported]
    assert code[0].metadata["setup"]["install"] == used
    for name in INSTALLABLE:
        assert (f'"{name}==' in code[0].source) == (name in used), name


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
