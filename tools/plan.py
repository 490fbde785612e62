"""The teaching plan's tables, written from the facts they are made of.

- each lesson's timetable: the lessons of book/_data/lessons.yml (which
  chapters, how many minutes, which core sections are homework, minutes to
  open Colab and for the exit ticket, what moves when time runs short) and
  each chapter's own `## ... (core, N min)` and `## ... (optional)`
  headings; each lesson leaves at least BUFFER minutes unplanned;
- every chapter at a glance: in which lesson, its core minutes, its
  optional sections;
- the before-class run times: each chapter's fastest and slowest passing
  run over the releases of book/_data/versions_matrix.json.

The minutes are estimated, not guessed: `estimate(cells)` reads a section's
own cells (its words, the code a reader sees, its outputs, its figures, its
predictions and exercises) at a class's rates (book/_data/lessons.yml, RATES),
and `make generate` writes each estimate into the chapter's `## ... (core, N
min)` heading and the sum into its objectives' "Time: about N minutes"
(`with_estimated_minutes`), so the chapters, the timetables and the student edition state one number.

`generated()` returns {path: text} for files under book/_generated/, which
the teacher's guide and the before-class page include. Run as a program it
writes them:
    python -m tools.plan
"""
import copy
import json
import math
import re
from collections import namedtuple
from dataclasses import dataclass
from pathlib import Path

import nbformat
import yaml

from tools.book import BOOK, DATA, GENERATED, ROOT, chapter_number, toc_notebooks, version_tuple

PLAN = BOOK / "_data" / "lessons.yml"
MATRIX = DATA / "versions_matrix.json"

HEADING = re.compile(r"^## (.+?)(?: \((?:core, (\d+) min|(optional))\))?\s*$")
STATED = re.compile(r"Time: about (\d+) minutes \(core sections\)")
CORE_MINUTES = re.compile(r"\(core, \d+ min\)\s*$")
EXPLANATION = re.compile(r"<details>.*?</details>", re.S)
IMAGES = ("image/png", "image/svg+xml", "image/jpeg")


# What a section costs a class, per thing it holds: book/_data/lessons.yml's
# `rates`, with the source of each. The `<details>` explanations are homework.
Rates = namedtuple("Rates", "words_per_minute code_words_per_minute minutes_per_code_cell "
                   "output_lines_per_minute minutes_per_figure minutes_per_prediction "
                   "minutes_per_exercise minutes_per_discussion_question")
RATES = Rates(**yaml.safe_load(PLAN.read_text())["rates"])


def output_minutes(output, rates):
    """Reading one stored output: its text lines, or a figure."""
    data = output.get("data", {})
    if any(kind in data for kind in IMAGES):
        return rates.minutes_per_figure
    text = output.get("text") or data.get("text/plain") or ""
    lines = len(("".join(text) if isinstance(text, list) else text).splitlines())
    if output.get("output_type") == "error":
        lines += len(output.get("traceback", []))
    return lines / rates.output_lines_per_minute


def cell_minutes(cell, rates=RATES):
    """The minutes one cell costs in class (see Rates); Markdown cells are
    counted by `estimate`, which splits them at their headings."""
    tags = cell.metadata.get("tags", [])
    if cell.cell_type != "code" or "remove-input" in tags or "copy_of" in cell.metadata:
        return 0.0          # a copy of another chapter's helpers: run in passing, not read
    minutes = rates.minutes_per_code_cell
    if "solution" in tags:
        return minutes + rates.minutes_per_exercise
    if "hide-input" not in tags:
        minutes += len(cell.source.split()) / rates.code_words_per_minute
    return minutes + sum(output_minutes(output, rates) for output in cell.get("outputs", []))


def text_minutes(text, rates=RATES):
    """Reading Markdown text, with a minute for each prediction in it."""
    text = EXPLANATION.sub("", text)
    return (len(text.split()) / rates.words_per_minute
            + text.count("**Predict.**") * rates.minutes_per_prediction)


def estimate(notebook, rates=RATES):
    """[(heading line, minutes)] of each `## ` section of a notebook: its
    Markdown after the heading and every cell up to the next `## `."""
    sections = []
    for cell in notebook.cells:
        if cell.cell_type != "markdown":
            if sections:
                sections[-1][1] += cell_minutes(cell, rates)
            continue
        for line in cell.source.splitlines():
            if line.startswith("## "):
                sections.append([line, 0.0])
            elif sections:
                sections[-1][1] += text_minutes(line, rates)
    return [(line, max(1, math.ceil(minutes - 1e-9))) for line, minutes in sections]


