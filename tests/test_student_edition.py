"""The student edition (book/student/, written by `make generate`) and the
grader's source notebooks (`tools.student.grading_notebook`).

The student edition is committed, so Colab can open it from the repository
(tests/test_generated.py holds it to what `make generate` writes today). It
gives nothing away: a prediction's reveal cells keep no output and no
assert, its explanation is folded, no check holds a digest, and the hidden
tests are only in the grader's notebook.

Its exercises are the graded ones (book/graded/), not the book's, whose
solutions are public. Run as shipped, only the exercise checks fail. Each
chapter's grader notebook is then run once, as a student (BOOK_STUDENT):
after each check, every trick of TRICKS (an empty function, the book's or
the question's value, a value of another variant, an always-equal object,
a near miss) is put in the answer cell and the hidden tests alone are run
on it: each must fail; then the graded exercise's solution (computed for
the student's variant) and the whole check: it must pass. One kernel per
chapter (the book's one runner, tools.run).
"""
import ast
import collections
import contextlib
import copy
import io
import json
import random
import re
from pathlib import Path

import nbformat
import pytest

from tools import student as student_edition
from tools.book import ROOT, tags, toc_notebooks
from tools.run import run_alone

CHAPTERS = toc_notebooks()
UNFOLD = re.compile(r"<details>\n<summary>Explanation \(after you ran the cell\)</summary>"
                    r"\n\n(.*?)\n\n</details>", re.S)


def student_of(path):
    return nbformat.read(student_edition.STUDENT / path.name, as_version=4)


def class_chapter(path):
    """The chapter at `path` as its student edition is made from: the graded
    exercises (book/graded/) in place of the book's."""
    return student_edition.class_chapter(nbformat.read(path, as_version=4), path)


def graded_solutions(stem):
    """The solution cells of chapter `stem`'s graded exercises."""
    bank = nbformat.read(student_edition.GRADED / f"{stem}.ipynb", as_version=4)
    return [c for c in bank.cells if "solution" in tags(c)]


def as_in_the_book(student):
    """The student notebook's cells with what the edition adds taken out
    again: the note under the title, the prediction cells, the folds of the
    explanations, the tag of a reveal cell (its outputs stay cleared)."""
    cells = []
    for cell in copy.deepcopy(student.cells):
        if cell.cell_type == "markdown" and cell.source == student_edition.PREDICTION:
            continue
        cell.source = cell.source.replace("\n\n" + student_edition.BANNER, "")
        if cell.cell_type == "markdown":
            cell.source = UNFOLD.sub(r"\1", cell.source)
        if "reveals-prediction" in tags(cell):
            cell.metadata["tags"] = [t for t in tags(cell) if t != "reveals-prediction"]
            if not cell.metadata["tags"]:
                del cell.metadata["tags"]
        cells.append(cell)
    return cells


def asserts_in(source):
    """The assert statements of a code cell (IPython's % lines skipped)."""
    code = "\n".join("pass" if re.match(r"\s*[%!]", line) else line
                     for line in source.split("\n"))
    return [node for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Assert)]


def is_subsequence(short, long):
    rest = iter(long)
    return all(any(item == other for other in rest) for item in short)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_student_edition_hides_every_answer_and_keeps_the_rest(path):
    book = class_chapter(path)
    student = student_of(path)
    start = student_edition.exercises_start(book)
    revealing = {i for group in student_edition.reveal_groups(book).values() for i in group}
    kept = as_in_the_book(student)
    for index, (theirs, ours) in enumerate(zip(kept[:start], book.cells[:start])):
        if index in revealing or student_edition.redraws_a_figure(ours):
            assert theirs.outputs == [] and theirs.execution_count is None, index
            ours = copy.deepcopy(ours)
            ours.outputs, ours.execution_count = [], None
            for key in student_edition.DESCRIBES_OUTPUT:
                ours.metadata.pop(key, None)
        if index in revealing:
            assert asserts_in(theirs.source) == [], f"cell {index} asserts an answer"
            assert is_subsequence([line for line in theirs.source.split("\n")
                                   if line.strip() != "pass"], ours.source.split("\n")), index
            assert not set(student_edition.DESCRIBES_OUTPUT) & set(theirs.metadata), index
            ours.source = theirs.source
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


