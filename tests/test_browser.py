"""Open every built page in headless Chromium, as readers would.

Each page is loaded four ways: a 1366x900 desktop and a 390-px phone
(is_mobile, touch), each in the light and the dark colour scheme. Every view
fails on a JavaScript error, a console error, a local file that does not
load, a broken image or an empty SVG, a formula MathJax did not render,
error output outside a cell that is meant to fail, a page wider than the
screen, and content cut off (clipped by its box; on a desktop, also a table,
formula or diagram that needs scrolling). On a phone the menu and contents
buttons must open the navigation; on a desktop the menu button must hide the
sidebar (checked in the light views; the dark ones run the same script).
Every image needs real alt text and a caption, graph labels must be at
least 10 px tall as shown, printing keeps each page's title, the intro's
quick fix shows on the first screen, and the site search ranks the intro
first for the error. Full-page screenshots of every view are saved under
_build/screenshots/ to look at.
"""
import os
import re
import shutil
import urllib.parse

import pytest

from tools.book import ROOT, THE_ERROR, toc_entries

HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = (os.environ.get("CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]
PAGES = [f"{entry}.html" for entry in toc_entries()] + ["search.html"]
INTRO = f"{toc_entries()[0]}.html"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
VIEWS = {
    "desktop": dict(viewport=DESKTOP),
    "desktop-dark": dict(viewport=DESKTOP, color_scheme="dark"),
    "phone": dict(viewport=PHONE, is_mobile=True, has_touch=True),
    "phone-dark": dict(viewport=PHONE, is_mobile=True, has_touch=True,
                       color_scheme="dark"),
}
MIN_TEXT_PX = 10

pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (Debian: apt-get install chromium); "
           "the browser test of the built book is skipped")

BROKEN_MEDIA = """() => {
  const bad = [];
  for (const img of document.images)
    if (!img.complete || img.naturalWidth === 0) bad.push('img ' + img.src);
  for (const svg of document.querySelectorAll('.cell_output svg, img[src$=".svg"]')) {
    const box = svg.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) bad.push('empty svg');
  }
  for (const math of document.querySelectorAll('span.math, div.math'))
    if (!math.querySelector('mjx-container')) bad.push('unrendered math ' + math.textContent.slice(0, 40));
  return bad;
}"""

MATH_DONE = """() => !window.MathJax || !MathJax.startup ||
  MathJax.startup.promise.then(() => true)"""

STRAY_ERRORS = """() => Array.from(
  document.querySelectorAll('.cell_output .output.traceback, .cell_output .output.error'))
  .filter(out => !out.closest('.tag_raises-exception'))
  .map(out => out.textContent.trim().split('\\n')[0])"""

# What does not fit. `screen` is the width the page was opened at (a phone's
# layout viewport grows with a too-wide page, so innerWidth cannot tell).
# Code may scroll in its own box anywhere; on a phone everything may (tables,
# formulas, diagrams, graphs), but nothing may stick out of the screen.
CUT_OFF = """([screen, desktop]) => {
  const name = el => el.tagName.toLowerCase() + (el.className && el.className.baseVal === undefined
    ? '.' + String(el.className).trim().split(/\\s+/).slice(0, 2).join('.') : '') +
    ' "' + (el.textContent || '').trim().replace(/\\s+/g, ' ').slice(0, 50) + '"';
  const problems = [];
  const width = document.documentElement.scrollWidth;
  if (width > screen) problems.push(`page is ${width} px wide on a ${screen}-px screen`);
  const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
  const isCode = el => el.tagName === 'PRE' && el.closest(
    '.cell_input, div[class*="highlight-python"], div[class*="highlight-ipython"]');
  for (const el of document.querySelectorAll('main *')) {
    if (el.closest('mjx-assistive-mml, .visually-hidden, .sr-only, dialog')) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) continue;
    const hidden = el.scrollWidth - el.clientWidth;
    if (hidden <= 1 || el.clientWidth === 0) continue;
    const overflow = getComputedStyle(el).overflowX;
    if (overflow === 'hidden' || overflow === 'clip')
      problems.push(`${name(el)} clips ${hidden} px`);
    else if (scrolls(el) && desktop && !isCode(el))
      problems.push(`${name(el)} hides ${hidden} px behind a scroll bar`);
  }
  return problems;
}"""

# Images: real alt text (not a file name) and a caption; graph (SVG) labels
# at least MIN_TEXT_PX tall as shown. Returns [src, alt, caption, shown width].
IMAGES = """() => Array.from(document.querySelectorAll('article img')).map(img => {
  const figure = img.closest('figure');
  const caption = figure && figure.querySelector('figcaption');
  const style = getComputedStyle(img);
  const padding = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  // the picture's own width as shown: zoom included, the theme's frame not
  const shown = img.clientWidth ? img.getBoundingClientRect().width *
                (img.clientWidth - padding) / img.clientWidth : 0;
  return [img.getAttribute('src'), img.getAttribute('alt') || '',
          caption ? caption.textContent.trim() : '', shown];
})"""

TITLE_PRINTED = """() => {
  const h1 = document.querySelector('article h1');
  return !!h1 && getComputedStyle(h1).display !== 'none' && h1.getBoundingClientRect().height > 0;
}"""


def svg_text_px(svg_path, shown_width):
    """The smallest label height of an SVG image shown `shown_width` px wide."""
    svg = svg_path.read_text()
    view_width = float(re.search(r'viewBox="[\d.-]+ [\d.-]+ ([\d.]+)', svg).group(1))
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)]
    return min(sizes) * shown_width / view_width if sizes else None


