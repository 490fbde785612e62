"""The theme's icons without its 1.4 MB Font Awesome script (rewrites 2 to 4
of light_pages.py, which runs them; book/_templates/layout.html drops the
script's tag). Each checks that it found what it rewrites and that its
result is whole, and stops the build otherwise (light_pages.failure).

2. The icons are drawn inline, as that script would: pydata-sphinx-theme
   writes them as empty `<i class="fa-solid fa-bars">` elements, each
   replaced by the same SVG, with the shapes read from the theme's own copy
   of the script (so they follow the pinned theme). Checked: the shapes read
   from the script hold all three packs (solid, regular, brands), each with
   a non-empty path; the page has icons; and every icon element of the page
   (every element with an `fa-...` class) is now an `<svg>` with a
   non-empty path.
3. The few icons the theme's CSS draws with the Font Awesome font (the
   admonitions' symbols, the breadcrumb arrow, the GitHub mark of shortened
   GitHub links) come from subsets of its fonts holding only the characters
   the CSS names (`fa-solid-subset.woff`, 2 kB; `fa-brands-subset.woff`),
   declared in book.css. Checked: both stylesheets name such characters,
   both theme fonts are there, each subset holds some of the characters,
   and every character has a glyph with a shape in one of them.
4. The theme's stylesheet loses the 2,000 `.fa-*:before{content:...}`
   rules of the icon font, used by no element once the icons are SVG (a
   third of the stylesheet). Checked: rules were found and no such rule is
   left. (A build that writes no page copies no static file: the stylesheet
   is then the one rewritten before, which its mark tells.)
"""
import re
from collections import Counter

from light_pages import failure


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
# Any element but an <svg> with a Font Awesome class: an icon not drawn.
UNDRAWN_ICON = re.compile(
    r'<(?!svg\b)[a-zA-Z][\w-]*\b[^>]*\bclass="(?:[^"]*\s)?(?:fa|fas|far|fab|fa-[\w-]+)(?:\s[^"]*)?"[^>]*>')
INLINE_ICON = re.compile(r'<svg\b[^>]*\bsvg-inline--fa\b[^>]*><path fill="currentColor" d="([^"]*)"/></svg>')
PACK_END = re.compile(r'\("(fab|far|fas)",\w+\)')
ICON_ENTRY = re.compile(
    r'(?:"([\w-]+)"|\b([a-z][\w]*)):\[(\d+),(\d+),\[[^\]]*\],"([0-9a-f]+)",'
    r'(?:"([^"]+)"|\[("[^"]+"(?:,"[^"]+")*)\])\]')
STYLES = {"fab": "fab", "fa-brands": "fab", "far": "far", "fa-regular": "far"}
ICON_FONT_RULES = re.compile(
    r'\.fa-[\w-]+:before(?:,\.fa-[\w-]+:before)*\{content:"[^"]*"\}')
ICON_FONT_RULE_LEFT = re.compile(r'\.fa-[\w-]+::?before[^{}]*\{\s*content:\s*"')
ICON_RULES_MARK = "/* light_pages.py: the .fa-*:before rules of the icon font removed */"


def icon_shapes(script, file=FONTAWESOME_JS):
    """{(pack, name): (width, height, path)} from fontawesome.js's text (2):
    every pack there, each shape with a size and a path, or an error."""
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
    packs = Counter(pack for pack, _ in shapes)
    missing = [pack for pack in ("fas", "far", "fab") if not packs[pack]]
    if missing:
        raise failure(2, file, f"no icon shapes read for the pack(s) {', '.join(missing)} "
                      f"(read: {dict(packs) or 'none'}); the script is not written "
                      "as ICON_ENTRY and PACK_END expect")
    empty = [name for name, (width, height, path) in shapes.items()
             if not path.strip() or width <= 0 or height <= 0]
    if empty:
        raise failure(2, file, f"icons read without a shape: {empty[:5]}")
    return shapes


