"""What a page loads: only what it shows (phones on slow networks).

Run at the end of the HTML build over every page written (idempotent):

1. Icons without the theme's 1.4 MB `fontawesome.js`: pydata-sphinx-theme
   writes its icons as empty `<i class="fa-solid fa-bars">` elements that
   that script replaces by SVG in the browser. Each is replaced here, when
   the page is built, by the same SVG (the shapes are read from the theme's
   own copy of the script, so they follow the pinned theme), and the script
   tag is dropped. The few icons the theme's CSS draws with the Font
   Awesome font (the admonitions' symbols, the breadcrumb arrow) come from a
   subset of that font holding only the characters the CSS names
   (`fa-solid-subset.woff`, 2 kB; the GitHub mark of shortened GitHub links
   from the brands font likewise), declared in book.css.
2. No MathJax: formulas are MathML, written when the book is built (below;
   `html_math_renderer: mathml` in _config.yml), which browsers draw
   themselves. (MathJax, 2 MB before compression, also loaded on the
   landing page, which shows no formula: Sphinx counts a page as having
   equations when any page of its table of contents has one.)
3. Images: their size written on the tag (no jump when they arrive) and
   loaded lazily, when the reader scrolls near them.
4. Nothing that holds the first paint without need. The theme loads the
   site search's scripts and index (`searchindex.js`, 90 kB) in every
   page's head, for its search-as-you-type, which this book keeps off
   (`search_as_you_type = false`: the search field opens search.html,
   which loads them itself): they are dropped from the other pages. The
   extensions' scripts in the head run after the page is parsed (`defer`,
   in the same order), so that the text shows before they run, and the
   theme's two scripts are not preloaded. The theme's
   stylesheet loses the 2,000 `.fa-*:before` rules of the icon font, used
   by no element once the icons are SVG (a third of the stylesheet).
5. Print in light colours whatever the reader's theme: the themes' light
   rules are repeated for the dark theme under `@media print`, at the end
   of book.css (the last stylesheet, so that they win).
6. Long names in inline code break after a dot, slash, underscore or comma
   (`<wbr>`), and headings after a slash, not in the middle of a word.
7. On a phone, a graph wider than the screen says that it scrolls (class
   `wide-on-phone`, book.css).
8. On a phone, a tap on a link in the menu or contents drawer closes the
   drawer, so that the reader sees where the link leads.
10. The colour theme is settled in the head, before the first paint (not
   by the theme's script at the end of the page), so that nothing moves.
9. The references' entries are items of their list for assistive
   technology: docutils gives each `role="doc-biblioentry"` inside a
   `role="list"`, which ARIA 1.2 deprecates and axe-core reports as a
   critical violation (aria-required-children); they become `listitem`s.
11. The sidebar's toggle of a page with pages under it (a `<summary>`
   holding only the chevron, hidden from assistive technology) is named
   after that page ("Pages under: Teacher's guide ..."): axe-core reports a
   summary without a name as serious (summary-name).
12. Boxes that scroll (code, outputs, tables) take the keyboard's focus, so
   that the arrow keys scroll them, without measuring the whole page at
   load. pydata-sphinx-theme gives each box `tabindex` 0 if it scrolls, -1
   if not, at the `load` event: it reads the size of every box of the page,
   which lays out every cell that `content-visibility` (book.css) leaves
   for later, one cell at a time: 55 style recalculations and layouts, a
   single task of 1.2 s in Lighthouse's phone profile on chapter 5 (its
   whole total blocking time). Here every such box is written focusable
   (`tabindex="0"`, the theme's value for a box that scrolls), and the
   theme's measurement is replaced by the same rule applied by a
   ResizeObserver, when the browser lays a box out (on screen, or near it)
   and whenever its size changes (a rotated phone), reading sizes the
   browser has just computed.
"""
import json
import re
import struct
from pathlib import Path

