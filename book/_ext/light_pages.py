"""What a page loads: only what it shows (phones on slow networks).

What a template or a setting can do is done there: book/_templates/layout.html
leaves out of every page's head the Font Awesome script, the preloads of the
theme's scripts and (but on search.html) the site search's scripts and index,
and its script (book/_templates/pages.js) settles the colour theme before the
first paint, prints in light colours, closes the phone's drawer on a tap on a
link, and sets the tab stops of the boxes that scroll (8); formulas are MathML
(mathml.py). The rest is rewritten when the book is built, here and in
icons.py (2 to 4: the theme's icons). Each rewrite checks that it found what
it rewrites and that its result is whole, and stops the build otherwise
(LightPagesError, naming the rewrite, the file and what is missing): a new
release of the themes (pinned in requirements.txt), of Sphinx or of docutils
that writes something else fails the build instead of leaving, say, every
icon blank. Rewrites 7 and 16 edit each page's list of scripts in Sphinx's
`html-page-context` event; the others edit what Sphinx wrote
(`build-finished`: the body's HTML, and the theme's script, copied at the end).

In every page that Sphinx writes (a page not written by this build, left
from an earlier one, is checked to be light already):

7. The extensions' scripts in the head run after the page is parsed
   (`defer`, in the same order), so that the text shows before they run;
   not on search.html, whose search scripts run in the head. Checked: each
   script of DEFERRED is in the page's list of scripts, and each is deferred.
8. pydata-sphinx-theme gives each box that may scroll `tabindex` 0 if it
   scrolls, -1 if not, at the `load` event: it reads the size of every box
   of the page, which lays out every cell that `content-visibility`
   (book.css) leaves for later: a single task of 1.2 s in Lighthouse's phone
   profile on chapter 5. The theme's script loses that measurement (pages.js
   applies the same rule with a ResizeObserver, when the browser lays a box
   out). Checked: the call at `load` and the rule it applies are found where
   expected, and exactly that call is replaced.
9. Every such box is written focusable (`tabindex="0"`, the theme's value
   for a box that scrolls) until pages.js settles it. Checked: no `<pre>`,
   output or table box is left without a `tabindex`.
10. Headings break after a slash ("owner/repository" is one long word
   otherwise), not in the middle of a word. Checked: every heading was
   matched, and no slash of a heading's text is left without `<wbr>`.
11. Long names in inline code break before a dot (the dot starts the
   next line, as in `layer.weight` / `.data`: an attribute such as `.data`
   is never split after its dot) and after a slash, underscore or comma
   (`<wbr>`). Checked: every `<code>` literal was matched, and no break is
   left after a dot.
12. Images: their size written on the tag (no jump when they arrive) and
   loaded lazily, when the reader scrolls near them; a graph wider than a
   phone's screen says that it scrolls (class `wide-on-phone`, book.css).
   Checked: every image is lazy, and every image of the book's own files
   exists and has its size.
13. The references' entries are items of their list for assistive
   technology: docutils gives each `role="doc-biblioentry"` inside a
   `role="list"`, which ARIA 1.2 deprecates and axe-core reports as a
   critical violation (aria-required-children); they become `listitem`s.
   Checked: no `doc-biblioentry` is left, and every citation is a listitem.
14. The sidebar's toggle of a page with pages under it (a `<summary>`
   holding only the chevron, hidden from assistive technology) is named
   after that page ("Pages under: Teacher's guide ..."): axe-core reports a
   summary without a name as serious (summary-name). Checked: every
   toctree toggle's summary is named.
16. No search highlighting: Sphinx's sphinx_highlight.js marks, on the
   next page the reader opens (even much later), every piece of text that
   holds a word of the last search ("an" inside "and"). It is dropped from
   every page's list of scripts; search.html, whose search script asks
   whether it is on, is told it is off. Checked: the script was in the
   list and is no longer.
17. Controls named by the text they show: MyST-NB's toggle of a folded
   cell ("Show code cell source") loses `aria-label="Toggle hidden
   content"`, and the theme's search field button ("Search Ctrl+K") its
   `aria-label="Search"`, which name them otherwise (axe-core's rule
   label-content-name-mismatch: a reader who speaks the label shown cannot
   reach it). Checked: no such label is left.

Rewrites 9 to 14 and 17 depend on what a page holds; a build that writes every
page also checks that each of them found something in some page (the
config value `light_pages_found_somewhere`: a smaller site, such as the
teacher's pack, without pictures or references, names fewer). (Numbers 1, 5,
6 and 15 were rewrites that layout.html and pages.js replaced.)
"""
import re
import struct
from collections import Counter
from pathlib import Path

