"""Each lesson's run sheet: one printed page, minute by minute.

The rows are the lesson's timetable (tools.plan.schedule: opening Colab,
each core section taught, discussion, the exit ticket, the buffer), each with one line
of what the teacher does, what the students do and what to watch for, read
from book/_data/teacher_notes.yml; under the table, what moves to homework
when time runs short, what is homework, and the exit ticket with its
answers. Written by `make generate` (tools.generate) as

- book/_generated/runsheet_N.html: a page of its own (no script, no
  stylesheet to fetch, `noindex`), for the teacher's pack;
- book/_generated/exit_ticket_N.md: the exit ticket, for the teacher's guide.

A lesson section without a note, and a note naming no section of a lesson,
are refused (RunSheetError), so the sheets follow every re-cut of the plan.
"""
import html
import re
from pathlib import Path

import yaml

from tools import plan
from tools.book import BOOK, GENERATED, ROOT

NOTES = BOOK / "_data" / "teacher_notes.yml"
FIELDS = ("teacher", "students", "watch")
ROWS = ("start", "discussion", "exit_ticket", "buffer")


class RunSheetError(ValueError):
    """The notes cannot fill a lesson's run sheet."""


def read_notes(path=NOTES):
    return yaml.safe_load(Path(path).read_text())


def inline(text):
    """A line of the notes' Markdown (`code`, **strong**, *emphasis*) as HTML."""
    parts = re.split(r"(`[^`]+`)", str(text))
    out = []
    for part in parts:
        if part.startswith("`") and part.endswith("`") and len(part) > 1:
            out.append(f"<code>{html.escape(part[1:-1])}</code>")
            continue
        part = html.escape(part, quote=False)
        part = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", part)
        part = re.sub(r"\*(.+?)\*", r"<em>\1</em>", part)
        out.append(part)
    return "".join(out)


def checked_note(where, key, note):
    if not isinstance(note, dict) or set(note) != set(FIELDS) or not all(
            isinstance(note[f], str) and note[f].strip() for f in FIELDS):
        raise RunSheetError(f"{where}: the note {key!r} needs exactly "
                            f"{', '.join(FIELDS)}, each one line of text")
    return note


def notes_for(lessons, notes):
    """{(chapter number, section title) or row name: note}, checked: every
    section a lesson teaches has a note, every note names one."""
    where = NOTES.relative_to(ROOT)
    notes = notes or {}
    for name in ROWS:
        checked_note(where, name, notes.get(name))
    sections = notes.get("sections") or {}
    found, used = {}, set()
    for lesson in lessons:
        for chapter, title, _ in lesson.taught():
            own = [key for key in sections if re.fullmatch(r"\d+: .+", key)
                   and int(key.split(":")[0]) == chapter.number
                   and title.startswith(key.split(": ", 1)[1])]
            if len(own) > 1:
                raise RunSheetError(f"{where}: {own} all name chapter "
                                    f"{chapter.number}'s section {title!r}")
            key = own[0] if own else title if title in sections else None
            if key is None:
                raise RunSheetError(
                    f"{where}: no note for chapter {chapter.number}'s section "
                    f"{title!r}, taught in lesson {lesson.number}: add "
                    f"'{chapter.number}: {title}' under `sections`")
            found[chapter.number, title] = checked_note(where, key, sections[key])
            used.add(key)
    unused = sorted(set(sections) - used)
    if unused:
        raise RunSheetError(f"{where}: {unused} name no section a lesson teaches "
                            "(a renamed section, or one moved to homework)")
    for name in ROWS:
        found[name] = notes[name]
    tickets = notes.get("exit_tickets") or []
    if len(tickets) != len(lessons) or not all(
            isinstance(t, dict) and t.get("questions") and t.get("answers")
            for t in tickets):
        raise RunSheetError(f"{where}: `exit_tickets` needs one entry per lesson "
                            f"({len(lessons)}), each with `questions` and `answers`")
    return found, tickets


CSS = """
@page { margin: 9mm 10mm; }
* { box-sizing: border-box; }
body { font: 8.1pt/1.17 "DejaVu Sans", Arial, sans-serif; margin: 0; color: #000; }
h1 { font-size: 12pt; margin: 0 0 1mm; }
p { margin: 1mm 0; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { border: 0.5pt solid #777; padding: 0.3mm 0.8mm; overflow-wrap: anywhere; vertical-align: top; text-align: left; }
th { background: #eee; }
tr { break-inside: avoid; }
col.time { width: 6%; } col.ch { width: 3.5%; } col.section { width: 20.5%; }
col.teacher { width: 25%; } col.students { width: 21%; } col.watch { width: 24%; }
code { font: 7.5pt "DejaVu Sans Mono", monospace; }
.small { font-size: 7.6pt; }
ol { margin: 0.5mm 0 0.5mm 5mm; padding: 0; }
.ticket { border: 0.8pt solid #000; padding: 1mm 2mm; margin-top: 1.5mm; }
""".strip()