FONTAWESOME_JS = "_static/scripts/fontawesome.js"
# The subsets of the icon fonts written (declared in book.css), and the
# theme's fonts they are made from.
FONT_SUBSETS = {
    "_static/fonts/fa-solid-subset.woff": "_static/vendor/fontawesome/webfonts/fa-solid-900.ttf",
    "_static/fonts/fa-brands-subset.woff": "_static/vendor/fontawesome/webfonts/fa-brands-400.ttf",
}
THEME_CSS = ("_static/styles/pydata-sphinx-theme.css",
             "_static/styles/sphinx-book-theme.css")

ICON_ELEMENT = re.compile(
    r'<(i|span)\s+(class="([^"]*\bfa-[^"]*)"[^>]*?)\s*>\s*</\1>')
FONTAWESOME_TAG = re.compile(
    r'[ \t]*(?:<!--[^>]*custom icons -->\s*)?'
    r'<script[^>]*scripts/fontawesome\.js[^>]*></script>\n?')
PACK_END = re.compile(r'\("(fab|far|fas)",\w+\)')
ICON_ENTRY = re.compile(
    r'(?:"([\w-]+)"|\b([a-z][\w]*)):\[(\d+),(\d+),\[[^\]]*\],"([0-9a-f]+)",'
    r'(?:"([^"]+)"|\[("[^"]+"(?:,"[^"]+")*)\])\]')
STYLES = {"fab": "fab", "fa-brands": "fab", "far": "far", "fa-regular": "far"}
SEARCH_SCRIPTS = re.compile(
    r'[ \t]*<script src="[^"]*(?:_static/searchtools\.js|_static/language_data\.js|'
    r'searchindex\.js)"></script>\n?')
SEARCH_AS_YOU_TYPE_OFF = "DOCUMENTATION_OPTIONS.search_as_you_type = false"
# Head scripts that nothing before the end of parsing needs (documentation_
# options.js stays: an inline script right after it sets its pagename).
DEFERRED = ("doctools.js", "sphinx_highlight.js", "clipboard.min.js",
            "copybutton.js", "sphinx-book-theme.js", "togglebutton.js",
            "design-tabs.js")
HEAD_SCRIPT = re.compile(r'<script((?:\s+[\w-]+="[^"]*")*)\s+src="([^"]+)"></script>')
ICON_FONT_RULES = re.compile(
    r'\.fa-[\w-]+:before(?:,\.fa-[\w-]+:before)*\{content:"[^"]*"\}')
# The theme preloads its two scripts, which then compete with the
# stylesheets for a slow network before the first paint; they load at the
# end of the page anyway (defer).
SCRIPT_PRELOAD = re.compile(r'[ \t]*<link rel="preload" as="script"[^>]*>\n?')
# The theme's tab stops (12): the boxes it measures, its call of the
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
IMG = re.compile(r'<img\b([^>]*?)\s*/?>')
# What a graph (an SVG in a cell output) may be wide on a 390-px phone:
# book.css shows it at 3/4 of its size, in a column of 390 - 2 x 16 px.
PHONE_COLUMN_PX, PHONE_GRAPH_ZOOM = 358, 0.75
HEADING = re.compile(r'(<h[1-6]\b[^>]*>)(.*?)(</h[1-6]>)', re.S)
INLINE_CODE = re.compile(r'(<code class="docutils literal notranslate">)(.*?)(</code>)', re.S)
BREAK_AFTER = re.compile(r'(?<=[./_,])(?=[^<>\s&;])(?![^<]*>)')
# Light-theme rules (of the stylesheets that have them, in the order pages
# load them), repeated for the dark theme in print.
TOC_TOGGLE = re.compile(
    r'(<a class="[^"]*reference internal[^"]*" href="[^"]*">)((?:(?!</a>).)*)'
    r'(</a><details[^>]*>)<summary>', re.S)
TAG = re.compile(r"<[^>]+>")
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


