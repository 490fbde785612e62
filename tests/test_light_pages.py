"""Each rewrite of book/_ext/light_pages.py (and icons.py) stops the build
when what it rewrites is not there, or when its result is not whole; the
theme's layout, lighter (book/_templates/layout.html), leaves out what a page
does not need.

The inputs are real: the pinned themes' own files (from their installed
packages) and the pages of a tiny Sphinx project built once with the book's
theme and extensions, kept as Sphinx wrote them, before light_pages.py
rewrote them. Each test shows first that its rewrite works on the real input,
then plants a failure (what a new theme release could write instead) and
expects the error that names the rewrite and the file. One more build, with
the icon table planted empty, shows that such an error fails the build.
"""
import re
import shutil
import struct
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pydata_sphinx_theme
import pytest
import sphinx_book_theme

ROOT = Path(__file__).resolve().parent.parent
EXT = ROOT / "book" / "_ext"
PYDATA_STATIC = Path(pydata_sphinx_theme.__file__).parent / "theme" / "pydata_sphinx_theme" / "static"
BOOK_THEME_STATIC = (Path(sphinx_book_theme.__file__).parent / "theme" / "sphinx_book_theme"
                     / "static")

TEMPLATES = ROOT / "book" / "_templates"

# as Sphinx loads them (icons.py imports light_pages.py)
sys.path.insert(0, str(EXT))
import icons  # noqa: E402
import light_pages as lp  # noqa: E402


def png(width, height):
    """A blank PNG of this size."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    rows = b"".join(b"\0" + b"\xff" * 3 * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


CONF = f"""\
import shutil, sys
sys.path.insert(0, {str(EXT)!r})
project = "tiny"
extensions = ["light_pages", "mathml", "sphinx_design", "sphinx_copybutton", "sphinx_togglebutton"]
html_theme = "sphinx_book_theme"
html_static_path = ["_static"]
templates_path = [{str(TEMPLATES)!r}]
html_css_files = ["book.css"]
html_math_renderer = "mathml"

def keep_fresh(app, exception):
    # the output as Sphinx and the theme wrote it (pydata-sphinx-theme
    # writes pygments.css at build-finished), before light_pages.py (900)
    if exception is None:
        shutil.copytree(app.outdir, app.outdir.parent / "fresh")

def setup(app):
    app.connect("build-finished", keep_fresh, priority=800)
"""
INDEX = """\
Pruning owner/repository models
===============================

Call ``torch.nn.utils.prune`` as in [Ref]_.

.. code-block:: python

   layer.weight.data = layer.weight.data[:, keep]

=====  =====
name   shape
=====  =====
fc1    10x100
=====  =====

.. image:: picture.png
   :alt: a picture

.. toctree::

   part

.. raw:: html

   <details class="admonition hide above-input">
   <summary aria-label="Toggle hidden content">
   <p class="collapsed admonition-title">Show code cell source</p>
   </summary><pre>x = 1</pre></details>

.. [Ref] A reference, for the bibliography.
"""
# (the raw block: a folded cell as MyST-NB 1.4 writes it)
PART = "Part\n====\n\nText.\n\n.. toctree::\n\n   sub\n"
SUB = "Sub\n===\n\nMore text.\n"


def write_project(folder, conf=CONF):
    folder.mkdir(parents=True)
    (folder / "conf.py").write_text(conf)
    (folder / "index.rst").write_text(INDEX)
    (folder / "part.rst").write_text(PART)
    (folder / "sub.rst").write_text(SUB)
    (folder / "picture.png").write_bytes(png(40, 30))
    (folder / "_static").mkdir()
    (folder / "_static" / "book.css").write_text("p{margin:0}\n")


def sphinx_build(source, out):
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "-E", str(source), str(out)],
        capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny project built with light_pages.py: (its output, the same
    output as Sphinx wrote it, before the rewrites)."""
    folder = tmp_path_factory.mktemp("tiny")
    write_project(folder / "source")
    run = sphinx_build(folder / "source", folder / "html")
    assert run.returncode == 0, run.stdout + run.stderr
    return folder / "html", folder / "fresh"


@pytest.fixture()
def fresh(tiny, tmp_path):
    """A copy of the tiny project's output before the rewrites."""
    copy = tmp_path / "html"
    shutil.copytree(tiny[1], copy)
    return copy


@pytest.fixture()
def index(fresh):
    """(fresh's index.html, its text, a count for what the rewrites find)."""
    page = fresh / "index.html"
    return page, page.read_text(), Counter()


def fake_app(outdir, docs=3):
    return SimpleNamespace(builder=SimpleNamespace(format="html"), outdir=outdir,
                           env=SimpleNamespace(all_docs=dict.fromkeys(range(docs))),
                           config=SimpleNamespace(
                               light_pages_found_somewhere=list(lp.FOUND_SOMEWHERE)))


