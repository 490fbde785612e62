"""Every chapter has the same frame, readable in the book, in Jupyter and in
Colab: objectives and time in a blockquote, sections marked core (with
minutes) or optional, setup first, summary then exercises, answers folded
in Colab's form view and in the book, checked by a cell, explained in
`<details>`; plumbing folded; at least one prediction prompt; and no MyST-only
markup in the notebooks (Jupyter and Colab show it as literal text)."""
import copy
import re

import nbformat
import pytest

from tools.book import tags, toc_notebooks
from tools.plan import read_chapter

CHAPTERS = toc_notebooks()


def markdown(notebook):
    return [c.source for c in notebook.cells if c.cell_type == "markdown"]


def exercise_cells(notebook):
    start = next(i for i, c in enumerate(notebook.cells)
                 if c.cell_type == "markdown"
                 and re.search(r"^## Exercises", c.source, re.M))
    return notebook.cells[start:]


# MyST syntax that plain Markdown renderers (Jupyter, Colab) show as text.
MYST_ONLY = [
    ("role", re.compile(r"\{[A-Za-z][\w:.-]*\}`")),
    ("directive", re.compile(r"^\s*(?::{3,}|`{3,}|~{3,})\s*\{[\w-]+\}", re.M)),
    ("colon fence", re.compile(r"^\s*:{3,}\s*$", re.M)),
    ("target", re.compile(r"^\s*\([\w.:-]+\)=\s*$", re.M)),
    ("substitution", re.compile(r"\{\{[^}]*\}\}")),
    ("comment", re.compile(r"^%\s", re.M)),
    ("block break", re.compile(r"^\+\+\+", re.M)),
    ("directive option", re.compile(r"^:[\w-]+:\s", re.M)),
]
PLAIN_FENCE = re.compile(r"^(`{3,}|~{3,})[^{\n]*\n.*?^\1\s*$", re.M | re.S)


def myst_only_syntax(notebook):
    """[(cell index, kind, text)] for each MyST-only construct in Markdown."""
    found = []
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type != "markdown":
            continue
        text = PLAIN_FENCE.sub("", cell.source)  # plain code blocks may show anything
        for kind, pattern in MYST_ONLY:
            found += [(index, kind, m.group(0).strip())
                      for m in pattern.finditer(text)]
    return found


@pytest.fixture(params=CHAPTERS, ids=[p.name for p in CHAPTERS])
def chapter(request, notebooks):
    return notebooks[request.param]


def test_no_myst_only_markup_in_markdown_cells(chapter):
    assert myst_only_syntax(chapter) == []


def test_myst_check_finds_a_planted_doc_role_and_each_kind(notebooks):
    notebook = nbformat.from_dict(nbformat.v4.new_notebook())
    notebook.cells = [nbformat.v4.new_markdown_cell("See [chapter 2](02_x.ipynb).")]
    assert myst_only_syntax(notebook) == []
    planted = copy.deepcopy(next(iter(notebooks.values())))
    planted.cells[-1].source += "\n\nSee {doc}`02_where_the_error_is_raised`."
    assert [(k, t) for _, k, t in myst_only_syntax(planted)] == [("role", "{doc}`")]
    for text, kind in [(":::{note}\nx\n:::", "directive"), ("(my-label)=\n# T", "target"),
                       ("```{code-cell}\n1\n```", "directive"),
                       ("a {term}`leaf <leaf tensor>`", "role"),
                       ("```python\n{doc}`x`\n```", None)]:
        notebook.cells[0].source = text
        kinds = {k for _, k, _ in myst_only_syntax(notebook)}
        assert (kind in kinds) if kind else kinds == set(), text


def test_opens_with_title_objectives_and_time(chapter):
    first = chapter.cells[0]
    assert first.cell_type == "markdown"
    assert first.source.startswith("# ")
    box = re.search(r"^> \*\*Learning objectives\*\*\n>\n> After this chapter you can:\n"
                    r"((?:> - .+\n(?:>   .+\n)*)+)>\n> Time: about (\d+) minutes \(core sections\)\.$",
                    first.source, re.M)
    assert box, "objectives blockquote: title, list, then the time"


@pytest.fixture(params=CHAPTERS, ids=[p.name for p in CHAPTERS])
def sections(request):
    """[(title, core minutes or None)]: tools.plan reads them, and refuses a
    heading marked neither core nor optional, or minutes that do not add up
    to the stated time (tests/test_teaching_plan.py holds that)."""
    return read_chapter(request.param).sections


