"""The teaching plan: book/_data/lessons.yml, the chapters' own minutes, and
the tables tools/plan.py writes from them for the teacher's guide and the
before-class page."""
import copy
import math
import re

import nbformat
import pytest
import yaml

from tools.book import BOOK, toc_notebooks
from tools.plan import (RATES, PlanError, Rates, estimate, generated, lessons,
                        read_chapters, read_plan, run_times, with_estimated_minutes)
from tools.runsheet import NOTES

GUIDE = (BOOK / "teachers_guide.md").read_text()
BEFORE = (BOOK / "before_class.md").read_text()
INCLUDE = re.compile(r"^```\{include\} (\S+)\s*$", re.M)


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


def test_three_lessons_each_leave_at_least_ten_minutes():
    """Chapters 1-5 in two lessons, 6 and 7 in a third; each plans at most
    80 of its 90 minutes by the estimate at a class's rates (Colab's start,
    the discussion and the exit ticket included); what does not fit is
    homework."""
    assert RATES.words_per_minute <= 150 and 2 <= RATES.minutes_per_prediction <= 3
    taught = lessons(read_plan(), read_chapters())
    assert 10 <= taught[0].start <= 15, "a first Colab session"
    assert [[c.number for c in lesson.chapters] for lesson in taught] == [
        [1, 2, 3], [4, 5], [6, 7]]
    for lesson in taught:
        assert lesson.minutes == 90
        assert lesson.planned <= 80, (lesson.number, lesson.planned)
        assert lesson.planned == lesson.start + lesson.exit_ticket + sum(
            minutes for _, _, minutes in lesson.taught()) + lesson.discussing
        assert lesson.if_short, "say what moves when time runs short"
        assert lesson.exit_ticket > 0


def test_timetable_rows_add_up_and_end_on_time():
    for path, text in generated().items():
        if not path.name.startswith("lesson_"):
            continue
        rows = [line.split(" | ") for line in text.splitlines()
                if re.match(r"\| \d+–\d+ \|", line)]
        spans = [tuple(map(int, row[0].strip("| ").split("–"))) for row in rows]
        assert spans[0][0] == 0 and spans[-1][1] == 90, path.name
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), path.name
        assert all(int(row[-1].strip(" |")) == end - start
                   for row, (start, end) in zip(rows, spans)), path.name
        assert "Buffer" in rows[-1][2] and spans[-1][1] - spans[-1][0] >= 10
        assert "Exit ticket" in rows[-2][2], "the exit ticket closes the lesson"


def test_a_lesson_leaving_less_than_ten_minutes_is_refused():
    plan = copy.deepcopy(read_plan())
    moved = plan["lessons"][0]["homework"].pop(0)
    chapters = read_chapters()
    number, title = moved.split(": ", 1)
    back = next(m for t, m in chapters[int(number)].core if t.startswith(title))
    planned = lessons(read_plan(), chapters)[0].planned + back
    assert planned > 80, "the test needs a homework section that overfills lesson 1"
    with pytest.raises(PlanError, match=f"lesson 1 lasts 90 min, but it plans {planned} min"):
        generated(plan)


def notebook_of(*cells):
    """A notebook of (kind, source, tags, outputs) cells."""
    made = []
    for kind, source, cell_tags, outputs in cells:
        if kind == "markdown":
            made.append(nbformat.v4.new_markdown_cell(source))
        else:
            cell = nbformat.v4.new_code_cell(source, outputs=outputs)
            cell.metadata["tags"] = cell_tags
            made.append(cell)
    return nbformat.v4.new_notebook(cells=made)


