"""The book to take away (tools/downloads.py, book/_ext/downloads.py).

One chapter of the built book is printed to PDF here, as `make pdf` prints
every page (the whole book is not: `make pdf` does that), with headless
Chromium: its solutions and its folded code cells print open (their text
is in the PDF, their "Show code cell source" label is not), and a book made
of it has a cover whose contents give each page's first sheet, and an
outline. The notebooks' zip holds both editions. Each page's download menu
links the files by the names the tool writes. Reads the book `make book`
builds.
"""
import html
import re
import zipfile

import nbformat
import pytest

from tools import downloads
from tools.downloads import HTML
from tools.book import ROOT, book_extension, toc_entries, toc_notebooks

CHAPTER = "book/01_reproduce_the_error"


ext = book_extension("downloads")


def words(text):
    return " ".join(text.split())


def pdf_text(path):
    from pypdf import PdfReader

    return words(" ".join(page.extract_text() or "" for page in PdfReader(path).pages))


def folded_texts(page_html):
    """(the first words of each solution's explanation, the first line of
    each folded code cell) of a built page."""
    plain = lambda fragment: words(html.unescape(re.sub(r"<[^>]+>", "", fragment)))  # noqa: E731
    solutions = [" ".join(plain(p).split()[:10]) for p in re.findall(
        r"<summary>Solution \d+</summary>\s*<p>(.*?)</p>", page_html, re.S)]
    code = [plain(first).strip() for first in re.findall(
        r'<details class="[^"]*\bhide\b[^"]*">.*?<pre[^>]*>(?:<span></span>)?(.*?)\n',
        page_html, re.S)]
    return solutions, code


@pytest.fixture(scope="module")
def printed(browser, site, tmp_path_factory):
    """Chapter 1 printed as `make pdf` prints it: (pdf, title)."""
    target = tmp_path_factory.mktemp("pdf") / downloads.page_pdf_name(CHAPTER)
    title = downloads.print_page(browser, f"{site}{CHAPTER}.html", target)
    return target, title


def test_a_printed_chapter_shows_its_solutions_and_folded_code(printed):
    pdf, title = printed
    text = pdf_text(pdf)
    solutions, code = folded_texts((HTML / f"{CHAPTER}.html").read_text())
    assert solutions and code, "chapter 1 has no solution or folded cell to look for"
    assert title == "Reproducing the error"
    # (compared without spaces: the PDF's text has spaces around inline code)
    bare = "".join(text.split())
    missing = [s for s in solutions + code if "".join(s.split()) not in bare]
    assert missing == [], f"folded text not printed: {missing}"
    assert "code cell source" not in text  # the fold's label is not printed


def test_the_book_has_a_cover_with_contents_and_an_outline(printed, browser, tmp_path):
    from pypdf import PdfReader

    pdf, title = printed
    sheets = len(PdfReader(pdf).pages)
    pages = [(CHAPTER, title, pdf), ("book/again", "The same again", pdf)]
    book = downloads.book_pdf(browser, pages, tmp_path / "book.pdf", "A title", tmp_path)
    reader = PdfReader(book)
    assert len(reader.pages) == 1 + 2 * sheets
    cover = words(reader.pages[0].extract_text())
    assert cover.startswith("A title") and "Contents" in cover
    assert f"{title} 2" in cover and f"The same again {2 + sheets}" in cover
    top = [item.title for item in reader.outline if not isinstance(item, list)]
    assert top == ["Contents", title, "The same again"]
    # each page's headings under its own entry, the first at its first sheet
    nested = [item for item in reader.outline if isinstance(item, list)]
    assert len(nested) == 2 and nested[0][0].title.startswith("Reproducing")
    assert reader.get_destination_page_number(reader.outline[1]) == 1


def test_the_zip_holds_both_editions(tmp_path):
    target = downloads.notebooks_zip(tmp_path / "notebooks.zip")
    names = zipfile.ZipFile(target).namelist()
    book = {p.resolve().relative_to(ROOT).as_posix() for p in map(lambda p: ROOT / p,
                                                                 toc_notebooks())}
    student = {f"book/student/{name.split('/')[-1]}" for name in book}
    assert set(names) == book | student and len(names) == len(book) * 2 == 14
    archive = zipfile.ZipFile(target)
    for name in names:
        notebook = nbformat.reads(archive.read(name).decode(), as_version=4)
        hidden = any("### BEGIN HIDDEN TESTS" in cell.source for cell in notebook.cells)
        # the book's edition runs its hidden tests; the student's has none
        assert hidden == (not name.startswith("book/student/")), name
    # the same notebooks give the same zip
    assert downloads.notebooks_zip(tmp_path / "again.zip").read_bytes() == target.read_bytes()
    with pytest.raises(downloads.DownloadsError, match="no notebooks"):
        downloads.notebooks_zip(tmp_path / "empty.zip", student=[])


def theme_buttons():
    """The header buttons as sphinx-book-theme 1.3.0 makes them."""
    return [{"type": "group", "label": "download-buttons", "buttons": [
        {"type": "link", "url": "../_sources/x.ipynb", "label": "download-source-button"},
        {"type": "javascript", "javascript": "window.print()", "text": ".pdf",
         "label": "download-pdf-button"}]},
        {"type": "javascript", "label": "fullscreen-button"}]


def test_the_download_menu_links_the_pages_pdf_the_book_and_the_notebooks():
    config = downloads.settings()
    buttons = ext.download_menu(theme_buttons(), "book/01_x", config,
                                lambda path, _: f"../{path}")
    items = buttons[0]["buttons"]
    assert [item["url"] for item in items] == [
        "../_sources/x.ipynb", "../downloads/01_x.pdf",
        f"../downloads/{config['book']}", f"../downloads/{config['notebooks']}"]
    assert all(item["type"] == "link" for item in items)
    without = theme_buttons()
    del without[0]["buttons"][1]
    with pytest.raises(ext.DownloadsError, match="print button"):
        ext.download_menu(without, "book/01_x", config, lambda path, _: path)
    with pytest.raises(ext.DownloadsError, match="0 download menus"):
        ext.download_menu(theme_buttons()[1:], "book/01_x", config, lambda path, _: path)


def test_every_page_links_the_files_make_pdf_writes():
    """The names the extension links are those the tool writes."""
    config = downloads.settings()
    for entry in toc_entries():
        page = (HTML / f"{entry}.html").read_text()
        depth = "../" * entry.count("/")
        for name in (downloads.page_pdf_name(entry), config["book"], config["notebooks"]):
            assert f'href="{depth}{config["folder"]}/{name}"' in page, (entry, name)
    intro = (HTML / f"{toc_entries()[0]}.html").read_text()
    assert intro.count(f'/{config["book"]}"') >= 2, "the intro's own text links the book's PDF"
