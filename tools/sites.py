"""The class site and the teacher's pack: the book's two other audiences.

    python -m tools.sites class-site      # make class-site
    python -m tools.sites teacher-pack    # make teacher-pack

The public book (`make book`) is for readers on their own: the chapters
with their answers, and the pages around them. Two more builds come from
the same sources:

- the class site, `_build/class/html`, published beside the book at
  `/class/` by the Pages workflow: the student edition of each chapter
  (book/student/), the before-class page, the Colab page and the
  worksheets. Nothing with an answer: no chapter, no guide, no assessment.
  Its chapters' Colab badges open the student notebooks.
- the teacher's pack, `_build/teacher-pack.zip` (attached to each release
  by the release workflow): the teacher's guide, the logistics page, the
  teaching notes, the assessment and its answers, each lesson's run sheet
  (book/_generated/runsheet_N.html), each lesson's slides (reveal.js, of
  the sections it teaches, answers included, for the projector), and the
  graded exercises with their solutions and hidden tests (book/graded/). Every HTML page
  in it says `noindex`, and nothing in it is loaded from the internet:
  reveal.js is copied from node_modules (package.json pins it; `npm ci`).

Each is a Jupyter Book of its own, built from a folder written under
_build/ (CLASS_SRC, TEACHER_SRC): the pages copied from book/, with links to
pages that are not in that build made absolute, to the public book's
address (tools.links.book_url), and a _config.yml and _toc.yml of its own.
"""
import copy
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import yaml

from tools import links, plan
from tools.book import BOOK, ROOT, book_extension, toc_notebooks

BUILD = ROOT / "_build"
CLASS_SRC = BUILD / "class-src"
CLASS_HTML = BUILD / "class" / "html"
TEACHER_SRC = BUILD / "teacher-src"
PACK = BUILD / "teacher-pack"
PACK_ZIP = BUILD / "teacher-pack.zip"
REVEAL = ROOT / "node_modules" / "reveal.js"
SLIDES_TEMPLATE = Path(__file__).parent / "slides_template"
THEME = "white"     # its font is in reveal.js (others import Google's fonts)

CLASS_PAGES = ["before_class", "colab_in_a_classroom", "worksheet_nine_variants",
               "worksheet_ways_out", "worksheet_four_reports"]
TEACHER_PAGES = ["teachers_guide", "logistics", "teaching_notes", "assessment",
                 "assessment_answers", "worksheet_nine_variants", "worksheet_ways_out",
                 "worksheet_four_reports", "colab_in_a_classroom"]
NOINDEX = '<meta name="robots" content="noindex">'
# What makes the public book and the class site findable (_config.yml); the
# teacher's pack goes without.
FINDABLE_EXTENSIONS = ("sphinx_sitemap", "sphinxext.opengraph", "notfound.extension")
FINDABLE_SETTINGS = ("sitemap_", "ogp_", "notfound_")
CLASS_DESCRIPTION = ("The student notebooks, worksheets and before-class page of the "
                     "lessons on pruning nn.Linear in place without breaking autograd.")


class SiteError(RuntimeError):
    """A site cannot be built as asked."""


def chapter_titles():
    """{stem: title} of the chapters of the toc."""
    titles = {}
    for path in toc_notebooks():
        first = nbformat.read(path, as_version=4).cells[0].source
        titles[path.stem] = next((line[2:].strip() for line in first.splitlines()
                                  if line.startswith("# ")), path.stem)
    return titles


def public_url():
    return links.book_url(links.repository_url())


DOC = re.compile(r"\{doc\}`(?:([^`<]*?)\s*<)?([\w/]+)>?`")
TERM = re.compile(r"\{term\}`([^`<]+?)(?:\s*<([^`>]+)>)?`")
MD_PAGE = re.compile(r"\]\((\w+)\.(md|ipynb)(#[^)]*)?\)")


def rewrite(text, here, base, titles, names=None):
    """`text` of a page, with {doc} and Markdown links to pages not in `here`
    (a set of page names) made absolute links to the public book at `base`;
    chapter links go to `names[stem]` when given (the class site's student
    notebooks); {term} roles become links to the public glossary."""
    names = names or {}

    def doc(match):
        label, name = match[1], match[2]
        if name in names:
            return f"{{doc}}`{label or titles.get(name, name)} <{names[name]}>`"
        if name in here:
            return match[0]
        return f"[{label or titles.get(name, name)}]({base}book/{name}.html)"

    def term(match):
        shown, target = match[1], match[2] or match[1]
        return f"[{shown}]({base}book/glossary.html#{links.term_anchor(target)})"

    def page(match):
        name, anchor = match[1], match[3] or ""
        if name in names:
            return f"]({names[name]}.{'ipynb'}{anchor})"
        if name in here:
            return match[0]
        return f"]({base}book/{name}.html{anchor})"

    return MD_PAGE.sub(page, TERM.sub(term, DOC.sub(doc, text)))