# What answers a prediction, as the book says it after the reveal (in an
# explanation, an assert of a reveal cell, a caption, a heading or an
# objective): none may be visible in a student notebook before the student
# has run the cell, that is, anywhere but inside a folded explanation. Each
# is in the book (BOOK_SAYS: so that the scan cannot pass by finding
# nothing), or was reworded out of it (REWORDED).
CASES = json.loads((Path(__file__).parent / "data" / "student_edition.json").read_text())
BOOK_SAYS, REWORDED = CASES["book_says"], CASES["reworded"]


def visible_text(notebook):
    """What a student sees before opening a fold: Markdown outside the
    <details> boxes, code, outputs, and each cell's metadata."""
    parts = []
    for cell in notebook.cells:
        source = cell.source
        if cell.cell_type == "markdown":
            source = re.sub(r"<details>.*?</details>", "", source, flags=re.S)
        parts.append(source)
        parts.append(json.dumps(cell.metadata))
        for output in cell.get("outputs", []):
            parts.append(json.dumps(output))
    return "\n".join(parts)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_no_prediction_is_answered_before_it_is_run(path):
    book = nbformat.read(path, as_version=4)
    book_text = "\n".join(c.source + json.dumps(c.metadata) for c in book.cells)
    student_text = visible_text(student_of(path))
    for phrase in BOOK_SAYS.get(path.stem, []):
        assert phrase in book_text, f"the book no longer says {phrase!r}: update BOOK_SAYS"
        assert phrase not in student_text, phrase
    for phrase in REWORDED.get(path.stem, []):
        assert phrase not in book_text and phrase not in student_text, phrase


def test_a_planted_prediction_answer_is_found():
    """The scan above, on planted cases: an explanation left unfolded, a
    reveal cell's assert, and a caption in the metadata."""
    stem = "03_what_holds_the_old_shape"
    student = student_of(CHAPTERS[2])
    unfolded = copy.deepcopy(student)
    for cell in unfolded.cells:
        cell.source = UNFOLD.sub(r"\1", cell.source)
    assert any(p in visible_text(unfolded) for p in BOOK_SAYS[stem])
    reveal = next(c for c in student.cells if "reveals-prediction" in tags(c))
    reveal.source += '\nassert both_labels.count("AccumulateGrad") == 2'
    reveal.metadata["mystnb"] = {"figure": {"caption": "two AccumulateGrad boxes, not four"}}
    text = visible_text(student)
    assert BOOK_SAYS[stem][1] in text and REWORDED[stem][0] in text


def test_reveal_cells_lose_asserts_and_explanations_fold():
    source = ("x = 1\nassert x == 1, (\n    'one')\nif x:\n    assert x\n"
              "for i in range(2):\n    print(i)\n    assert i < 2\n%xmode Minimal\nprint(x)")
    assert student_edition.without_asserts(source) == (
        "x = 1\nif x:\n    pass\nfor i in range(2):\n    print(i)\n%xmode Minimal\nprint(x)")
    folded = student_edition.folded_explanation(
        "It is two.\n\nWhy two.\n\nNow the next one:\n\n**Predict.** How many?")
    assert folded.startswith("<details>") and "Why two.\n\n</details>" in folded
    assert folded.endswith("</details>\n\nNow the next one:\n\n**Predict.** How many?")
    assert student_edition.folded_explanation("## A section\n\nText") == "## A section\n\nText"
    assert student_edition.folded_explanation("It is two.\n\n## Next\n\nText").endswith(
        "</details>\n\n## Next\n\nText")


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_no_check_is_a_digest_oracle(path):
    """No check compares a digest (a student could test guesses against it):
    no hash function, no hex digest in any check cell of the student notebook
    or of the grader's."""
    for notebook in (student_of(path), student_edition.grading_notebook(path.stem)):
        for cell in notebook.cells:
            if "exercise-check" in tags(cell):
                assert not re.search(r"hashlib|sha256|md5|hexdigest", cell.source), cell.source
                assert not re.search(r"\b[0-9a-f]{10,}\b", cell.source), cell.source


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_grading_notebook_is_the_student_notebook_with_hidden_tests(path):
    student = student_of(path)
    grading = student_edition.grading_notebook(path.stem)
    assert "HIDDEN TESTS" not in nbformat.writes(student)
    answers = [c for c in grading.cells if "answer" in tags(c)]
    checks = [c for c in grading.cells if "exercise-check" in tags(c)]
    for answer, check in zip(answers, checks):
        hidden = student_edition.HIDDEN_TESTS.findall(check.source)
        assert len(hidden) == 1, check.source
        # the hidden tests use the student's answer
        used = {node.id for node in ast.walk(ast.parse(hidden[0])) if isinstance(node, ast.Name)}
        assert set(student_edition.stub_names(answer.source)) & used, hidden[0]
    stripped = copy.deepcopy(grading)
    for cell in stripped.cells:
        if "exercise-check" in tags(cell):
            cell.source = student_edition.without_hidden_tests(cell.source).replace(
                ': passed")', ': form ok; graded later")')  # the grader's verdict, not the cell's
    assert stripped == student
    book = class_chapter(path)
    book_checks = [c.source for c in book.cells if "exercise-check" in tags(c)]
    assert [c.source.endswith(b) for c, b in zip(checks, book_checks)] == [True] * len(checks)