@pytest.fixture(scope="module")
def browser():
    if not (HTML / "index.html").is_file():
        pytest.fail("the book is not built: run `make book` first")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


def open_page(browser, view, page_path, problems):
    context = browser.new_context(**VIEWS[view])
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"JS error: {error}"))
    page.on("console", lambda message: message.type == "error"
            and problems.append(f"console: {message.text}"))
    page.on("requestfailed", lambda request: request.url.startswith("file:")
            and problems.append(f"missing file: {request.url}"))
    page.goto((HTML / page_path).as_uri(), wait_until="load")
    page.wait_for_timeout(300)
    if page.locator("span.math, div.math").count():
        page.wait_for_function(MATH_DONE, timeout=20000)
        page.wait_for_timeout(200)
    return context, page


def visible(page, selector):
    return [button for button in page.locator(selector).all() if button.is_visible()]


def phone_navigation_problems(page):
    """Tap the menu and the contents buttons; each must open its panel."""
    problems = []
    toc_pages = {f"{entry}.html".split("/")[-1] for entry in toc_entries()}
    for selector, dialog, needs in ((".primary-toggle", "#pst-primary-sidebar-modal", True),
                                   (".secondary-toggle", "#pst-secondary-sidebar-modal", False)):
        buttons = visible(page, selector)
        if not buttons:
            if needs:
                problems.append(f"no visible {selector} button")
            continue
        buttons[0].tap()
        page.wait_for_timeout(300)
        opened = page.evaluate(f"""() => {{
          const dialog = document.querySelector('{dialog}');
          if (!dialog || !dialog.open) return null;
          return Array.from(dialog.querySelectorAll('a'))
            .filter(a => a.getBoundingClientRect().width > 0)
            .map(a => a.getAttribute('href'));
        }}""")
        if not opened:
            problems.append(f"{selector} does not open the navigation")
        elif selector == ".primary-toggle":
            reached = {href.split("#")[0].split("/")[-1] for href in opened}
            missing = toc_pages - reached - {""}
            # the current page links to itself as "#"
            if len(missing) > 1:
                problems.append(f"the menu does not list {sorted(missing)}")
        page.keyboard.press("Escape")
        page.wait_for_timeout(200)
    return problems


def desktop_navigation_problems(page):
    problems = []
    toggles = page.locator(".primary-toggle").count()
    if toggles != 1:
        problems.append(f"{toggles} menu buttons (the theme binds only the first)")
    buttons = visible(page, ".primary-toggle")
    if not buttons:
        return problems + ["no visible menu button"]
    hidden = "() => document.querySelector('.bd-sidebar-primary').classList.contains('pst-sidebar-hidden')"
    before = page.evaluate(hidden)
    buttons[0].click()
    page.wait_for_timeout(300)
    if page.evaluate(hidden) == before:
        problems.append("the menu button does not hide or show the sidebar")
    buttons[0].click()
    page.wait_for_timeout(300)
    return problems


