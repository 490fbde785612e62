"""What a search engine and a link preview read, on the built book
(`make book`; book/_ext/findable.py and the extensions of _config.yml).

Every page of the toc has its own description, a canonical link to its
address on the published book, Open Graph and Twitter tags whose image is
its card (a PNG in the build), and is listed in sitemap.xml, which lists
nothing else (no search page, index, 404 page or teacher's page). No line
of a graded exercise's solution or hidden tests is in any of its files. The
404 page, the root page, the search page and the chapters' pointers to the
fix are checked as a reader (or a crawler) meets them. Reads files only.
"""
import html
import re
import struct
import zipfile
import zlib
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import nbformat
import pytest

from book._ext.findable import quick_fix_code, site_url
from tools import downloads, links
from tools.book import BOOK, ROOT, THE_ERROR, tags, toc_entries, toc_notebooks
from tools.student import GRADED, STUDENT
from tools.sites import TEACHER_PAGES

HTML = ROOT / "_build" / "html"
BASE = links.book_url(links.repository_url())
PAGES = toc_entries()
INTRO, CHAPTER_1, WAYS_OUT = PAGES[0], "book/01_reproduce_the_error", "book/04_every_way_out"
CHAPTERS = [path.relative_to(ROOT).with_suffix("").as_posix() for path in toc_notebooks()]
CARD_MAX_BYTES = 40_000


class Head(HTMLParser):
    """The meta tags, links and title of a page, and its forms and links."""

    def __init__(self):
        super().__init__()
        self.meta, self.links, self.anchors, self.forms, self.inputs = {}, {}, [], [], []
        self.lang, self.title, self._in_title = None, "", False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "html":
            self.lang = attrs.get("lang")
        elif tag == "meta":
            key = attrs.get("name") or attrs.get("property") or attrs.get("http-equiv")
            if key and "content" in attrs:
                self.meta.setdefault(key.lower(), attrs["content"])
        elif tag == "link" and "rel" in attrs:
            self.links.setdefault(attrs["rel"], attrs.get("href"))
        elif tag == "a" and attrs.get("href"):
            self.anchors.append(attrs["href"])
        elif tag == "form":
            self.forms.append(attrs)
        elif tag == "input":
            self.inputs.append(attrs)
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data


def parsed(path):
    if not path.is_file():
        pytest.fail(f"{path.relative_to(ROOT)} is not built: run `make book` first")
    head = Head()
    head.feed(path.read_text())
    return head


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def heads():
    return {page: parsed(HTML / f"{page}.html") for page in PAGES}


@pytest.fixture(scope="module")
def sitemap():
    path = HTML / "sitemap.xml"
    if not path.is_file():
        pytest.fail("_build/html/sitemap.xml is missing: run `make book`")
    namespace = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
    return [loc.text for loc in ElementTree.parse(path).iter(f"{namespace}loc")]


def test_every_page_has_its_description_canonical_link_and_card(heads):
    problems = []
    descriptions = {}
    for page, head in heads.items():
        meta = head.meta
        description = meta.get("description", "").strip()
        descriptions.setdefault(description, []).append(page)
        if len(description) < 60:
            problems.append(f"{page}: description {description!r}")
        if head.links.get("canonical") != f"{BASE}{page}.html":
            problems.append(f"{page}: canonical {head.links.get('canonical')!r}")
        if meta.get("og:url") != f"{BASE}{page}.html":
            problems.append(f"{page}: og:url {meta.get('og:url')!r}")
        if not meta.get("og:title") or meta.get("og:title") != meta.get("twitter:title"):
            problems.append(f"{page}: og:title {meta.get('og:title')!r}, twitter:title "
                            f"{meta.get('twitter:title')!r}")
        for key in ("og:description", "twitter:description"):
            if meta.get(key) != description:
                problems.append(f"{page}: {key} is not its description: {meta.get(key)!r}")
        image = meta.get("og:image", "")
        if not image.startswith(f"{BASE}_images/cards/") or meta.get("twitter:image") != image:
            problems.append(f"{page}: og:image {image!r}, twitter:image "
                            f"{meta.get('twitter:image')!r}")
            continue
        card = HTML / image[len(BASE):]
        if not card.is_file():
            problems.append(f"{page}: its card {card.name} is not in the build")
            continue
        size = png_size(card)
        if size != (1200, 630) or (meta.get("og:image:width"), meta.get("og:image:height")) \
                != ("1200", "630"):
            problems.append(f"{page}: card of {size}, said to be "
                            f"{meta.get('og:image:width')}x{meta.get('og:image:height')}")
        if card.stat().st_size > CARD_MAX_BYTES:
            problems.append(f"{page}: card of {card.stat().st_size} bytes")
        if not meta.get("og:image:alt") or meta.get("twitter:card") != "summary_large_image":
            problems.append(f"{page}: no image alt text, or twitter:card "
                            f"{meta.get('twitter:card')!r}")
    problems += [f"{pages}: one description for several pages"
                 for pages in descriptions.values() if len(pages) > 1]
    assert problems == []


