"""The repository's own documentation: README.md, CONTRIBUTING.md, docs/.

Not their wording: what they name must be real. Every repository path
written as code (`tools/run.py`, `book/student/`) exists, every `make X`
names a target of the Makefile, every relative link leads to a file, every
"`name` in `file`" names something that file defines, and the docs stay
short enough to read in fifteen minutes.
"""
import json
import os
import re

from tools.book import ROOT

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 100
# Words as `wc -w` counts them: whitespace-separated tokens of the whole
# files, code blocks and tables included (a table's `|` is a word).
DOCS_MAX_WORDS = 3500

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.M | re.S)
INLINE = re.compile(r"`([^`\n]+)`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FILE_NAME = re.compile(r"[\w.-]+\.(py|md|yml|yaml|txt|json|ipynb|cfg|toml|js|cff|csv|sh|html)")
TOP_LEVEL_NAMES = {"LICENSE", "LICENSE-CONTENT", "Makefile"}
# What is written like a path but is not one of the repository's files:
# a placeholder for a name the reader picks, a folder the tools create.
PLACEHOLDER = re.compile(r"NN|\.\.\.|OWNER|REPOSITORY|YOUR-|SUBMISSIONS")
CREATED = ("_build/", "node_modules/", "../", ".venv")
NOT_PATHS = {
    "someone/pruning-book": "the GitHub repository `make publish-dry-run` pretends to be",
    "us-docker.pkg.dev/colab-images/public/runtime": "Colab's Docker image",
}
# the machine's folders (absolute, or in the home folder), not the repository's
MACHINE_PATHS = ("/", "~/")
SKIPPED_DIRS = {".git", ".venv", "_build", "node_modules", "__pycache__", ".pytest_cache"}


def code_spans(text):
    """(inline code spans, lines of fenced code blocks) of a Markdown text."""
    blocks = [line for block in FENCE.findall(text) for line in block.splitlines()]
    return INLINE.findall(FENCE.sub("", text)), blocks


def repository_files(root=ROOT):
    """Every file and folder name under `root` (relative paths), outside
    the folders that the tools and git create."""
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIPPED_DIRS]
        base = os.path.relpath(folder, root)
        for name in dirs + files:
            found.add(os.path.normpath(os.path.join(base, name)))
    return found


def named_paths(text):
    """The repository paths a Markdown text names as code."""
    spans, _ = code_spans(text)
    paths = []
    for span in spans:
        span = span.strip().split("#")[0]
        if (not span or any(c.isspace() for c in span) or "=" in span or "://" in span
                or span in NOT_PATHS or PLACEHOLDER.search(span)
                or span.startswith(CREATED) or span.startswith(MACHINE_PATHS)):
            continue
        if "/" in span or FILE_NAME.fullmatch(span) or span in TOP_LEVEL_NAMES:
            paths.append(span)
    return paths


def missing_paths(text, files):
    """The paths named in `text` that are not in `files`: a path with a
    folder must exist from the root; a bare file name, somewhere."""
    names = {os.path.basename(f) for f in files}
    missing = []
    for path in named_paths(text):
        if "/" in path:
            if os.path.normpath(path) not in files:
                missing.append(path)
        elif path not in names:
            missing.append(path)
    return missing


def make_targets(makefile_text):
    """The targets a Makefile defines (explicit rules, not patterns)."""
    targets = set()
    for line in makefile_text.splitlines():
        match = re.match(r"^([^\s:#=$%][^:=]*?)\s*::?(?!=)", line)
        if match:
            targets.update(match[1].split())
    return targets - {".PHONY"}


def named_targets(text):
    """The targets of every `make ...` command a Markdown text writes as code
    (inline or in a fenced block), its variables and options left out."""
    spans, lines = code_spans(text)
    targets = []
    for command in spans + lines:
        words = command.split("#")[0].split()
        if not words or words[0] != "make":
            continue
        targets += [w for w in words[1:] if "=" not in w and not w.startswith("-")]
    return targets


# "`paired`, `holm` and `say` in `book/05_variance_pruning.ipynb#paired-comparison`",
# "`generated` in `tools/findings.py`": names said to be defined in a file
# (a notebook's cell, when the path has an anchor).
PLACED = re.compile(r"((?:`\w+`(?:,?\s+and\s+|,\s+|\s+or\s+)?)+)\s+(?:is\s+)?in\s+"
                    r"`([\w./-]+\.(?:py|ipynb))(?:#([\w-]+))?`")


def placed_names(text):
    """[(name, path, cell id or None)] for every "`name` in `file`" of a text."""
    return [(name, path, cell) for names, path, cell in PLACED.findall(text)
            for name in INLINE.findall(names)]


def source_of(path, cell=None):
    """The code of `path` (from the root): a module, or a notebook's code
    cells (only the cell with the id `cell`, if given)."""
    text = (ROOT / path).read_text()
    if not path.endswith(".ipynb"):
        return text
    return "\n".join("".join(c["source"]) for c in json.loads(text)["cells"]
                     if c["cell_type"] == "code" and cell in (None, c.get("id")))