def icon_shapes(script):
    """{(pack, name): (width, height, path)} from fontawesome.js's text."""
    shapes, start = {}, 0
    for end in PACK_END.finditer(script):
        pack = end.group(1)
        for entry in ICON_ENTRY.finditer(script, start, end.start()):
            name = entry.group(1) or entry.group(2)
            path = entry.group(6) or " ".join(
                p.strip('"') for p in entry.group(7).split('","'))
            shapes.setdefault((pack, name),
                              (int(entry.group(3)), int(entry.group(4)), path))
        start = end.end()
    return shapes


def icon_svg(match, shapes):
    """The inline SVG for one `<i class="fa-...">` element, or it unchanged."""
    classes = match.group(3).split()
    pack = next((STYLES[c] for c in classes if c in STYLES), "fas")
    names = [c[3:] for c in classes
             if c.startswith("fa-") and (pack, c[3:]) in shapes]
    if not names:
        return match.group(0)
    width, height, path = shapes[(pack, names[0])]
    attributes = match.group(2).replace(
        f'class="{match.group(3)}"',
        f'class="{" ".join(classes)} svg-inline--fa"')
    return (f'<svg {attributes} aria-hidden="true" focusable="false" '
            f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}">'
            f'<path fill="currentColor" d="{path}"/></svg>')


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
    attributes = match.group(1)
    if "loading=" not in attributes:
        attributes += ' loading="lazy" decoding="async"'
    src = re.search(r'\bsrc="([^"]+)"', attributes)
    if not src or "://" in src[1]:
        return f"<img{attributes} />"
    file = (page.parent / src[1].split("?")[0]).resolve()
    size = image_size(file) if file.is_file() else None
    if size and "width=" not in attributes:
        attributes += f' width="{size[0]}" height="{size[1]}"'
    if size and file.suffix == ".svg" and "_images/" in src[1] and \
            size[0] * PHONE_GRAPH_ZOOM > PHONE_COLUMN_PX and "wide-on-phone" not in attributes:
        # it scrolls on a phone: it takes the keyboard's focus, so that the
        # arrow keys scroll it
        attributes += ' class="wide-on-phone" tabindex="0"'
    return f"<img{attributes} />"


def breakable_heading(match):
    """A heading with a line-break opportunity after each slash of its text
    (an "owner/repository" is one long word otherwise)."""
    if "<wbr>" in match.group(2):
        return match.group(0)
    inner = re.sub(r'/(?=[^<>\s])(?![^<]*>)', "/<wbr>", match.group(2))
    return match.group(1) + inner + match.group(3)


def breakable_code(match):
    """Inline code with a line-break opportunity after . / _ and ,"""
    if "<wbr>" in match.group(2):
        return match.group(0)
    return match.group(1) + BREAK_AFTER.sub("<wbr>", match.group(2)) + match.group(3)


def print_in_light(css, themes):
    """`css` (the book's own stylesheet, loaded last) followed by the light
    rules of the stylesheets `themes`, for the dark theme, in print."""
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
    # the dark theme dims pictures; paper does not need that
    rules.append("html[data-theme=dark] img{filter:none!important}")
    return css + f"\n{PRINT_MARK}\n@media print{{{''.join(rules)}}}\n"


def deferred_script(match):
    attributes, src = match.groups()
    if src.split("?")[0].rsplit("/", 1)[-1] in DEFERRED:
        return f'<script defer{attributes} src="{src}"></script>'
    return match.group(0)


def named_toggle(match):
    """A toctree toggle's summary, named after the page it opens (11)."""
    title = TAG.sub("", match[2]).replace('"', "&quot;").strip()
    return f'{match[1]}{match[2]}{match[3]}<summary aria-label="Pages under: {title}">'


