"""The triage page in headless Chromium: every message of the corpus
(tests/data/triage_corpus.json) is read by the page's reader, which must give
chapter 6's reading (and so the book's score table); each is pasted into the
box at 1366 px and at 390 px, in the light and the dark scheme, and the
answer checked: the node's forward operation and input where the corpus
expects them, the changed dimensions in one compact row, the cause or the
candidates with their links, and a page no wider than the screen; on a phone
the verdict is on screen after "Read it". A fuzz corpus of generated texts
(unicode included) is read by both readers in one call. The browser and the
views are tests/test_browser.py's."""
import json
import random
import re

import pytest

from tests.test_browser import HTML, VIEWS, open_page
from tools import triage
from tools.exports import load_exports

ch = load_exports("06_any_layer_any_node.ipynb")
MESSAGES = json.loads(triage.CORPUS.read_text())
PAGE = "book/triage.html"


ANSWER = """() => {
  const answer = document.getElementById('triage-answer');
  const rows = {};
  for (const tr of answer.querySelectorAll('tr'))
    rows[tr.dataset.row] = tr.querySelector('td').textContent;
  const verdict = answer.querySelector('.triage-verdict');
  const links = [...answer.querySelectorAll('.triage-verdict a, .triage-link a')];
  const box = verdict && verdict.getBoundingClientRect();
  return {rows, kind: verdict && verdict.dataset.kind, cause: verdict && verdict.dataset.cause,
          candidates: verdict && verdict.dataset.candidates,
          verdict: verdict && verdict.textContent, hrefs: links.map(a => a.getAttribute('href')),
          wide: document.documentElement.scrollWidth, box: answer.getBoundingClientRect().right,
          top: box && box.top, bottom: box && box.bottom, screen: window.innerHeight,
          text: answer.textContent.trim()};
}"""


# Every text pasted and "Read it" clicked, in one call (the button's own
# listener runs; the answer is read as ANSWER reads it).
ANSWER_ALL = """texts => {
  const read = %s;
  const box = document.getElementById('triage-input');
  return texts.map(text => {
    box.value = text;
    document.getElementById('triage-read').click();
    return read();
  });
}""" % ANSWER


def python_reading(text):
    reading = ch.read_message(text)
    return {"kind": reading.kind, "autograd": reading.autograd, "cause": reading.cause,
            "fields": reading.fields, "where": reading.where,
            "candidates": list(reading.candidates), "ask": reading.ask}


@pytest.mark.parametrize("view", ["desktop", "phone"])
def test_every_message_of_the_table_is_answered(browser, site, view):
    problems = []
    with open_page(browser, site, view, PAGE, problems) as page:
        width = VIEWS[view]["viewport"]["width"]
        texts = [m["text"] for m in MESSAGES]
        js = page.evaluate("texts => window.triage.readAll(texts)", texts)
        assert js == [python_reading(t) for t in texts]      # the same readings, so
        assert triage.score_table(MESSAGES, js) == triage.score_table(   # the same score
            MESSAGES, [ch.read_message(t) for t in texts])
        for message in MESSAGES[:3]:                # typed and clicked as a user does
            page.fill("#triage-input", message["text"])
            page.click("#triage-read")
            assert page.evaluate(ANSWER)["cause"] == ch.read_message(message["text"]).cause
        answers = page.evaluate(ANSWER_ALL, texts)
        for message, answer in zip(MESSAGES, answers, strict=True):
            text = message["text"]
            reading = ch.read_message(text)
            where = f"{view}: {message['source']}"
            assert answer["wide"] <= width, f"{where}: page {answer['wide']} px wide"
            assert answer["box"] <= width, where
            if not text.strip():
                assert answer["text"] == "Paste an error above.", where
                continue
            assert answer["kind"] == reading.kind, where
            # on a phone too, the verdict is on screen after "Read it"
            assert answer["top"] >= 0 and answer["top"] < answer["screen"], (where, answer["top"])
            if reading.kind == "unknown":
                assert answer["verdict"].startswith("Not a message this page reads"), where
                continue
            rows = answer["rows"]
            assert answer["cause"] == reading.cause, where
            if reading.cause == "cannot tell":
                assert answer["candidates"] == "|".join(reading.candidates), where
                assert answer["verdict"].startswith("The text alone cannot tell."), where
                for key in reading.candidates:
                    assert ch.CAUSES[key][0] in answer["verdict"], (where, key)
                assert ("Paste the whole traceback" in answer["verdict"]) == reading.ask, where
            else:
                assert ch.CAUSES[reading.cause][0] in answer["verdict"], where
            assert answer["hrefs"] and all(h.startswith("06_any_layer_any_node.html#")
                                           for h in answer["hrefs"]), where
            if reading.where:
                assert rows["raised in"] == ch.WHERE[reading.where], where
            if message.get("node"):
                assert rows["node"] == message["node"], where
            if "op" in message:
                made = rows["made by"]
                if message["op"] is None:
                    assert made.startswith("no entry in torch"), where
                else:
                    assert made.startswith(f"torch.{message['op']}"), (where, made)
                    assert rows["index"] == f"{message['index']}: the input {message['input']}", where
            f = reading.fields
            changes = (ch.shape_changes(f["got"], f["expected"]) if isinstance(f.get("got"), list)
                       and isinstance(f.get("expected"), list) else [])
            assert [list(c) for c in changes] == message.get("changes", [list(c) for c in changes])
            assert ("changed" in rows) == bool(changes), where
            assert not any(key.startswith("dim ") for key in rows), where   # one row
            for dim, was, now in changes[:4]:
                shown = (f"dim {dim}: expected {'none' if was is None else was}, "
                         f"got {'none' if now is None else now}" if None not in (was, now)
                         else "only in got" if was is None else "missing in got")
                assert shown in rows["changed"], (where, rows["changed"])
                if isinstance(was, int) and isinstance(now, int) and now < was:
                    assert f"{was - now} fewer" in rows["changed"], where
        page.fill("#triage-input", "")
        page.click("#triage-read")
        assert page.inner_text("#triage-answer").strip() == "Paste an error above."
        assert problems == [], problems


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
def test_the_box_and_its_answer_follow_the_colour_scheme(browser, site, view):
    problems = []
    with open_page(browser, site, view, PAGE, problems) as page:
        page.fill("#triage-input", MESSAGES[0]["text"])
        page.click("#triage-read")
        for selector in ("#triage-input", "#triage-answer td", ".triage-verdict"):
            text, back = page.evaluate(LUMINANCE, selector)
            dark = view.endswith("dark")
            assert (text > back) if dark else (text < back), (view, selector, text, back)
            assert abs(text - back) > 100, (view, selector, text, back)
        assert problems == [], problems


