"""The book to take away: a PDF of the whole book and one of each page, and
a zip of the notebooks in both editions.

    python -m tools.downloads pdf [--html _build/html] [--pages book/01_x ...]
    python -m tools.downloads zip [--html _build/html]

`make pdf` and `make notebooks-zip` run these; both write into the built
site's folder that `book_downloads` in _config.yml names, with the file
names given there (book/_ext/downloads.py links them from every page).

The PDFs are printed by the system's Chromium (CHROMIUM, or chromium,
chromium-browser, google-chrome on the PATH; nothing is downloaded) from
the built HTML, served as a web host sends it (tools/serve.py), each page
as a reader's browser prints it: print media, the page's own `beforeprint`
listener run (it opens every fold: solutions, folded code), every picture
loaded first (they load lazily on screen), A4. The book's PDF is a cover
with the contents (each page's title and the sheet it starts on), then
every page of the table of contents in order; its outline (the PDF's
bookmarks) holds each page, with that page's headings under it.

The zip holds every chapter as the book runs it (`book/NN_name.ipynb`,
with the answers) and as students get it (`book/student/NN_name.ipynb`),
at those paths, with a fixed date on each entry (the same notebooks give the
same zip).
"""
import argparse
import html
import io
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

import yaml

from tools.book import BOOK, ROOT, toc_entries, toc_notebooks

HTML = ROOT / "_build" / "html"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
# A reader's desktop window: the page's layout for a wide screen, then print.
VIEWPORT = {"width": 1100, "height": 900}
PAPER = {"format": "A4", "margin": {"top": "14mm", "bottom": "16mm",
                                    "left": "14mm", "right": "14mm"}}
# One timeout for a page to load, its pictures, and its printing (ms).
PAGE_TIMEOUT_MS = 60_000
ZIP_DATE = (2026, 1, 1, 0, 0, 0)

OPEN_FOR_PRINT = """async () => {
  window.dispatchEvent(new Event("beforeprint"));
  await Promise.all(Array.from(document.images).map((img) => {
    img.loading = "eager";
    return img.decode().catch(() => null);
  }));
  await document.fonts.ready;
  return Array.from(document.querySelectorAll("article details")).filter((d) => !d.open).length;
}"""


class DownloadsError(RuntimeError):
    """What a download needs is missing (no Chromium, no built book, ...)."""


def settings(config_file=ROOT / "_config.yml"):
    """`book_downloads` of _config.yml: {'folder', 'book', 'notebooks'}."""
    config = yaml.safe_load(Path(config_file).read_text())
    downloads = ((config.get("sphinx") or {}).get("config") or {}).get("book_downloads")
    if not downloads or not all(downloads.get(key) for key in ("folder", "book", "notebooks")):
        raise DownloadsError(f"{config_file}: sphinx.config.book_downloads needs a folder, "
                             "a book and a notebooks file name")
    return downloads


def chromium():
    """The system Chromium's path, or an error that says how to get one."""
    found = os.environ.get("CHROMIUM") or next(
        (shutil.which(name) for name in CHROMIUM_NAMES if shutil.which(name)), None)
    if not found or not Path(found).exists():
        raise DownloadsError("no Chromium found (set CHROMIUM, or install one: "
                             "Debian: apt-get install chromium)")
    return found


def page_pdf_name(entry):
    """'book/01_x' -> '01_x.pdf' (book/_ext/downloads.py links the same name)."""
    return f"{Path(entry).name}.pdf"


def print_page(browser, url, target):
    """Print the page at `url` to the PDF `target` as a reader's browser
    prints it; returns its title."""
    context = browser.new_context(viewport=VIEWPORT)
    try:
        page = context.new_page()
        page.set_default_timeout(PAGE_TIMEOUT_MS)
        response = page.goto(url, wait_until="load")
        if response is None or not response.ok:
            raise DownloadsError(f"{url} did not load "
                                 f"({response.status if response else 'no response'})")
        page.emulate_media(media="print")
        closed = page.evaluate(OPEN_FOR_PRINT)
        if closed:
            raise DownloadsError(f"{url}: {closed} folds still closed after beforeprint")
        title = page.evaluate("() => (document.querySelector('article h1') || "
                              "{textContent: document.title}).textContent.trim()")
        page.pdf(path=str(target), print_background=True, outline=True, tagged=True,
                 **PAPER)
        return title.rstrip("#").strip()
    finally:
        context.close()


def print_pages(browser, site, entries, folder):
    """Each page of `entries` (toc entries) printed into `folder`;
    [(entry, title, pdf)] in order."""
    folder.mkdir(parents=True, exist_ok=True)
    printed = []
    for entry in entries:
        target = folder / page_pdf_name(entry)
        title = print_page(browser, f"{site}{entry}.html", target)
        printed.append((entry, title, target))
    return printed