from sphinx.errors import SphinxError

REWRITES = {
    2: "icons drawn as inline SVG",
    3: "icon font subsets",
    4: "icon font rules dropped from the theme's stylesheet",
    7: "head scripts deferred",
    8: "the theme's tab-stop measurement at load",
    9: "boxes that scroll made focusable",
    10: "headings break after a slash",
    11: "inline code breaks before a dot, after / _ and ,",
    12: "images sized and lazy",
    13: "references as list items",
    14: "sidebar toggles named",
    16: "search highlighting off",
    17: "controls named by the text they show",
}


class LightPagesError(SphinxError, ValueError):
    """A rewrite found nothing to rewrite, or left its work half done: the
    theme (or Sphinx, or docutils) writes something else now. Stops the
    build (a SphinxError raised in an event handler is not turned into a
    warning)."""
    category = "light_pages.py: a rewrite does not fit what the theme wrote"


def failure(number, file, what):
    return LightPagesError(f"rewrite {number} ({REWRITES[number]}): {file}: {what}")


# Written into every page's head by `html-page-context`, removed with the
# rewrites: a page that holds it was written by this build.
PAGE_MARK = '\n<meta name="light-pages" content="not lightened yet" />'

# Head scripts that nothing before the end of parsing needs (documentation_
# options.js stays: an inline script right after it sets its pagename).
DEFERRED = ("doctools.js", "clipboard.min.js",
            "copybutton.js", "sphinx-book-theme.js", "togglebutton.js",
            "design-tabs.js")
# Search highlighting (16): the script dropped, and what search.html's
# searchtools.js reads to know whether it is on.
SEARCH_HIGHLIGHT = "sphinx_highlight.js"
SEARCH_HIGHLIGHT_OFF = "const SPHINX_HIGHLIGHT_ENABLED = false;"
# MyST-NB's toggle of a folded cell (17).
FOLD_LABEL = '<summary aria-label="Toggle hidden content">'
SEARCH_FIELD_LABEL = re.compile(r'(<button class="btn search-button-field\b[^>]*?) aria-label="Search"')
SEARCH_FIELD_LABELLED = re.compile(r'<button class="btn search-button-field\b[^>]*\baria-label=')
# The theme's tab stops (8): the boxes it measures, its call of the
# measurement at `load` (pages.js sets them as boxes are laid out), and the rule.
THEME_JS = "_static/scripts/pydata-sphinx-theme.js"
TAB_STOPS_AT_LOAD = re.compile(
    r'"complete"===document\.readyState\?(\w+)\(\):window\.addEventListener\("load",\1\)')
TAB_STOPS_RULE = "e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1"
TAB_STOPS_OFF = 'void 0/* light_pages.py: tab stops set as boxes are laid out */'
FOCUSABLE_BOX = re.compile(
    r'<(pre|div(?= class="(?:output|pst-scrollable-table-container)\b))\b(?![^>]*\btabindex=)')
# A box of (9) left without a tab stop, however its attributes are written.
UNFOCUSABLE_BOX = re.compile(
    r'<(?:pre\b|div\b(?=[^>]*\bclass="(?:output|pst-scrollable-table-container)\b))'
    r'(?![^>]*\btabindex=)[^>]*>')
IMG = re.compile(r'<img\b([^>]*?)\s*/?>')
ANY_IMG = re.compile(r'<img\b[^>]*>', re.I)
# What a graph (an SVG in a cell output) may be wide on a 390-px phone:
# book.css shows it at 3/4 of its size, in a column of 390 - 2 x 16 px.
PHONE_COLUMN_PX, PHONE_GRAPH_ZOOM = 358, 0.75
HEADING = re.compile(r'(<h[1-6]\b[^>]*>)(.*?)(</h[1-6]>)', re.S)
ANY_HEADING = re.compile(r'<h[1-6]\b', re.I)
SLASH_TO_BREAK = re.compile(r'/(?=[^<>\s])(?![^<]*>)')
INLINE_CODE = re.compile(r'(<code class="docutils literal notranslate">)(.*?)(</code>)', re.S)
ANY_LITERAL = re.compile(r'<code\b[^>]*\bliteral\b', re.I)
BREAK_AFTER = re.compile(r'(?<=[/_,])(?=[^<>\s&;])(?![^<]*>)')
# before a dot that ends a name (not a leading dot, as in `.data`, nor one of "..")
BREAK_BEFORE = re.compile(r'(?<=[\w)\]])(?=\.[^<>\s&;.])(?![^<]*>)')
BREAK_AFTER_DOT = re.compile(r'\.<wbr>')
TOC_TOGGLE = re.compile(
    r'(<a class="[^"]*reference internal[^"]*" href="[^"]*">)((?:(?!</a>).)*)'
    r'(</a><details[^>]*>)<summary>', re.S)