def test_setup_is_the_first_section_and_core(sections):
    title, minutes = sections[0]
    assert title == "Setup" and minutes is not None


def test_ends_with_summary_then_exercises(sections):
    titles = [title for title, _ in sections]
    assert "Summary" in titles and "Exercises" in titles
    assert titles.index("Summary") < titles.index("Exercises")
    assert titles[-1] == "Exercises"


def test_has_a_prediction_prompt_before_a_code_cell(chapter):
    cells = chapter.cells
    prompts = [i for i, c in enumerate(cells) if c.cell_type == "markdown"
               and re.search(r"^\*\*Predict\.\*\* ", c.source, re.M)]
    assert prompts, "at least one paragraph starting **Predict.**"
    for i in prompts:   # the cell that answers it comes before the next section
        following = cells[i + 1:]
        ends = next((k for k, c in enumerate(following) if c.cell_type == "markdown"
                     and c.source.startswith("## ")), len(following))
        assert any(c.cell_type == "code" for c in following[:ends]), (
            f"cell {i}: a prediction with no code cell before the next section")


def test_each_exercise_has_folded_solution_check_and_explanation(chapter):
    cells = exercise_cells(chapter)
    prompts = [n for c in cells if c.cell_type == "markdown"
               for n in re.findall(r"^\*\*(\d+)\.\*\*", c.source, re.M)]
    assert 2 <= len(prompts) <= 4, prompts
    assert prompts == [str(n) for n in range(1, len(prompts) + 1)]
    code = [c for c in cells if c.cell_type == "code"]
    solutions = [c for c in code if "solution" in tags(c)]
    checks = [c for c in code if "exercise-check" in tags(c)]
    assert len(solutions) == len(checks) == len(prompts)
    for n, cell in zip(prompts, solutions):
        assert "hide-input" in tags(cell)
        assert cell.source.startswith(f"# @title Solution {n} (double-click to show)\n")
        assert cell.metadata.get("cellView") == "form"
    # each solution is followed by its check
    order = [("s" if "solution" in tags(c) else "c") for c in code
             if {"solution", "exercise-check"} & set(tags(c))]
    assert order == ["s", "c"] * len(prompts), order
    for check in checks:
        assert "assert" in check.source
    explanations = re.findall(r"<details>\n<summary>Solution (\d+)</summary>\n\n",
                              "\n".join(c.source for c in cells
                                        if c.cell_type == "markdown"))
    assert explanations == prompts
    assert "</details>" in "".join(markdown(chapter))
    printed = ["".join(o.get("text", "") for o in c.outputs) for c in checks]
    # A check may show what it looked at; its last line is the verdict.
    assert [p.strip().splitlines()[-1] for p in printed] == [
        f"Exercise {n}: passed" for n in prompts]


def test_exercise_tags_only_in_the_exercises(chapter):
    cells = exercise_cells(chapter)
    before = chapter.cells[:len(chapter.cells) - len(cells)]
    assert not [c for c in before if c.cell_type == "code"
                and {"solution", "exercise-check"} & set(tags(c))]


def test_folded_cells_fold_in_colab_and_in_the_book(chapter):
    """Folded in the book (hide-input, or remove-input for a generated data
    cell) and in Colab's form view go together, with a title."""
    for index, cell in enumerate(chapter.cells):
        if cell.cell_type != "code":
            continue
        folded = "hide-input" in tags(cell) or (
            "remove-input" in tags(cell) and "study" in cell.metadata)
        form = cell.metadata.get("cellView") == "form"
        titled = re.match(r"# @title \S.*\n", cell.source) is not None
        assert folded == form == titled, (
            f"cell {index}: hide-input {folded}, cellView form {form}, "
            f"# @title {titled}")


MAX_VISIBLE_LINES = 40


def folded(cell):
    """Folded in the book and in Colab (see the test above)."""
    return "hide-input" in tags(cell) or (
        "remove-input" in tags(cell) and "study" in cell.metadata)


def long_visible_cells(notebook, limit=MAX_VISIBLE_LINES, folded_too=False):
    """[(index, id, lines)] for each code cell a reader sees unfolded (any
    code cell if `folded_too`) that is longer than `limit` lines: show a
    short core, fold the hardened version."""
    return [(index, cell.get("id"), len(cell.source.splitlines()))
            for index, cell in enumerate(notebook.cells)
            if cell.cell_type == "code" and (folded_too or not folded(cell))
            and len(cell.source.splitlines()) > limit]


def test_no_visible_code_cell_is_longer_than_40_lines(chapter):
    assert long_visible_cells(chapter) == []