def cover_html(book_title, contents):
    """The cover and contents page: `contents` is [(title, first sheet)]."""
    rows = "\n".join(f"<li><span>{html.escape(title)}</span><b>{sheet}</b></li>"
                     for title, sheet in contents)
    return f"""<!doctype html><html lang="en"><meta charset="utf-8">
<title>{html.escape(book_title)}</title>
<style>
  body {{ font: 12pt/1.45 sans-serif; color: #111; }}
  h1 {{ font-size: 22pt; margin: 30mm 0 6mm; }}
  p {{ color: #444; }}
  h2 {{ font-size: 14pt; margin-top: 14mm; }}
  ol {{ list-style: none; padding: 0; }}
  li {{ display: flex; gap: 1em; border-bottom: 1px dotted #999; padding: 1.2mm 0; }}
  li span {{ flex: 1; }}
</style>
<h1>{html.escape(book_title)}</h1>
<p>Printed from the book's web pages. Each chapter runs as a notebook:
the notebooks come as a zip beside this PDF.</p>
<h2>Contents</h2>
<p>Sheet numbers are those of this PDF.</p>
<ol>
{rows}
</ol></html>"""


def book_pdf(browser, printed, target, book_title, work):
    """The whole book: a cover with the contents, then each printed page,
    with an outline (each page, its headings under it)."""
    from pypdf import PdfReader, PdfWriter

    sheets = [len(PdfReader(pdf).pages) for _, _, pdf in printed]
    cover = work / "cover.pdf"

    def render_cover(cover_sheets):
        first, contents = cover_sheets + 1, []
        for (_, title, _), count in zip(printed, sheets):
            contents.append((title, first))
            first += count
        (work / "cover.html").write_text(cover_html(book_title, contents))
        context = browser.new_context()
        try:
            page = context.new_page()
            page.goto((work / "cover.html").as_uri())
            page.pdf(path=str(cover), **PAPER)
        finally:
            context.close()
        return len(PdfReader(cover).pages)

    cover_sheets = render_cover(1)
    if cover_sheets != 1:  # a long contents: number the sheets again
        render_cover(cover_sheets)
    writer = PdfWriter()
    writer.append(str(cover), outline_item="Contents", import_outline=False)
    for (_, title, pdf) in printed:
        writer.append(str(pdf), outline_item=title, import_outline=True)
    writer.add_metadata({"/Title": book_title})
    with open(target, "wb") as out:
        writer.write(out)
    return target


def launch(playwright):
    return playwright.chromium.launch(executable_path=chromium(), args=FLAGS)


def make_pdfs(html_dir=HTML, entries=None, config_file=ROOT / "_config.yml"):
    """`make pdf`: each page's PDF and, when every page is printed, the book's."""
    from playwright.sync_api import sync_playwright

    from tools.serve import serve

    html_dir = Path(html_dir)
    if not (html_dir / "index.html").is_file():
        raise DownloadsError(f"{html_dir} holds no built book: run `make book` first")
    downloads = settings(config_file)
    folder = html_dir / downloads["folder"]
    whole = entries is None
    entries = list(toc_entries()) if whole else list(entries)
    missing = [entry for entry in entries if not (html_dir / f"{entry}.html").is_file()]
    if missing:
        raise DownloadsError(f"pages not built: {missing}")
    names = [page_pdf_name(entry) for entry in entries]
    if len(set(names)) != len(names):
        raise DownloadsError(f"two pages would print to the same file: {sorted(names)}")
    book_title = yaml.safe_load(Path(config_file).read_text())["title"]
    server = serve(html_dir)
    try:
        with sync_playwright() as playwright, tempfile.TemporaryDirectory() as work:
            browser = launch(playwright)
            try:
                printed = print_pages(browser, server.url, entries, folder)
                for _, title, pdf in printed:
                    print(f"{pdf.relative_to(html_dir)}: {title}")
                if whole:
                    target = book_pdf(browser, printed, folder / downloads["book"],
                                      book_title, Path(work))
                    print(f"{target.relative_to(html_dir)}: the whole book")
            finally:
                browser.close()
    finally:
        server.shutdown()
    return folder


def student_notebooks():
    """The student edition of each chapter that has one (book/student/)."""
    return sorted((BOOK / "student").glob("*.ipynb"))


def notebooks_zip(target, book=None, student=None):
    """The zip of both editions at `target`: each notebook at its path in
    the repository (book/NN.ipynb, book/student/NN.ipynb)."""
    book = [Path(p) for p in (toc_notebooks() if book is None else book)]
    student = [Path(p) for p in (student_notebooks() if student is None else student)]
    if not book or not student:
        raise DownloadsError("no notebooks to zip (book or student edition missing)")
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in book + student:
            name = path.resolve().relative_to(ROOT).as_posix()
            entry = zipfile.ZipInfo(name, date_time=ZIP_DATE)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, path.read_bytes())
    target.write_bytes(buffer.getvalue())
    return target


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("pdf", "zip"))
    parser.add_argument("--html", type=Path, default=HTML, help="the built book")
    parser.add_argument("--pages", nargs="+", metavar="ENTRY",
                        help="only these toc entries (book/01_x), and no book PDF")
    args = parser.parse_args(argv)
    try:
        if args.what == "pdf":
            make_pdfs(args.html, args.pages)
        else:
            if args.pages:
                parser.error("--pages is for pdf")
            downloads = settings()
            target = notebooks_zip(args.html / downloads["folder"] / downloads["notebooks"])
            print(f"{target}: {len(zipfile.ZipFile(target).namelist())} notebooks")
    except DownloadsError as error:
        print(f"downloads: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
