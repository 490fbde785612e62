"""Every icon of the built book is drawn, in headless Chromium.

book/_ext/icons.py draws the theme's icons as inline SVG when the book is
built (book/_templates/layout.html does not load the theme's script that
would). On a few pages (PAGES, one view each), every Font Awesome element
must be an `<svg>` whose path inks pixels in the page's colours, and each
one shown must have a box and a path of non-zero size. The icons the CSS
draws with the icon font (the admonitions' symbols) must be drawn by the
font subsets, without fetching the theme's whole icon fonts.
"""
import pytest

from tests.test_browser import INTRO, open_page
from tools.book import ROOT, toc_entries, toc_notebooks

ICONS = """async () => {
  // the pixels an SVG icon inks, drawn alone on a canvas with the colours,
  // strokes and opacities the page gives each of its parts
  const ink = async (svg) => {
    const clone = svg.cloneNode(true);
    const copies = [clone, ...clone.querySelectorAll("*")];
    [svg, ...svg.querySelectorAll("*")].forEach((part, i) => {
      const style = getComputedStyle(part);
      for (const name of ["fill", "fill-opacity", "stroke", "stroke-width", "stroke-opacity", "opacity"])
        copies[i].style.setProperty(name, style.getPropertyValue(name));
    });
    clone.setAttribute("width", 48);
    clone.setAttribute("height", 48);
    const image = new Image();
    image.src = "data:image/svg+xml;charset=utf-8,"
      + encodeURIComponent(new XMLSerializer().serializeToString(clone));
    try { await image.decode(); } catch (error) { return 0; }
    const context = Object.assign(document.createElement("canvas"), {width: 48, height: 48})
      .getContext("2d");
    context.drawImage(image, 0, 0);
    return context.getImageData(0, 0, 48, 48).data.filter((v, i) => i % 4 === 3 && v > 0).length;
  };
  return Promise.all(Array.from(document.querySelectorAll(
      '[class*="fa-"], .fa, .fas, .far, .fab')).map(async (icon) => {
    const svg = icon.tagName.toLowerCase() === "svg";
    const path = svg ? icon.querySelector("path") : null;
    const shown = icon.getClientRects().length > 0 && getComputedStyle(icon).visibility !== "hidden";
    const box = icon.getBoundingClientRect();
    const shape = path && shown ? path.getBBox() : null;
    return {
      element: icon.outerHTML.slice(0, 100),
      svg,
      path: path ? (path.getAttribute("d") || "").length : 0,
      shown,
      size: [box.width, box.height],
      shape: shape ? [shape.width, shape.height] : null,
      ink: svg ? await ink(icon) : 0,
    };
  }));
}"""
# The icons the CSS draws with the icon font (a private-use character as the
# content of a ::before or ::after), each measured in the face the page
# draws it with (the last @font-face of its family and weight, loaded here
# on its own): a glyph that the font subset lacks is blank (no ink).
FONT_ICONS = """async () => {
  const unquote = (family) => family.split(",")[0].trim().replace(/^["']|["']$/g, "");
  const faces = [];
  for (const sheet of document.styleSheets)
    for (const rule of sheet.cssRules)
      if (rule instanceof CSSFontFaceRule) faces.push({
        family: unquote(rule.style.getPropertyValue("font-family")),
        weight: rule.style.getPropertyValue("font-weight") || "400",
        src: rule.style.getPropertyValue("src").replace(/url\\(["']?([^"')]+)["']?\\)/g,
          (_, url) => `url("${new URL(url, sheet.href || document.baseURI)}")`)});
  const icons = [];
  for (const element of document.querySelectorAll("body *"))
    for (const pseudo of ["::before", "::after"]) {
      const style = getComputedStyle(element, pseudo);
      const character = style.content.match(/[\\ue000-\\uf8ff]/u);
      if (character) icons.push({element: element.outerHTML.slice(0, 80) + pseudo,
        character: character[0], family: unquote(style.fontFamily), weight: style.fontWeight});
    }
  const context = document.createElement("canvas").getContext("2d");
  for (const [i, icon] of icons.entries()) {
    const face = faces.filter((f) => f.family === icon.family && f.weight === icon.weight).pop();
    icon.face = face ? face.src : null;
    icon.drawn = false;
    if (!face) continue;
    const probe = new FontFace(`probe-${i}`, face.src, {weight: icon.weight});
    try { await probe.load(); } catch (error) { icon.face += ` (${error})`; continue; }
    document.fonts.add(probe);
    context.font = `${icon.weight} 40px "probe-${i}"`;
    const ink = context.measureText(icon.character);
    icon.drawn = ink.actualBoundingBoxAscent + ink.actualBoundingBoxDescent > 0
      && ink.actualBoundingBoxLeft + ink.actualBoundingBoxRight > 0;
  }
  return icons;
}"""
# What the page fetched for its own font icons: the first one shown.
SHOW_FONT_ICON = """async () => {
  const icon = Array.from(document.querySelectorAll(".admonition-title")).find((title) =>
    /[\\ue000-\\uf8ff]/u.test(getComputedStyle(title, "::after").content
                                 + getComputedStyle(title, "::before").content));
  if (icon) icon.scrollIntoView();
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  await document.fonts.ready;
  return Boolean(icon);
}"""
# A character that the solid subset lacks, drawn as the admonitions' are.
PLANTED = """() => {
  const style = document.createElement("style");
  style.textContent = '.planted::before{content:"\\\\f00f";font:normal 900 1em/1 "Font Awesome 6 Free"}';
  document.head.append(style);
  const planted = document.createElement("p");
  planted.className = "planted";
  document.querySelector("article").append(planted);
}"""
# Copies of the page's first icon that draw nothing, though each is an SVG
# with a path that has a box: no fill, a transparent colour, an invisible path.
INKLESS = """() => {
  const real = document.querySelector("svg.svg-inline--fa");
  const spoil = [(icon) => icon.querySelector("path").setAttribute("fill", "none"),
                 (icon) => { icon.style.color = "transparent"; },
                 (icon) => { icon.querySelector("path").style.opacity = "0"; }];
  for (const change of spoil) {
    const icon = real.cloneNode(true);
    icon.classList.add("planted");
    change(icon);
    document.querySelector("article").append(icon);
  }
}"""
# One view per page: the landing page on a phone (its menu and contents
# buttons), and on a desktop a chapter, the versions page (admonitions, as
# the intro has) and the search page.
CHAPTER = toc_notebooks()[0].relative_to(ROOT).with_suffix(".html").as_posix()
VERSIONS = next(f"{entry}.html" for entry in toc_entries() if entry.endswith("/versions"))
PAGES = {INTRO: "phone", CHAPTER: "desktop", VERSIONS: "desktop", "search.html": "desktop"}