def base_config(title, exclude):
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    config["title"] = title
    config["exclude_patterns"] = exclude
    config["only_build_toc_files"] = True
    # the book's PDFs and notebooks are the book's own downloads, not this site's
    config["sphinx"]["config"].pop("book_downloads", None)
    return config


def fresh_source(folder, pages, names=None):
    """A new source folder with the book's extension, static files, tools
    (which the extension reads), the student notebooks, and `pages` and the
    generated files they include, rewritten (`rewrite`); returns (the public
    book's address, {stem: chapter title})."""
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "book").mkdir(parents=True)
    for name in ("_ext", "_static", "_templates", "_generated"):
        shutil.copytree(BOOK / name, folder / "book" / name)
    shutil.copy(BOOK / "references.bib", folder / "book" / "references.bib")
    os.symlink(ROOT / "tools", folder / "tools")
    base, titles = public_url(), chapter_titles()
    (folder / "book" / "student").mkdir()
    for stem in titles:  # the teacher's pack's {student-colab} checks they exist
        shutil.copy(BOOK / "student" / f"{stem}.ipynb", folder / "book" / "student")
    for page in pages:
        shutil.copy(BOOK / f"{page}.md", folder / "book")
    included = (folder / "book" / "_generated").glob("*.md")
    for path in [*(folder / "book" / f"{page}.md" for page in pages), *included]:
        path.write_text(rewrite(path.read_text(), set(pages), base, titles, names))
    return base, titles


def jupyter_book(folder):
    """Build the Jupyter Book in `folder`, every warning an error."""
    command = [str(Path(sys.executable).parent / "jupyter-book"), "build", "--all",
               "--warningiserror", "--keep-going", "--quiet", str(folder)]
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if result.returncode:
        raise SiteError(f"jupyter-book failed on {folder}:\n{result.stdout[-4000:]}"
                        f"\n{result.stderr[-4000:]}")
    return folder / "_build" / "html"