def test_estimate_reads_words_code_outputs_predictions_and_exercises():
    """Each thing a section holds costs its rate, and nothing else does."""
    rates = Rates(200, 100, 0.25, 30, 0.5, 1, 8, 5)
    words = " ".join(["word"] * 400)                         # 2 min of prose
    code = " ".join(["x"] * 100)                             # 1 min of code
    stream = nbformat.v4.new_output("stream", text="line\n" * 30)   # 1 min
    figure = nbformat.v4.new_output("display_data", data={"image/png": "AA=="})
    notebook = notebook_of(
        ("markdown", "# Title\n\n## Reading (core, 1 min)\n\n" + words, [], []),
        ("code", code, [], [stream]),
        ("code", code, ["hide-input"], [figure]),            # folded: run only
        ("code", code, ["remove-input"], [stream]),          # data: not counted
        ("markdown", "## Thinking (core, 1 min)\n\n**Predict.** What prints?\n\n"
                     "<details><summary>Why</summary>" + words + "</details>", [], []),
        ("markdown", "## Exercises (core, 1 min)", [], []),
        ("code", code, ["solution"], []),
    )
    estimated = dict(estimate(notebook, rates))
    assert estimated == {
        "## Reading (core, 1 min)": math.ceil(2 + 0.25 + 1 + 1 + 0.25 + 0.5),
        "## Thinking (core, 1 min)": math.ceil(4 / 200 + 1),
        "## Exercises (core, 1 min)": math.ceil(0.25 + 8),
    }
    # slower reading makes the same section longer
    slow = dict(estimate(notebook, Rates(100, 100, 0.25, 30, 0.5, 1, 8, 5)))
    assert slow["## Reading (core, 1 min)"] == estimated["## Reading (core, 1 min)"] + 2


def test_generate_writes_the_estimates_into_the_headings_and_objectives():
    notebook = notebook_of(
        ("markdown", "# T\n\n> Time: about 1 minutes (core sections).", [], []),
        ("markdown", "## A (core, 1 min)\n\n" + " ".join(["w"] * 1000), [], []),
        ("markdown", "## B (optional)\n\n" + " ".join(["w"] * 1000), [], []),
    )
    [written] = with_estimated_minutes({"x": notebook}).values()
    minutes = math.ceil(1000 / RATES.words_per_minute)
    assert written.cells[1].source.startswith(f"## A (core, {minutes} min)\n")
    assert written.cells[2].source.startswith("## B (optional)\n")
    assert f"Time: about {minutes} minutes (core sections)." in written.cells[0].source
    assert notebook.cells[1].source.startswith("## A (core, 1 min)"), "a copy is written"


def test_every_chapter_states_the_minutes_its_sections_are_estimated_at():
    """The headings hold the estimates: `make generate` writes them."""
    for path in toc_notebooks():
        notebook = nbformat.read(path, as_version=4)
        for line, minutes in estimate(notebook):
            stated = re.search(r"\(core, (\d+) min\)", line)
            if stated:
                assert int(stated[1]) == minutes, (path.name, line, minutes)


def test_homework_naming_a_missing_section_is_refused():
    plan = copy.deepcopy(read_plan())
    plan["lessons"][1]["homework"].append("4: No such section")
    with pytest.raises(PlanError, match="chapter 4 has 0 core sections"):
        generated(plan)
    plan = copy.deepcopy(read_plan())
    plan["lessons"][1]["if_short"].append("1: Summary")
    with pytest.raises(PlanError, match="for a chapter of the lesson"):
        generated(plan)


def test_a_plan_naming_a_missing_chapter_is_refused():
    plan = copy.deepcopy(read_plan())
    plan["lessons"][0]["chapters"].append(99)
    with pytest.raises(PlanError, match="chapter 99"):
        generated(plan)


def test_a_chapter_in_two_lessons_is_refused():
    plan = copy.deepcopy(read_plan())
    plan["lessons"][1]["chapters"].append(plan["lessons"][0]["chapters"][0])
    plan["lessons"][1]["minutes"] += 60
    with pytest.raises(PlanError, match="in lesson 1 and in lesson 2"):
        generated(plan)


def test_the_guide_places_each_exit_ticket_where_its_timetable_does():
    """The timetable's exit-ticket row links the guide's section, which
    includes the ticket written from book/_data/teacher_notes.yml."""
    generated_files = generated()
    for lesson in lessons(read_plan(), read_chapters()):
        label = f"(exit-ticket-{lesson.number})=\n## Exit ticket, lesson {lesson.number}"
        assert label in GUIDE, label
        assert f"(exit-ticket-{lesson.number})" in generated_files[
            BOOK / "_generated" / f"lesson_{lesson.number}.md"]
        section = GUIDE.split(label, 1)[1].split("\n## ", 1)[0]
        [included] = INCLUDE.findall(section)
        ticket = (BOOK / included).read_text()
        assert re.findall(r"^\d\. ", ticket, re.M), "the ticket has questions"
        assert "Answers:" in ticket


# the handouts, each linked from the guide; the worksheets and the Colab page
# are public (the book's toc and the class site), the assessment and its
# answers are in the teacher's pack only
HANDOUTS = {"worksheet_nine_variants": True, "worksheet_ways_out": True,
            "worksheet_four_reports": True, "colab_in_a_classroom": True,
            "assessment": False, "assessment_answers": False}