def fails(number, file, call, *args):
    """`call(*args)` raises the error of rewrite `number`, naming `file`."""
    with pytest.raises(lp.LightPagesError, match=rf"^rewrite {number} \(") as error:
        call(*args)
    assert str(file) in str(error.value)
    return str(error.value)


@pytest.fixture(scope="module")
def shapes():
    return icons.icon_shapes((PYDATA_STATIC / "scripts" / "fontawesome.js").read_text())


# -- the whole: the tiny build passes every check, and an error fails a build

def test_the_pinned_themes_fit_every_rewrite(tiny):
    html, fresh = tiny
    page = (html / "index.html").read_text()
    assert lp.PAGE_MARK in (fresh / "index.html").read_text()
    assert lp.PAGE_MARK not in page
    assert page.count("svg-inline--fa") >= 5 and not icons.undrawn_icons(page)
    assert 'loading="lazy"' in page and 'width="40" height="30"' in page
    assert 'role="listitem"' in page and "owner/<wbr>repository" in page
    assert 'aria-label="Pages under: Part"' in page
    assert lp.TAB_STOPS_OFF in (html / lp.THEME_JS).read_text()


def test_the_layout_loads_only_what_the_page_shows(tiny):
    """book/_templates/layout.html: no Font Awesome script, no preloads of
    scripts, the search's scripts and index on search.html only; its script
    (pages.js) in the head of every page."""
    html, _ = tiny
    search = (html / "search.html").read_text()
    for name in ("index.html", "part.html", "search.html"):
        page = (html / name).read_text()
        head = page[:page.index("</head>")]
        assert "fontawesome.js" not in page, name
        assert not re.search(r'<link\b[^>]*\bpreload\b', page), name
        assert head.count('addEventListener("beforeprint"') == 1, name
        assert head.count('matchMedia("(prefers-color-scheme: dark)")') == 1, name
        assert "styles/pydata-sphinx-theme.css" in head and ".pst-js-only" in head, name
        assert '<meta name="viewport"' in head, name
        # the theme's scripts, at the end of the page
        assert page.count("scripts/pydata-sphinx-theme.js") == 1, name
        if name != "search.html":
            assert not re.search(r"searchtools\.js|language_data\.js|searchindex\.js", page)
    for script in ("searchtools.js", "language_data.js", "searchindex.js"):
        assert search.count(script) == 1, script


def test_lighten_pages_does_what_the_build_did(tiny, fresh):
    lp.lighten_pages(fake_app(fresh), None)
    for page in ("index.html", "part.html", "sub.html", "search.html", "genindex.html"):
        assert (fresh / page).read_text() == (tiny[0] / page).read_text(), page
    # a second run (a build that wrote no page) changes nothing
    before = {p: p.read_bytes() for p in fresh.rglob("*") if p.suffix in (".html", ".css", ".js")}
    lp.lighten_pages(fake_app(fresh), None)
    assert before == {p: p.read_bytes() for p in before}


def test_an_empty_icon_table_stops_the_build(tmp_path):
    """The case that once passed silently: the icon table parsed to nothing."""
    planted = CONF.replace('project = "tiny"', 'project = "tiny"\nimport re, icons\n'
                           'icons.ICON_ENTRY = re.compile(r"(?!)")')
    write_project(tmp_path / "source", planted)
    run = sphinx_build(tmp_path / "source", tmp_path / "html")
    assert run.returncode != 0
    assert "rewrite 2 (icons drawn as inline SVG)" in run.stderr
    assert "fontawesome.js" in run.stderr


def test_a_rewrite_that_finds_nothing_in_any_page_stops_a_full_build(fresh):
    for page in fresh.glob("*.html"):
        page.write_text(lp.ANY_IMG.sub("", page.read_text()))
    fails(12, fresh, lp.lighten_pages, fake_app(fresh), None)


def test_a_page_without_the_mark_must_be_light_already(index):
    page, text, _ = index
    fails(2, page, lp.light_page, text.replace(lp.PAGE_MARK, ""), page, {})
    redirect = '<meta http-equiv="Refresh" content="0; url=book/intro.html" />'
    assert lp.light_page(redirect, page.parent / "redirect.html", {}) == redirect


# -- one test per rewrite: it works on the real input, and fails loudly

