"""Every chapter has the same frame: objectives, time, setup, summary,
exercises with hidden solutions that a cell checks."""
import re

import pytest

from book_files import toc_notebooks

CHAPTERS = toc_notebooks()


def markdown(notebook):
    return [c.source for c in notebook.cells if c.cell_type == "markdown"]


def headings(notebook):
    return [line for text in markdown(notebook) for line in text.splitlines()
            if line.startswith("## ")]


@pytest.fixture(params=CHAPTERS, ids=[p.name for p in CHAPTERS])
def chapter(request, notebooks):
    return notebooks[request.param]


def test_opens_with_title_objectives_and_time(chapter):
    first = chapter.cells[0]
    assert first.cell_type == "markdown"
    assert first.source.startswith("# ")
    assert ":::{admonition} Learning objectives" in first.source
    assert re.search(r"^- ", first.source, re.M), "objectives are a list"
    assert re.search(r"Time: about \d+ minutes", first.source)


def test_setup_section_comes_first(chapter):
    assert headings(chapter)[0] == "## Setup"


def test_ends_with_summary_then_exercises(chapter):
    titles = headings(chapter)
    assert "## Summary" in titles and "## Exercises" in titles
    assert titles.index("## Summary") < titles.index("## Exercises")
    assert titles[-1] == "## Exercises"


def test_each_exercise_has_hidden_solution_check_and_explanation(chapter):
    start = next(i for i, c in enumerate(chapter.cells)
                 if c.cell_type == "markdown" and "## Exercises" in c.source)
    cells = chapter.cells[start:]
    prompts = [n for c in cells if c.cell_type == "markdown"
               for n in re.findall(r"^\*\*(\d+)\.\*\*", c.source, re.M)]
    assert 2 <= len(prompts) <= 4, prompts
    assert prompts == [str(n) for n in range(1, len(prompts) + 1)]
    hidden = [c for c in cells if c.cell_type == "code"
              and "hide-input" in c.metadata.get("tags", [])]
    checks = [c for c in cells if c.cell_type == "code" and "assert" in c.source
              and re.search(r'Exercise \d+: passed', c.source)]
    explanations = re.findall(r":::\{dropdown\} Solution (\d+)",
                              "\n".join(c.source for c in cells))
    assert len(hidden) == len(prompts), "one hidden solution per exercise"
    assert explanations == prompts
    printed = ["".join(o.get("text", "") for o in c.outputs) for c in checks]
    # A check may show what it looked at; its last line is the verdict.
    assert [p.strip().splitlines()[-1] for p in printed] == [
        f"Exercise {n}: passed" for n in prompts]
