"""The triage page in headless Chromium: every message of the unit tests'
table (tests/data/triage_messages.json) is pasted into the box, at 1366 px
and at 390 px, in the light and the dark scheme, and the answer checked: the
same reading as chapter 6's read_message (compared field by field, through
the page's own reader), the node's forward operation and input where the
table expects them, the changed dimensions, the cause and its link, and a
page no wider than the screen. The browser and the views are
tests/test_browser.py's."""
import json

import pytest

from tests.test_browser import CHROMIUM, HTML, VIEWS, browser, open_page, site  # noqa: F401
from tools.book import ROOT
from tools.exports import load_exports

ch = load_exports("06_any_layer_any_node.ipynb")
MESSAGES = json.loads((ROOT / "tests" / "data" / "triage_messages.json").read_text())
PAGE = "book/triage.html"

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed")

ANSWER = """() => {
  const answer = document.getElementById('triage-answer');
  const rows = {};
  for (const tr of answer.querySelectorAll('tr'))
    rows[tr.dataset.row] = tr.querySelector('td').textContent;
  const verdict = answer.querySelector('.triage-verdict');
  const link = answer.querySelector('.triage-link a');
  return {rows, kind: verdict && verdict.dataset.kind, cause: verdict && verdict.dataset.cause,
          verdict: verdict && verdict.textContent, href: link && link.getAttribute('href'),
          wide: document.documentElement.scrollWidth, box: answer.getBoundingClientRect().right};
}"""


def python_reading(text):
    reading = ch.read_message(text)
    return {"kind": reading.kind, "autograd": reading.autograd, "cause": reading.cause,
            "fields": reading.fields}


@pytest.mark.parametrize("view", ["desktop", "phone"])
def test_every_message_of_the_table_is_answered(browser, site, view):  # noqa: F811
    problems = []
    context, page = open_page(browser, site, view, PAGE, problems)
    try:
        width = VIEWS[view]["viewport"]["width"]
        for message in MESSAGES:
            text = message["text"]
            # the page's reader gives chapter 6's reading, field by field
            js = page.evaluate("text => window.triage.readMessage(text)", text)
            assert js == python_reading(text), message["source"]
            page.fill("#triage-input", text)
            page.click("#triage-read")
            answer = page.evaluate(ANSWER)
            where = f"{view}: {message['source']}"
            assert answer["wide"] <= width, f"{where}: page {answer['wide']} px wide"
            assert answer["box"] <= width, where
            if not text.strip():
                assert page.inner_text("#triage-answer").strip() == "Paste an error above."
                continue
            assert answer["kind"] == message["kind"], where
            if message["kind"] == "unknown":
                assert answer["verdict"].startswith("Not an autograd validation message"), where
                continue
            rows = answer["rows"]
            assert answer["cause"] == message["cause"], where
            cause = ch.CAUSES[message["cause"]]
            assert cause[0] in answer["verdict"], where
            assert answer["href"].startswith("06_any_layer_any_node.html#"), where
            if message.get("node"):
                assert rows["node"] == message["node"], where
            if "op" in message:
                made = rows["made by"]
                if message["op"] is None:
                    assert made.startswith("no entry in torch"), where
                else:
                    assert made.startswith(f"torch.{message['op']}"), (where, made)
                    assert rows["index"] == f"{message['index']}: the input {message['input']}", where
            for dim, was, now in message.get("changes", []):
                shown = rows[f"dim {dim}"]
                assert shown.startswith(f"expected {'none' if was is None else was}, "
                                        f"got {'none' if now is None else now}"), (where, shown)
                if isinstance(was, int) and isinstance(now, int) and now < was:
                    assert f"{was - now} fewer" in shown, where
        page.fill("#triage-input", "")
        page.click("#triage-read")
        assert page.inner_text("#triage-answer").strip() == "Paste an error above."
        assert problems == [], problems
    finally:
        context.close()


LUMINANCE = """selector => {
  const rgb = c => (c.match(/[\\d.]+/g) || []).slice(0, 3).map(Number);
  const lum = c => { const [r, g, b] = rgb(c); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
  let node = document.querySelector(selector), back = 'rgba(0, 0, 0, 0)';
  const text = getComputedStyle(node).color;
  while (node && /rgba\\(0, 0, 0, 0\\)|transparent/.test(back)) {
    back = getComputedStyle(node).backgroundColor; node = node.parentElement;
  }
  if (/rgba\\(0, 0, 0, 0\\)|transparent/.test(back)) back = 'rgb(255, 255, 255)';
  return [lum(text), lum(back)];
}"""


@pytest.mark.parametrize("view", ["desktop", "desktop-dark", "phone", "phone-dark"])
def test_the_box_and_its_answer_follow_the_colour_scheme(browser, site, view):  # noqa: F811
    problems = []
    context, page = open_page(browser, site, view, PAGE, problems)
    try:
        page.fill("#triage-input", MESSAGES[0]["text"])
        page.click("#triage-read")
        for selector in ("#triage-input", "#triage-answer td", ".triage-verdict"):
            text, back = page.evaluate(LUMINANCE, selector)
            dark = view.endswith("dark")
            assert (text > back) if dark else (text < back), (view, selector, text, back)
            assert abs(text - back) > 100, (view, selector, text, back)
        assert problems == [], problems
    finally:
        context.close()


def test_each_cause_link_leads_to_a_heading_of_chapter_6():
    chapter = (HTML / "book" / "06_any_layer_any_node.html").read_text()
    rules = (HTML / "_static" / "triage_rules.js").read_text()
    anchors = set(__import__("re").findall(r'06_any_layer_any_node\.html#([\w-]+)', rules))
    assert anchors and all(f'id="{anchor}"' in chapter for anchor in anchors)
