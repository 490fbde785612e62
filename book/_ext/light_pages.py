"""What a page loads: only what it shows (phones on slow networks).

The pages, the theme's scripts and its stylesheets are rewritten when the
book is built. Each rewrite below checks that it found what it rewrites and
that its result is whole, and stops the build otherwise (LightPagesError,
naming the rewrite, the file and what is missing): a new release of the
themes (pinned in requirements.txt), of Sphinx or of docutils that writes
something else fails the build instead of leaving, say, every icon blank.
Rewrites 7 and 16 edit each page's list of scripts in Sphinx's
`html-page-context` event; the others edit files once Sphinx has written them (`build-finished`:
what they change is written by the theme's templates or copied from its
files, and is in no list the event could edit; each says why below).

In every page that Sphinx writes (a page not written by this build, left
from an earlier one, is checked to be light already):

1. The Font Awesome script is not loaded (1.4 MB; it turns the icons into
   SVG in the browser): its tag is dropped. Checked: the page has exactly
   one tag of the script, and none is left. (The theme's layout template
   writes the tag itself, in no list of the page's context.)
2 to 4. The theme's icons drawn as inline SVG, from subsets of its icon fonts
   where its CSS draws them, its stylesheet without the font's rules:
   icons.py.
5. The theme's two scripts are not preloaded: they would compete with the
   stylesheets for a slow network before the first paint, and load at the
   end of the page anyway (defer). Checked: the page had preloads of
   scripts and has none left. (Written by the theme's template, as 1.)
6. The theme loads the site search's scripts and index (`searchindex.js`,
   90 kB) in every page's head, for its search-as-you-type, which this book
   keeps off (the search field opens search.html, which loads them itself):
   they are dropped from the other pages. Checked: the page says whether
   search-as-you-type is on; when off, all three tags were found and none
   is left. (Written by the theme's template, as 1.)
7. The extensions' scripts in the head run after the page is parsed
   (`defer`, in the same order), so that the text shows before they run;
   not on search.html, whose search scripts run in the head. Done on the
   page's list of scripts (`html-page-context`). Checked: each script of
   DEFERRED is in the list, and each is deferred.
8. Boxes that scroll (code, outputs, tables) take the keyboard's focus, so
   that the arrow keys scroll them, without measuring the whole page at
   load. pydata-sphinx-theme gives each box `tabindex` 0 if it scrolls, -1
   if not, at the `load` event: it reads the size of every box of the page,
   which lays out every cell that `content-visibility` (book.css) leaves
   for later, one cell at a time: 55 style recalculations and layouts, a
   single task of 1.2 s in Lighthouse's phone profile on chapter 5 (its
   whole total blocking time). The theme's script loses that measurement
   (TAB_STOPS below applies the same rule with a ResizeObserver, when the
   browser lays a box out and whenever its size changes, reading sizes the
   browser has just computed). Checked: the call at `load` and the rule it
   applies are found where expected, and exactly that call is replaced.
9. Every such box is written focusable (`tabindex="0"`, the theme's value
   for a box that scrolls) until TAB_STOPS settles it. Checked: no `<pre>`,
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
15. Print in light colours whatever the reader's theme: the light rules of
   the themes' stylesheets (and pygments') are repeated for the dark theme
   under `@media print`, at the end of book.css (the last stylesheet, so
   that they win). Checked: each of those stylesheets is there and has
   light rules.
16. No search highlighting: Sphinx's sphinx_highlight.js marks, on the
   next page the reader opens (even much later), every piece of text that
   holds a word of the last search ("an" inside "and"). It is dropped from
   every page's list of scripts (`html-page-context`); search.html, whose
   search script asks whether it is on, is told it is off. Checked: the
   script was in the list and is no longer.
17. Controls named by the text they show: MyST-NB's toggle of a folded
   cell ("Show code cell source") loses `aria-label="Toggle hidden
   content"`, and the theme's search field button ("Search Ctrl+K") its
   `aria-label="Search"`, which name them otherwise (axe-core's rule
   label-content-name-mismatch: a reader who speaks the label shown cannot
   reach it). Checked: no such label is left.

Rewrites 9 to 14 and 17 depend on what a page holds; a build that writes every
page also checks that each of them found something in some page (the
config value `light_pages_found_somewhere`: a smaller site, such as the
teacher's pack, without pictures or references, names fewer).

Also, not rewrites: (formulas are MathML: mathml.py); the colour theme is settled in the head, before the first
paint, not by the theme's script at the end of the page, so that nothing
moves (THEME_BEFORE_FIRST_PAINT); on a phone, a tap on a link in the menu or
contents drawer closes the drawer, so that the reader sees where the link
leads (CLOSE_DRAWER_ON_NAVIGATION).
"""
import json
import re
import struct
from collections import Counter
from pathlib import Path

from sphinx.errors import SphinxError