def test_grading_notebook_refuses_what_is_not_a_chapter():
    with pytest.raises(ValueError, match="no chapter"):
        student_edition.grading_notebook("08_no_such_chapter")
    with pytest.raises(TypeError):
        student_edition.grading_notebook(1)
    assert student_edition.grading_notebook(CHAPTERS[0].name).cells


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


# Submissions that must not pass: {chapter: {exercise: [answer cell source]}},
# each run against the exercise's hidden tests alone, as a student whose
# variant is not the book's.
STUDENT_ID = "student-7"
ALWAYS_EQUAL = """
class AlwaysEqual({base}):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = {base}.__hash__
"""


def expanded(trick):
    """A trick's code: a first line `AlwaysEqual(T)` is ALWAYS_EQUAL's class of T."""
    first, _, rest = trick.partition("\n")
    base = re.fullmatch(r"AlwaysEqual\((\w+)\)", first)
    return ALWAYS_EQUAL.format(base=base[1]) + "\n" + rest if base else trick


TRICKS = {stem: {int(n): [expanded(t) for t in tricks] for n, tricks in by_exercise.items()}
          for stem, by_exercise in CASES["tricks"].items()}


def test_every_exercise_has_tricks():
    for path in CHAPTERS:
        solutions = graded_solutions(path.stem)
        assert sorted(TRICKS[path.stem]) == list(range(1, len(solutions) + 1)), path.stem


def code_cell(source, tag, number):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["tags"] = [tag]
    cell.metadata["exercise"] = number
    return cell


