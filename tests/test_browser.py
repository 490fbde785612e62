"""Open every built page in headless Chromium, as readers would.

The book is served over HTTP with gzip, as a web host sends it
(tools/serve.py). Each page is loaded four ways (VIEWS): a 1366x900 desktop
and a 390-px phone, each in the light and the dark colour scheme, and every
view fails on what test_page lists: errors, missing files, broken media,
content cut off, words broken, images without alt text or caption, a page
over its budget (BUDGETS), navigation that does not open or close, print
that is too small or dark, and serious accessibility violations. Each check
below says what it looks for. The tests after test_page run once each: the
site search, a planted low-contrast token, and the quick fix on a small
phone.

With SCREENSHOTS=1 in the environment, a full-page screenshot of every view
is saved under _build/screenshots/ to look at; without it, none is taken (a
screenshot checks nothing, and costs time). `make test` spreads the views
over its workers (tests/conftest.py).
"""
import contextlib
import os
import re
import urllib.parse

import pytest

from tools.book import ROOT, THE_ERROR, toc_entries
from tools.downloads import HTML
from tools.serve import gzip_size

SHOTS = ROOT / "_build" / "screenshots"
PAGES = [f"{entry}.html" for entry in toc_entries()] + ["search.html"]
INTRO = f"{toc_entries()[0]}.html"
DESKTOP = {"width": 1366, "height": 900}
PHONE = {"width": 390, "height": 844}
SMALL_PHONE = {"width": 360, "height": 640}
VIEWS = {
    "desktop": dict(viewport=DESKTOP),
    "desktop-dark": dict(viewport=DESKTOP, color_scheme="dark"),
    "phone": dict(viewport=PHONE, is_mobile=True, has_touch=True),
    "phone-dark": dict(viewport=PHONE, is_mobile=True, has_touch=True,
                       color_scheme="dark"),
}
# The views axe-core runs in: between them both layouts (the rules that
# depend on the width) and both colour schemes (the contrast of each), at
# half the cost of four runs, axe being most of a view's time.
AXE_VIEWS = ("desktop", "phone-dark")
MIN_TEXT_PX = 10
# Print: CSS px per point.
PX_PER_PT = 96 / 72

# What a page may load on a phone, in one place: KiB as sent with gzip
# (tools/serve.py: compressed text, images and fonts as they are; lazy
# images count once on the first screen only) and the scripts it fetches.
# For scale: a fresh `jupyter-book create` book's intro loads 964 KiB and
# 21 scripts. Raise a budget only with a reason written here.
BUDGETS = {
    "default": {"kib": 200, "scripts": 13},
    # the landing page: most readers arrive here from a search
    INTRO: {"kib": 150, "scripts": 13},
    # the longest chapter: its own HTML is 105 KiB with gzip (every reading
    # of the message, the module check and where else the message is
    # raised, each shown by a cell's output; and the doctor, which must sit
    # in the chapter whose helpers it calls, so that the chapter runs alone;
    # 232 became 240 when it learned to read prune's computed weights, freed
    # graphs and average copies, and the chapter showed a checkpoint under prune)
    "book/06_any_layer_any_node.html": {"kib": 240, "scripts": 13},
    # the chapters with formulas also load the math font (68 KiB)
    "book/05_variance_pruning.html": {"kib": 280, "scripts": 13},
    "book/07_tnvp_language_model.html": {"kib": 280, "scripts": 13},
    # the search page loads the site's search index
    "search.html": {"kib": 220, "scripts": 16},
}

BROKEN_MEDIA = """() => {
  const bad = [];
  for (const img of document.images)
    if (!img.complete || img.naturalWidth === 0) bad.push('img ' + img.src);
  for (const svg of document.querySelectorAll('.cell_output svg, img[src$=".svg"]')) {
    const box = svg.getBoundingClientRect();
    if (box.width === 0 || box.height === 0) bad.push('empty svg');
  }
  for (const math of document.querySelectorAll('span.math, div.math'))
    if (!math.querySelector('math') || math.querySelector('merror') ||
        /\\\\[a-zA-Z]/.test(math.textContent))
      bad.push('unrendered math ' + math.textContent.slice(0, 40));
  return bad;
}"""

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
    '.cell_input, div[class*="highlight-python"], div[class*="highlight-ipython"], .aligned-output');
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