TOCTREE_TOGGLE = 'class="toctree-toggle"'
NAMED_TOGGLE = '<summary aria-label="Pages under: '
BIBLIOENTRY = 'role="doc-biblioentry"'
CITATION_NOT_ITEM = re.compile(r'<div\b(?=[^>]*\bclass="citation")(?![^>]*\brole="listitem")[^>]*>')
TAG = re.compile(r"<[^>]+>")


def image_size(file):
    """(width, height) in CSS px of a PNG or SVG file, or None."""
    data = file.read_bytes()[:4096]
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", data[16:24])
    if file.suffix == ".svg":
        text = data.decode("utf-8", "replace")
        svg = re.search(r"<svg\b[^>]*>", text)
        if not svg:
            return None
        sizes = []
        for key in ("width", "height"):
            value = re.search(rf'\b{key}="([\d.]+)(pt|px)?"', svg.group(0))
            if not value:
                return None
            sizes.append(round(float(value[1]) * (4 / 3 if value[2] == "pt" else 1)))
        return tuple(sizes)
    return None


def sized_lazy_image(match, page):
    """One image, lazy and with its size (12); an error for an image of the
    book's own whose file is missing or whose size cannot be read."""
    attributes = match.group(1)
    if "loading=" not in attributes:
        attributes += ' loading="lazy" decoding="async"'
    src = re.search(r'\bsrc="([^"]+)"', attributes)
    if not src:
        raise failure(12, page, f"an image without a src: {match.group(0)}")
    if "://" in src[1] or src[1].startswith("data:"):
        return f"<img{attributes} />"
    file = (page.parent / src[1].split("?")[0]).resolve()
    if not file.is_file():
        raise failure(12, page, f"the image {src[1]} is not in the build")
    size = image_size(file)
    if size is None and "width=" not in attributes:
        raise failure(12, page, f"no size read from the image {src[1]} (PNG and SVG are read)")
    if size and "width=" not in attributes:
        attributes += f' width="{size[0]}" height="{size[1]}"'
    if size and file.suffix == ".svg" and "_images/" in src[1] and \
            size[0] * PHONE_GRAPH_ZOOM > PHONE_COLUMN_PX and "wide-on-phone" not in attributes:
        # it scrolls on a phone: it takes the keyboard's focus, so that the
        # arrow keys scroll it
        attributes += ' class="wide-on-phone" tabindex="0"'
    return f"<img{attributes} />"


def sized_lazy_images(text, page, found):
    """Every image of the page lazy, with its size (12)."""
    images = len(ANY_IMG.findall(text))
    text, count = IMG.subn(lambda m: sized_lazy_image(m, page), text)
    if count != images:
        raise failure(12, page, f"{count} of the page's {images} images matched IMG")
    lazy = [tag for tag in ANY_IMG.findall(text) if "loading=" not in tag]
    if lazy:
        raise failure(12, page, f"images left without loading=: {lazy[:3]}")
    found[12] += count
    return text


def breakable_heading(match):
    """A heading with a line-break opportunity after each slash of its text
    (an "owner/repository" is one long word otherwise)."""
    if "<wbr>" in match.group(2):
        return match.group(0)
    inner = SLASH_TO_BREAK.sub("/<wbr>", match.group(2))
    return match.group(1) + inner + match.group(3)


def breakable_headings(text, page, found):
    """Every heading of the page breakable after a slash (10)."""
    headings = len(ANY_HEADING.findall(text))
    text, count = HEADING.subn(breakable_heading, text)
    if count != headings:
        raise failure(10, page, f"{count} of the page's {headings} headings matched HEADING")
    unbroken = [m.group(0)[:120] for m in HEADING.finditer(text)
                if SLASH_TO_BREAK.search(m.group(2))]
    if unbroken:
        raise failure(10, page, f"headings left with a slash that cannot break: {unbroken[:3]}")
    found[10] += count
    return text