@pytest.mark.parametrize("page", HANDOUTS)
def test_guide_links_every_handout_and_the_pack_or_toc_lists_it(page):
    from tools.sites import CLASS_PAGES, TEACHER_PAGES
    assert f"{{doc}}`{page}`" in GUIDE
    assert page in TEACHER_PAGES, "the pack prints every handout"
    listed = f"file: book/{page}\n" in (BOOK.parent / "_toc.yml").read_text()
    assert listed == HANDOUTS[page] == (page in CLASS_PAGES), page


def test_guide_links_each_run_sheet_and_slides():
    for lesson in range(1, len(read_plan()["lessons"]) + 1):
        assert f'href="../slides/lesson_{lesson}.slides.html"' in GUIDE
        assert f'href="../runsheets/lesson_{lesson}.html"' in GUIDE
        assert (BOOK / "_generated" / f"runsheet_{lesson}.html").is_file()


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


def section_texts(path):
    """{section title: its Markdown, code and printed text} of a chapter."""
    text = "\n".join(cell.source + "".join(
        str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", ""))
        for out in cell.get("outputs", [])) for cell in nbformat.read(path, as_version=4).cells)
    parts = re.split(r"^## (.+?)(?: \((?:core, \d+ min|optional)\))?$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def untaught(number, text):
    """The `code` that `text` names but no section taught in lessons 1 to
    `number` shows."""
    texts = {p.stem: section_texts(p) for p in toc_notebooks()}
    taught = "".join(texts[chapter.stem][title] for lesson in lessons(read_plan(), read_chapters())
                     if lesson.number <= number for chapter, title, _ in lesson.taught())
    names = re.findall(r"`([^`]+)`", re.sub(r"^```.*$|\{\w+\}`[^`]*`", "", text, flags=re.M))
    return sorted({name for name in names
                   if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", taught)})


def lesson_items():
    """[(lesson number, name, text)]: each exit ticket (questions and
    answers), each worksheet, each discussion question a lesson holds."""
    items = [(n, f"exit ticket {n}", "\n".join(t["questions"]) + t["answers"])
             for n, t in enumerate(yaml.safe_load(NOTES.read_text())["exit_tickets"], 1)]
    items += [(int(re.search(r"^\*Lesson (\d)", text := page.read_text(), re.M)[1]), page.stem,
               text) for page in BOOK.glob("worksheet_*.md")]
    notes = (BOOK / "teaching_notes.md").read_text().split("## Discussion questions", 1)[1]
    questions, answers = (dict(re.findall(r"^(\d)\. (.*?)(?=^\d\. |^:::|\Z)", part, re.M | re.S))
                          for part in notes.split(":::{dropdown}")[:2])
    items += [(lesson.number, f"discussion question {q}", questions[str(q)] + answers[str(q)])
              for lesson in lessons(read_plan(), read_chapters()) for q in lesson.discussion]
    return items


def test_exit_tickets_worksheets_and_discussion_ask_only_what_was_taught():
    """Every `name` they use is shown by a core section taught in class in
    that lesson or an earlier one (not by homework, nor a later lesson)."""
    items = lesson_items()
    assert len(items) >= 3 + 3 + 2, items
    for number, name, text in items:
        assert untaught(number, text) == [], (number, name)
    # and the check finds a name from an optional section, or a later lesson
    assert untaught(3, "`new Parameter's grad: None`") == [      # chapter 3, optional
        "new Parameter's grad: None"]
    assert untaught(1, "Adam's `exp_avg`") == ["exp_avg"]       # lesson 2's
    assert untaught(2, "Adam's `exp_avg`") == []


def test_an_error_output_is_read_with_its_traceback_and_notes_markup_is_html():
    from tools.plan import output_minutes
    from tools.runsheet import inline
    error = {"output_type": "error", "ename": "E", "evalue": "x", "traceback": ["a"] * 6}
    stream = {"output_type": "stream", "text": "one\ntwo\nthree\n"}
    assert output_minutes(error, RATES) == 6 / RATES.output_lines_per_minute
    assert output_minutes(stream, RATES) == 3 / RATES.output_lines_per_minute
    assert inline("**Predict** *now*: `a<b` & c") == (
        "<strong>Predict</strong> <em>now</em>: <code>a&lt;b</code> &amp; c")