def test_the_length_check_finds_a_long_cell_and_lets_a_folded_one_pass():
    notebook = nbformat.v4.new_notebook()
    long_source = "\n".join(f"x{n} = {n}" for n in range(41))
    notebook.cells = [nbformat.v4.new_code_cell("\n".join(long_source.splitlines()[:40])),
                      nbformat.v4.new_code_cell(long_source)]
    notebook.cells[1]["id"] = "too-long"
    assert long_visible_cells(notebook) == [(1, "too-long", 41)]
    notebook.cells[1].source = "# @title A long helper\n" + long_source
    notebook.cells[1].metadata.update({"tags": ["hide-input"], "cellView": "form"})
    assert long_visible_cells(notebook) == []
    assert long_visible_cells(notebook, 40, folded_too=True) == [(1, "too-long", 42)]


MAX_CODE_LINES = 150


def test_no_code_cell_is_longer_than_150_lines(chapter):
    """Folded or not, written by hand or by `make generate` (a copy of several
    cells is one cell per source; a stored study is one line per seed)."""
    assert long_visible_cells(chapter, MAX_CODE_LINES, folded_too=True) == []


def lines(path):
    return len(path.read_text().splitlines())


MACHINERY = ("tools", "book/_ext", "book/_templates", "tests")


def test_machinery_stays_below_two_and_a_half_lines_per_line_of_chapter_code():
    """Lines of the Python, JavaScript and HTML under tools/, book/_ext/,
    book/_templates/ and tests/ (tests/data/ aside), per line of the
    chapters' hand-written code cells (copies and the stored study aside),
    their class editions' graded exercises (book/graded/) included."""
    root = CHAPTERS[0].parent.parent
    machinery = sum(lines(path) for folder in MACHINERY for path in (root / folder).rglob("*")
                    if path.suffix in {".py", ".js", ".html"} and "data" not in path.parts
                    and "__pycache__" not in path.parts)
    graded = sorted((root / "book" / "graded").glob("*.ipynb"))
    chapter_code = sum(len(cell.source.splitlines()) for path in [*CHAPTERS, *graded]
                       for cell in nbformat.read(path, as_version=4).cells
                       if cell.cell_type == "code" and "generated" not in tags(cell))
    assert machinery / chapter_code <= 2.5, (machinery, chapter_code)


def test_no_sphinx_extension_file_is_over_500_lines():
    root = CHAPTERS[0].parent
    assert [(path.name, lines(path)) for path in (root / "_ext").iterdir()
            if path.is_file() and lines(path) > 500] == []


CHAPTERS_WITH_A_STUDY = ("05_variance_pruning.ipynb", "07_tnvp_language_model.ipynb")


def test_the_chapters_with_a_study_and_their_student_editions_weigh_under_2_mb():
    """The study is stored as data (one line of numbers per seed), the plots
    once: chapters 5 and 7, both editions, under 2,000,000 bytes."""
    paths = [folder / name for folder in (CHAPTERS[0].parent, CHAPTERS[0].parent / "student")
             for name in CHAPTERS_WITH_A_STUDY]
    assert sum(path.stat().st_size for path in paths) < 2_000_000


# Ids that Jupyter or nbformat made up: a cell other chapters copy, or a
# reader links to, needs a name that says what it holds (CONTRIBUTING.md).
RANDOM_ID = re.compile(r"^[0-9a-f]{8}(-|$)|^[0-9a-f]{32}$")


def random_ids(notebook):
    return [(index, cell.get("id")) for index, cell in enumerate(notebook.cells)
            if RANDOM_ID.match(cell.get("id") or "")]


def test_no_cell_id_looks_random(chapter):
    assert random_ids(chapter) == []


def test_the_id_check_finds_made_up_ids_and_not_meaningful_ones():
    notebook = nbformat.v4.new_notebook()
    made_up = ["1fffcc2b", "6b6aea30-2c1d-4a4e-9d55-9a3e5c0c1b2f",
               "0123456789abcdef0123456789abcdef"]
    meaningful = ["prune-linear-pair", "cell-07", "facade-feed", "accumulate"]
    notebook.cells = [nbformat.v4.new_code_cell("1") for _ in made_up + meaningful]
    for cell, cell_id in zip(notebook.cells, made_up + meaningful):
        cell["id"] = cell_id
    assert [cell_id for _, cell_id in random_ids(notebook)] == made_up
    fresh = nbformat.v4.new_code_cell("1")          # nbformat's own id: random
    notebook.cells = [fresh]
    assert random_ids(notebook) == [(0, fresh["id"])]