# Text laid out in columns in a cell output (two or more lines padded with
# runs of spaces between words: the rule book/_ext/output_shapes.py marks
# them by) must keep each line whole; if it scrolls, a shadow shows it.
ALIGNED_OUTPUTS = """() => {
  const problems = [];
  for (const pre of document.querySelectorAll('div.cell_output pre')) {
    if (pre.closest('.traceback') || pre.getBoundingClientRect().width === 0) continue;
    const lines = pre.textContent.replace(/\\n$/, '').split('\\n');
    if (lines.filter(line => /\\S {2,}\\S/.test(line)).length < 2) continue;
    const tops = new Set();
    const range = document.createRange();
    range.selectNodeContents(pre);
    for (const rect of range.getClientRects())
      if (rect.width > 0) tops.add(Math.round(rect.top));
    const shown = tops.size, written = lines.filter(line => line.trim()).length;
    const name = '"' + lines[0].trim().slice(0, 40) + '"';
    if (shown > written) problems.push(`aligned output ${name} wraps: ${written} lines shown as ${shown}`);
    if (pre.scrollWidth > pre.clientWidth + 1 &&
        !getComputedStyle(pre).backgroundImage.includes('gradient'))
      problems.push(`aligned output ${name} scrolls with no shadow at its edge`);
  }
  return problems;
}"""

# On a phone, a graph (an image in a cell output) that scrolls sideways says so.
SCROLLING_FIGURES = """() => Array.from(document.querySelectorAll('div.cell_output'))
  .filter(box => box.querySelector('img') && box.scrollWidth > box.clientWidth + 1)
  .filter(box => !/scroll/i.test(getComputedStyle(box, '::before').content))
  .map(box => 'graph scrolls sideways without saying so: ' +
              (box.querySelector('img').getAttribute('alt') || '').slice(0, 50))"""

# Reading code on a phone: inline code never breaks right after a dot (an
# attribute such as `.data` split from its dot); a line of code or output
# that wraps continues to the right of where it started (a hanging indent),
# not under it as if it were a statement of its own; and a code box's copy
# button covers none of its text (code that scrolls is looked at scrolled to
# its end, where what the button covers at the edge comes out from under it).
PHONE_READING = """() => {
  const problems = [];
  const range = document.createRange();
  const chars = function* (el) {
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode())
      for (let i = 0; i < node.textContent.length; i++) yield [node, i];
  };
  const box = (node, i) => { range.setStart(node, i); range.setEnd(node, i + 1);
                             return range.getBoundingClientRect(); };
  let dotBreaks = 0, example = '';
  for (const code of document.querySelectorAll('article code.literal')) {
    if (code.getClientRects().length < 2) continue;
    let previous = null;
    for (const [node, i] of chars(code)) {
      const rect = box(node, i), c = node.textContent[i];
      if (/\\s/.test(c)) previous = null;  // a break at a space is no break after a dot
      if (rect.width === 0 || /\\s/.test(c)) continue;
      if (previous && previous.c === '.' && rect.top >= previous.rect.bottom - 1) {
        dotBreaks++;
        example = example || code.textContent.trim().slice(0, 40);
      }
      previous = {c, rect};
    }
  }
  if (dotBreaks) problems.push(`${dotBreaks} inline code breaks right after a dot, as "${example}"`);
  for (const pre of document.querySelectorAll('article pre')) {
    if (!getComputedStyle(pre).whiteSpace.startsWith('pre-wrap') ||
        pre.getBoundingClientRect().width === 0) continue;
    const text = pre.textContent, nodes = [];
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(), at = 0; node; at += node.textContent.length, node = walker.nextNode())
      nodes.push([node, at]);
    const point = (offset) => {
      let k = nodes.length - 1;
      while (k > 0 && nodes[k][1] > offset) k--;
      return [nodes[k][0], Math.min(offset - nodes[k][1], nodes[k][0].textContent.length)];
    };
    const style = getComputedStyle(pre);
    const lineHeight = parseFloat(style.lineHeight) || 16;
    // a line shorter than the box cannot wrap: not measured (the width of a
    // character of the box's monospace font, from its first character)
    const width = pre.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    const ch = nodes.length && nodes.find(([n]) => n.textContent.trim()) ?
      box(nodes.find(([n]) => n.textContent.trim())[0], 0).width : 0;
    let start = 0;
    for (const line of text.split('\\n')) {
      const end = start + line.length;
      if (line.trim() && (!ch || line.length * ch > width - 2 * ch)) {
        range.setStart(...point(start)); range.setEnd(...point(end));
        const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
        const top = Math.min(...rects.map(r => r.top));
        const first = rects.filter(r => r.top < top + lineHeight / 2);
        const later = rects.filter(r => r.top >= top + lineHeight / 2);
        if (later.length) {
          const from = Math.min(...first.map(r => r.left)), then = Math.min(...later.map(r => r.left));
          if (then < from + 2) problems.push('a wrapped line continues under its own start, as a ' +
            `line of its own: "${line.trim().slice(0, 50)}"`);
        }
      }
      start = end + 1;
    }
  }
  for (const button of document.querySelectorAll('article button.copybtn')) {
    const pre = button.parentElement.querySelector('pre');
    if (!pre || pre.getBoundingClientRect().width === 0) continue;
    const scrolled = pre.scrollLeft;
    pre.scrollLeft = pre.scrollWidth;
    const b = button.getBoundingClientRect();
    let covered = '';
    for (const [node, i] of chars(pre)) {
      const rect = box(node, i);
      if (rect.top > b.bottom) break;
      if (rect.width > 0 && /\\S/.test(node.textContent[i]) && rect.right > b.left + 1 &&
          rect.left < b.right - 1 && rect.bottom > b.top + 1 && rect.top < b.bottom - 1)
        covered += node.textContent[i];
    }
    pre.scrollLeft = scrolled;
    if (covered) problems.push(`the copy button covers "${covered}" of ` +
                               `"${pre.textContent.trim().slice(0, 40)}"`);
  }
  return problems;
}"""