LABELS = {"start": "Open Colab", "discussion": "Discussion",
          "exit_ticket": "<strong>Exit ticket</strong>", "buffer": "Buffer"}


def titles(sections, minutes):
    return "; ".join(f"{number}: {inline(title)} ({minutes[number, title]})"
                     for number, title in sections)


def runsheet(lesson, notes, ticket):
    """The HTML page of one lesson's run sheet."""
    chapters = ", ".join(str(c.number) for c in lesson.chapters)
    rows = []
    for start, end, chapter, title in plan.schedule(lesson):
        note = notes[title] if chapter is None else notes[chapter.number, title]
        section = (LABELS[title] if chapter is None
                   else f"{inline(title)} ({end - start})")
        rows.append(f"<tr><td>{start}–{end}</td><td>{'' if chapter is None else chapter.number}"
                    f"</td><td>{section}</td>"
                    + "".join(f"<td>{inline(note[f])}</td>" for f in FIELDS) + "</tr>")
    minutes = {(c.number, t): m for c in lesson.chapters for t, m in c.core}
    questions = "".join(f"<li>{inline(q)}</li>" for q in ticket["questions"])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex">
<title>Lesson {lesson.number}: run sheet</title>
<style>
{CSS}
</style>
</head>
<body>
<h1>Lesson {lesson.number} run sheet: chapters {chapters}, {lesson.minutes} minutes</h1>
<p class="small">Planned {lesson.planned} min, buffer {lesson.minutes - lesson.planned} min.
Minutes are the chapters' own estimates (<code>make generate</code>); the student
notebooks are on the class site.</p>
<table>
<colgroup><col class="time"><col class="ch"><col class="section"><col class="teacher"><col class="students"><col class="watch"></colgroup>
<thead><tr><th>Min</th><th>Ch</th><th>Section (min)</th><th>Teacher does</th><th>Students do</th><th>Watch for</th></tr></thead>
<tbody>
{chr(10).join(rows)}
</tbody>
</table>
<p class="small"><strong>Short of time?</strong> Move to homework, in order: {titles(lesson.if_short, minutes)}.</p>
<p class="small"><strong>Homework</strong> (not in class, with the optional sections): {titles(lesson.homework, minutes)}.</p>
<div class="ticket"><strong>Exit ticket</strong> (last {lesson.exit_ticket} minutes, without notes)
<ol>{questions}</ol>
<p class="small"><strong>Answers:</strong> {inline(ticket["answers"])}</p></div>
</body>
</html>
"""


def exit_ticket_markdown(lesson, ticket):
    questions = "\n".join(f"{i}. {q}" for i, q in enumerate(ticket["questions"], 1))
    return (f"In the last {lesson.exit_ticket} minutes of lesson {lesson.number} (its "
            "timetable's *Exit ticket* row), each student writes, without notes:\n\n"
            f"{questions}\n\nAnswers: {ticket['answers']}\n")


NOTE_MD = "% Written by `python -m tools.runsheet` from {source}; not edited by hand.\n\n"
SOURCE = "book/_data/teacher_notes.yml, book/_data/lessons.yml and the chapters"


def generated(notes=None, chapters=None):
    """{path under book/_generated: text}: each lesson's run sheet and exit ticket."""
    taught = plan.lessons(plan.read_plan(), plan.read_chapters(chapters))
    found, tickets = notes_for(taught, read_notes() if notes is None else notes)
    files = {}
    for lesson, ticket in zip(taught, tickets):
        files[GENERATED / f"runsheet_{lesson.number}.html"] = runsheet(
            lesson, found, ticket).replace(
            "<head>\n", f"<head>\n<!-- Written by `python -m tools.runsheet` from "
                         f"{SOURCE}; not edited by hand. -->\n", 1)
        files[GENERATED / f"exit_ticket_{lesson.number}.md"] = (
            NOTE_MD.format(source="book/_data/teacher_notes.yml")
            + exit_ticket_markdown(lesson, ticket))
    return files


if __name__ == "__main__":
    for path, text in generated().items():
        path.write_text(text)
        print(path.relative_to(ROOT))