def light_page(text, page, outdir, shapes):
    text = FONTAWESOME_TAG.sub("", text)
    text = SCRIPT_PRELOAD.sub("", text)
    if SEARCH_AS_YOU_TYPE_OFF in text and page.name != "search.html":
        text = SEARCH_SCRIPTS.sub("", text)
    if page.name != "search.html":  # its search scripts run in the head
        head, separator, body = text.partition("</head>")
        text = HEAD_SCRIPT.sub(deferred_script, head) + separator + body
    text = HEADING.sub(breakable_heading, text)
    text = INLINE_CODE.sub(breakable_code, text)
    text = text.replace('role="doc-biblioentry"', 'role="listitem"')
    text = TOC_TOGGLE.sub(named_toggle, text)
    text = ICON_ELEMENT.sub(lambda m: icon_svg(m, shapes), text)
    text = FOCUSABLE_BOX.sub(r'<\1 tabindex="0"', text)
    return IMG.sub(lambda m: sized_lazy_image(m, page), text)


def css_characters(outdir):
    """The Font Awesome characters the theme's CSS draws by itself: its
    `--pst-icon-*` variables and the `content` of the book theme's rules
    (not the `.fa-*:before` rules of every icon, drawn as SVG here)."""
    characters = set()
    for name in THEME_CSS:
        css = (outdir / name).read_text() if (outdir / name).is_file() else ""
        if "pydata" in name:
            css = " ".join(re.findall(r'--pst-icon-[\w-]+:("[^"]*")', css))
        characters |= {int(c, 16) for c in re.findall(r'"\\(f[0-9a-f]{3})"', css)}
        characters |= {ord(c) for c in re.findall('"([\ue000-\uf8ff])"', css)}
    return characters


def write_font_subsets(outdir):
    from fontTools import subset
    from fontTools.ttLib import TTFont

    characters = sorted(css_characters(outdir))
    for target, source in FONT_SUBSETS.items():
        if not (outdir / source).is_file():
            continue
        font = TTFont(outdir / source)
        options = subset.Options()
        options.flavor = "woff"
        options.layout_features = []
        options.name_IDs = []
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=characters)
        subsetter.subset(font)
        (outdir / target).parent.mkdir(parents=True, exist_ok=True)
        subset.save_font(font, str(outdir / target), options)


def tab_stops_when_laid_out(script):
    """The theme's script without its measurement of every box at `load`
    (12), or an error if the theme no longer has the measurement where
    this expects it (a new release: look at what it does now)."""
    if TAB_STOPS_OFF in script:
        return script
    call = TAB_STOPS_AT_LOAD.search(script)
    function = call and re.search(rf"function {call[1]}\(\)\{{(.{{0,400}})", script)
    if not function or TAB_STOPS_RULE not in function[1]:
        raise ValueError(f"{THEME_JS}: the theme's measurement of the boxes that "
                         "scroll at `load` is not where light_pages.py expects it")
    return script[:call.start()] + TAB_STOPS_OFF + script[call.end():]


def lighten_pages(app, exception):
    if exception is not None or app.builder.format != "html":
        return
    outdir = Path(app.outdir)
    script = outdir / FONTAWESOME_JS
    shapes = icon_shapes(script.read_text()) if script.is_file() else {}
    for page in outdir.rglob("*.html"):
        if "_static" in page.relative_to(outdir).parts:
            continue
        text = page.read_text()
        lighter = light_page(text, page, outdir, shapes)
        if lighter != text:
            page.write_text(lighter)
    write_font_subsets(outdir)
    theme_js = outdir / THEME_JS
    if theme_js.is_file():
        theme_js.write_text(tab_stops_when_laid_out(theme_js.read_text()))
    theme_css = outdir / THEME_CSS[0]
    if theme_css.is_file():
        css = theme_css.read_text()
        theme_css.write_text(ICON_FONT_RULES.sub("", css))
    book_css = outdir / "_static" / "book.css"
    if book_css.is_file():
        themes = [(outdir / name).read_text() for name in STYLESHEETS_WITH_THEMES
                  if (outdir / name).is_file()]
        book_css.write_text(print_in_light(book_css.read_text(), themes))