# No line break between two letters or digits of one word in headings, the
# footer and the page links, inline code, and code that wraps.
MID_WORD_BREAKS = """() => {
  const problems = [];
  const word = /[\\p{L}\\p{N}]/u;
  const selector = 'article h1, article h2, article h3, article h4, .prev-next-area, ' +
                   'footer, code.literal, article pre';
  const range = document.createRange();
  for (const el of document.querySelectorAll(selector)) {
    if (el.tagName === 'PRE' && !getComputedStyle(el).whiteSpace.startsWith('pre-wrap') &&
        getComputedStyle(el).whiteSpace !== 'normal') continue;
    if (el.tagName === 'PRE' && el.closest('div.cell_output')) continue;
    const box = el.getBoundingClientRect();
    if (box.width === 0) continue;
    const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const text = node.textContent;
      if (text.length < 2) continue;
      range.selectNodeContents(node);
      if (range.getClientRects().length < 2) continue;  // on one line
      let previous = null;
      for (let i = 0; i < text.length; i++) {
        range.setStart(node, i); range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        if (previous && word.test(text[i - 1]) && word.test(text[i]) && rect.width > 0 &&
            rect.top >= previous.bottom - 1) {
          problems.push(`mid-word break in ${el.tagName.toLowerCase()}: "` +
            text.slice(Math.max(0, i - 12), i) + ' / ' + text.slice(i, i + 12) + '"');
          break;
        }
        if (rect.width > 0) previous = rect;
      }
    }
  }
  return problems;
}"""

# Print (emulated print media): the title shown, text sizes, the width used,
# and colours.
PRINTED = """() => {
  const luminance = color => {
    const [r, g, b] = (color.match(/[\\d.]+/g) || [0, 0, 0]).map(Number);
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255;
  };
  const background = el => {
    for (; el; el = el.parentElement) {
      const color = getComputedStyle(el).backgroundColor;
      const alpha = (color.match(/[\\d.]+/g) || [])[3];
      if (color !== 'transparent' && alpha !== '0') return color;
    }
    return 'rgb(255, 255, 255)';
  };
  const article = document.querySelector('article');
  const paragraph = article.querySelector('section p');
  const code = Array.from(article.querySelectorAll('pre, code'))
    .filter(el => el.getBoundingClientRect().width > 0);
  const h1 = article.querySelector('h1');
  return {
    title: !!h1 && getComputedStyle(h1).display !== 'none' && h1.getBoundingClientRect().height > 0,
    body: paragraph ? parseFloat(getComputedStyle(paragraph).fontSize) : null,
    code: code.length ? Math.min(...code.map(el => parseFloat(getComputedStyle(el).fontSize))) : null,
    width: article.getBoundingClientRect().width / document.documentElement.clientWidth,
    heading: luminance(getComputedStyle(h1).color),
    paper: luminance(background(h1)),
    text: paragraph ? luminance(getComputedStyle(paragraph).color) : 0,
  };
}"""