def icon_problems(icons):
    problems = [f"not an SVG: {icon['element']}" for icon in icons if not icon["svg"]]
    problems += [f"an SVG without a shape: {icon['element']}"
                 for icon in icons if icon["svg"] and not icon["path"]]
    problems += [f"an SVG that draws nothing: {icon['element']}"
                 for icon in icons if icon["svg"] and icon["path"] and not icon["ink"]]
    problems += [f"shown but not drawn ({icon['size']}, path {icon['shape']}): {icon['element']}"
                 for icon in icons if icon["shown"] and (
                     min(icon["size"]) <= 0 or not icon["shape"] or min(icon["shape"]) <= 0)]
    return problems


@pytest.mark.parametrize("page_path", list(PAGES))
def test_every_icon_is_drawn(browser, site, page_path):
    problems, loaded = [], []
    with open_page(browser, site, PAGES[page_path], page_path, problems, loaded) as page:
        icons = page.evaluate(ICONS)
        shown = page.evaluate(SHOW_FONT_ICON)
        fetched_by_the_page = [url for url, _ in loaded]
        font_icons = page.evaluate(FONT_ICONS)
    assert problems == [], problems
    # drawn by the subsets, not by the theme's whole icon fonts (which its
    # stylesheet declares too, and a browser fetches for a glyph the
    # subsets lack)
    assert [url for url in fetched_by_the_page if "/webfonts/" in url] == []
    if shown:
        assert any("-subset.woff" in url for url in fetched_by_the_page), fetched_by_the_page
    assert len(icons) >= 10, icons  # the theme's buttons: the check has something to check
    assert sum(icon["shown"] for icon in icons) >= 3, icons
    assert not icon_problems(icons)
    assert [icon for icon in font_icons if not icon["drawn"]] == []
    if page_path in (INTRO, VERSIONS):  # their admonitions
        assert font_icons, "no icon drawn with the icon font found"


def test_a_glyph_missing_from_the_font_subset_is_seen(browser, site):
    with open_page(browser, site, "desktop", INTRO, []) as page:
        page.evaluate(PLANTED)
        font_icons = page.evaluate(FONT_ICONS)
    assert [icon["drawn"] for icon in font_icons if "planted" in icon["element"]] == [False]
    assert [icon for icon in font_icons if "planted" not in icon["element"]
            and not icon["drawn"]] == [] and len(font_icons) >= 2


def test_an_icon_without_ink_is_seen(browser, site):
    with open_page(browser, site, "desktop", INTRO, []) as page:
        page.evaluate(INKLESS)
        icons = page.evaluate(ICONS)
    planted = [icon for icon in icons if "planted" in icon["element"]]
    assert len(planted) == 3 and all(icon["shown"] and min(icon["shape"]) > 0 for icon in planted)
    assert icon_problems(icons) == [f"an SVG that draws nothing: {icon['element']}"
                                    for icon in planted]


def test_a_missing_icon_is_seen():
    """The check itself: an icon left as the theme writes it (an empty
    `<i>`), one without a shape, and one drawn at no size are reported."""
    drawn = {"element": "<svg>", "svg": True, "path": 300, "shown": True,
             "size": [16, 16], "shape": [14, 14], "ink": 500}
    assert icon_problems([drawn, {**drawn, "shown": False, "size": [0, 0], "shape": None}]) == []
    assert icon_problems([{**drawn, "element": "<i>", "svg": False, "path": 0,
                           "size": [0, 17], "shape": None}]) == [
        "not an SVG: <i>", "shown but not drawn ([0, 17], path None): <i>"]
    assert icon_problems([{**drawn, "path": 0}]) == ["an SVG without a shape: <svg>"]
    assert len(icon_problems([{**drawn, "shape": [0, 0]}])) == 1
    assert icon_problems([{**drawn, "ink": 0}]) == ["an SVG that draws nothing: <svg>"]
