"""Write every generated file, or check that each is up to date.

    python -m tools.generate           # write (make generate)
    python -m tools.generate --check   # exit 1, naming each file out of date

`--check` shows, for each chapter cell that `make generate` would change,
a diff of its source and whether it is stale (the source changed:
`make generate` fixes it) or edited by hand (move the edit into the
source first: `make generate` rewrites the cell); and it fails on a name
that two chapters define or assign differently (tools.copies).

What is generated, each from one source:
- in the chapters: each setup cell, and each copy of another chapter's
  helpers (tools.copies); each core section's minutes, estimated from the
  section itself (tools.plan); each link to a page of the book, made
  absolute (tools.links);
- book/student/: the student edition of every chapter (tools.student);
- book/_generated/: tables that restate facts kept elsewhere (each module
  in GENERATORS below), and nothing else: `--check` fails on a file there
  (or in book/student/) that no generator writes.
"""
import importlib
import inspect
import sys

import nbformat

from tools import copies, links, plan, student, study
from tools.book import BOOK, GENERATED, ROOT, render, toc_notebooks

# Modules with a `generated()` that returns {path: text}: tables and the
# run sheets under book/_generated, and the triage page's rules (book/_static/triage_rules.js).
GENERATORS = ["tools.plan", "tools.runsheet", "tools.citation", "tools.triage",
              "tools.findings", "tools.exports", "tools.wheel_facts", "tools.versions",
              "tools.claims"]


def read_chapters():
    return {path: nbformat.read(path, as_version=4) for path in toc_notebooks()}


def wanted_chapters(chapters):
    """{path: notebook} of the chapters as `make generate` writes them."""
    return links.with_absolute_links(
        plan.with_estimated_minutes(copies.with_generated_cells(chapters)))


def wanted_files(chapters=None, generated=None):
    """{path: text} of every generated file, from `chapters` ({path:
    notebook}, read from disk by default)."""
    chapters = read_chapters() if chapters is None else chapters
    generated = wanted_chapters(chapters) if generated is None else generated
    files = {path: render(notebook) for path, notebook in generated.items()}
    files.update(student.editions(generated))
    for name in GENERATORS:
        module = importlib.import_module(name)
        # the tables that read the chapters read them as they are about to be
        # written, so that one run of `make generate` is enough
        reads_chapters = "chapters" in inspect.signature(module.generated).parameters
        files.update(module.generated(chapters=generated) if reads_chapters
                     else module.generated())
    return files


def stray_files(wanted):
    """Files in a generated-only folder (book/student/, book/_generated/)
    that nothing generates any more."""
    written = set(wanted)
    return sorted(path for folder in (BOOK / "student", GENERATED)
                  for path in folder.rglob("*") if path.is_file() and path not in written)


def out_of_date(wanted):
    """Paths whose text on disk differs from the wanted text."""
    return [path for path, text in wanted.items()
            if not path.is_file() or path.read_text() != text]


def reports(stale, chapters, generated):
    """{chapter path: [(kind, lines)]}: what differs, cell by cell, in each
    stale chapter (tools.copies.cell_report)."""
    found = {}
    for path in stale:
        if path in generated:
            found[path] = copies.chapter_report(path, chapters[path], generated[path],
                                                chapters) or [
                ("stale", [f"{path.name}: notebook metadata or layout differs from what "
                           "`make generate` writes: run `make generate`"])]
    return found


def name_problems(generated):
    """Lines that say which names the chapters give two meanings."""
    lines = []
    for name, places in copies.names_defined_twice(generated, own=study.PROTOCOL).items():
        lines.append(f"one name, two meanings: `{name}` is defined or assigned in more than "
                     "one chapter, differently or by hand twice (a name a copy defines is "
                     "the copy's: write it once, in its source cell)")
        lines += [f"    {cell} ({how}): {statement.splitlines()[0][:90]}"
                  for cell, how, statement in places]
    return lines


def indented(lines):
    return "\n".join("    " + line for line in lines)


def main(argv):
    chapters = read_chapters()
    try:
        generated = wanted_chapters(chapters)
        wanted = wanted_files(chapters, generated)
    except (ValueError, LookupError) as error:   # a copy_of or a tag that is wrong
        if isinstance(error, (IndexError, KeyError)):
            raise
        print(f"error: {error}")
        return 1
    stale, stray = out_of_date(wanted), stray_files(wanted)
    cells = reports(stale, chapters, generated)
    if "--check" in argv:
        for path in stale:
            if path in cells:
                print(f"out of date: {path.relative_to(ROOT)}")
                for _, lines in cells[path]:
                    print(indented(lines))
            else:
                print(f"out of date: {path.relative_to(ROOT)} (written by `make generate`, "
                      "which rewrites it: an edit made in it is lost)")
        for path in stray:
            print(f"generated by nothing: {path.relative_to(ROOT)}")
        names = name_problems(generated)
        if names:
            print("\n".join(names))
        return 1 if stale or stray or names else 0
    for path in stale:
        for kind, lines in cells.get(path, []):
            if kind in ("edited", "unknown"):            # a copy's hand edit
                print("rewriting a cell that may hold a hand edit; it is lost, but for "
                      "this diff:\n" + indented(lines))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(wanted[path])
        print(f"wrote {path.relative_to(ROOT)}")
    for path in stray:
        path.unlink()
        print(f"removed {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