# What the page's scripts make the browser lay out while the page loads.
# book.css leaves the cells far from the screen to be laid out when the
# reader scrolls near them (content-visibility: auto); a script that reads
# the size, the position or the computed style of an element in such a cell
# makes the browser lay that cell out at once (the theme's tab stops did so
# for every cell: 1.2 s of blocking time on chapter 5 on a throttled phone).
# Installed before the page's own scripts, it records each such read until
# LAYOUT_READS_SO_FAR is asked, which stops it.
RECORD_LAYOUT_READS = """(() => {
  const reads = [];
  let recording = true;
  const deferred = el => el instanceof Element && el.isConnected && el.checkVisibility() &&
    !el.checkVisibility({contentVisibilityAuto: true});
  const note = (el, name) => {
    if (!recording || !deferred(el)) return;
    recording = false;  // the name below reads nothing of the layout
    const cls = typeof el.className === 'string' && el.className.trim()
      ? '.' + el.className.trim().split(/\\s+/)[0] : '';
    reads.push(`${name} of ${el.tagName.toLowerCase()}${cls} in a cell not laid out yet`);
    recording = true;
  };
  const getters = {
    Element: ['scrollWidth', 'scrollHeight', 'scrollTop', 'scrollLeft', 'clientWidth',
              'clientHeight', 'clientTop', 'clientLeft'],
    HTMLElement: ['offsetWidth', 'offsetHeight', 'offsetTop', 'offsetLeft', 'offsetParent',
                  'innerText'],
  };
  for (const [type, names] of Object.entries(getters))
    for (const name of names) {
      const property = Object.getOwnPropertyDescriptor(window[type].prototype, name);
      Object.defineProperty(window[type].prototype, name, {...property,
        get() { note(this, name); return property.get.call(this); }});
    }
  for (const name of ['getBoundingClientRect', 'getClientRects']) {
    const method = Element.prototype[name];
    Element.prototype[name] = function () { note(this, name); return method.call(this); };
  }
  const computed = window.getComputedStyle;
  window.getComputedStyle = function (el, ...rest) {
    note(el, 'getComputedStyle');
    return computed.call(this, el, ...rest);
  };
  window.__layoutReadsSoFar = () => { recording = false; return reads; };
})()"""
LAYOUT_READS_SO_FAR = "() => window.__layoutReadsSoFar()"



def svg_text_px(svg_path, shown_width):
    """The smallest label height of an SVG image shown `shown_width` px wide."""
    svg = svg_path.read_text()
    view_width = float(re.search(r'viewBox="[\d.-]+ [\d.-]+ ([\d.]+)', svg).group(1))
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)]
    return min(sizes) * shown_width / view_width if sizes else None


def local_file(url, site):
    """The file under _build/html that a URL of the site serves."""
    path = urllib.parse.unquote(urllib.parse.urlsplit(url).path).lstrip("/")
    file = HTML / path
    return file / "index.html" if file.is_dir() else file


@contextlib.contextmanager
def open_page(browser, site, view, page_path, problems, loaded=None):
    """The page opened in a context of its own, closed after; `problems`
    receives its errors and missing files, `loaded` (a list) each (url,
    resource type) it fetched from the site."""
    context = browser.new_context(**VIEWS[view])
    context.add_init_script(RECORD_LAYOUT_READS)
    page = context.new_page()
    page.on("pageerror", lambda error: problems.append(f"JS error: {error}"))
    page.on("console", lambda message: message.type == "error"
            and problems.append(f"console: {message.text}"))
    page.on("requestfailed", lambda request: request.url.startswith(site)
            and problems.append(f"missing file: {request.url}"))
    page.on("response", lambda response: response.url.startswith(site)
            and response.status >= 400
            and problems.append(f"missing file ({response.status}): {response.url}"))
    if loaded is not None:
        page.on("requestfinished", lambda request: request.url.startswith(site)
                and loaded.append((request.url, request.resource_type)))
    page.goto(site + page_path, wait_until="load")
    # the fonts drawn (the checks measure text), then 300 ms in which what
    # the page's scripts do after the load event (a timer, an observer) is
    # recorded too: layout reads, errors
    page.evaluate("() => document.fonts.ready.then(() => null)")
    page.wait_for_timeout(300)
    try:
        yield page
    finally:
        context.close()