# Mathematics as MathML, written when the book is built: browsers draw it
# themselves, so no page loads MathJax (2 MB before compression, and
# seconds of script on a phone). latex2mathml converts the TeX; a few
# constructions it does not know are rewritten first into ones it does.
# book.css gives <math> the font book/_static/fonts/math.woff: a subset of
# DejaVu Math TeX Gyre (Debian's fonts-dejavu-extra; public domain math
# extensions) with its MATH table, made by `write_math_font` below.
TEX_REWRITES = (
    (re.compile(r"\\begin\{aligned\}|\\end\{aligned\}"), ""),
    (re.compile(r"\\(?:big|Big|bigg|Bigg)[lr]?(?=\\|[|()\[\]])"), ""),
)


def tex_to_mathml(tex, display):
    from latex2mathml.converter import convert

    for pattern, replacement in TEX_REWRITES:
        tex = pattern.sub(replacement, tex)
    if display and "\\\\" in tex and "\\begin{" not in tex:
        tex = r"\begin{split}" + tex + r"\end{split}"
    mathml = convert(tex.strip(), display="block" if display else "inline")
    # A norm's bars keep their size (latex2mathml leaves them stretchy,
    # and browsers then stretch them to the height of the whole row).
    mathml = mathml.replace("<mo>&#x02016;</mo>", '<mo stretchy="false">&#x02016;</mo>')
    if "\\" in re.sub(r"<[^>]+>", "", mathml):
        raise ValueError(f"latex2mathml left TeX in its output for {tex!r}")
    return mathml


def write_math_font(source, target):
    """The subset of a math font the book's formulas need: ASCII, Greek, the
    operators, arrows and delimiters, and the italic, double-struck and
    Greek-italic letters of Unicode's math alphabets, with the MATH table
    that sizes sums, fences and scripts."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    characters = (
        [*range(0x20, 0x7F), 0xA0, 0xAC, 0xB1, 0xB7, 0xD7, 0xF7,
         *range(0x391, 0x3CA), 0x3D1, 0x3D5, 0x3F0, 0x3F1, 0x3F5,
         0x2016, 0x2026, 0x2032, 0x2033, 0x2212, 0x2215, 0x221A, 0x221E,
         *range(0x2190, 0x2195), 0x21D2, 0x21D4, *range(0x2200, 0x2270),
         0x2282, 0x2283, 0x2286, 0x2287, 0x22A4, 0x22A5, 0x22C5, 0x22EF,
         *range(0x2308, 0x230C), *range(0x27E8, 0x27EC),
         0x210E, 0x2113, 0x2115, 0x211A, 0x211D, 0x2124,
         *range(0x1D434, 0x1D468), *range(0x1D538, 0x1D56C),
         *range(0x1D6E2, 0x1D71C)])
    options = subset.Options()
    options.flavor = "woff"
    options.layout_features = ["*"]
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]
    options.drop_tables = [t for t in options.drop_tables if t != "MATH"] + ["FFTM"]
    font = TTFont(source)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=characters)
    subsetter.subset(font)
    subset.save_font(font, str(target), options)


def visit_math(self, node):
    from docutils import nodes

    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate"))
    self.body.append(tex_to_mathml(node.astext(), display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node):
    from docutils import nodes

    self.body.append(self.starttag(node, "div", CLASS="math notranslate"))
    parts = [part for part in node.astext().split("\n\n") if part.strip()]
    for part in parts:
        self.body.append(tex_to_mathml(part, display=True))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None),
                               (visit_displaymath, None))
    # after the theme's own (pydata-sphinx-theme writes pygments.css then)
    app.connect("build-finished", lighten_pages, priority=900)
    app.add_js_file(None, body=THEME_BEFORE_FIRST_PAINT, priority=100)
    app.add_js_file(None, body=CLOSE_DRAWER_ON_NAVIGATION)
    app.add_js_file(None, body=TAB_STOPS)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    # python book/_ext/light_pages.py /usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf
    import sys

    write_math_font(sys.argv[1], Path(__file__).parent.parent / "_static" / "fonts" / "math.woff")