def with_estimated_minutes(chapters, rates=RATES):
    """{path: notebook} with each core heading's minutes set to its estimate
    and the objectives' stated time to their sum (copies; optional sections
    stay optional)."""
    result = {}
    for path, notebook in chapters.items():
        notebook = copy.deepcopy(notebook)
        minutes = dict(estimate(notebook, rates))
        total = 0
        for cell in notebook.cells:
            if cell.cell_type != "markdown" or "## " not in cell.source:
                continue
            lines = cell.source.split("\n")
            for i, line in enumerate(lines):
                if line.startswith("## ") and CORE_MINUTES.search(line):
                    lines[i] = CORE_MINUTES.sub(f"(core, {minutes[line]} min)", line)
                    total += minutes[line]
            cell.source = "\n".join(lines)
        first = next((c for c in notebook.cells if c.cell_type == "markdown"), None)
        if first is not None and STATED.search(first.source):
            first.source = STATED.sub(f"Time: about {total} minutes (core sections)",
                                      first.source)
        result[path] = notebook
    return result


class PlanError(ValueError):
    """The plan, or a chapter's own minutes, cannot make a timetable."""


@dataclass
class Chapter:
    number: int
    stem: str
    title: str
    minutes: int        # "Time: about N minutes (core sections)."
    sections: list      # [(title, minutes, or None for an optional section)]

    @property
    def core(self):
        return [(title, minutes) for title, minutes in self.sections
                if minutes is not None]

    @property
    def optional(self):
        return [title for title, minutes in self.sections if minutes is None]


def read_chapter(path, notebook=None):
    """A chapter's title, stated minutes and marked `## ` sections (from
    `notebook` if given, else from the file)."""
    path = Path(path)
    notebook = nbformat.read(path, as_version=4) if notebook is None else notebook
    markdown = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    stated = STATED.search(markdown[0]) if markdown else None
    if not stated:
        raise PlanError(f"{where}: the first Markdown cell does not say "
                        "'Time: about N minutes (core sections).'")
    title = next((line[2:].strip() for line in markdown[0].splitlines()
                  if line.startswith("# ")), path.stem)
    sections = []
    for source in markdown:
        for line in source.splitlines():
            match = HEADING.match(line) if line.startswith("## ") else None
            if not match:
                continue
            if not (match[2] or match[3]):
                raise PlanError(f"{where}: the heading {line!r} is marked "
                                "neither '(core, N min)' nor '(optional)'")
            sections.append((match[1], int(match[2]) if match[2] else None))
    chapter = Chapter(chapter_number(path), path.stem, title, int(stated[1]), sections)
    core = sum(minutes for _, minutes in chapter.core)
    if core != chapter.minutes:
        raise PlanError(f"{where}: states {chapter.minutes} minutes, but its "
                        f"core sections' minutes add up to {core}")
    return chapter


def read_chapters(notebooks=None):
    """{number: Chapter} for the notebooks of the toc (`notebooks`: {path:
    notebook} to read instead of the files, such as the chapters as
    `make generate` is about to write them)."""
    notebooks = notebooks or {}
    return {chapter.number: chapter for chapter in
            (read_chapter(path, notebooks.get(path)) for path in toc_notebooks())}


def read_plan(path=PLAN):
    return yaml.safe_load(Path(path).read_text())


BUFFER = 10        # minutes of each lesson left unplanned, at least
OPTIONAL_KEYS = {"start", "homework", "discussion", "exit_ticket", "if_short"}


@dataclass
class Lesson:
    number: int
    minutes: int        # the lesson's length
    chapters: list      # [Chapter], in order
    start: int          # minutes to open Colab and run the setup cells
    homework: list      # [(chapter number, section title)] moved out of class
    exit_ticket: int    # minutes for the exit ticket, at the end (0: none)
    if_short: list      # [(chapter number, section title)] to drop first, in order
    discussion: list    # the numbers of the discussion questions held in class
    discussing: int     # minutes for them

    def taught(self):
        """[(Chapter, title, minutes)] of the core sections taught in class."""
        return [(chapter, title, minutes) for chapter in self.chapters
                for title, minutes in chapter.core
                if (chapter.number, title) not in self.homework]

    @property
    def planned(self):
        return (self.start + sum(m for _, _, m in self.taught()) + self.discussing
                + self.exit_ticket)