def breakable_code(match):
    """Inline code with a line-break opportunity before a dot (not a
    leading one) and after / _ and ,"""
    if "<wbr>" in match.group(2):
        return match.group(0)
    code = BREAK_AFTER.sub("<wbr>", BREAK_BEFORE.sub("<wbr>", match.group(2)))
    return match.group(1) + code + match.group(3)


def breakable_inline_code(text, page, found):
    """Every inline code literal of the page breakable before a dot and
    after / _ and , (11)."""
    literals = len(ANY_LITERAL.findall(text))
    text, count = INLINE_CODE.subn(breakable_code, text)
    if count != literals:
        raise failure(11, page, f"{count} of the page's {literals} inline code literals "
                      "matched INLINE_CODE")
    after_dot = [m.group(0)[:80] for m in INLINE_CODE.finditer(text)
                 if BREAK_AFTER_DOT.search(m.group(2))]
    if after_dot:
        raise failure(11, page, f"inline code that breaks after a dot: {after_dot[:3]}")
    found[11] += count
    return text


def references_as_list_items(text, page, found):
    """The references' entries as items of their list (13)."""
    count = text.count(BIBLIOENTRY)
    text = text.replace(BIBLIOENTRY, 'role="listitem"')
    left = ["doc-biblioentry"] if "doc-biblioentry" in text else []
    left += CITATION_NOT_ITEM.findall(text)
    if left:
        raise failure(13, page, f"entries of the references left out of their list: {left[:3]}")
    found[13] += count
    return text


def named_toggle(match):
    """A toctree toggle's summary, named after the page it opens (14)."""
    title = TAG.sub("", match[2]).replace('"', "&quot;").strip()
    return f'{match[1]}{match[2]}{match[3]}<summary aria-label="Pages under: {title}">'


def named_toggles(text, page, found):
    """Every sidebar toggle of the page named after its page (14)."""
    text, count = TOC_TOGGLE.subn(named_toggle, text)
    toggles, named = text.count(TOCTREE_TOGGLE), text.count(NAMED_TOGGLE)
    if named != toggles:
        raise failure(14, page, f"{named} of the page's {toggles} toctree toggles named")
    found[14] += count
    return text


def focusable_boxes(text, page, found):
    """Every box that may scroll written focusable (9)."""
    text, count = FOCUSABLE_BOX.subn(r'<\1 tabindex="0"', text)
    left = UNFOCUSABLE_BOX.findall(text)
    if left:
        raise failure(9, page, f"boxes left without a tabindex: {left[:3]}")
    found[9] += count
    return text


def light_page(text, page, shapes, found=None):
    """A page that Sphinx wrote in this build (it holds PAGE_MARK),
    rewritten (2, 9 to 14, 17); `found` counts what the rewrites that
    depend on the page's content found. A page without the mark is only
    checked to be light already (written by an earlier build, or not by
    Sphinx, such as the redirecting index.html)."""
    import icons

    found = Counter() if found is None else found
    if PAGE_MARK not in text:
        if icons.undrawn_icons(text):
            raise failure(2, page, "a page not lightened: it holds no mark of "
                          "html-page-context (PAGE_MARK), yet has icons not drawn")
        return text
    text = text.replace(PAGE_MARK, "", 1)
    text = breakable_headings(text, page, found)
    text = breakable_inline_code(text, page, found)
    text = references_as_list_items(text, page, found)
    text = named_toggles(text, page, found)
    text = folds_named_by_their_text(text, page, found)
    text = icons.inline_icons(text, page, shapes)
    text = focusable_boxes(text, page, found)
    return sized_lazy_images(text, page, found)


def folds_named_by_their_text(text, page, found):
    """MyST-NB's fold toggles and the search field button without the label
    that hides their text (17)."""
    count = text.count(FOLD_LABEL)
    text = text.replace(FOLD_LABEL, "<summary>")
    if "Toggle hidden content" in text:
        raise failure(17, page, "a fold's toggle still labelled 'Toggle hidden content'")
    text = SEARCH_FIELD_LABEL.sub(r"\1", text)
    if SEARCH_FIELD_LABELLED.search(text):
        raise failure(17, page, "the search field button still has an aria-label")
    found[17] += count
    return text


