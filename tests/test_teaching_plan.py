"""The teaching plan: book/_data/lessons.yml, the chapters' own minutes, and
the tables tools/plan.py writes from them for the teacher's guide and the
before-class page."""
import copy
import re

import pytest

from tools.book import BOOK, toc_notebooks
from tools.plan import (PlanError, generated, read_chapters, read_plan,
                        run_times)

GUIDE = (BOOK / "teachers_guide.md").read_text()
BEFORE = (BOOK / "before_class.md").read_text()
INCLUDE = re.compile(r"^```\{include\} (\S+)\s*$", re.M)


def core_minutes(lesson):
    chapters = read_chapters()
    return sum(chapters[c].minutes for c in lesson["chapters"])


def test_committed_generated_files_are_what_the_plan_writes():
    """Run `python -m tools.plan` after changing the plan, a chapter's
    headings or the versions matrix, and commit what it writes."""
    for path, text in generated().items():
        assert path.is_file(), f"{path.name} is missing: run python -m tools.plan"
        assert path.read_text() == text, f"{path.name} is stale: run python -m tools.plan"


def test_every_chapter_marks_its_sections_and_states_their_sum():
    chapters = read_chapters()  # raises on an unmarked heading or a wrong sum
    assert sorted(chapters) == sorted(int(p.name[:2]) for p in toc_notebooks())
    for chapter in chapters.values():
        assert chapter.core, chapter.stem
        assert chapter.minutes == sum(minutes for _, minutes in chapter.core)


def test_plan_names_real_chapters_and_fills_each_lesson_exactly():
    chapters = read_chapters()
    lessons = read_plan()["lessons"]
    assert lessons
    for number, lesson in enumerate(lessons, 1):
        assert lesson["chapters"], number
        assert set(lesson["chapters"]) <= set(chapters), number
        core = sum(chapters[c].minutes for c in lesson["chapters"])
        assert core == lesson["minutes"], (
            f"lesson {number}: core sections take {core} of {lesson['minutes']} min")


def test_a_plan_naming_a_missing_chapter_is_refused():
    plan = copy.deepcopy(read_plan())
    plan["lessons"][0]["chapters"].append(99)
    with pytest.raises(PlanError, match="chapter 99"):
        generated(plan)


def test_a_lesson_too_short_for_its_chapters_is_refused():
    plan = copy.deepcopy(read_plan())
    plan["lessons"][0]["minutes"] = core_minutes(plan["lessons"][0]) - 1
    with pytest.raises(PlanError, match="lesson 1 lasts"):
        generated(plan)


def test_a_chapter_in_two_lessons_is_refused():
    plan = copy.deepcopy(read_plan())
    plan["lessons"][1]["chapters"].append(plan["lessons"][0]["chapters"][0])
    plan["lessons"][1]["minutes"] += 60
    with pytest.raises(PlanError, match="in lesson 1 and in lesson 2"):
        generated(plan)


def test_a_lesson_with_time_left_shows_it_and_ends_on_time():
    plan = copy.deepcopy(read_plan())
    plan["lessons"][0]["minutes"] = core_minutes(plan["lessons"][0]) + 5
    files = generated(plan)
    table = next(text for path, text in files.items() if path.name == "lesson_1.md")
    rows = [line for line in table.splitlines() if line.startswith("| ")]
    length = plan["lessons"][0]["minutes"]
    assert rows[-2].startswith(f"| {length - 5}–{length} | | Spare")
    assert rows[-1] == f"| | | **Total** | **{length}** |"


def test_run_times_span_only_passing_runs():
    chapters = {n: c for n, c in read_chapters().items() if n <= 2}
    stems = [c.stem for c in chapters.values()]
    matrix = {
        "2.10.0": {"chapters": {stems[0]: {"status": "pass", "seconds": 9.6},
                                stems[1]: {"status": "fail", "seconds": 99.0}}},
        "2.9.1": {"chapters": {stems[0]: {"status": "pass", "seconds": 4.4},
                               stems[1]: {"status": "pass", "seconds": 6.0}}},
    }
    table = run_times(matrix, chapters).splitlines()
    assert "torch 2.9.1 to 2.10.0, 2 releases" in table[0]
    assert table[2] == "| 1 | 4 to 10 s |"
    assert table[3] == "| 2 | 6 s (passes on 1 of the 2 releases) |"


def test_pages_include_every_generated_file():
    included = {BOOK / name for page in BOOK.glob("*.md")
                for name in INCLUDE.findall(page.read_text())}
    assert set(generated()) <= included
    guide = {BOOK / name for name in INCLUDE.findall(GUIDE)}
    lessons = [path for path in generated() if path.name.startswith("lesson_")]
    assert len(lessons) == len(read_plan()["lessons"])
    assert set(lessons) <= guide
    assert BOOK / "_generated/run_times.md" in {BOOK / n for n in INCLUDE.findall(BEFORE)}


@pytest.mark.parametrize("page", ["teachers_guide.md", "before_class.md"])
def test_page_links_every_student_notebook(page):
    text = (BOOK / page).read_text()
    linked = re.findall(r"\{student-colab\}`[^`<]*<(book/[\w]+)>`", text)
    assert linked == [f"book/{p.stem}" for p in toc_notebooks()]


def test_before_class_quiz_has_ten_questions_with_hidden_answers_from_cells():
    questions = re.findall(r"^\*\*(\d+)\.\*\* ", BEFORE, re.M)
    assert questions == [str(n) for n in range(1, 11)]
    answers = re.findall(r"^:::\{dropdown\} Answer (\d+)\n(.*?)^:::$", BEFORE, re.M | re.S)
    assert [n for n, _ in answers] == questions
    chapters = {p.name for p in toc_notebooks()}
    for number, text in answers:
        linked = re.findall(r"\]\((\d\d_\w+\.ipynb)\)", text)
        assert linked and set(linked) <= chapters, number
        assert "prints" in text, f"answer {number} names the cell that prints it"