def section_list(where, number, key, entries, chapters, taught):
    """[(chapter, title)] from entries like '5: Exercises' (a title's prefix)."""
    found = []
    for entry in entries or []:
        match = re.fullmatch(r"(\d+): (.+)", str(entry))
        if not match or int(match[1]) not in taught:
            raise PlanError(f"{where}: lesson {number}'s {key} entry {entry!r} must "
                            "be 'N: section title' for a chapter of the lesson")
        chapter = chapters[int(match[1])]
        titles = [t for t, _ in chapter.core if t.startswith(match[2])]
        if len(titles) != 1:
            raise PlanError(f"{where}: lesson {number}'s {key} entry {entry!r}: chapter "
                            f"{chapter.number} has {len(titles)} core sections "
                            "starting so")
        found.append((chapter.number, titles[0]))
    return found


def lessons(plan, chapters):
    """[Lesson], checked against the chapters: each leaves at least BUFFER
    minutes unplanned."""
    where = PLAN.relative_to(ROOT)
    entries = (plan or {}).get("lessons")
    if not entries:
        raise PlanError(f"{where}: no `lessons:` list")
    result, placed = [], {}
    for number, entry in enumerate(entries, 1):
        if (not isinstance(entry, dict) or not {"chapters", "minutes"} <= set(entry)
                or set(entry) - {"chapters", "minutes"} - OPTIONAL_KEYS):
            raise PlanError(f"{where}: lesson {number} needs `chapters` and `minutes` "
                            f"(and may have {', '.join(sorted(OPTIONAL_KEYS))}), "
                            f"got {entry!r}")
        length = entry["minutes"]
        if not isinstance(length, int) or length <= 0:
            raise PlanError(f"{where}: lesson {number} lasts {length!r} minutes")
        taught = []
        for name in entry["chapters"] or []:
            if name not in chapters:
                known = ", ".join(str(n) for n in sorted(chapters))
                raise PlanError(f"{where}: lesson {number} names chapter {name!r}, "
                                f"which is not a chapter of the toc ({known})")
            if name in placed:
                raise PlanError(f"{where}: chapter {name} is in lesson "
                                f"{placed[name]} and in lesson {number}")
            placed[name] = number
            taught.append(chapters[name])
        if not taught:
            raise PlanError(f"{where}: lesson {number} covers no chapter")
        numbers = [c.number for c in taught]
        lesson = Lesson(number, length, taught, int(entry.get("start", 0)),
                        section_list(where, number, "homework", entry.get("homework"),
                                     chapters, numbers),
                        int(entry.get("exit_ticket", 0)),
                        section_list(where, number, "if_short", entry.get("if_short"),
                                     chapters, numbers), list(entry.get("discussion") or []),
                        math.ceil(len(entry.get("discussion") or [])
                                  * RATES.minutes_per_discussion_question))
        moved = [s for s in lesson.if_short if s in lesson.homework]
        if moved:
            raise PlanError(f"{where}: lesson {number}: {moved} is homework already")
        if lesson.planned > length - BUFFER:
            raise PlanError(f"{where}: lesson {number} lasts {length} min, but it plans "
                            f"{lesson.planned} min: at least {BUFFER} must be left for "
                            "what runs over (move a section to `homework`)")
        result.append(lesson)
    return result


NOTE = "% Written by `python -m tools.plan` from {source}; not edited by hand.\n\n"


def schedule(lesson):
    """[(start minute, end minute, Chapter or None, section title)] of a
    lesson, in order: "start" (opening Colab), the core sections taught,
    "discussion", "exit_ticket", and "buffer" up to the lesson's end (the rows of its
    timetable and of its run sheet, tools/runsheet.py)."""
    rows, start = [], 0
    parts = ([(None, "start", lesson.start)] if lesson.start else [])
    parts += [(chapter, title, minutes) for chapter, title, minutes in lesson.taught()]
    if lesson.discussion:
        parts.append((None, "discussion", lesson.discussing))
    if lesson.exit_ticket:
        parts.append((None, "exit_ticket", lesson.exit_ticket))
    for chapter, title, minutes in parts:
        rows.append((start, start + minutes, chapter, title))
        start += minutes
    rows.append((start, lesson.minutes, None, "buffer"))
    return rows