def without_search_highlight(scripts, page):
    """The page's list of scripts without sphinx_highlight.js (16), edited
    in place; on search.html, a script that says it is off."""
    def name(js):
        return str(getattr(js, "filename", None) or "").split("?")[0].rsplit("/", 1)[-1]

    if not any(name(js) == SEARCH_HIGHLIGHT for js in scripts):
        raise failure(16, page, f"{SEARCH_HIGHLIGHT} is not among the page's scripts")
    scripts[:] = [js for js in scripts if name(js) != SEARCH_HIGHLIGHT]
    if page == "search.html":
        kind = type(scripts[0])
        scripts.append(kind(None, body=SEARCH_HIGHLIGHT_OFF, priority=1000))
    if any(name(js) == SEARCH_HIGHLIGHT for js in scripts):
        raise failure(16, page, f"{SEARCH_HIGHLIGHT} left among the page's scripts")
    return scripts


def deferred_scripts(scripts, page):
    """The page's list of scripts (Sphinx's `script_files`) with those of
    DEFERRED deferred (7), edited in place."""
    def name(js):
        return str(getattr(js, "filename", None) or "").split("?")[0].rsplit("/", 1)[-1]

    missing = sorted(set(DEFERRED) - {name(js) for js in scripts})
    if missing:
        raise failure(7, page, f"not among the page's scripts: {', '.join(missing)}")
    scripts[:] = [type(js)(js.filename, priority=js.priority,
                           **{**js.attributes, "defer": "defer"})
                  if name(js) in DEFERRED else js for js in scripts]
    eager = [name(js) for js in scripts
             if name(js) in DEFERRED and js.attributes.get("defer") != "defer"]
    if eager:
        raise failure(7, page, f"scripts left without defer: {eager}")
    return scripts


def page_context(app, pagename, templatename, context, doctree):
    """Per page, before it is written: the mark that it is to be lightened,
    no search highlighting (16), and its head scripts deferred (7)."""
    if app.builder.format != "html":
        return
    context["metatags"] = (context.get("metatags") or "") + PAGE_MARK
    without_search_highlight(context["script_files"], f"{pagename}.html")
    if pagename != "search":  # its search scripts run in the head
        deferred_scripts(context["script_files"], f"{pagename}.html")


def tab_stops_when_laid_out(script, file=THEME_JS):
    """The theme's script without its measurement of every box at `load`
    (8), or an error if the theme no longer has the measurement where
    this expects it (a new release: look at what it does now)."""
    if TAB_STOPS_OFF in script:
        return script
    calls = list(TAB_STOPS_AT_LOAD.finditer(script))
    call = calls[0] if len(calls) == 1 else None
    function = call and re.search(rf"function {call[1]}\(\)\{{(.{{0,400}})", script)
    if not function or TAB_STOPS_RULE not in function[1]:
        raise failure(8, file, "the theme's measurement of the boxes that "
                      "scroll at `load` is not where light_pages.py expects it "
                      f"({len(calls)} calls at load found, one expected)")
    script = script[:call.start()] + TAB_STOPS_OFF + script[call.end():]
    if TAB_STOPS_AT_LOAD.search(script) or script.count(TAB_STOPS_OFF) != 1:
        raise failure(8, file, "the measurement at load was not replaced exactly once")
    return script


def lighten_pages(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    import icons

    outdir = Path(app.outdir)
    script = outdir / icons.FONTAWESOME_JS
    if not script.is_file():
        raise failure(2, script, "the theme's Font Awesome script is missing")
    shapes = icons.icon_shapes(script.read_text(), script)
    found, fresh = Counter(), 0
    for page in outdir.rglob("*.html"):
        if "_static" in page.relative_to(outdir).parts:
            continue
        text = page.read_text()
        fresh += PAGE_MARK in text
        lighter = light_page(text, page, shapes, found)
        if lighter != text:
            page.write_text(lighter)
    if fresh >= len(app.env.all_docs):  # every page written by this build
        for number in app.config.light_pages_found_somewhere:
            if not found[number]:
                raise failure(number, outdir, "found nothing to rewrite in any page")
    icons.theme_icon_files(outdir)
    theme_js = outdir / THEME_JS
    if not theme_js.is_file():
        raise failure(8, theme_js, "the theme's script is missing")
    theme_js.write_text(tab_stops_when_laid_out(theme_js.read_text(), theme_js))


# The rewrites that a whole build of the book must find something for.
FOUND_SOMEWHERE = (9, 10, 11, 12, 13, 14, 17)


def setup(app):
    app.add_config_value("light_pages_found_somewhere", list(FOUND_SOMEWHERE), "html")
    # after the other extensions' handlers (drop_duplicate_scripts of
    # book_html.py first): the page's final list of scripts
    app.connect("html-page-context", page_context, priority=900)
    # after the theme's own handlers (its static files copied)
    app.connect("build-finished", lighten_pages, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