def icon_svg(match, shapes, page="a page"):
    """The inline SVG for one `<i class="fa-...">` element (2), or an error
    if the theme's script has no shape for it."""
    classes = match.group(3).split()
    pack = next((STYLES[c] for c in classes if c in STYLES), "fas")
    names = [c[3:] for c in classes
             if c.startswith("fa-") and (pack, c[3:]) in shapes]
    if not names:
        raise failure(2, page, f"no shape in {FONTAWESOME_JS} for the icon {match.group(0)}")
    width, height, path = shapes[(pack, names[0])]
    attributes = match.group(2).replace(
        f'class="{match.group(3)}"',
        f'class="{" ".join(classes)} svg-inline--fa"')
    return (f'<svg {attributes} aria-hidden="true" focusable="false" '
            f'xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}">'
            f'<path fill="currentColor" d="{path}"/></svg>')


def undrawn_icons(text):
    """The icon elements of a page that are not inline SVG with a shape."""
    return ([m.group(0) for m in UNDRAWN_ICON.finditer(text)]
            + [m.group(0)[:80] for m in INLINE_ICON.finditer(text) if not m.group(1).strip()])


def inline_icons(text, page, shapes):
    """Every icon element of the page drawn as inline SVG (2)."""
    text, count = ICON_ELEMENT.subn(lambda m: icon_svg(m, shapes, page), text)
    if not count:
        raise failure(2, page, "no icon element (<i class=\"fa-...\"></i>) found")
    left = undrawn_icons(text)
    if left:
        raise failure(2, page, f"{len(left)} icon(s) not drawn as SVG: {left[:3]}")
    return text


def css_characters(outdir):
    """The Font Awesome characters the theme's CSS draws by itself (3): its
    `--pst-icon-*` variables and the `content` of the book theme's rules
    (not the `.fa-*:before` rules of every icon, drawn as SVG here)."""
    characters = set()
    for name in THEME_CSS:
        if not (outdir / name).is_file():
            raise failure(3, outdir / name, "the theme's stylesheet is missing")
        css = (outdir / name).read_text()
        if "pydata" in name:
            css = " ".join(re.findall(r'--pst-icon-[\w-]+:("[^"]*")', css))
        named = ({int(c, 16) for c in re.findall(r'"\\(f[0-9a-f]{3})"', css)}
                 | {ord(c) for c in re.findall('"([\ue000-\uf8ff])"', css)})
        if not named:
            raise failure(3, outdir / name, "names no Font Awesome character")
        characters |= named
    return characters


def write_font_subsets(outdir):
    """The subsets of the theme's icon fonts (3)."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    characters = sorted(css_characters(outdir))
    drawn = set()
    for target, source in FONT_SUBSETS.items():
        if not (outdir / source).is_file():
            raise failure(3, outdir / source, "the theme's icon font is missing")
        font = TTFont(outdir / source, recalcTimestamp=False)
        options = subset.Options()
        options.flavor = "woff"
        options.layout_features = []
        options.name_IDs = []
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=characters)
        subsetter.subset(font)
        (outdir / target).parent.mkdir(parents=True, exist_ok=True)
        subset.save_font(font, str(outdir / target), options)
        written = TTFont(outdir / target)
        glyphs = written["glyf"]
        held = {c for c, glyph in (written.getBestCmap() or {}).items()
                if c in characters and glyphs[glyph].numberOfContours}
        if not held:
            raise failure(3, outdir / target, "holds none of the characters the CSS names")
        drawn |= held
    missing = [f"U+{c:04X}" for c in characters if c not in drawn]
    if missing:
        raise failure(3, outdir / "_static/fonts", f"no glyph with a shape for {missing}")


def without_icon_font_rules(css, file=THEME_CSS[0]):
    """The theme's stylesheet without its `.fa-*:before` rules (4), marked
    (a build that writes no page copies no static file: the stylesheet is
    then the one this rewrote before)."""
    if ICON_RULES_MARK in css:
        return css
    css, count = ICON_FONT_RULES.subn("", css)
    if not count:
        raise failure(4, file, "no .fa-*:before{content:...} rule found")
    left = ICON_FONT_RULE_LEFT.findall(css)
    if left:
        raise failure(4, file, f"{len(left)} icon font rules left: {left[:3]}")
    return css + f"\n{ICON_RULES_MARK}\n"


def theme_icon_files(outdir):
    """The font subsets (3) and the theme's stylesheet without its icon
    font rules (4)."""
    write_font_subsets(outdir)
    theme_css = outdir / THEME_CSS[0]
    if not theme_css.is_file():
        raise failure(4, theme_css, "the theme's stylesheet is missing")
    theme_css.write_text(without_icon_font_rules(theme_css.read_text(), theme_css))
