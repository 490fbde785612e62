"""Open every built page in headless Chromium, as a reader would.

Fails on a JavaScript error, a console error, a local file that does not
load, a broken image or an empty SVG, a formula MathJax did not render, and on error output outside a cell
that is meant to fail. Saves a full-page screenshot of each page under
_build/screenshots/ to look at.
"""
import os
import shutil

import pytest

from book_files import ROOT, toc_entries

HTML = ROOT / "_build" / "html"
SHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = (os.environ.get("CHROMIUM") or shutil.which("chromium")
            or shutil.which("chromium-browser"))
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update",
         "--disable-sync"]
PAGES = [f"{entry}.html" for entry in toc_entries()] + ["search.html"]

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


@pytest.fixture(scope="module")
def browser():
    if not (HTML / "index.html").is_file():
        pytest.fail("the book is not built: run `make book` first")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.mark.parametrize("page_path", PAGES)
def test_page_renders_without_errors(browser, page_path):
    assert (HTML / page_path).is_file(), f"{page_path} was not built"
    problems = []
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.on("pageerror", lambda error: problems.append(f"JS error: {error}"))
    page.on("console", lambda message: message.type == "error"
            and problems.append(f"console: {message.text}"))
    page.on("requestfailed", lambda request: request.url.startswith("file:")
            and problems.append(f"missing file: {request.url}"))
    page.goto((HTML / page_path).as_uri(), wait_until="load")
    page.wait_for_timeout(300)
    if page.locator("span.math, div.math").count():
        page.wait_for_function(MATH_DONE, timeout=20000)
    problems += page.evaluate(BROKEN_MEDIA)
    problems += [f"error output: {e}" for e in page.evaluate(STRAY_ERRORS)]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=SHOTS / (page_path.replace("/", "_") + ".png"),
                    full_page=True)
    page.close()
    assert problems == []
