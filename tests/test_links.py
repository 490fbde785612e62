"""Every link in every notebook, book and student edition, resolves where the
reader is: links between notebooks are relative and name a notebook beside
them; links to the book's Markdown pages are absolute links to the published
book (tools.links), a glossary link to its term."""
import copy
import re

import nbformat
import pytest

from tools import links
from tools.book import BOOK, ROOT, toc_notebooks
from tools.student import STUDENT

CHAPTERS = toc_notebooks()
NOTEBOOKS = CHAPTERS + [STUDENT / path.name for path in CHAPTERS]
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
HTML_LINK = re.compile(r"""href=["']([^"']+)["']""")
BASE = links.book_url(links.repository_url())


def targets(notebook):
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            yield from MARKDOWN_LINK.findall(cell.source)
            yield from HTML_LINK.findall(cell.source)


def unresolved(path, notebook):
    """The links of `notebook` (stored at `path`) that lead nowhere."""
    problems = []
    terms = {links.term_anchor(t) for t in links.glossary_terms()}
    for target in targets(notebook):
        address, _, anchor = target.partition("#")
        if address.startswith(BASE):
            page = address[len(BASE):]
            match = re.fullmatch(r"book/(\w+)\.html", page)
            if not match or not (BOOK / f"{match[1]}.md").is_file():
                problems.append(f"{target}: no page {page} in the book")
            elif match[1] == "glossary" and anchor and anchor not in terms:
                problems.append(f"{target}: no glossary term with the anchor {anchor}")
        elif address.startswith(("http://", "https://", "mailto:")):
            if re.match(r"https://[^/]+\.github\.io/", address):
                problems.append(f"{target}: a book page, but not at {BASE}")
            continue        # elsewhere on the web: not checked offline
        elif not address:
            continue        # an anchor in the same notebook
        elif address.endswith(".md"):
            problems.append(f"{target}: a Markdown page, which Colab cannot open")
        elif not (path.parent / address).is_file():
            problems.append(f"{target}: no file {address} beside {path.relative_to(ROOT)}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(BOOK)) for p in NOTEBOOKS])
def test_every_link_in_every_notebook_resolves(path):
    notebook = nbformat.read(path, as_version=4)
    assert list(targets(notebook)), "a chapter links somewhere"
    assert unresolved(path, notebook) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[str(p.relative_to(BOOK)) for p in NOTEBOOKS])
def test_glossary_links_land_on_a_term(path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        for text, target in re.findall(r"\[([^\]]+)\]\(([^)\s]+)\)", cell.source):
            if "/book/glossary.html" in target and text.strip("`").lower() != "glossary":
                assert "#term-" in target, (text, target)


def test_unresolved_links_are_found():
    """The check above on planted cases: a relative .md link, a missing
    notebook, a glossary anchor that is no term, a page the book lacks."""
    cell = nbformat.v4.new_markdown_cell(
        "[a](glossary.md) [b](99_missing.ipynb) "
        f"[c]({BASE}book/glossary.html#term-nothing) [d]({BASE}book/nowhere.html) "
        "[e](https://someone-else.github.io/book/book/glossary.html)")
    notebook = nbformat.v4.new_notebook(cells=[cell])
    assert len(unresolved(CHAPTERS[0], notebook)) == 5


def test_links_are_made_absolute_from_the_repository_and_idempotent():
    source = ("See the [leaf](glossary.md), [`AccumulateGrad`](glossary.md), the "
              "[glossary](glossary.md), [versions](versions.md#torch) and "
              "[chapter 2](02_where_the_error_is_raised.ipynb).")
    terms, pages = links.glossary_terms(), {"glossary", "versions"}
    base = links.book_url("https://github.com/Someone/pruning-book")
    assert base == "https://someone.github.io/pruning-book/"
    once = links.absolute(source, base, terms, pages)
    assert once == (
        f"See the [leaf]({base}book/glossary.html#term-leaf-tensor), "
        f"[`AccumulateGrad`]({base}book/glossary.html#term-AccumulateGrad), the "
        f"[glossary]({base}book/glossary.html), [versions]({base}book/versions.html#torch) "
        "and [chapter 2](02_where_the_error_is_raised.ipynb).")
    assert links.absolute(once, base, terms, pages) == once
    moved = links.book_url("https://github.com/other/fork")
    assert links.absolute(once, moved, terms, pages) == once.replace(base, moved)
    with pytest.raises(ValueError, match="names no glossary term"):
        links.absolute("[no such term](glossary.md)", base, terms, pages)
    with pytest.raises(ValueError, match="must start with https://github.com/"):
        links.book_url("https://gitlab.com/a/b")


def test_a_glossary_link_names_one_term_whole_or_by_its_only_start():
    terms = ["leaf tensor", "leaf node", "accumulator", "grad accumulator"]
    assert links.term_of("`Accumulator`", terms) == "accumulator"
    assert links.term_of("grad", terms) == "grad accumulator"       # the only term it starts
    assert links.term_of("the glossary", terms) is None
    for text in ("leaf", "node"):                                   # two terms, or none
        with pytest.raises(ValueError, match="names no glossary term"):
            links.term_of(text, terms)


def test_the_placeholder_address_is_recognised():
    assert links.placeholder(links.book_url("https://github.com/YOUR-ACCOUNT/YOUR-REPOSITORY"))
    assert not links.placeholder("https://someone.github.io/pruning-book/book/glossary.html")


def test_the_committed_notebooks_use_the_address_of_config():
    """`make generate` wrote the links from _config.yml's repository: the
    generated files are up to date (also tests/test_generated.py)."""
    from tools.generate import read_chapters
    generated = links.with_absolute_links(copy.deepcopy(read_chapters()))
    for path, notebook in generated.items():
        assert nbformat.writes(notebook) == nbformat.writes(nbformat.read(path, as_version=4)), path


def test_glossary_anchors_are_the_ones_sphinx_writes():
    """In the built book (`make book`, which `make test` runs first), each
    glossary term's anchor is on the glossary page."""
    page = ROOT / "_build/html/book/glossary.html"
    if not page.is_file():
        pytest.skip("the book is not built: run make book")
    ids = set(re.findall(r'id="([^"]+)"', page.read_text()))
    for term in links.glossary_terms():
        assert links.term_anchor(term) in ids, term