def test_2_icons(index, shapes):
    assert {pack for pack, _ in shapes} == {"fas", "far", "fab"} and len(shapes) > 1000
    page, text, _ = index
    drawn = icons.inline_icons(text, page, shapes)
    assert drawn.count("svg-inline--fa") == len(icons.ICON_ELEMENT.findall(text)) >= 5
    script = (PYDATA_STATIC / "scripts" / "fontawesome.js").read_text()
    # a script written otherwise: no shapes read for a pack, or none at all
    fails(2, icons.FONTAWESOME_JS, icons.icon_shapes, script.replace('("fab",', '("brands",'))
    fails(2, icons.FONTAWESOME_JS, icons.icon_shapes, "")
    # an icon that the script has no shape for
    unknown = text.replace("fa-bars", "fa-not-an-icon", 1)
    assert "fa-not-an-icon" in fails(2, page, icons.inline_icons, unknown, page, shapes)
    # an icon element that the pattern does not match (not empty)
    filled = re.sub(r'(<(i|span) class="fa-solid fa-bars">)\s*(</\2>)', r"\1menu\3", text, count=1)
    assert filled != text
    fails(2, page, icons.inline_icons, filled, page, shapes)
    # no icon at all
    fails(2, page, icons.inline_icons, icons.ICON_ELEMENT.sub("", text), page, shapes)
    # a shape without a path
    hollow = {key: (w, h, "") for key, (w, h, _) in shapes.items()}
    assert 'd=""' in icons.icon_svg(icons.ICON_ELEMENT.search(text), hollow)
    fails(2, page, icons.inline_icons, text, page, hollow)