def with_tricks_and_honest_answers(grading, stem):
    """The grader's notebook with, after each check: each trick of TRICKS and
    the hidden tests alone (tagged `trick`), then the honest answer and the
    whole check (tagged `restored`); each after the exercise's variant cell,
    run again."""
    solutions = iter(graded_solutions(stem))
    cells, number, variant = [], 0, "pass"
    for cell in grading.cells:
        cells.append(cell)
        if cell.get("id", "").endswith("-variant"):  # drawn again: a trick may change it
            variant = cell.source
        if "exercise-check" not in tags(cell):
            continue
        number += 1
        hidden = student_edition.HIDDEN_TESTS.search(cell.source).group(0)
        for trick in TRICKS[stem][number]:
            cells += [code_cell(variant, "trick", number), code_cell(trick, "trick", number),
                      code_cell(hidden, "trick", number)]
        cells += [code_cell(variant, "restored", number),
                  code_cell(next(solutions).source, "restored", number),
                  code_cell(cell.source, "restored", number)]
    combined = copy.deepcopy(grading)
    combined.cells = cells
    for index, cell in enumerate(combined.cells):
        cell["id"] = f"cell-{index}"
    return combined


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_tricks_fail_the_hidden_tests_and_honest_answers_pass(path, monkeypatch):
    monkeypatch.setenv("BOOK_STUDENT", STUDENT_ID)
    notebook = with_tricks_and_honest_answers(student_edition.grading_notebook(path.stem),
                                              path.stem)
    nbformat.validate(notebook)
    result, notebook = run_alone(notebook, name=path.name, keep_going=True)
    assert notebook is not None, result
    assert result["files_written"] == [], "the student notebook wrote files"
    cells = notebook.cells
    failed = [i for i, c in enumerate(cells) if c.cell_type == "code"
              and any(o.output_type == "error" for o in c.outputs)]
    tests_of_tricks = [i for i, c in enumerate(cells) if "trick" in tags(c)
                       and student_edition.HIDDEN_TESTS.match(c.source)]
    shipped = [i for i, c in enumerate(cells)
               if {"raises-exception", "exercise-check"} & set(tags(c))]
    assert tests_of_tricks and set(tests_of_tricks) <= set(failed), (
        "a trick passed the hidden tests: "
        + str([cells[i - 1].source for i in tests_of_tricks if i not in failed]))
    assert [i for i in failed if i not in tests_of_tricks and "trick" not in tags(cells[i])] \
        == shipped, "as shipped, exactly the exercise checks fail; honest answers pass"
    verdicts = ["".join(o.get("text", "") for o in c.outputs).strip().splitlines()[-1:]
                for c in cells if "restored" in tags(c) and "Exercise" in c.source]
    numbers = range(1, len(verdicts) + 1)
    assert verdicts == [[f"Exercise {n}: passed"] for n in numbers], verdicts
    for index in shipped:
        if "exercise-check" in tags(cells[index]):
            error = next(o for o in cells[index].outputs if o.output_type == "error")
            assert error.ename == "NotImplementedError", (error.ename, error.evalue)



VARIANT_CELLS = [(path.stem, cell) for path in sorted(student_edition.GRADED.glob("*.ipynb"))
                 for cell in nbformat.read(path, as_version=4).cells
                 if cell.get("id", "").endswith("-variant")]


@pytest.mark.parametrize("stem, cell", VARIANT_CELLS,
                         ids=[f"{stem[:2]}-{cell.id}" for stem, cell in VARIANT_CELLS])
def test_every_graded_exercise_varies_and_two_students_rarely_share_a_variant(stem, cell):
    """Of 100 student ids, each graded exercise draws at least ten variants
    (what its variant cell prints), and two students picked at random share
    one less than once in ten pairs."""
    import torch

    study = json.loads((ROOT / "book" / "_data" / "study" / f"{stem}.json").read_text()) \
        if stem.startswith("07") else {}
    drawn = []
    for number in range(100):
        namespace = dict(torch=torch, nn=torch.nn, random=random, STUDENT_ID=f"s-{number}",
                         CONFIG=study.get("variants", {}).get("main", {}).get("config"))
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            exec(cell.source, namespace)
        drawn.append(printed.getvalue())
    counts = collections.Counter(drawn).values()
    shared = sum(n * (n - 1) for n in counts) / (len(drawn) * (len(drawn) - 1))
    assert len(counts) >= 10 and shared < 0.1, (len(counts), shared)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_the_books_own_exercises_are_practice_not_graded(path):
    """The chapter's exercises are for practice (the graded ones are the class
    edition's): none of them speaks of grading, a roster or a teacher."""
    book = nbformat.read(path, as_version=4)
    text = "\n".join(c.source for c in book.cells[student_edition.exercises_start(book):])
    assert not re.findall(r".{0,40}\b(?:graded|hand (?:the notebook )?in|roster|teacher)\b.{0,40}",
                          text, re.I)


def test_every_hidden_assert_of_the_bank_says_what_it_expected_and_got():
    """A graded exercise's hidden assert has a message built from the values
    (an f-string): the grader shows it as the row's failure."""
    silent = []
    for path in sorted(student_edition.GRADED.glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS",
                                    cell.source, re.S):
                silent += [(path.stem, ast.unparse(node.test)) for node in ast.walk(ast.parse(block))
                           if isinstance(node, ast.Assert)
                           and not isinstance(node.msg, ast.JoinedStr)]
    assert silent == []
