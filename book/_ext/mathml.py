"""Mathematics as MathML, written when the book is built (the renderer
`mathml`, chosen by `html_math_renderer` in _config.yml): browsers draw it
themselves, offline too, so no page loads MathJax (2 MB before compression,
and seconds of script on a phone). latex2mathml converts the TeX; a few
constructions it does not know are rewritten first into ones it does.
book.css gives <math> the font book/_static/fonts/math.woff: a subset of
DejaVu Math TeX Gyre (Debian's fonts-dejavu-extra; public domain math
extensions) with its MATH table, made by `write_math_font` below:

    python book/_ext/mathml.py /usr/share/fonts/truetype/dejavu/DejaVuMathTeXGyre.ttf
"""
import re
from pathlib import Path

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
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    import sys

    write_math_font(sys.argv[1], Path(__file__).parent.parent / "_static" / "fonts" / "math.woff")