def timetable(lesson):
    """A lesson's table, minute by minute: opening Colab, the core sections
    taught in class, the exit ticket, the buffer; then what is homework and
    what moves first when time runs short."""
    lines = ["| Time | Chapter | Core section | Minutes |",
             "| --- | --- | --- | --- |"]
    titles = {"start": "Open the student notebooks in Colab, *File > Save a copy "
                       "in Drive*, run each setup cell",
              "exit_ticket": f"[**Exit ticket**](exit-ticket-{lesson.number})",
              "discussion": "Discussion question " + ", ".join(map(str, lesson.discussion))
                            + " (teaching notes)",
              "buffer": "Buffer: what runs over (Colab restarts, pair work, exercises)"}
    for start, end, chapter, title in schedule(lesson):
        number = "" if chapter is None else chapter.number
        lines.append(f"| {start}–{end} | {number} | {titles.get(title, title)} "
                     f"| {end - start} |")
    lines.append(f"| | | **Total** (planned {lesson.planned}, buffer "
                 f"{lesson.minutes - lesson.planned}) | **{lesson.minutes}** |")
    minutes = {(c.number, t): m for c in lesson.chapters for t, m in c.core}
    if lesson.homework:
        lines += ["", "Homework, not taught in class: " + "; ".join(
            f"chapter {n}, *{t}* ({minutes[n, t]} min)" for n, t in lesson.homework) + "."]
    if lesson.if_short:
        lines += ["", "When time runs short, move these to homework, in this order: "
                  + "; ".join(f"chapter {n}, *{t}* (frees {minutes[n, t]} min)"
                              for n, t in lesson.if_short) + "."]
    return "\n".join(lines) + "\n"


def overview(chapters, taught):
    """Every chapter: its lesson (planned and lasting minutes) or "after the
    lessons", its core minutes and how many are in class, its optional sections."""
    lines = ["| Chapter | Taught in | Core sections | Optional sections |",
             "| --- | --- | --- | --- |"]
    for number, chapter in sorted(chapters.items()):
        lesson = next((x for x in taught if chapter in x.chapters), None)
        when = (f"lesson {lesson.number} ({lesson.planned} of {lesson.minutes} min planned)"
                if lesson else "after the lessons")
        in_class = sum(m for c, _, m in lesson.taught() if c is chapter) if lesson else 0
        optional = "; ".join(f"*{title}*" for title in chapter.optional) or "none"
        lines.append(f"| {number}. {{doc}}`{chapter.stem}` | {when} "
                     f"| {chapter.minutes} min, {in_class} in class | {optional} |")
    return "\n".join(lines) + "\n"


def run_times(matrix, chapters):
    """Each chapter's fastest to slowest passing run over the matrix's releases."""
    releases = sorted(matrix, key=version_tuple)
    if not releases:
        raise PlanError(f"{MATRIX.relative_to(ROOT)} holds no release")
    span = (f"torch {releases[0]} to {releases[-1]}" if len(releases) > 1
            else f"torch {releases[0]}")
    lines = [f"| Chapter | Run time ({span}, {len(releases)} releases) |",
             "| --- | --- |"]
    for number, chapter in sorted(chapters.items()):
        seconds = [matrix[r]["chapters"][chapter.stem]["seconds"] for r in releases
                   if matrix[r].get("chapters", {}).get(chapter.stem, {})
                   .get("status") == "pass"]
        if not seconds:
            shown = "no passing run"
        else:
            low, high = f"{min(seconds):.0f}", f"{max(seconds):.0f}"
            shown = f"{low} s" if low == high else f"{low} to {high} s"
            if len(seconds) < len(releases):
                shown += f" (passes on {len(seconds)} of the {len(releases)} releases)"
        lines.append(f"| {number} | {shown} |")
    return "\n".join(lines) + "\n"


def generated(plan=None, matrix=None, chapters=None):
    """{path under book/_generated: text}. `plan` and `matrix` default to the
    contents of book/_data/lessons.yml and book/_data/versions_matrix.json;
    `chapters` ({path: notebook}) to the chapters on disk."""
    plan = read_plan() if plan is None else plan
    matrix = json.loads(MATRIX.read_text()) if matrix is None else matrix
    chapters = read_chapters(chapters)
    taught = lessons(plan, chapters)
    from_plan = NOTE.format(source="book/_data/lessons.yml and the chapters' "
                                   "`## ` headings")
    files = {}
    for lesson in taught:
        files[GENERATED / f"lesson_{lesson.number}.md"] = from_plan + timetable(lesson)
    files[GENERATED / "chapters_at_a_glance.md"] = from_plan + overview(chapters, taught)
    files[GENERATED / "run_times.md"] = (
        NOTE.format(source="book/_data/versions_matrix.json")
        + run_times(matrix, chapters))
    return files


if __name__ == "__main__":
    for path, text in generated().items():
        path.write_text(text)
        print(path.relative_to(ROOT))
