"""The reading rules of the triage page, generated from one source each.

    python -m tools.triage     # write book/_static/triage_rules.js,
                               # book/_generated/triage_score.md and
                               # book/_generated/backward_nodes.md

The triage page (book/triage.md, its script book/_static/triage.js) reads a
pasted error in the browser, with no Python. What it reads by is written here
from two sources, so that it never disagrees with the book:

- the rules (MESSAGE_RULES, NODE_RULES, HINT_RULES, WHERE_RULES, CAUSES): chapter 6's cells
  `RULES_CELLS`, the very tables its `read_message` reads by. Only those
  cells are run (they import nothing but `re` and `typing`). Each cause's
  section title becomes a link to that `## ` heading of chapter 6 (refused
  if the chapter has no such heading);
- which forward operation made each backward node, and its inputs in the
  order of the node's edges: the `derivatives.yaml` that the pinned torch's
  wheel ships (`torchgen/packaged/autograd/`), read by the wheel's own
  torchgen (`load_derivatives`), so the node names are torch's. Refused
  under any other torch than requirements.txt's pin. The same table is the
  page of backward nodes (book/backward_nodes.md), each name an index entry.
"""
import json
import re
import sys
from pathlib import Path

import nbformat
from docutils.nodes import make_id

from tools.book import BOOK, ROOT, torch_pin

CHAPTER = BOOK / "06_any_layer_any_node.ipynb"
RULES_CELLS = ("message-rules", "message-rules-forward", "message-rules-more", "node-rules",
               "message-causes", "read-message")
OUTPUT = BOOK / "_static" / "triage_rules.js"
HEADER = ("// Written by `python -m tools.triage` (make generate) from chapter 6's rules\n"
          "// cells and the derivatives.yaml of torch {torch}; not edited by hand.\n")


def rules_namespace(chapter=CHAPTER, notebook=None, strict=True):
    """The names chapter 6's rules cells define (from `notebook`, the chapter
    as `make generate` is about to write it, or else from disk; `strict`
    False for an older chapter, which may lack a cell added since)."""
    notebook = nbformat.read(chapter, as_version=4) if notebook is None else notebook
    namespace = {}
    for name in RULES_CELLS:
        cells = [c for c in notebook.cells if c.get("id") == name]
        if not cells and not strict:
            continue
        if len(cells) != 1:
            raise LookupError(f"{chapter.name}: no single cell with id {name!r}")
        exec(compile(cells[0].source, f"{chapter.name}[{name}]", "exec"), namespace)
    return namespace, notebook


def section_links(causes, notebook, page=None):
    """{title: 'page.html#anchor'} for each cause's section title, from the
    chapter's `## ` headings (anchors as Sphinx makes them)."""
    page = page or CHAPTER.with_suffix(".html").name
    headings = [line[3:].strip() for cell in notebook.cells if cell.cell_type == "markdown"
                for line in cell.source.splitlines() if line.startswith("## ")]
    links = {}
    for _, title, *_ in causes.values():
        if title is None or title in links:
            continue
        found = [h for h in headings if h == title or h.startswith(title + " (")]
        if len(found) != 1:
            raise LookupError(f"{CHAPTER.name} has no single heading {title!r}")
        links[title] = f"{page}#{make_id(found[0])}"
    return links


def node_table():
    """{node name: [forward operation, [[input, is a list], ...]]} from the
    installed torch's derivatives.yaml (the pin's only)."""
    from importlib.metadata import version

    import torchgen                       # shipped in the torch wheel
    from torchgen.packaged.autograd.load_derivatives import load_derivatives

    installed = version("torch").split("+")[0]      # without importing torch
    if installed != torch_pin():
        raise RuntimeError(f"the node table is read from torch {torch_pin()}'s "
                           f"derivatives.yaml (requirements.txt); this is torch "
                           f"{installed}: run it in the book's venv")
    packaged = Path(torchgen.__file__).parent / "packaged"
    infos, _ = load_derivatives(str(packaged / "autograd" / "derivatives.yaml"),
                                str(packaged / "ATen" / "native" / "native_functions.yaml"),
                                str(packaged / "ATen" / "native" / "tags.yaml"))
    table = {}
    for by_key in infos.values():
        for info in by_key.values():
            if info.op is None or info.op in table:
                continue
            inputs = [[arg.name, "[]" in str(arg.argument.type)]
                      for arg in info.args_with_derivatives]
            table[info.op] = [str(info.func.func.name), inputs]
    return dict(sorted(table.items()))


