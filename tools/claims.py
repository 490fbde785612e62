"""The book's claims and where each is shown: book/claims.md's list.

A claim in a chapter's prose carries its proof beside it, a marker the
reader sees: "(shown: `cell-id`)", or "(asserted: `cell-id`)", names the
code cell of the same notebook whose asserts check it. `problems` refuses a
marker that names no code cell, a cell without an `assert`, a cell that
raises on purpose, or one whose stored outputs hold an error or that never
ran. `generated()` writes the list of every claim with its cells and the
torch releases the cell is checked on: each CI run's (the stored outputs'
torch and the oldest supported one) and every release of the versions
matrix whose result for the chapter is current and passed. A claim whose
cell reads the stored study or benchmark (`reading_stored`) is marked
*(stored)*: on every release its assert re-reads numbers computed once.
"""
import ast
import json
import re

from tools.book import GENERATED, tags, torch_pin, torch_releases
from tools.versions import RESULTS, today_keys

TABLE = GENERATED / "claims.md"
STORED_MARK = "(stored) "
STORED_NOTE = ("A sentence marked *(stored)* is asserted on the stored study or benchmark: "
               "numbers computed once, by `make study` or `make bench` on the torch their "
               "cells print; on every other release its assert re-reads those numbers, and "
               "only the chapter's live run is new.")
MARKER = re.compile(r"\([^()`]*?(?:shown|asserted): `([^`]+)`[^()]*\)")
TEXT = r"(?:`[^`]*`|\((?:`[^`]*`|[^()`])*\)|(?<=\d)\.(?=\d)|[^.!?\n`])"  # dots in code, (...), 2.6 go on
SENTENCE = re.compile(TEXT + r"*?\([^()`]*?(?:shown|asserted): `[^`]+`[^()]*\)" + TEXT + r"*[.!?]?")


def claims(chapters):
    """[(notebook path, markdown cell id, sentence, [cell ids])] of every
    sentence with a marker."""
    found = []
    for path, notebook in chapters.items():
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                for sentence in SENTENCE.findall(cell.source):
                    text = " ".join(sentence.replace("**", "").split()).lstrip("- ")
                    found.append((path, cell.get("id"), text, MARKER.findall(sentence)))
    return found


def problems(chapters):
    """A line for each marker that points at nothing it can prove."""
    lines = []
    for path, where, target in [(p, w, t) for p, w, _, ts in claims(chapters) for t in ts]:
        code = {c.get("id"): c for c in chapters[path].cells if c.cell_type == "code"}
        cell, place = code.get(target), f"{path.name}#{where}: `{target}`"
        if cell is None:
            lines.append(f"{place} is no code cell of the chapter")
        elif not re.search(r"^\s*assert\b", cell.source, re.M):
            lines.append(f"{place} asserts nothing")
        elif "raises-exception" in tags(cell) or any(
                o.get("output_type") == "error" for o in cell.get("outputs", [])):
            lines.append(f"{place} raises: it cannot show a claim")
        elif cell.get("execution_count") is None:
            lines.append(f"{place} never ran (no stored outputs)")
    return lines


def checked_on(chapters):
    """{notebook stem: [torch releases its cells are checked on]}."""
    matrix, keys = json.loads(RESULTS.read_text()), today_keys(chapters)
    ci = {torch_pin(), torch_releases()[0]}
    return {path.stem: sorted(ci | {release for release, row in matrix.items()
                                    if row.get("chapters", {}).get(path.stem, {}).get("key")
                                    == keys[path.stem]
                                    and row["chapters"][path.stem].get("status") == "pass"},
                              key=lambda r: tuple(map(int, r.split("."))))
            for path in chapters}


def reading_stored(notebook):
    """Ids of the code cells that read a name whose value, at that cell, comes
    from the stored study or benchmark (a cell with `study` or `bench`
    metadata, written by `make study` or `make bench`) or from a cell that
    read one: on every release the same numbers, computed once."""
    names, found = set(), set()
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        try:
            tree = ast.parse(re.sub(r"^(\s*)[%!].*$", r"\1pass", cell.source, flags=re.M))
        except SyntaxError:
            continue
        read = {n.id for n in ast.walk(tree)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        written = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
                   and isinstance(n.ctx, ast.Store)} | {
            n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        if {"study", "bench"} & set(cell.metadata) or read & names:
            found.add(cell.get("id"))
            names |= written
        else:
            names -= written
    return found


def generated(chapters):
    """{the list's path: its text}, from `chapters` ({path: notebook}) about to be written."""
    releases, lines, chapter = checked_on(chapters), [], None
    for path, _, sentence, targets in claims(chapters):
        if path != chapter:
            chapter, shown = path, releases[path.stem]
            span = (", ".join(shown) if len(shown) < 4
                    else f"{shown[0]} to {shown[-1]} ({len(shown)} releases)")
            lines += ["", f"## {{doc}}`{path.stem}`", "", f"Checked on torch {span}.", ""]
            stored = reading_stored(chapters[path])
            if any(stored & set(t) for p, _, _, t in claims(chapters) if p == path):
                lines += [STORED_NOTE, ""]
        linked = re.sub(r"(shown|asserted): `([^`]+)`",
                        rf'\1: <a href="{path.stem}.html#code-\2"><code>\2</code></a>', sentence)
        lines.append(f"- {STORED_MARK if stored & set(targets) else ''}{linked}")  # its marker names the cell
    return {TABLE: "\n".join([
        "% Written by `make generate` (tools/claims.py); not edited by hand.", "",
        f"{len(claims(chapters))} sentences, each linking the cell that shows and asserts it.",
        *lines]) + "\n"}