def settles(page, condition, arg=None):
    """Whether the JavaScript `condition` (a function of `arg`) becomes true
    within Playwright's 30 s (a fixed sleep is too short on a busy machine)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(condition, arg=arg)
    except PlaywrightTimeout:
        return False
    return True


def budget_problems(page_path, loaded, site):
    """What the page loaded against its budget (BUDGETS)."""
    budget = BUDGETS.get(page_path, BUDGETS["default"])
    urls = {url.split("#")[0].split("?")[0]: kind for url, kind in loaded}
    kib = sum(gzip_size(local_file(url, site)) for url in urls) / 1024
    scripts = sorted(url.rsplit("/", 1)[-1] for url, kind in urls.items() if kind == "script")
    problems = []
    if kib > budget["kib"]:
        problems.append(f"loads {kib:.0f} KiB with gzip, over its budget of {budget['kib']} KiB")
    if len(scripts) > budget["scripts"]:
        problems.append(f"loads {len(scripts)} scripts, over its budget of "
                        f"{budget['scripts']}: {scripts}")
    return problems


def mathjax_problems(page, loaded):
    """MathJax on a page without mathematics."""
    if page.locator("span.math, div.math").count():
        return []
    mathjax = [url for url, _ in loaded if "mathjax" in url.lower()]
    if mathjax or page.evaluate("() => !!window.MathJax"):
        return [f"loads MathJax but shows no mathematics: {mathjax}"]
    return []


# Code is coloured token by token: a chapter's code cells hold some 13,000
# highlighted spans in a few dozen distinct looks, and axe's colour-contrast
# rule, checking each, was two thirds of a chapter's axe time. Every span of
# one look (its classes, colour, size, weight, opacity and the background
# behind it) has the same contrast, so the rule checks one span of each
# look, marked here, and every other element of the page as before.
MARK_CODE_TOKEN_SAMPLES = """() => {
  const background = el => {
    for (; el; el = el.parentElement) {
      const colour = getComputedStyle(el).backgroundColor;
      if (colour !== 'rgba(0, 0, 0, 0)' && colour !== 'transparent') return colour;
    }
    return 'none';
  };
  const looks = new Set();
  for (const span of document.querySelectorAll('div.highlight pre span')) {
    const style = getComputedStyle(span);
    const look = [span.className, style.color, style.fontSize, style.fontWeight,
                  style.opacity, background(span.parentElement)].join('|');
    if (!looks.has(look)) { looks.add(look); span.dataset.axeSample = ''; }
  }
  return looks.size;
}"""
CONTRAST_CHECKED = "*:not(div.highlight pre span), div.highlight pre span[data-axe-sample]"


def accessibility_problems(page):
    """axe-core's serious and critical violations."""
    from axe_playwright_python.sync_playwright import Axe

    looks = page.evaluate(MARK_CODE_TOKEN_SAMPLES)
    page.evaluate(Axe().axe_script)
    page.evaluate("selector => axe.configure({rules: [{id: 'color-contrast', selector}]})",
                  CONTRAST_CHECKED)
    # preload off: axe would fetch the theme's imported stylesheet again,
    # relative to the page instead of the stylesheet (a 404 of its own).
    # Every rule runs; only the violations are reported in full (the nodes
    # that pass, megabytes on a chapter, are neither collected nor sent).
    # label-content-name-mismatch is experimental in axe-core (off unless
    # asked): a control named otherwise than by the text it shows.
    results = page.evaluate("""() => axe.run({preload: false, resultTypes: ['violations'],
        rules: {'label-content-name-mismatch': {enabled: true}}})""")
    problems = [f"axe {v['impact']}: {v['id']} ({v['help']}) at "
                f"{', '.join(str(n['target'][0]) for n in v['nodes'][:3])}"
                for v in results["violations"] if v["impact"] in ("serious", "critical")]
    if page.locator("div.highlight pre span").count() and not looks:
        problems.append("code is highlighted, yet no token was sampled for contrast")
    return problems


def favicon_problems(page, site):
    href = page.evaluate("""() => document.querySelector('link[rel~="icon"]')?.href""")
    if not href:
        return ["no favicon"]
    if not local_file(href, site).is_file():
        return [f"the favicon {href} is missing"]
    return []