def triage_rules(notebook=None):
    namespace, notebook = rules_namespace(notebook=notebook)
    causes = namespace["CAUSES"]
    links = section_links(causes, notebook)
    return {
        "torch": torch_pin(),
        "space": namespace["SPACE"],
        "wrap": namespace["WRAP"],
        "dash": namespace["DASH"],
        "message_rules": namespace["MESSAGE_RULES"],
        "node_rules": namespace["NODE_RULES"],
        "hint_rules": namespace["HINT_RULES"],
        "where_rules": namespace["WHERE_RULES"],
        "where": namespace["WHERE"],
        "causes": {key: {"text": text, "section": title, "question": question,
                         "href": links.get(title)}
                   for key, (text, title, question) in causes.items()},
        "nodes": node_table(),
    }


# --- the corpus of real messages, and how the readers score on it -------------

CORPUS = ROOT / "tests" / "data" / "triage_corpus.json"
SCORE = BOOK / "_generated" / "triage_score.md"
# Each held-out set (messages the rules were never written from, frozen and
# labelled before the rules read them), one per round, oldest first: its first
# score, with the rules of the commit it names, and whether a rule was corrected
# after it (tests/test_triage.py scores each commit again).
FIRST_SCORE = BOOK / "_data" / "triage_first_score.json"
HELD_OUTS = [ROOT / path for path in json.loads(FIRST_SCORE.read_text())]
NODES = BOOK / "_generated" / "backward_nodes.md"
VERDICTS = ("right", "cannot tell", "misleading", "silent")


def score(reading, label):
    """How a reading (a dict or a Reading: cause, candidates) fares against a
    label of the corpus (a cause, "cannot tell" or "unknown"): "right", "cannot
    tell" (it said so, and the label is among its candidates, where "other", a
    cause the rules do not name, stands for the label "unknown"), "misleading" (a
    cause that is not the label, or candidates that leave the label out) or
    "silent" (it read nothing in a message that has a cause)."""
    get = reading.get if isinstance(reading, dict) else lambda k: getattr(reading, k)
    cause, candidates = get("cause"), list(get("candidates"))
    if cause == "cannot tell":
        if label == "cannot tell":
            return "right"
        if label == "unknown" and "other" in candidates:   # "none of these" was said
            return "cannot tell"
        return "cannot tell" if label in candidates else "misleading"
    if cause == "unknown":
        return "right" if label == "unknown" else "silent"
    return "right" if cause == label else "misleading"


def score_table(corpus, readings):
    """{label: {verdict: count}} over the corpus, and the totals under "all"."""
    table = {}
    for entry, reading in zip(corpus, readings, strict=True):
        verdict = score(reading, entry["label"])
        for key in (entry["label"], "all"):
            table.setdefault(key, dict.fromkeys(VERDICTS, 0))[verdict] += 1
    return table


def table_lines(table):
    lines = ["| cause | n | " + " | ".join(VERDICTS) + " |",
             "| --- | ---: | " + " | ".join("---:" for _ in VERDICTS) + " |"]
    for label in sorted(table, key=lambda k: (k == "all", -sum(table[k].values()), k)):
        row = table[label]
        name = "**all**" if label == "all" else label
        lines.append(f"| {name} | {sum(row.values())} | " + " | ".join(
            str(row[v]) for v in VERDICTS) + " |")
    return lines


def error_message(text):
    """The error's own message: from the last line that starts an exception
    (`SomethingError: ...`) to the end, its spaces joined."""
    lines = text.strip().splitlines()
    starts = [i for i, line in enumerate(lines)
              if re.match(r"\s*[\w.]*(Error|Exception)\b[^:]*:", line)]
    return " ".join(" ".join(lines[starts[-1] if starts else -1:]).split())


def report(source):
    """A public report's address, without what a set added after it."""
    return re.split(r" \(| ;", source)[0]


def repeats(n, corpus=None):
    """The ids of held-out round n's cases (n from 0) whose public report, or
    whose very message, the corpus or an earlier round already has: in sample
    for the text reader, whoever wrote them."""
    before = json.loads(CORPUS.read_text()) if corpus is None else corpus
    before = before + [m for p in HELD_OUTS[:n] for m in json.loads(p.read_text())]
    messages = {error_message(m["text"]) for m in before if m["text"].strip()}
    reports = {report(m["source"]) for m in before if m["source"].startswith("https://")}
    return [m["id"] for m in json.loads(HELD_OUTS[n].read_text())
            if report(m["source"]) in reports or error_message(m["text"]) in messages]