REWRITES = {
    1: "the Font Awesome script not loaded",
    2: "icons drawn as inline SVG",
    3: "icon font subsets",
    4: "icon font rules dropped from the theme's stylesheet",
    5: "script preloads dropped",
    6: "search scripts dropped",
    7: "head scripts deferred",
    8: "the theme's tab-stop measurement at load",
    9: "boxes that scroll made focusable",
    10: "headings break after a slash",
    11: "inline code breaks before a dot, after / _ and ,",
    12: "images sized and lazy",
    13: "references as list items",
    14: "sidebar toggles named",
    15: "print in light colours",
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

FONTAWESOME_TAG = re.compile(
    r'[ \t]*(?:<!--[^>]*custom icons -->\s*)?'
    r'<script[^>]*scripts/fontawesome\.js[^>]*></script>\n?')
SEARCH_SCRIPTS = re.compile(
    r'[ \t]*<script src="[^"]*(?:_static/searchtools\.js|_static/language_data\.js|'
    r'searchindex\.js)"></script>\n?')
SEARCH_SCRIPT_LEFT = re.compile(r'<script\b[^>]*(?:searchtools|language_data|searchindex)\.js')
SEARCH_AS_YOU_TYPE_OFF = "DOCUMENTATION_OPTIONS.search_as_you_type = false"
SEARCH_AS_YOU_TYPE_ON = "DOCUMENTATION_OPTIONS.search_as_you_type = true"
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
# The theme preloads its two scripts (5).
SCRIPT_PRELOAD = re.compile(r'[ \t]*<link rel="preload" as="script"[^>]*>\n?')
SCRIPT_PRELOAD_LEFT = re.compile(r'<link\b(?=[^>]*\bpreload\b)(?=[^>]*\bas="?script)[^>]*>')
# The theme's tab stops (8): the boxes it measures, its call of the
# measurement at `load` (replaced by TAB_STOPS below), and what marks a box.
THEME_JS = "_static/scripts/pydata-sphinx-theme.js"
TAB_STOPS_AT_LOAD = re.compile(
    r'"complete"===document\.readyState\?(\w+)\(\):window\.addEventListener\("load",\1\)')
TAB_STOPS_RULE = "e.tabIndex=e.scrollWidth>e.clientWidth||e.scrollHeight>e.clientHeight?0:-1"
TAB_STOPS_OFF = 'void 0/* light_pages.py: tab stops set as boxes are laid out */'
SCROLLING_BOXES = ("pre", ".nboutput > .output_area", ".cell_output > .output",
                   ".jp-RenderedHTMLCommon", ".pst-scrollable-table-container")
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
# Light-theme rules (of the stylesheets that have them, in the order pages
# load them), repeated for the dark theme in print.
LIGHT_RULE = re.compile(r'([^{}]*\[data-theme="?light"?\][^{}]*)\{([^{}]*)\}')
PRINT_MARK = "/* light_pages: print in light colours */"
STYLESHEETS_WITH_THEMES = ("_static/styles/pydata-sphinx-theme.css",
                           "_static/styles/sphinx-book-theme.css",
                           "_static/pygments.css")
# With the colour mode "auto", the theme first shows the page with
# data-theme="auto", which none of its rules (nor pygments') match, until its
# script, at the end of the page, sets "light" or "dark": code blocks and
# inline code then change size and push the page down (a layout shift of
# 0.23 on the cheat sheet, which Lighthouse scores). Set in the head, as the
# theme's script will.
THEME_BEFORE_FIRST_PAINT = """\
(() => {
  const html = document.documentElement;
  if (html.dataset.theme === "auto")
    html.dataset.theme = matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light";
})();"""
TAB_STOPS = """\
(() => {
  const laidOut = (entry) => entry.borderBoxSize[0].inlineSize > 0 || entry.borderBoxSize[0].blockSize > 0;
  const observer = new ResizeObserver((entries) => {
    const boxes = entries.filter(laidOut).map((entry) => entry.target);
    const scrolls = boxes.map((box) =>
      box.scrollWidth > box.clientWidth || box.scrollHeight > box.clientHeight);
    boxes.forEach((box, i) => { box.tabIndex = scrolls[i] ? 0 : -1; });
  });
  document.addEventListener("DOMContentLoaded", () => document
    .querySelectorAll(SELECTOR).forEach((box) => observer.observe(box)));
})();""".replace("SELECTOR", json.dumps(", ".join(SCROLLING_BOXES)))
CLOSE_DRAWER_ON_NAVIGATION = """\
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("dialog a[href]");
  const drawer = link && link.closest("dialog");
  if (drawer && drawer.open) requestAnimationFrame(() => drawer.close());
});"""


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


def drop_fontawesome_script(text, page):
    """The page without the Font Awesome script's tag (1)."""
    text, count = FONTAWESOME_TAG.subn("", text)
    if count != 1:
        raise failure(1, page, f"{count} tags of fontawesome.js found (one expected)")
    if "fontawesome.js" in text:
        raise failure(1, page, "fontawesome.js is still named in the page")
    return text


def drop_script_preloads(text, page):
    """The page without its preloads of scripts (5)."""
    text, count = SCRIPT_PRELOAD.subn("", text)
    if not count:
        raise failure(5, page, "no preload of a script (<link rel=\"preload\" as=\"script\">) found")
    left = SCRIPT_PRELOAD_LEFT.findall(text)
    if left:
        raise failure(5, page, f"preloads of scripts left: {left}")
    return text


def drop_search_scripts(text, page):
    """A page other than search.html without the search's scripts, when
    search-as-you-type is off (6)."""
    if SEARCH_AS_YOU_TYPE_OFF not in text:
        if SEARCH_AS_YOU_TYPE_ON in text:
            return text
        raise failure(6, page, "the page does not say whether search-as-you-type is on "
                      f"({SEARCH_AS_YOU_TYPE_OFF!r} or true)")
    text, count = SEARCH_SCRIPTS.subn("", text)
    left = SEARCH_SCRIPT_LEFT.findall(text)
    if count != 3 or left:
        raise failure(6, page, f"{count} of the 3 search scripts found"
                      + (f", and left: {left}" if left else ""))
    return text


def light_page(text, page, shapes, found=None):
    """A page that Sphinx wrote in this build (it holds PAGE_MARK),
    rewritten (1, 2, 5, 6, 9 to 14, 17); `found` counts what the rewrites that
    depend on the page's content found. A page without the mark is only
    checked to be light already (written by an earlier build, or not by
    Sphinx, such as the redirecting index.html)."""
    import icons

    found = Counter() if found is None else found
    if PAGE_MARK not in text:
        if "fontawesome.js" in text or icons.undrawn_icons(text):
            raise failure(1, page, "a page not lightened: it holds no mark of "
                          "html-page-context (PAGE_MARK), yet still loads fontawesome.js "
                          "or has icons not drawn")
        return text
    text = text.replace(PAGE_MARK, "", 1)
    text = drop_fontawesome_script(text, page)
    text = drop_script_preloads(text, page)
    if page.name != "search.html":
        text = drop_search_scripts(text, page)
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


def print_in_light(css, themes, file="_static/book.css"):
    """`css` (the book's own stylesheet, loaded last) followed by the light
    rules of the stylesheets `themes`, for the dark theme, in print (15)."""
    if PRINT_MARK in css:
        return css
    rules = []
    for theme in themes:
        for selectors, declarations in LIGHT_RULE.findall(theme):
            if selectors.lstrip().startswith("@"):
                continue
            dark = re.sub(r'\[data-theme="?light"?\]', "[data-theme=dark]",
                          selectors.strip())
            rules.append(f"{dark}{{{declarations}}}")
    if not rules:
        raise failure(15, file, "no light rule ([data-theme=light]) found in the themes' stylesheets")
    # the dark theme dims pictures; paper does not need that
    rules.append("html[data-theme=dark] img{filter:none!important}")
    return css + f"\n{PRINT_MARK}\n@media print{{{''.join(rules)}}}\n"


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
    print_stylesheets(outdir)


def print_stylesheets(outdir):
    """book.css with the light rules of STYLESHEETS_WITH_THEMES for print (15)."""
    book_css = outdir / "_static" / "book.css"
    if not book_css.is_file():
        raise failure(15, book_css, "the book's stylesheet is missing")
    themes = []
    for name in STYLESHEETS_WITH_THEMES:
        if not (outdir / name).is_file():
            raise failure(15, outdir / name, "the stylesheet is missing")
        themes.append((outdir / name).read_text())
        if not LIGHT_RULE.search(themes[-1]):
            raise failure(15, outdir / name, "has no light rule ([data-theme=light])")
    book_css.write_text(print_in_light(book_css.read_text(), themes, book_css))


# The rewrites that a whole build of the book must find something for.
FOUND_SOMEWHERE = (9, 10, 11, 12, 13, 14, 17)


def setup(app):
    app.add_config_value("light_pages_found_somewhere", list(FOUND_SOMEWHERE), "html")
    # after the other extensions' handlers (drop_duplicate_scripts of
    # book_html.py first): the page's final list of scripts
    app.connect("html-page-context", page_context, priority=900)
    # Rewrites 1 to 6, 8 to 15 and 17 edit what Sphinx wrote: the tags of 1, 5
    # and 6 are written by the theme's layout template itself (in no list
    # of the page's context), 2, 9 to 14 and 17 rewrite the body's HTML, and
    # 3, 4, 8 and 15 files of the theme's static folder, copied at the end.
    # After the theme's own (pydata-sphinx-theme writes pygments.css then).
    app.connect("build-finished", lighten_pages, priority=900)
    app.add_js_file(None, body=THEME_BEFORE_FIRST_PAINT, priority=100)
    app.add_js_file(None, body=CLOSE_DRAWER_ON_NAVIGATION)
    app.add_js_file(None, body=TAB_STOPS)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