def misplaced_names(text):
    """The (name, where) of `text` whose file, or cell, does not define the
    name at its top level (a def, a class, an assignment)."""
    return [(name, path + (f"#{cell}" if cell else "")) for name, path, cell in placed_names(text)
            if not re.search(rf"^(?:(?:def|class) {name}\b|{name} *=)",
                             source_of(path, cell or None), re.M)]


def links(text):
    """The relative links of a Markdown text, outside its code (where a
    chapter's link is shown as an example)."""
    prose = INLINE.sub("", FENCE.sub("", text))
    return [address.split("#")[0] for address in LINK.findall(prose)
            if "://" not in address and not address.startswith(("#", "mailto:"))]


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines; move the details to docs/")


def test_the_docs_are_read_in_fifteen_minutes():
    words = {doc.name: len(doc.read_text().split()) for doc in DOCS}
    assert sum(words.values()) <= DOCS_MAX_WORDS, (
        f"the docs have {sum(words.values())} words (at most {DOCS_MAX_WORDS}): {words}")


def test_every_name_the_docs_place_in_a_file_is_defined_there():
    wrong = {doc.name: misplaced_names(doc.read_text()) for doc in DOCS}
    assert not any(wrong.values()), wrong


def test_the_docs_say_where_the_statistics_are_computed():
    """The paired t intervals, Holm's adjustment, the declared families and
    the pages' sentences: each named with the file that defines it (checked
    by the test above)."""
    placed = {name for doc in DOCS for name, _, _ in placed_names(doc.read_text())}
    assert {"paired", "holm", "say", "study_verdicts", "generated"} <= placed, placed


def test_every_path_the_docs_name_exists():
    files = repository_files()
    missing = {doc.name: missing_paths(doc.read_text(), files) for doc in DOCS}
    assert not any(missing.values()), missing


def test_every_make_target_the_docs_name_exists():
    targets = make_targets((ROOT / "Makefile").read_text())
    unknown = {doc.name: sorted(set(named_targets(doc.read_text())) - targets)
               for doc in DOCS}
    assert not any(unknown.values()), unknown


def test_every_relative_link_of_the_docs_leads_to_a_file():
    broken = {doc.name: [a for a in links(doc.read_text()) if not (doc.parent / a).exists()]
              for doc in DOCS}
    assert not any(broken.values()), broken


def test_the_checks_see_the_docs():
    """The scanners read every document: each names paths, and together
    they name many paths and make targets (a scanner that found nothing
    would pass the checks above)."""
    texts = [doc.read_text() for doc in DOCS]
    assert len(DOCS) >= 3 and all(named_paths(text) for text in texts)
    assert len({p for text in texts for p in named_paths(text)}) > 50
    assert len({t for text in texts for t in named_targets(text)}) > 10


def test_the_checks_find_what_does_not_exist():
    """The scanners on planted text: a folder that is gone, a file that is
    not anywhere, a target the Makefile lacks, a link to nowhere; and what
    they must leave alone."""
    text = ("Run `make book` and `make TORCH_INDEX=x -s no-such-target`; see\n"
            "`scripts/`, `tools/run.py`, `tools/gone.py`, `nowhere.md`, `Makefile`,\n"
            "`book/NN_name.ipynb`, `_build/html`, `someone/pruning-book`,\n"
            "`https://x.org/a/b`, `a b/c`, `04_every_way_out.ipynb#prune-linear-pair`,\n"
            "`/tmp`, `~/.cache/x` (the machine's, not the repository's).\n"
            "[guide](CONTRIBUTING.md) [lost](docs/lost.md) [out](https://x.org/y.md)\n"
            "`[chapter 2](02_gone.ipynb)` is code, not a link.\n"
            "```sh\nmake versions   # long\nmake other-missing\n```\n")
    assert missing_paths(text, repository_files()) == ["scripts/", "tools/gone.py", "nowhere.md"]
    targets = make_targets((ROOT / "Makefile").read_text())
    assert {"book", "test", "setup", "versions", "node_modules/.package-lock.json"} <= targets
    assert [t for t in named_targets(text) if t not in targets] == [
        "no-such-target", "other-missing"]
    assert links(text) == ["CONTRIBUTING.md", "docs/lost.md"]


def test_the_check_finds_a_name_its_file_does_not_define():
    text = ("`paired`, `holm` and `say` in `tools/study.py`; `holm` in\n"
            "`book/05_variance_pruning.ipynb#paired-comparison`; `study_verdicts` is in\n"
            "`book/05_variance_pruning.ipynb#stored-study`; `generated` in `tools/findings.py`;\n"
            "`study_verdicts` in `book/07_tnvp_language_model.ipynb`; `TRICKS` in\n"
            "`tests/test_student_edition.py`; `make study` in `tools/study.py`.")
    assert [name for name, _, _ in placed_names(text)] == [
        "paired", "holm", "say", "holm", "study_verdicts", "generated", "study_verdicts", "TRICKS"]
    assert misplaced_names(text) == [
        ("paired", "tools/study.py"), ("holm", "tools/study.py"), ("say", "tools/study.py"),
        ("study_verdicts", "book/05_variance_pruning.ipynb#stored-study")]