def test_each_cause_link_leads_to_a_heading_of_chapter_6():
    chapter = (HTML / "book" / "06_any_layer_any_node.html").read_text()
    rules = (HTML / "_static" / "triage_rules.js").read_text()
    anchors = set(re.findall(r'06_any_layer_any_node\.html#([\w-]+)', rules))
    assert anchors and all(f'id="{anchor}"' in chapter for anchor in anchors)


def fuzz_texts(count=2400, seed=0):
    """Generated texts: corpus messages cut, spliced, wrapped at any position,
    with unicode (accents, CJK, emoji, other spaces and line separators) put
    in, and pieces of messages shuffled together."""
    pick = random.Random(seed)
    corpus = [m["text"] for m in MESSAGES if m["text"]]
    pieces = ["Function ", "returned an invalid gradient at index ", "[", "]", " - got ",
              " but expected shape compatible with ", "1", "0", ", ", "s0", "(", ")", "\n",
              "::", "<", ">", "expected device ", "Backward", "Backward0", "TensorOptions(",
              "-", "optimizer.step(", "/torch/optim/adam.py", ".backward(", " vmap ",
              "The size of tensor a (", ") must match the size of tensor b (",
              ") at non-singleton dimension ", "hook '", "' has changed the size of value",
              "Given groups=", "running_mean should contain ", " elements not ",
              "\u00e9", "\u4e2d\u6587", "\U0001f600", "\u2028", "\u00a0", "\u3000",
              "\u212a", "\u017f", "\ufeff", "\r\n", "\t", "99999999999999999999"]
    texts = []
    for n in range(count):
        how = n % 4
        if how == 0:                    # a message with unicode or a break put in
            text = pick.choice(corpus)
            for _ in range(pick.randint(1, 3)):
                at = pick.randint(0, len(text))
                text = text[:at] + pick.choice(pieces[-14:] + ["\n"]) + text[at:]
        elif how == 1:                  # a message cut somewhere
            text = pick.choice(corpus)
            text = text[pick.randint(0, len(text) // 2):pick.randint(len(text) // 2, len(text))]
        elif how == 2:                  # pieces of messages shuffled
            text = "".join(pick.choice(pieces) for _ in range(pick.randint(1, 30)))
        else:                           # any characters
            text = "".join(chr(pick.choice([pick.randint(32, 126), pick.randint(160, 0x2FFF),
                                            pick.randint(0x1F300, 0x1F64F)]))
                           for _ in range(pick.randint(0, 80)))
        texts.append(text)
    return texts


def test_the_page_and_python_agree_on_generated_texts(browser, site):
    texts = fuzz_texts()
    assert len(texts) >= 2000
    problems = []
    with open_page(browser, site, "desktop", PAGE, problems) as page:
        js = page.evaluate("texts => window.triage.readAll(texts)", texts)
    python = [python_reading(t) for t in texts]
    differ = [(t, a, b) for t, a, b in zip(texts, js, python) if a != b]
    assert differ == [], differ[:3]
    kinds = {r["kind"] for r in python}
    assert len(kinds) >= 5, kinds            # the texts reach several rules, not only "unknown"


def test_long_shapes_stay_compact_and_the_verdict_in_view_on_a_phone(browser, site):
    """Shapes of different lengths give one "changed" row, not a row per
    dimension; after "Read it" the verdict is on the phone's screen."""
    got = ", ".join(str(n) for n in range(2, 40))
    text = ("Traceback (most recent call last):\n" + "  File \"train.py\", line 9, in <module>\n"
            * 40 + f"RuntimeError: Function MmBackward0 returned an invalid gradient at index 0"
            f" - got [{got}] but expected shape compatible with [3, 4]")
    problems = []
    with open_page(browser, site, "phone", PAGE, problems) as page:
        page.fill("#triage-input", text)
        page.click("#triage-read")
        answer = page.evaluate(ANSWER)
        assert list(answer["rows"]).count("changed") == 1
        assert len(answer["rows"]) <= 10, answer["rows"]
        table = page.evaluate("document.querySelector('.triage-table').getBoundingClientRect().height")
        assert table < answer["screen"], table                 # 38 changed dims, one row
        assert 0 <= answer["top"] < answer["screen"], answer["top"]
        assert answer["wide"] <= VIEWS["phone"]["viewport"]["width"]
        assert problems == [], problems
