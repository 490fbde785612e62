"""The book to download, and printing with every fold open.

`make pdf` writes a PDF of the whole book and one of each page, and `make
notebooks-zip` a zip of the notebooks (both editions), into the built
site's folder that the config value `book_downloads` names, with their file
names (tools/downloads.py reads them there too); the Pages workflow runs
both after the book. This extension links them:

1. Each page's download menu (sphinx-book-theme's download button): its
   `.pdf` item, which only opened the print dialog, links the page's own
   PDF, and two items follow it: the whole book as PDF, and the notebooks as
   a zip. Checked: the menu and its `.pdf` item are where the pinned theme
   puts them (DownloadsError, naming the page, otherwise).
2. {book-download}`text <book>` and {book-download}`text <notebooks>` in a
   page: a link to the book's PDF or to the notebooks' zip.
3. Printing a page from the browser opens every fold (solutions, folded
   code): PRINT_OPENS_FOLDS opens them at `beforeprint` and closes them
   again at `afterprint`; book.css opens them in print by itself where the
   browser can (::details-content).

With `book_downloads` empty (the class site, the teacher's pack), nothing
is linked and the menu is left as the theme writes it.
"""
import posixpath

from docutils import nodes
from sphinx.errors import SphinxError

PRINT_OPENS_FOLDS = """\
addEventListener("beforeprint", () => document.querySelectorAll("article details:not([open])")
  .forEach((fold) => { fold.open = true; fold.dataset.openedForPrint = ""; }));
addEventListener("afterprint", () => document.querySelectorAll("details[data-opened-for-print]")
  .forEach((fold) => { fold.open = false; delete fold.dataset.openedForPrint; }));"""
KINDS = ("book", "notebooks")


class DownloadsError(SphinxError, ValueError):
    category = "downloads.py: the download menu is not what the theme wrote before"


def page_pdf(docname):
    """The name of the PDF of page `docname` ('book/01_x' -> '01_x.pdf')."""
    return f"{posixpath.basename(docname)}.pdf"


def download_href(config, kind, docname):
    """The relative address, from page `docname`, of the book's PDF
    ('book') or of the notebooks' zip ('notebooks')."""
    if kind not in KINDS:
        raise ValueError(f"a download is one of {KINDS}, not {kind!r}")
    target = posixpath.join(config["folder"], config[kind])
    return posixpath.relpath(target, posixpath.dirname(docname) or ".")


def download_menu(buttons, pagename, downloads, pathto):
    """The theme's header buttons with the download menu's `.pdf` item a
    link to the page's PDF, followed by the book's PDF and the notebooks'
    zip (1); edited in place."""
    menus = [button for button in buttons if button.get("label") == "download-buttons"]
    if len(menus) != 1:
        raise DownloadsError(f"{pagename}: {len(menus)} download menus found, one expected")
    items = menus[0].get("buttons") or []
    pdf = [i for i, item in enumerate(items) if item.get("label") == "download-pdf-button"]
    if len(pdf) != 1 or items[pdf[0]].get("type") != "javascript":
        raise DownloadsError(f"{pagename}: the menu's .pdf item (the print button) is not found")
    folder = downloads["folder"]
    link = {"type": "link", "icon": "fas fa-file-pdf"}
    items[pdf[0]:pdf[0] + 1] = [
        {**link, "url": pathto(f"{folder}/{page_pdf(pagename)}", 1), "text": ".pdf",
         "tooltip": "This page as PDF", "label": "download-pdf-button"},
        {**link, "url": pathto(f"{folder}/{downloads['book']}", 1), "text": "book .pdf",
         "tooltip": "The whole book as PDF", "label": "download-book-pdf-button",
         "icon": "fas fa-book"},
        {**link, "url": pathto(f"{folder}/{downloads['notebooks']}", 1), "text": "notebooks .zip",
         "tooltip": "Every notebook, with the answers and in the student edition",
         "label": "download-notebooks-button", "icon": "fas fa-file-zipper"},
    ]
    return buttons


def page_context(app, pagename, templatename, context, doctree):
    downloads = app.config.book_downloads
    if not downloads or app.builder.format != "html" or "header_buttons" not in context:
        return
    if not any(b.get("label") == "download-buttons" for b in context["header_buttons"]):
        return  # a page without a source (search, index): no menu
    download_menu(context["header_buttons"], pagename, downloads, context["pathto"])


def book_download_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """{book-download}`the whole book <book>`: a link to a download (2)."""
    env = inliner.document.settings.env
    label, _, kind = text.rpartition("<")
    kind, label = kind.rstrip(">").strip(), label.strip() or text
    downloads = env.config.book_downloads
    if not downloads or kind not in KINDS:
        message = inliner.reporter.error(
            f"{{book-download}} names {kind!r}: one of {KINDS}, with book_downloads set",
            line=lineno)
        return [inliner.problematic(rawtext, rawtext, message)], [message]
    href = download_href(downloads, kind, env.docname)
    return [nodes.reference(rawtext, label, refuri=href)], []


def setup(app):
    app.add_config_value("book_downloads", {}, "html")
    # after sphinx-book-theme has made its buttons (501), before light_pages
    # reads the page (900)
    app.connect("html-page-context", page_context, priority=600)
    app.add_role("book-download", book_download_role)
    app.add_js_file(None, body=PRINT_OPENS_FOLDS)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