def image_problems(page, view):
    problems = []
    for src, alt, caption, shown in page.evaluate(IMAGES):
        name = src.split("/")[-1][:16]
        if not alt.strip() or "_images/" in alt or re.search(r"\.(svg|png|jpe?g|gif)$", alt):
            problems.append(f"image {name} has no real alt text: {alt!r}")
        if not caption:
            problems.append(f"image {name} has no caption")
        if src.endswith(".svg") and shown:
            file = (HTML / page.url.split("/_build/html/")[-1]).parent / urllib.parse.unquote(src)
            text_px = svg_text_px(file.resolve(), shown)
            if text_px is not None and text_px < MIN_TEXT_PX - 0.05:
                problems.append(f"graph {name}: labels {text_px:.1f} px tall on the {view}")
    return problems


def quick_fix_problems(page, view):
    """The intro: its title and description name the error, and its quick
    fix is right under the error, on the first screen."""
    box = page.evaluate("""() => {
      const box = document.querySelector('.quick-fix');
      if (!box) return null;
      const rect = box.getBoundingClientRect();
      const code = box.querySelector('pre');
      const error = document.querySelector('div.highlight-text pre');
      const prev = box.previousElementSibling;
      return {top: rect.top + window.scrollY, bottom: rect.bottom + window.scrollY,
              right: rect.right, codeHidden: code.scrollWidth - code.clientWidth,
              underError: !!prev && !!prev.querySelector('pre') && prev.textContent.includes('TBackward0'),
              errorText: error ? error.textContent.trim() : ''};
    }""")
    problems = []
    title, description = page.evaluate("""() => [document.title,
      (document.querySelector('meta[name="description"]') || {}).content || '']""")
    for words in ("TBackward0", "invalid gradient"):
        if words not in title or words not in description:
            problems.append(f"the page title or description lacks {words!r}")
    book_title = title.split(" \N{EM DASH} ")[-1]
    if title.count(book_title) > 1:
        problems.append(f"the page title repeats itself: {title!r}")
    if box is None:
        return problems + ["the intro has no quick-fix box"]
    screen = VIEWS[view]["viewport"]
    if box["errorText"] != THE_ERROR:
        problems.append(f"the first text block is not the error: {box['errorText'][:60]!r}")
    if not box["underError"]:
        problems.append("the quick fix is not right under the error")
    if box["bottom"] > screen["height"]:
        problems.append(f"the quick fix ends at {box['bottom']:.0f} px, below the "
                        f"first screen ({screen['height']} px)")
    if box["right"] > screen["width"] or box["codeHidden"] > 1:
        problems.append("the quick fix is cut at the side")
    return problems


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("page_path", PAGES)
def test_page(browser, page_path, view):
    assert (HTML / page_path).is_file(), f"{page_path} was not built"
    problems = []
    context, page = open_page(browser, view, page_path, problems)
    dark = page.evaluate("() => document.documentElement.dataset.theme")
    assert dark == ("dark" if view.endswith("dark") else "light"), dark
    problems += page.evaluate(BROKEN_MEDIA)
    problems += [f"error output: {e}" for e in page.evaluate(STRAY_ERRORS)]
    desktop = view.startswith("desktop")
    problems += page.evaluate(CUT_OFF, [VIEWS[view]["viewport"]["width"], desktop])
    problems += image_problems(page, view)
    if page_path == INTRO:
        problems += quick_fix_problems(page, view)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / f"{page_path.replace('/', '_')[:-5]}-{view}.png",
                    full_page=True)
    if page_path != "search.html" and not view.endswith("dark"):
        problems += (desktop_navigation_problems(page) if desktop
                     else phone_navigation_problems(page))
    if view == "desktop" and page_path != "search.html":
        page.emulate_media(media="print")
        if not page.evaluate(TITLE_PRINTED):
            problems.append("the printed page has no title")
    context.close()
    assert problems == []


@pytest.mark.parametrize("query", [THE_ERROR, "TBackward0"])
def test_search_ranks_the_intro_first(browser, query):
    page = browser.new_page(viewport=DESKTOP)
    page.goto((HTML / "search.html").as_uri() + "?q=" + urllib.parse.quote(query),
              wait_until="load")
    page.wait_for_function(
        "() => document.querySelector('#search-results .search-summary')", timeout=20000)
    page.wait_for_timeout(500)
    found = page.evaluate("""() => Array.from(
      document.querySelectorAll('#search-results ul.search > li > a'))
      .map(a => a.getAttribute('href'))""")
    page.close()
    assert found, f"no result for {query!r}"
    assert found[0].split("#")[0].endswith(INTRO.split("/")[-1]), found[:3]