def copy_theme_fonts(outdir):
    files = [(PYDATA_STATIC if "pydata" in name else BOOK_THEME_STATIC, name)
             for name in icons.THEME_CSS]
    for static, name in files + [(PYDATA_STATIC, font) for font in icons.FONT_SUBSETS.values()]:
        (outdir / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(static / name.removeprefix("_static/"), outdir / name)


def test_3_icon_font_subsets(tmp_path):
    from fontTools.ttLib import TTFont

    copy_theme_fonts(tmp_path)
    icons.write_font_subsets(tmp_path)
    characters = icons.css_characters(tmp_path)
    held = set()
    for target in icons.FONT_SUBSETS:
        held |= set(TTFont(tmp_path / target).getBestCmap())
    assert characters <= held and len(characters) >= 10
    # a font missing
    solid = tmp_path / icons.FONT_SUBSETS["_static/fonts/fa-solid-subset.woff"]
    kept = solid.read_bytes()
    solid.unlink()
    fails(3, solid, icons.write_font_subsets, tmp_path)
    solid.write_bytes(kept)
    # the theme's stylesheet names its icons otherwise
    css = tmp_path / icons.THEME_CSS[0]
    css.write_text(css.read_text().replace("--pst-icon-", "--pst-glyph-"))
    fails(3, css, icons.write_font_subsets, tmp_path)
    # a character that neither font has
    css.write_text(css.read_text().replace("--pst-glyph-", "--pst-icon-")
                   + 'html{--pst-icon-x:"\\f00f"}')
    fails(3, "U+F00F", icons.write_font_subsets, tmp_path)


def test_4_icon_font_rules(tmp_path):
    css = (PYDATA_STATIC / "styles" / "pydata-sphinx-theme.css").read_text()
    lighter = icons.without_icon_font_rules(css, "theme.css")
    assert len(lighter) < len(css) * 0.85 and icons.ICON_RULES_MARK in lighter
    assert icons.without_icon_font_rules(lighter) == lighter  # once only
    fails(4, "theme.css", icons.without_icon_font_rules,
          css.replace(":before{content:", "::before{content:"), "theme.css")
    # some rules written another way: left behind
    fails(4, "theme.css", icons.without_icon_font_rules,
          css.replace(".fa-github:before{", ".fa-github:before {", 1), "theme.css")


def scripts(*names):
    """A page's list of scripts as Sphinx gives it: `names` under _static/,
    then an inline script."""
    from sphinx.builders.html._assets import _JavaScript

    inline = _JavaScript(None, body="let x = 1;")
    return [_JavaScript(f"_static/{name}") for name in names] + [inline]


def test_7_head_scripts_deferred():
    names = ("documentation_options.js", *lp.DEFERRED)
    deferred = lp.deferred_scripts(scripts(*names), "page.html")
    assert [js.attributes.get("defer") for js in deferred] == \
        [None] + ["defer"] * len(lp.DEFERRED) + [None]
    assert [js.filename for js in deferred] == [js.filename for js in scripts(*names)]
    without = [js for js in scripts(*names) if "doctools" not in str(js.filename)]
    assert "doctools.js" in fails(7, "page.html", lp.deferred_scripts, without, "page.html")
    old_style = [str(js.filename) if "copybutton" in str(js.filename) else js
                 for js in scripts(*names)]
    fails(7, "page.html", lp.deferred_scripts, old_style, "page.html")


def test_16_no_search_highlighting():
    names = ("doctools.js", "sphinx_highlight.js")
    kept = [js.filename for js in lp.without_search_highlight(scripts(*names), "page.html")]
    assert kept == ["_static/doctools.js", None]
    # search.html's search script is told that highlighting is off
    on_search = lp.without_search_highlight(scripts(*names), "search.html")
    assert [js.filename for js in on_search] == ["_static/doctools.js", None, None]
    assert on_search[-1].attributes["body"] == lp.SEARCH_HIGHLIGHT_OFF
    fails(16, "page.html", lp.without_search_highlight, scripts("doctools.js"), "page.html")


def test_17_folds_named_by_their_text(index):
    page, text, found = index
    assert lp.FOLD_LABEL in text
    named = lp.folds_named_by_their_text(text, page, found)
    assert "Toggle hidden content" not in named and found[17] == 1
    fails(17, page, lp.folds_named_by_their_text,
          text.replace(lp.FOLD_LABEL, '<summary  aria-label="Toggle hidden content">'),
          page, found)
    # the theme's search field button, named "Search" while it shows "Search Ctrl+K"
    assert 'class="btn search-button-field' in text and not lp.SEARCH_FIELD_LABELLED.search(named)
    fails(17, page, lp.folds_named_by_their_text,
          text.replace('aria-label="Search"', 'aria-label="Find"'), page, found)


def test_8_the_themes_tab_stops():
    script = (PYDATA_STATIC / "scripts" / "pydata-sphinx-theme.js").read_text()
    lighter = lp.tab_stops_when_laid_out(script, "theme.js")
    assert lighter.count(lp.TAB_STOPS_OFF) == 1
    assert len(script) - len(lighter) < 100  # the call only
    fails(8, "theme.js", lp.tab_stops_when_laid_out,
          script.replace('"complete"===document.readyState', "document.readyState"), "theme.js")
    fails(8, "theme.js", lp.tab_stops_when_laid_out,
          script.replace("e.scrollWidth>e.clientWidth", "e.offsetWidth<e.scrollWidth"), "theme.js")
    call = lp.TAB_STOPS_AT_LOAD.search(script).group(0)
    fails(8, "theme.js", lp.tab_stops_when_laid_out, script + ";" + call, "theme.js")


def test_9_boxes_that_scroll_focusable(index):
    page, text, found = index
    lighter = lp.focusable_boxes(text, page, found)
    assert found[9] >= 2 and '<pre tabindex="0"' in lighter
    assert 'class="pst-scrollable-table-container"' in lighter
    fails(9, page, lp.focusable_boxes,
          text.replace('<div class="pst-scrollable-table-container"',
                       '<div id="t" class="pst-scrollable-table-container"'), page, found)


def test_10_headings(index):
    page, text, found = index
    assert "owner/<wbr>repository" in lp.breakable_headings(text, page, found) and found[10]
    fails(10, page, lp.breakable_headings, text.replace("</h1>", "</H1>"), page, found)
    fails(10, page, lp.breakable_headings,
          text.replace("Pruning owner/repository", "Pruning <wbr>owner/repository"), page, found)


def test_11_inline_code(index):
    page, text, found = index
    assert "torch<wbr>.nn<wbr>.utils" in lp.breakable_inline_code(text, page, found)
    assert found[11]
    fails(11, page, lp.breakable_inline_code,
          text.replace('class="docutils literal notranslate"', 'class="literal docutils"'),
          page, found)
    # a break after a dot, however it got there, splits an attribute from its dot
    fails(11, page, lp.breakable_inline_code,
          text.replace("torch.nn.utils", "torch.<wbr>nn.utils"), page, found)


def test_12_images(fresh, index):
    page, text, found = index
    assert 'width="40" height="30"' in lp.sized_lazy_images(text, page, found) and found[12]
    image = re.search(r'src="(_images/[^"]+)"', text)[1]
    fails(12, page, lp.sized_lazy_images, text.replace(image, "_images/gone.png"), page, found)
    (fresh / "_images" / "photo.jpg").write_bytes(b"\xff\xd8\xff")
    fails(12, page, lp.sized_lazy_images, text.replace(image, "_images/photo.jpg"), page, found)
    fails(12, page, lp.sized_lazy_images, text.replace("<img ", "<IMG "), page, found)


def test_13_references(index):
    page, text, found = index
    lighter = lp.references_as_list_items(text, page, found)
    assert found[13] == 1 and 'class="citation" id="ref" role="listitem"' in lighter
    fails(13, page, lp.references_as_list_items,
          text.replace('role="doc-biblioentry"', "role='doc-biblioentry'"), page, found)


def test_14_sidebar_toggles(index):
    page, text, found = index
    assert 'aria-label="Pages under: Part"' in lp.named_toggles(text, page, found)
    assert found[14] == 1
    fails(14, page, lp.named_toggles,
          re.sub(r"(</a><details[^>]*>)<summary>", r"\1<summary class='t'>", text),
          page, found)