def class_source(folder=CLASS_SRC):
    """The class site's sources: student notebooks, before-class, Colab page,
    worksheets, and an index; no page with an answer."""
    names = {path.stem: f"student/{path.stem}" for path in toc_notebooks()}
    base, titles = fresh_source(folder, CLASS_PAGES, names)
    chapters = "\n".join(f"- [{titles[s]}](book/student/{s}.ipynb)" for s in titles)
    (folder / "index.md").write_text(f"""---
myst:
  html_meta:
    "description lang=en": "{CLASS_DESCRIPTION}"
---

# Class site

The notebooks and handouts of the lessons on pruning `nn.Linear` in place
without breaking autograd. Start with [Before class](book/before_class.md).
Each chapter here is its *student edition*: open it in Colab from the badge
under its title, then *File > Save a copy in Drive*. The full book, for
reading on your own, is at <{base}>.

{chapters}
""")
    config = base_config(
        "Pruning nn.Linear in place: class site",
        [".venv/*", "_build/*"])
    # no references (13) and no nested pages in its sidebar (14) on the class
    # site: book/_ext/light_pages.py
    config["sphinx"]["config"]["light_pages_found_somewhere"] = [9, 10, 11, 12]
    # published at /class/ beside the book: its canonical links, sitemap,
    # cards and 404 page there (book/_ext/findable.py)
    config["sphinx"]["config"]["html_baseurl"] = f"{base}class/"
    (folder / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    toc = {"format": "jb-book", "root": "index", "parts": [
        {"caption": "Before class",
         "chapters": [{"file": "book/before_class"}, {"file": "book/colab_in_a_classroom"}]},
        {"caption": "The student notebooks",
         "chapters": [{"file": f"book/student/{s}"} for s in titles]},
        {"caption": "Worksheets",
         "chapters": [{"file": f"book/{p}"} for p in CLASS_PAGES if p.startswith("worksheet")]},
    ]}
    (folder / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    return folder


def build_class_site():
    built = jupyter_book(class_source())
    shutil.rmtree(CLASS_HTML, ignore_errors=True)
    shutil.copytree(built, CLASS_HTML)
    return CLASS_HTML


# --- slides ---------------------------------------------------------------

def mathml():
    """book/_ext/mathml.py (its TeX to MathML converter)."""
    return book_extension("mathml")


DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$([^$\n]+?)\$")
DETAILS = re.compile(r"<details>.*?</details>", re.S)
PROSE_ON_A_SLIDE = 60   # words: longer prose goes to the speaker notes


def with_mathml(text, convert):
    text = DISPLAY_MATH.sub(lambda m: convert(m[1], True), text)
    return INLINE_MATH.sub(lambda m: convert(m[1], False), text)


def markdown_cell(source, slide_type):
    cell = nbformat.v4.new_markdown_cell(source)
    cell.metadata["slideshow"] = {"slide_type": slide_type}
    return cell


def slide_notebook(notebook, convert, taught):
    """A chapter's title and its sections titled in `taught`, for reveal.js:
    a slide per `#`/`##` heading, a sub-slide per `###` and per code cell a
    reader sees, with its outputs (not folded, copied or setup cells, nor
    `<details>`); short prose a fragment, long prose speaker notes; formulas
    MathML (drawn by the browser, offline)."""
    notebook = copy.deepcopy(notebook)
    cells, section = [], None
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type == "code" and section in taught:
            hidden = ({"remove-input", "hide-input", "remove-cell"} & set(tags)
                      or "copy_of" in cell.metadata or section == "Setup")
            cell.metadata["slideshow"] = {"slide_type": "skip" if hidden else "subslide"}
            cells.append(cell)
            continue
        if cell.cell_type != "markdown":
            continue
        source = with_mathml(DETAILS.sub("", cell.source), convert)
        for block in re.split(r"\n(?=#{1,3} )", source):
            block = block.strip()
            if block.startswith("## "):
                section = plan.HEADING.match(block.partition("\n")[0])[1]
            if not block or (section and section not in taught):
                continue
            heading, _, rest = block.partition("\n") if block.startswith("#") else ("", "", block)
            if heading:
                kind = "subslide" if heading.startswith("### ") else "slide"
                cells.append(markdown_cell(heading, kind))
            rest = rest.strip()
            if rest:
                short = len(re.sub(r"<[^>]+>", " ", rest).split()) <= PROSE_ON_A_SLIDE
                cells.append(markdown_cell(rest, "fragment" if short else "notes"))
    notebook.cells = cells
    return notebook


def write_slides(folder):
    """Each lesson's slides, of the sections it teaches, in `folder` by reveal.js."""
    if not (REVEAL / "dist" / "reveal.js").is_file():
        raise SiteError(f"{REVEAL.relative_to(ROOT)} is missing: run `npm ci` "
                        "(package.json pins reveal.js)")
    folder.mkdir(parents=True, exist_ok=True)
    local = folder / "reveal.js"
    for name in ("reveal.js", "reveal.css", "reset.css", f"theme/{THEME}.css"):
        (local / "dist" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REVEAL / "dist" / name, local / "dist" / name)
    shutil.copytree(REVEAL / "dist" / "theme" / "fonts" / "source-sans-pro",
                    local / "dist" / "theme" / "fonts" / "source-sans-pro")
    (local / "plugin" / "notes").mkdir(parents=True)
    shutil.copy(REVEAL / "plugin" / "notes" / "notes.js", local / "plugin" / "notes")
    shutil.copy(REVEAL / "LICENSE", local / "LICENSE")
    convert = mathml().tex_to_mathml
    work = BUILD / "slides-src"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for lesson in plan.lessons(plan.read_plan(), plan.read_chapters()):
        notebook = nbformat.read(BOOK / f"{lesson.chapters[0].stem}.ipynb", as_version=4)
        notebook.cells = [cell for chapter in lesson.chapters for cell in slide_notebook(
            nbformat.read(BOOK / f"{chapter.stem}.ipynb", as_version=4), convert,
            {title for c, title, _ in lesson.taught() if c is chapter}).cells]
        for number, cell in enumerate(notebook.cells):    # unique in the lesson
            cell.id = f"slide-{number}"
        nbformat.write(notebook, work / f"lesson_{lesson.number}.ipynb")
    command = [str(Path(sys.executable).parent / "jupyter-nbconvert"), "--to", "slides",
               f"--TemplateExporter.extra_template_basedirs={SLIDES_TEMPLATE}",
               "--template", "offline", "--SlidesExporter.reveal_url_prefix=reveal.js",
               "--SlidesExporter.reveal_scroll=True", f"--SlidesExporter.reveal_theme={THEME}",
               "--output-dir", str(folder), *sorted(str(p) for p in work.glob("*.ipynb"))]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode:
        raise SiteError(f"nbconvert failed:\n{result.stderr[-4000:]}")
    return sorted(folder.glob("*.slides.html"))


# --- the teacher's pack ---------------------------------------------------

def teacher_source(folder=TEACHER_SRC):
    fresh_source(folder, TEACHER_PAGES)
    config = base_config("Teacher's pack: pruning nn.Linear in place", [".venv/*", "_build/*"])
    config["html"]["use_repository_button"] = False
    # no pictures (12), references (13) or nested pages in its sidebar (14)
    # in the pack: book/_ext/light_pages.py
    config["sphinx"]["config"]["light_pages_found_somewhere"] = [9, 10, 11]
    # not published (every page says noindex): no sitemap, Open Graph tags,
    # cards or 404 page (book/_ext/findable.py)
    config["sphinx"]["extra_extensions"] = [
        name for name in config["sphinx"].get("extra_extensions", [])
        if name not in FINDABLE_EXTENSIONS]
    config["sphinx"]["config"] = {
        key: value for key, value in config["sphinx"]["config"].items()
        if not key.startswith(FINDABLE_SETTINGS)}
    config["sphinx"]["config"]["findable"] = False
    (folder / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    toc = {"format": "jb-book", "root": "book/teachers_guide", "chapters": [
        {"file": f"book/{page}"} for page in TEACHER_PAGES[1:]]}
    (folder / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False))
    return folder


def with_noindex(folder):
    """Every HTML page under `folder` says `noindex` (the theme's template
    fragments under _static are not pages)."""
    for page in folder.rglob("*.html"):
        if "_static" in page.relative_to(folder).parts:
            continue
        text = page.read_text()
        if NOINDEX not in text:
            text, count = re.subn(r"<head>", f"<head>\n{NOINDEX}", text, count=1,
                                  flags=re.I)
            if not count:
                raise SiteError(f"{page}: no <head>")
            page.write_text(text)


def build_teacher_pack():
    built = jupyter_book(teacher_source())
    shutil.rmtree(PACK, ignore_errors=True)
    shutil.copytree(built, PACK)
    # beside the book's pages, not through Sphinx (which would rewrite them)
    (PACK / "runsheets").mkdir()
    for sheet in sorted((BOOK / "_generated").glob("runsheet_*.html")):
        shutil.copy(sheet, PACK / "runsheets" / sheet.name.replace("runsheet_", "lesson_"))
    write_slides(PACK / "slides")
    shutil.copytree(BOOK / "graded", PACK / "graded")
    (PACK / "index.html").write_text(
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'{NOINDEX}\n<meta http-equiv="Refresh" content="0; url=book/teachers_guide.html">\n'
        "<title>Teacher's pack</title>\n</head>\n<body>\n"
        '<p><a href="book/teachers_guide.html">The teacher\'s guide</a></p>\n</body>\n</html>\n')
    (PACK / "README.txt").write_text(
        "The teacher's pack. Open index.html (the teacher's guide) in a browser;\n"
        "run sheets: runsheets/lesson_N.html (print one page each);\n"
        "slides: slides/lesson_N.slides.html (press S for the speaker notes);\n"
        "graded/: each chapter's graded exercises (the student edition's), with\n"
        "their solutions and the grader's hidden tests (open them in Jupyter).\n"
        "Nothing here loads from the internet. Not for students: the assessment\n"
        "answers and every exercise's solution are in it.\n")
    with_noindex(PACK)
    PACK_ZIP.unlink(missing_ok=True)
    with zipfile.ZipFile(PACK_ZIP, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(PACK.rglob("*")):
            if path.is_file():
                archive.write(path, Path("teacher-pack") / path.relative_to(PACK))
    return PACK_ZIP


def main(argv):
    builders = {"class-site": build_class_site, "teacher-pack": build_teacher_pack}
    if len(argv) != 1 or argv[0] not in builders:
        print(f"usage: python -m tools.sites {{{','.join(builders)}}}", file=sys.stderr)
        return 2
    try:
        print(builders[argv[0]]().relative_to(ROOT))
    except SiteError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
