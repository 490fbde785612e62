"""The teacher's guide's two 90-minute lessons match the chapters' own
minutes, and the before-class page covers every chapter."""
import re

import nbformat
import pytest

from tools.book import BOOK, toc_notebooks

GUIDE = (BOOK / "teachers_guide.md").read_text()
BEFORE = (BOOK / "before_class.md").read_text()
FLAT = " ".join(GUIDE.split())  # wrapped lines joined
SECTION_MARK = re.compile(r" \((?:core, (\d+) min|optional)\)$")
LESSONS = {1: [1, 2, 3], 2: [4, 5]}


def chapter_plans():
    """{number: (stated minutes, [(section title, minutes or None)])}."""
    plans = {}
    for path in toc_notebooks():
        notebook = nbformat.read(path, as_version=4)
        stated = int(re.search(r"Time: about (\d+) minutes",
                               notebook.cells[0].source)[1])
        sections = [(SECTION_MARK.sub("", line)[3:],
                     int(m[1]) if (m := SECTION_MARK.search(line)) and m[1] else None)
                    for cell in notebook.cells if cell.cell_type == "markdown"
                    for line in cell.source.splitlines() if line.startswith("## ")]
        plans[int(path.name[:2])] = (stated, sections)
    return plans


PLANS = chapter_plans()


def lesson_rows(number):
    """[(start, end, chapter, section, minutes)] of lesson `number`'s table."""
    part = re.search(rf"^## Lesson {number}: .*?$(.*?)(?=^## )", GUIDE, re.M | re.S)
    assert part, f"no section '## Lesson {number}: ...'"
    rows = re.findall(r"^\| (\d+)–(\d+) \| (\d+) \| (.+?) \| (\d+) \|$", part[1], re.M)
    total = re.search(r"^\| \| \| \*\*Total\*\* \| \*\*(\d+)\*\* \|$", part[1], re.M)
    assert total and int(total[1]) == 90
    return [(int(a), int(b), int(c), title, int(m)) for a, b, c, title, m in rows]


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_is_90_minutes_of_its_chapters_core_sections(lesson):
    rows = lesson_rows(lesson)
    assert sum(r[4] for r in rows) == 90
    assert rows[0][0] == 0 and rows[-1][1] == 90
    for (start, end, _, _, minutes), after in zip(rows, rows[1:] + [None]):
        assert end - start == minutes
        assert after is None or after[0] == end
    assert sorted({r[2] for r in rows}) == LESSONS[lesson]
    for chapter in LESSONS[lesson]:
        stated, sections = PLANS[chapter]
        core = [(title, minutes) for title, minutes in sections if minutes]
        assert [(r[3], r[4]) for r in rows if r[2] == chapter] == core
        assert sum(minutes for _, minutes in core) == stated


def test_lesson_headings_give_each_chapter_its_stated_time():
    headings = re.findall(r"^## Lesson (\d), (\d+)–(\d+) min: .*\(chapter (\d+), (\d+) min\)$",
                          GUIDE, re.M)
    by_lesson = {}
    for lesson, start, end, chapter, minutes in headings:
        assert int(end) - int(start) == int(minutes) == PLANS[int(chapter)][0]
        by_lesson.setdefault(int(lesson), []).append((int(start), int(end), int(chapter)))
    assert sorted(by_lesson) == [1, 2]
    for lesson, blocks in by_lesson.items():
        assert [c for _, _, c in blocks] == LESSONS[lesson]
        assert blocks[0][0] == 0 and blocks[-1][1] == 90
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))


def test_every_minute_figure_matches_the_chapter_it_names():
    named = re.findall(r"\(chapter (\d+), (\d+) min\)", FLAT)
    assert len(named) >= 5
    for chapter, minutes in named:
        assert PLANS[int(chapter)][0] == int(minutes), (chapter, minutes)
    sections = re.findall(r"Chapter (\d+), \*(.+?)\* \((\d+) min\)", FLAT)
    assert len(sections) >= 5
    for chapter, title, minutes in sections:
        marks = dict(PLANS[int(chapter)][1])
        assert marks.get(title) == int(minutes), (chapter, title, minutes)


def test_optional_sections_and_later_chapters_are_homework_in_the_guide():
    for chapter, (stated, sections) in PLANS.items():
        for title, minutes in sections:
            if minutes is None:
                assert f"*{title}*" in FLAT, (chapter, title)
        if chapter > 5:
            assert f"(chapter {chapter}, {stated} min)" in FLAT, chapter


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


def test_before_class_gives_every_chapter_a_run_time():
    rows = re.findall(r"^\| (\d+) \| .*\d+ s", BEFORE, re.M)
    assert rows == [str(int(p.name[:2])) for p in toc_notebooks()]


def test_before_class_run_times_are_the_versions_matrix_range():
    """The run-time table is the min to max seconds `make versions` measured."""
    matrix = (BOOK / "_generated" / "versions_matrix.md").read_text()
    table = matrix.split("\n\n")[0].splitlines()[2:]
    seconds = [[int(s) for s in re.findall(r"pass, (\d+) s", row)] for row in table]
    assert seconds and all(len(row) == len(seconds[0]) for row in seconds)
    for number, column in enumerate(zip(*seconds), 1):
        low, high = min(column), max(column)
        shown = re.search(rf"^\| {number} \| (\d+)(?: to (\d+))? s", BEFORE, re.M)
        assert shown, f"chapter {number} has no run time"
        assert (int(shown[1]), int(shown[2] or shown[1])) == (low, high), number