def print_problems(page, view):
    page.emulate_media(media="print")
    page.evaluate("dispatchEvent(new Event('beforeprint'))")  # as a browser printing
    problems = []
    printed = page.evaluate(PRINTED)
    if not printed["title"]:
        problems.append("the printed page has no title")
    if printed["body"] is not None and printed["body"] < 10 * PX_PER_PT - 0.01:
        problems.append(f"printed text is {printed['body'] / PX_PER_PT:.1f} pt")
    if printed["code"] is not None and printed["code"] < 8.5 * PX_PER_PT - 0.01:
        problems.append(f"printed code is {printed['code'] / PX_PER_PT:.1f} pt")
    if printed["width"] < 0.9:
        problems.append(f"print uses {printed['width']:.0%} of the paper's width")
    if printed["heading"] > 0.45 or printed["text"] > 0.45 or printed["paper"] < 0.8:
        problems.append(f"print in the {view} view is not dark on light: heading "
                        f"{printed['heading']:.2f}, text {printed['text']:.2f}, "
                        f"paper {printed['paper']:.2f} (luminance)")
    page.evaluate("dispatchEvent(new Event('afterprint'))")
    page.emulate_media(media="screen")
    return problems


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
        links_shown = f"""() => {{
          const dialog = document.querySelector('{dialog}');
          if (!dialog || !dialog.open) return null;
          return Array.from(dialog.querySelectorAll('a'))
            .filter(a => a.getBoundingClientRect().width > 0)
            .map(a => a.getAttribute('href'));
        }}"""
        buttons[0].tap()
        settles(page, f"() => ({links_shown})()?.length > 0")
        opened = page.evaluate(links_shown)
        if not opened:
            problems.append(f"{selector} does not open the navigation")
        elif selector == ".primary-toggle":
            reached = {href.split("#")[0].split("/")[-1] for href in opened}
            missing = toc_pages - reached - {""}
            # the current page links to itself as "#"
            if len(missing) > 1:
                problems.append(f"the menu does not list {sorted(missing)}")
        elif any(href.startswith("#") and len(href) > 1 for href in opened):
            # a tap on a section of the contents takes the reader there,
            # and the drawer closes
            page.locator(f'{dialog} a[href^="#"]').last.tap()
            if not settles(page, f"() => !document.querySelector('{dialog}').open"):
                problems.append("the contents drawer stays open after a tap on a section")
                page.keyboard.press("Escape")
            continue
        page.keyboard.press("Escape")
        if not settles(page, f"() => !document.querySelector('{dialog}').open"):
            problems.append(f"Escape does not close {dialog}")
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
    if not settles(page, f"before => ({hidden})() !== before", before):
        problems.append("the menu button does not hide or show the sidebar")
    buttons[0].click()
    if not settles(page, f"before => ({hidden})() === before", before):
        problems.append("a second click of the menu button does not undo the first")
    return problems


def image_problems(page, site, view):
    problems = []
    for src, alt, caption, shown in page.evaluate(IMAGES):
        name = src.split("/")[-1][:16]
        if not alt.strip() or "_images/" in alt or re.search(r"\.(svg|png|jpe?g|gif)$", alt):
            problems.append(f"image {name} has no real alt text: {alt!r}")
        if not caption:
            problems.append(f"image {name} has no caption")
        if src.endswith(".svg") and shown:
            file = local_file(urllib.parse.urljoin(page.url, src), site)
            text_px = svg_text_px(file, shown)
            if text_px is not None and text_px < MIN_TEXT_PX - 0.05:
                problems.append(f"graph {name}: labels {text_px:.1f} px tall on the {view}")
    return problems


# The quick-fix box: where it ends, whether its code is cut, what stands
# above it (the error), the header's height over it, and its last line.
QUICK_FIX_BOX = """() => {
  const box = document.querySelector('.quick-fix');
  if (!box) return null;
  const rect = box.getBoundingClientRect();
  const code = box.querySelector('pre');
  const error = document.querySelector('div.highlight-text pre');
  const prev = box.previousElementSibling;
  const header = document.querySelector('.bd-header-article');
  const lines = code.textContent.trim().split('\\n');
  return {bottom: rect.bottom + window.scrollY, height: rect.height, right: rect.right,
          codeHidden: code.scrollWidth - code.clientWidth,
          underError: !!prev && !!prev.querySelector('pre') && prev.textContent.includes('TBackward0'),
          errorText: error ? error.textContent.trim() : '',
          header: header ? header.getBoundingClientRect().height : 0, lastLine: lines[lines.length - 1]};
}"""


def quick_fix_cut(box, screen, first_screen=True):
    """Where the quick fix (QUICK_FIX_BOX) does not fit on `screen`."""
    problems = []
    if first_screen and box["bottom"] > screen["height"]:
        problems.append(f"the quick fix ends at {box['bottom']:.0f} px, below the "
                        f"first screen ({screen['height']} px)")
    if box["right"] > screen["width"] or box["codeHidden"] > 1:
        problems.append("the quick fix is cut at the side")
    return problems