def test_the_error_is_in_the_description_and_on_the_card_of_the_intro_and_chapter_1(heads):
    title = " ".join(heads[INTRO].title.split())
    assert "TBackward0" in title and "invalid gradient" in title, title
    book_title = title.split(" \N{EM DASH} ")[-1]
    assert title.count(book_title) == 1, f"the title repeats itself: {title!r}"
    for page in (INTRO, CHAPTER_1):
        meta = heads[page].meta
        assert "TBackward0" in meta["description"] and "invalid gradient" in meta["description"]
        assert THE_ERROR in meta["og:image:alt"], page
    assert THE_ERROR in heads[CHAPTER_1].meta["description"]
    # the other pages' cards show their title, not the error
    assert THE_ERROR not in heads["book/glossary"].meta["og:image:alt"]
    assert heads["book/glossary"].meta["og:title"] in heads["book/glossary"].meta["og:image:alt"]


def test_the_sitemap_lists_every_page_and_nothing_else(sitemap):
    assert sorted(sitemap) == sorted(f"{BASE}{page}.html" for page in PAGES)


def test_no_teacher_page_is_built_or_named_in_a_card():
    only_teachers = set(TEACHER_PAGES) - {Path(page).name for page in PAGES}
    assert only_teachers, TEACHER_PAGES
    for name in only_teachers:
        assert not (HTML / "book" / f"{name}.html").exists(), name
        assert not list((HTML / "_images" / "cards").glob(f"book_{name}-*")), name


def test_the_404_page_has_the_search_box_and_the_contents():
    head = parsed(HTML / "404.html")
    prefix = "/" + BASE.split("://", 1)[1].split("/", 1)[1]
    assert "Page not found" in head.title
    searches = [form for form in head.forms if form.get("action") == f"{prefix}search.html"]
    assert searches, head.forms
    assert any(field.get("name") == "q" for field in head.inputs), head.inputs
    # every page of the contents, by an address that works from any folder
    missing = [page for page in PAGES if f"{prefix}{page}.html" not in head.anchors]
    assert missing == []


def test_the_root_page_has_a_language_title_description_and_card(heads):
    root = parsed(HTML / "index.html")
    first = heads[INTRO]
    assert root.lang == "en"
    assert root.title.strip() == first.title.strip() and "TBackward0" in root.title
    assert root.meta.get("description") == first.meta["description"]
    assert root.links.get("canonical") == f"{BASE}{INTRO}.html"
    for key in ("og:title", "og:description", "og:image", "twitter:card"):
        assert root.meta.get(key) == first.meta[key], key
    assert root.meta.get("refresh") == f"0; url={INTRO}.html"


def test_no_page_says_project_name_not_set():
    pages = [p for p in HTML.rglob("*.html") if "_static" not in p.relative_to(HTML).parts]
    assert len(pages) > len(PAGES)
    assert [p.name for p in pages if "Project name not set" in p.read_text()] == []
    inventory = (HTML / "objects.inv").read_bytes()
    header = inventory.split(b"\n", 4)
    assert header[1].startswith(b"# Project: Pruning"), header[1]
    zlib.decompress(header[4])  # the inventory is whole


def test_search_index_and_404_say_noindex_and_have_a_description():
    for name in ("search.html", "genindex.html", "404.html"):
        meta = parsed(HTML / name).meta
        assert meta.get("robots") == "noindex", name
        assert len(meta.get("description", "")) > 40, name


def test_every_chapter_points_to_the_fix_under_its_badge():
    problems = []
    for chapter in CHAPTERS:
        text = (HTML / f"{chapter}.html").read_text()
        badge = text.find('class="colab-badge"')
        pointer = text.find("fix-pointer")
        if badge < 0 or pointer < 0 or not 0 < pointer - text.find("</p>", badge) < 80:
            problems.append(f"{chapter}: no pointer to the fix right under the badge")
            continue
        # the pointer: from its class to the end of its paragraph that
        # names every way out, before anything else of the page
        end = text.find("</p>", text.find("every way out", pointer))
        block = text[pointer:end]
        if end < 0 or re.search(r"<h[1-6]\b|<section\b|class=\"cell", block):
            problems.append(f"{chapter}: the pointer does not name every way out")
            continue
        # chapter 4 is every way out; the others link to it
        targets = ["intro.html"] + ["04_every_way_out.html"] * (chapter != WAYS_OUT)
        for target in targets:
            if f'href="{target}"' not in block:
                problems.append(f"{chapter}: the pointer does not link to {target}")
    assert problems == []


