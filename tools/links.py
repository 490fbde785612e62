"""Links from the chapters to the book's Markdown pages, made absolute.

A notebook opened in Colab, or a student notebook in book/student/, cannot
follow `[glossary](glossary.md)`: Colab has no such file beside it, and the
student folder has no glossary. `make generate` (tools.generate) therefore
writes every Markdown link from a chapter to a page of the book (a `.md`
file of book/) as an absolute link to that page on the published book,
`https://OWNER.github.io/NAME/book/glossary.html`, built from
`repository.url` in _config.yml like the Colab badges (book/_ext), and a
glossary link to its term's anchor (the term is the link's text, or the
term it begins: `[leaf](glossary.md)` -> *leaf tensor*). It recognises the
links it wrote before, so rewriting is idempotent and follows a change of
address. Links between notebooks stay relative (`02_x.ipynb`).

While _config.yml holds its placeholder address (YOUR-ACCOUNT), the links
hold it too; the Pages workflow's placeholder guard is what must refuse to
publish them (see `placeholder`).
"""
import copy
import re

import yaml
from sphinx.util.nodes import _make_id

from tools.book import BOOK, ROOT, book_extension

PLACEHOLDER = re.compile(r"YOUR-ACCOUNT|YOUR-REPOSITORY", re.I)
GITHUB = "https://github.com/"
# a Markdown link to a page of the book: relative (`glossary.md#x`) or as
# written before by this module (`https://.../book/glossary.html#x`)
PAGE_LINK = re.compile(
    r"\[(?P<text>[^\]]+)\]\((?P<target>(?:https://[^\s)]+\.github\.io/[^\s)/]+/book/)?"
    r"(?P<page>[a-z_]+)\.(?:md|html)(?:#[^\s)]*)?)\)")


def repository_url(config_path=ROOT / "_config.yml"):
    return yaml.safe_load(config_path.read_text())["repository"]["url"]


def book_url(repo_url):
    """'https://github.com/Owner/name' -> 'https://owner.github.io/name/', the
    address GitHub Pages publishes the book at (the Pages workflow): the
    build's own rule, book/_ext/findable.py's site_url (ValueError if
    `repo_url` is not a GitHub repository's address)."""
    findable = book_extension("findable")
    try:
        return findable.site_url(repo_url)
    except findable.FindableError as error:
        raise ValueError(str(error)) from None


def placeholder(text):
    """True when `text` holds the placeholder address of _config.yml."""
    return bool(PLACEHOLDER.search(text))


def glossary_terms(path=BOOK / "glossary.md"):
    """The terms of the glossary page's {glossary} block, in order."""
    block = re.search(r"```\{glossary\}\n(.*?)\n```", path.read_text(), re.S)
    if not block:
        raise ValueError(f"{path.name}: no {{glossary}} block")
    return [line.strip() for line in block[1].splitlines()
            if line.strip() and not line.startswith((" ", "\t"))]


def term_anchor(term):
    """The HTML id Sphinx gives a glossary term ('leaf tensor' -> 'term-leaf-tensor')."""
    return _make_id(f"term-{term}")


def term_of(text, terms):
    """The glossary term a link's text names, or None for the page itself."""
    text = text.strip().strip("`").strip()
    if text.lower() in ("glossary", "the glossary"):
        return None
    for term in terms:
        if term.lower() == text.lower():
            return term
    starting = [term for term in terms if term.lower().startswith(text.lower() + " ")]
    if len(starting) == 1:
        return starting[0]
    raise ValueError(f"the link [{text}](glossary.md) names no glossary term; "
                     f"known terms: {', '.join(terms)}")


def absolute(source, base, terms, pages):
    """`source` (Markdown) with each link to a page of the book made absolute."""
    def rewrite(match):
        page = match["page"]
        if page not in pages:
            if match["target"].startswith("https://"):
                raise ValueError(f"link to {match['target']}: book/{page}.md does not exist")
            return match[0]
        anchor = ""
        if page == "glossary":
            term = term_of(match["text"], terms)
            anchor = f"#{term_anchor(term)}" if term else ""
        elif "#" in match["target"]:
            anchor = "#" + match["target"].split("#", 1)[1]
        return f"[{match['text']}]({base}book/{page}.html{anchor})"
    return PAGE_LINK.sub(rewrite, source)


def with_absolute_links(notebooks, repo_url=None):
    """{path: notebook} with every Markdown link to a page of the book made
    absolute; the notebooks given are not changed."""
    base = book_url(repository_url() if repo_url is None else repo_url)
    terms = glossary_terms()
    pages = {path.stem for path in BOOK.glob("*.md")}
    result = {}
    for path, notebook in notebooks.items():
        notebook = copy.deepcopy(notebook)
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                try:
                    cell.source = absolute(cell.source, base, terms, pages)
                except ValueError as error:
                    raise ValueError(f"{path.name}: {error}") from None
        result[path] = notebook
    return result