def quick_fix_problems(page, view):
    """The intro's quick fix is right under the error, on the first screen
    (its title and description are tests/test_findable.py's)."""
    box = page.evaluate(QUICK_FIX_BOX)
    if box is None:
        return ["the intro has no quick-fix box"]
    problems = quick_fix_cut(box, VIEWS[view]["viewport"])
    if box["errorText"] != THE_ERROR:
        problems.append(f"the first text block is not the error: {box['errorText'][:60]!r}")
    if not box["underError"]:
        problems.append("the quick fix is not right under the error")
    return problems


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("page_path", PAGES)
def test_page(browser, site, page_path, view):
    assert (HTML / page_path).is_file(), f"{page_path} was not built"
    problems, loaded = [], []
    with open_page(browser, site, view, page_path, problems, loaded) as page:
        dark = page.evaluate("() => document.documentElement.dataset.theme")
        assert dark == ("dark" if view.endswith("dark") else "light"), dark
        desktop = view.startswith("desktop")
        # first, before the checks below read the layout of the whole page
        reads = page.evaluate(LAYOUT_READS_SO_FAR)
        problems += [f"while loading, a script reads {read} ({len(reads)} reads)"
                     for read in sorted(set(reads))[:5]]
        if view == "phone":
            problems += budget_problems(page_path, loaded, site)
        problems += mathjax_problems(page, loaded)
        # every picture, also those loaded when scrolled to, for the checks below
        page.evaluate("""() => Promise.all(Array.from(document.querySelectorAll(
          'img[loading="lazy"]')).map(img => { img.loading = 'eager';
            return img.decode().catch(() => null); }))""")
        problems += favicon_problems(page, site)
        problems += page.evaluate(BROKEN_MEDIA)
        problems += [f"error output: {e}" for e in page.evaluate(STRAY_ERRORS)]
        problems += page.evaluate(CUT_OFF, [VIEWS[view]["viewport"]["width"], desktop])
        problems += page.evaluate(ALIGNED_OUTPUTS)
        if not desktop:
            problems += page.evaluate(SCROLLING_FIGURES)
        if view == "phone":
            problems += page.evaluate(PHONE_READING)
        problems += page.evaluate(MID_WORD_BREAKS)
        problems += image_problems(page, site, view)
        if view in AXE_VIEWS:
            problems += accessibility_problems(page)
        if page_path == INTRO:
            problems += quick_fix_problems(page, view)
        if os.environ.get("SCREENSHOTS") == "1":
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=SHOTS / f"{page_path.replace('/', '_')[:-5]}-{view}.png",
                            full_page=True)
        if page_path != "search.html" and not view.endswith("dark"):
            problems += (desktop_navigation_problems(page) if desktop
                         else phone_navigation_problems(page))
        if desktop and page_path != "search.html":
            problems += print_problems(page, view)
    assert problems == []


# The search finished (Sphinx writes its status after the last result), and
# every result has its summary (each fetched from its page) or its description.
SEARCH_DONE = """() => {
  const status = document.querySelector('#search-results .search-summary');
  if (!status || !/^(Search finished|Your search did not)/.test(status.textContent))
    return false;
  return Array.from(document.querySelectorAll('#search-results ul.search > li'))
    .every(li => li.querySelector(':scope > p.context, :scope > span'));
}"""


def search_results(browser, site, query):
    """[(href, summary)] of the site search's results for `query`."""
    page = browser.new_page(viewport=DESKTOP)
    page.goto(site + "search.html?q=" + urllib.parse.quote(query), wait_until="load")
    page.wait_for_function(SEARCH_DONE)
    found = page.evaluate("""() => Array.from(
      document.querySelectorAll('#search-results ul.search > li')).map(li => [
        li.querySelector('a').getAttribute('href'),
        (li.querySelector('p.context') || {textContent: ''}).textContent.trim()])""")
    page.close()
    return found


@pytest.mark.parametrize("query", [THE_ERROR, "TBackward0"])
def test_search_ranks_the_intro_first(browser, site, query):
    found = search_results(browser, site, query)
    assert found, f"no result for {query!r}"
    assert found[0][0].split("#")[0].endswith(INTRO.split("/")[-1]), found[:3]


@pytest.mark.parametrize("node, first", [("CdistBackward0", 0), ("AddmmBackward0", None)])
def test_search_lands_on_a_backward_nodes_entry(browser, site, node, first):
    """A node's name finds its entry of the backward nodes' page (a glossary
    term): first where no page explains the node, after those that do."""
    found = search_results(browser, site, node)
    entries = [i for i, (href, _) in enumerate(found) if "backward_nodes.html#" in href]
    assert entries and (entries[0] == first if first is not None else entries[0] > 0), found[:4]
    anchor = found[entries[0]][0].split("#")[1]
    page = (HTML / "book" / "backward_nodes.html").read_text()
    assert re.search(rf'<dt id="{anchor}">{node}<', page), anchor


def test_search_summaries_start_with_the_pages_own_words(browser, site):
    """Not with the page's buttons, its contents list, or the chapters'
    Colab badge and student link: a word of a chapter's title puts the
    summary at the start of the page's text."""
    found = search_results(browser, site, "shape")
    chapters = [(href, summary) for href, summary in found
                if re.search(r"/0\d_[^/]*\.html", href)]
    assert len(chapters) >= 3, found
    foreign = [(href, summary[:60]) for href, summary in chapters
               if re.search(r"Open in Colab|Student edition|\.pdf|Contents",
                            " ".join(summary.split()[:12]))]
    assert foreign == [], foreign