def test_chapter_1_shows_the_intros_quick_fix():
    text = (HTML / f"{CHAPTER_1}.html").read_text()
    box = re.search(r'<div class="admonition tip quick-fix fix-pointer">(.*?)\n</div>\n',
                    text, re.S)
    assert box, "chapter 1 has no quick fix under its badge"
    shown = html.unescape(re.sub(r"<[^>]+>", "", box[1]))
    code = quick_fix_code(ROOT)
    assert code.strip().splitlines()[-1].startswith("optimizer = ")
    for line in code.strip().splitlines():
        assert line in shown, line
    assert "optimizer" in (BOOK / "intro.md").read_text()


def test_the_site_address_is_the_one_the_notebooks_link_to():
    for repository in ("https://github.com/Someone/pruning-book",
                       "https://github.com/someone/pruning-book/"):
        assert site_url(repository) == links.book_url(repository)
    with pytest.raises(RuntimeError, match="must start with https://github.com/"):
        site_url("https://gitlab.com/someone/book")
    with pytest.raises(RuntimeError, match="OWNER/NAME"):
        site_url("https://github.com/someone")


def test_a_title_too_long_for_a_card_stops_the_build(tmp_path):
    from book._ext.findable import FindableError, draw_card

    with pytest.raises(FindableError, match="does not fit on a card"):
        draw_card(tmp_path / "card.png", "pruning " * 40, "site", "someone.github.io/book")
    assert not (tmp_path / "card.png").exists()


def visible_text(path):
    """A built file's text as a reader or a download holds it, whitespace
    collapsed: a page's without tags, a notebook's cell sources, a zip's
    members', a PDF's extracted text."""
    if path.suffix == ".zip":
        with zipfile.ZipFile(path) as archive:
            return " ".join(notebook_text(archive.read(name).decode(errors="replace"))
                            for name in archive.namelist())
    if path.suffix == ".pdf":
        from pypdf import PdfReader
        return " ".join(" ".join(page.extract_text() or "" for page in PdfReader(path).pages)
                        .split())
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        return notebook_text(text)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


def notebook_text(text):
    try:
        cells = nbformat.reads(text, as_version=4).cells
    except Exception:
        return " ".join(text.split())
    return " ".join(" ".join(cell.source.split()) for cell in cells)


def lines_of(notebook, kept):
    """The lines (whitespace collapsed, 20 characters or more) of the cells of
    `notebook` for which `kept(cell)` holds."""
    return {" ".join(line.split()) for cell in notebook.cells if kept(cell)
            for line in cell.source.splitlines() if len(" ".join(line.split())) >= 20}


def test_no_graded_solution_or_hidden_test_is_on_the_site(tmp_path):
    """The graded exercises (book/graded/) are the class's: none of their
    solution or hidden-test lines (but those the student edition shows, such
    as a function's signature) is in any page, source, notebook, zip or PDF
    of the built site, nor in the notebooks' zip; the chapters' own solutions
    are, read the same way (so the reading can find what it looks for)."""
    public = "\n".join(notebook_text(path.read_text())
                       for path in [*toc_notebooks(), *STUDENT.glob("*.ipynb")])
    secret, practice = set(), set()
    for path in sorted(GRADED.glob("*.ipynb")):
        graded = nbformat.read(path, as_version=4)
        secret |= lines_of(graded, lambda c: "solution" in tags(c)) | {
            " ".join(line.split()) for cell in graded.cells
            for block in re.findall(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS",
                                    cell.source, re.S)
            for line in block.splitlines() if len(" ".join(line.split())) >= 20}
        chapter = nbformat.read(BOOK / path.name, as_version=4)
        practice |= lines_of(chapter, lambda c: "solution" in tags(c))
    secret = {line for line in secret if line not in public}
    assert len(secret) > 100 and practice, (len(secret), len(practice))
    files = [p for p in HTML.rglob("*") if p.is_file() and p.suffix in (
        ".html", ".txt", ".ipynb", ".md", ".js", ".json", ".zip", ".pdf")]
    files.append(downloads.notebooks_zip(tmp_path / "notebooks.zip"))
    site_text = "\n".join(visible_text(p) for p in files)
    assert not [line for line in secret if line in site_text][:5]
    assert sum(line in site_text for line in practice) >= len(practice) * 0.9