def held_out_lines(path, held_out, read, first, repeated=()):
    """The page's paragraph and table for one held-out set: its first score,
    with the rules of the commit that made it, then today's."""
    real = sum(e["source"].startswith("https://") for e in held_out)
    return [
        f"**Held out, {first['round']}.** {len(held_out)} messages written by someone who had "
        f"not read the rules: {real} from public reports (each reproduced live where it "
        f"could be), {len(held_out) - real} made live on torch ({path.name}); each labelled "
        f"with the book's causes before the rules read it. Their first score, with the "
        f"rules of commit {first['rules_of']}: " + ", ".join(f"{first[v]} {v}" for v in VERDICTS)
        + f" of {len(held_out)}. " + (
            f"{len(repeated)} of them repeat a report or a message of the corpus or of an "
            f"earlier round, so are not out of sample for the text: "
            + ", ".join(f"`{i}`" for i in repeated) + ". " if repeated else "") + (
            "The rules were then corrected for the classes of error that score showed, so "
            "the table below, with today's rules, is no longer out of sample."
            if first["corrected"] else "No rule has been changed for them since: the table "
            "below is that score."), "",
        *table_lines(score_table(held_out, [read(e["text"]) for e in held_out])), ""]


def score_page(notebook=None, corpus=None, held_out=None):
    """The Markdown tables of the triage page: per cause, how chapter 6's
    read_message scores on the corpus its rules were written from, and on
    each held-out set (the page's reader gives the same readings:
    tests/test_triage_browser.py)."""
    namespace, _ = rules_namespace(notebook=notebook)
    corpus = json.loads(CORPUS.read_text()) if corpus is None else corpus
    read = namespace["read_message"]
    real = sum(e["source"].startswith("https://") for e in corpus)
    firsts = json.loads(FIRST_SCORE.read_text())
    rounds = []
    for n, path in enumerate(HELD_OUTS, 1):
        first = dict(firsts[str(path.relative_to(ROOT))], round=f"round {n}")
        sets = json.loads(path.read_text()) if held_out is None or n > 1 else held_out
        rounds += held_out_lines(path, sets, read, first, repeats(n - 1, corpus))
    return "\n".join([
        "<!-- Written by `python -m tools.triage` (make generate) from "
        "tests/data/triage_corpus.json and the held-out sets of tests/data; not edited "
        "by hand. -->", "",
        f"**In sample.** {len(corpus)} messages: {real} from public reports (each with its "
        f"link, and the cause its thread established), {len(corpus) - real} made live on "
        "torch or kept from the chapters. Each is labelled with its cause, or "
        "\"cannot tell\" where its thread did not settle one. The rules were written and "
        "corrected on these messages.", "",
        *table_lines(score_table(corpus, [read(e["text"]) for e in corpus])), "",
        *rounds]).rstrip("\n") + "\n"


def nodes_page(nodes):
    """The list of book/backward_nodes.md: a glossary entry per backward node
    of `nodes` (node_table), so that the site's search lands on it: the
    operation that records it, and the input each of its edges is."""
    lines = ["```{glossary}"]
    for node, (operation, inputs) in nodes.items():
        edges = "; ".join(f"{index}: `{name}`" + (" (a list: an edge per tensor)" if listed
                                                  else "")
                          for index, (name, listed) in enumerate(inputs)) or "none"
        lines += [node, f"  Recorded by `{operation}`. Its edges, by index: {edges}.", ""]
    return "\n".join(lines[:-1] + ["```"]) + "\n"


def generated(chapters=None):
    """{OUTPUT: text, SCORE: text, NODES: text}; `chapters` ({path: notebook})
    are the chapters as generated, so that the section links follow their headings."""
    notebook = (chapters or {}).get(CHAPTER)
    rules = triage_rules(notebook)
    text = (HEADER.format(torch=rules["torch"]) + "window.TRIAGE_RULES = "
            + json.dumps(rules, indent=0, sort_keys=False, ensure_ascii=True)
            .replace("\n", "") + ";\n")
    return {OUTPUT: text, SCORE: score_page(notebook), NODES: nodes_page(rules["nodes"])}


def main():
    for path, text in generated().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