def test_a_low_contrast_token_colour_is_found(browser, site):
    """The sampled contrast check above, on a planted case: one kind of code
    token drawn in a light grey on the code's light background (not the same colour:
    axe leaves a 1:1 contrast for a person to review, as text perhaps hidden)."""
    problems = []
    with open_page(browser, site, "desktop", f"{toc_entries()[1]}.html", problems) as page:
        kind = page.evaluate("() => document.querySelector('div.cell_input div.highlight pre "
                             "span[class]').className.split(' ')[0]")
        grey = f"div.highlight pre span.{kind} {{ color: #b0b0b0 !important; }}"
        page.add_style_tag(content=grey)
        found = accessibility_problems(page)
    assert any("color-contrast" in problem for problem in found), found


# The magnifying glass of a search field, and where the query's text starts.
SEARCH_FIELDS = """() => Array.from(document.querySelectorAll('form.bd-search'))
  .filter(form => form.getBoundingClientRect().width > 0).map(form => {
    const input = form.querySelector('input'), icon = form.querySelector('svg');
    const style = getComputedStyle(input), box = input.getBoundingClientRect();
    return {icon: icon ? icon.getBoundingClientRect().right : null,
            text: box.left + parseFloat(style.borderLeftWidth) + parseFloat(style.paddingLeft),
            query: input.value};
  })"""


def test_the_search_icon_leaves_the_query_whole(browser, site):
    """On a 360-px phone, the search field's magnifying glass stands before
    the query typed, in the header's search dialog and on the search page."""
    context = browser.new_context(viewport=SMALL_PHONE, is_mobile=True, has_touch=True)
    page = context.new_page()
    page.goto(site + INTRO, wait_until="load")
    visible(page, "button.search-button__button")[0].tap()
    assert settles(page, "() => document.querySelector('#pst-search-dialog').open")
    page.locator("#pst-search-dialog input").fill("TBackward0")
    fields = page.evaluate(SEARCH_FIELDS)
    page.goto(site + "search.html?q=TBackward0", wait_until="load")
    fields += page.evaluate(SEARCH_FIELDS)
    context.close()
    assert [field["query"] for field in fields] == ["TBackward0"] * 2, fields
    covered = [field for field in fields if field["icon"] is None or field["icon"] > field["text"]]
    assert covered == [], f"the icon covers the query's first letters: {covered}"


def test_a_search_does_not_highlight_the_pages_read_after_it(browser, site):
    """Sphinx's highlighting marked a search's words on the next page the
    reader opened (even much later), inside other words ("an" in "and"),
    and in the search's own summaries: the book has none of it."""
    context = browser.new_context(viewport=DESKTOP)
    page = context.new_page()
    page.goto(site + "search.html?q=an+error", wait_until="load")
    page.wait_for_function(SEARCH_DONE)
    marked = {"search.html": page.locator(".highlighted").count()}
    for address in (f"{INTRO}", f"{INTRO}?highlight=an"):
        page.goto(site + address, wait_until="load")
        # Sphinx highlights on a 10-ms timer set when the page is ready: a
        # timer set now is due after it, however slow the machine
        page.evaluate("() => new Promise(done => setTimeout(done, 10))")
        marked[address] = page.locator(".highlighted").count()
    context.close()
    assert marked == dict.fromkeys(marked, 0), f"search words highlighted: {marked}"


def test_the_quick_fix_is_whole_on_a_small_phone(browser, site):
    """Chapter 1 (where a search for the error lands) shows the quick fix,
    its last line (the optimizer rebuilt) included, on the first screen of
    a 360x640 phone; the intro's fits on one screen when scrolled to."""
    problems = []
    for page_path, first_screen in (("book/01_reproduce_the_error.html", True),
                                    (INTRO, False)):
        context = browser.new_context(viewport=SMALL_PHONE, is_mobile=True, has_touch=True)
        page = context.new_page()
        page.goto(site + page_path, wait_until="load")
        page.evaluate("() => document.fonts.ready.then(() => null)")
        box = page.evaluate(QUICK_FIX_BOX)
        context.close()
        if box is None:
            problems.append(f"{page_path}: no quick fix")
            continue
        if not box["lastLine"].startswith("optimizer = torch.optim."):
            problems.append(f"{page_path}: the quick fix ends with {box['lastLine']!r}")
        problems += [f"{page_path}: {problem}"
                     for problem in quick_fix_cut(box, SMALL_PHONE, first_screen)]
        if box["height"] + box["header"] > SMALL_PHONE["height"]:
            problems.append(f"{page_path}: the quick fix ({box['height']:.0f} px) does "
                            "not fit on one screen under the header")
    assert problems == []
