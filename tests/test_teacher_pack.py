"""The teacher's pack and the class site (tools/sites.py, tools/runsheet.py).

- each lesson's run sheet prints on one page, A4 and Letter, and has a row
  for every row of the lesson's timetable;
- the class site (`make class-site`) links no teacher page and holds no
  answer: no solution cell's code, no explained solution;
- the teacher's pack (`make teacher-pack`) holds the guide, logistics,
  teaching notes, assessment, answers, run sheets and slides, every page of
  it says `noindex`, and the slides load nothing from the internet;
- the public book lists no teacher page;
- no assessment question repeats a class item (worksheets, exit tickets,
  discussion questions, the before-class self-check) for 8 words running.

The two sites are built by the fixtures below when their sources are newer
than the last build (about two minutes each), once per session.
"""
import html
import re
import shutil
import subprocess
import zipfile

import nbformat
import pytest
import yaml

from tools import plan, runsheet, sites
from test_teaching_plan import lesson_items
from tools.book import BOOK, ROOT, toc_notebooks

PAPER = ["A4", "Letter"]
TEACHER_ONLY = ["teachers_guide", "assessment_answers", "assessment", "teaching_notes",
                "logistics", "runsheet", "lesson_1.html", "slides"]


def pdf_pages(pdf):
    return len(re.findall(rb"/Type\s*/Page[^s]", pdf))


def printed(browser, path, paper):
    page = browser.new_page()
    page.goto(path.as_uri())
    pdf = page.pdf(format=paper)
    page.close()
    return pdf_pages(pdf)


# --- run sheets -------------------------------------------------------------

SHEETS = sorted((BOOK / "_generated").glob("runsheet_*.html"))


def test_one_run_sheet_per_lesson():
    assert len(SHEETS) == len(plan.read_plan()["lessons"]) == 3


@pytest.mark.parametrize("paper", PAPER)
@pytest.mark.parametrize("sheet", SHEETS, ids=lambda p: p.stem)
def test_run_sheet_prints_on_one_page(browser, sheet, paper):
    assert printed(browser, sheet, paper) == 1


def test_a_sheet_too_long_is_found(browser, tmp_path):
    """The page count above, on a planted case: the same sheet, rows doubled."""
    text = SHEETS[0].read_text()
    body = text.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    planted = tmp_path / "long.html"
    planted.write_text(text.replace(body, body * 2))
    assert printed(browser, planted, "A4") > 1


def test_each_sheet_has_a_row_per_timetable_row_with_its_notes():
    taught = plan.lessons(plan.read_plan(), plan.read_chapters())
    notes = yaml.safe_load(runsheet.NOTES.read_text())
    for lesson, sheet in zip(taught, SHEETS):
        text = sheet.read_text()
        rows = re.findall(r"<tr><td>(\d+)–(\d+)</td>", text)
        assert [(int(a), int(b)) for a, b in rows] == [
            (start, end) for start, end, _, _ in plan.schedule(lesson)]
        assert '<meta name="robots" content="noindex">' in text
        assert not re.search(r"<(script|link)\b", text), "a sheet loads nothing"
        for question in notes["exit_tickets"][lesson.number - 1]["questions"]:
            assert runsheet.inline(question) in text


def test_a_section_without_a_note_is_refused():
    notes = yaml.safe_load(runsheet.NOTES.read_text())
    del notes["sections"]["4: The optimizer trap"]
    with pytest.raises(runsheet.RunSheetError, match="no note for chapter 4's section "
                                                     "'The optimizer trap"):
        runsheet.generated(notes)


def test_a_note_naming_no_section_is_refused():
    notes = yaml.safe_load(runsheet.NOTES.read_text())
    notes["sections"]["4: Tool 2"] = dict(notes["sections"]["Setup"])   # homework
    with pytest.raises(runsheet.RunSheetError, match="name no section a lesson teaches"):
        runsheet.generated(notes)
    notes = yaml.safe_load(runsheet.NOTES.read_text())
    notes["sections"]["Setup"] = {"teacher": "only this"}
    with pytest.raises(runsheet.RunSheetError, match="needs exactly teacher, students, watch"):
        runsheet.generated(notes)


# --- the public book ----------------------------------------------------------

def test_public_toc_lists_no_teacher_page():
    toc = (ROOT / "_toc.yml").read_text()
    for page in sites.TEACHER_PAGES:
        if page not in sites.CLASS_PAGES:
            assert f"file: book/{page}\n" not in toc, page
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["only_build_toc_files"] is True, "else Sphinx builds every page"


def test_no_public_page_links_a_teacher_page():
    toc = (ROOT / "_toc.yml").read_text()
    public = [BOOK / f"{name}.md" for name in re.findall(r"file: book/(\w+)\n", toc)]
    public = [path for path in public if path.is_file()] + toc_notebooks()
    assert len(public) > 10
    for path in public:
        text = path.read_text()
        for page in sites.TEACHER_PAGES:
            if page not in sites.CLASS_PAGES:
                assert not re.search(rf"\b{page}\b", text), (path.name, page)


# --- the class site -----------------------------------------------------------

def stale(target, sources):
    if not target.exists():
        return True
    built = target.stat().st_mtime
    return any(path.stat().st_mtime > built for path in sources if path.is_file())


def make(target):
    result = subprocess.run(["make", target], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, f"make {target} failed:\n{result.stdout[-3000:]}" \
                                   f"\n{result.stderr[-3000:]}"


SITE_SOURCES = [*(BOOK / "student").glob("*.ipynb"), *(BOOK / "graded").glob("*"),
                *(BOOK / "_generated").glob("*"),
                *BOOK.glob("*.md"), ROOT / "tools" / "sites.py", ROOT / "_config.yml",
                *(ROOT / "tools" / "slides_template").rglob("*"), *toc_notebooks()]


@pytest.fixture(scope="module")
def class_site():
    index = sites.CLASS_HTML / "index.html"
    if stale(index, SITE_SOURCES):
        make("class-site")
    return {path: path.read_text(errors="replace")
            for path in sites.CLASS_HTML.rglob("*.html")}


def visible(text):
    """The text of an HTML page, as words (tags dropped, entities read)."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", text, flags=re.S)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def solution_texts():
    """[(chapter, text)]: the lines of each solution cell (the chapter's and
    its graded exercises') that its student stub does not keep, and each
    explained solution's sentences."""
    found = []
    for path in toc_notebooks():
        student = nbformat.read(BOOK / "student" / path.name, as_version=4)
        kept = {line.strip() for cell in student.cells for line in cell.source.splitlines()}
        cells = [cell for source in (path, BOOK / "graded" / path.name)
                 for cell in nbformat.read(source, as_version=4).cells]
        for cell in cells:
            if "solution" in cell.metadata.get("tags", []):
                found += [(path.stem, line.strip()) for line in cell.source.splitlines()
                          if len(line.strip()) >= 30 and line.strip() not in kept
                          and not line.startswith("# @title")]
            for block in re.findall(r"<summary>Solution \d+</summary>(.*?)</details>",
                                    cell.source if cell.cell_type == "markdown" else "",
                                    re.S):
                words = re.sub(r"[`*_]", "", block)
                found += [(path.stem, " ".join(s.split())) for s in
                          re.split(r"(?<=[.:;])\s", words) if len(s.split()) >= 8]
    return found


def test_every_chapter_has_solutions_to_look_for():
    chapters = {chapter for chapter, _ in solution_texts()}
    assert chapters == {path.stem for path in toc_notebooks()}


def answers_in(pages):
    """[(page, chapter, solution text)] for each solution found in `pages`
    ({path: HTML})."""
    shown = {path: visible(text) for path, text in pages.items()}
    return [(path.name, chapter, solution) for chapter, solution in solution_texts()
            for path, text in shown.items() if solution in text]


def test_the_solution_scan_finds_a_planted_solution(class_site):
    chapter, solution = solution_texts()[0]
    path, text = next(iter(class_site.items()))
    planted = text.replace("</body>", f"<pre><code>{html.escape(solution)}</code></pre></body>")
    assert (path.name, chapter, solution) in answers_in({path: planted})
    assert answers_in({path: text}) == []


def test_class_site_has_the_student_notebooks_and_handouts(class_site):
    names = {path.relative_to(sites.CLASS_HTML).as_posix() for path in class_site}
    for path in toc_notebooks():
        assert f"book/student/{path.stem}.html" in names
    for page in sites.CLASS_PAGES:
        assert f"book/{page}.html" in names
    assert not any(name.startswith("book/0") for name in names), "no chapter"


def test_class_site_links_no_teacher_page(class_site):
    for path, text in class_site.items():
        targets = re.findall(r'(?:href|src)="([^"]*)"', text)
        for target in targets:
            for page in TEACHER_ONLY:
                assert page not in target, (path.name, target)


def test_class_site_holds_no_answer(class_site):
    assert answers_in(class_site) == []
    index = (sites.CLASS_HTML / "searchindex.js").read_text()
    assert [s for _, s in solution_texts() if s in index] == []
    sources = [path.name for path in (sites.CLASS_HTML / "_sources").rglob("*")]
    assert sources and not [name for name in sources
                            if any(page in name for page in TEACHER_ONLY[:5])]


# --- the teacher's pack -------------------------------------------------------

@pytest.fixture(scope="module")
def pack():
    if stale(sites.PACK_ZIP, SITE_SOURCES + [ROOT / "package-lock.json"]):
        if shutil.which("npm") is None and not (sites.REVEAL / "dist").is_dir():
            pytest.skip("npm is missing: the pack needs reveal.js (npm ci)")
        make("teacher-pack")
    with zipfile.ZipFile(sites.PACK_ZIP) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def test_pack_holds_guide_answers_run_sheets_slides_and_logistics(pack):
    names = set(pack)
    for page in sites.TEACHER_PAGES:
        assert f"teacher-pack/book/{page}.html" in names, page
    for lesson in (1, 2, 3):
        assert f"teacher-pack/runsheets/lesson_{lesson}.html" in names
        assert f"teacher-pack/slides/lesson_{lesson}.slides.html" in names
    assert "teacher-pack/slides/reveal.js/dist/reveal.js" in names
    for path in toc_notebooks():  # the graded exercises, their solutions and hidden tests
        graded = pack[f"teacher-pack/graded/{path.name}"].decode()
        assert graded == (BOOK / "graded" / path.name).read_text(), path.name
    answers = visible(pack["teacher-pack/book/assessment_answers.html"].decode())
    assert "marking scheme" in answers and "(4)" in answers


def test_every_pack_page_says_noindex(pack):
    pages = [name for name in pack if name.endswith(".html") and "/_static/" not in name]
    assert len(pages) > 15
    for name in pages:
        assert re.search(rb'<meta name="robots" content="noindex"\s*/?>',
                         pack[name]), name


def test_slides_load_nothing_remote(pack):
    for name, data in pack.items():
        if not name.startswith("teacher-pack/slides/"):
            continue
        text = data.decode(errors="replace")
        if name.endswith(".html"):
            for tag in re.findall(r"<(?:script|link|img|iframe)\b[^>]*>", text):
                assert not re.search(r'(?:src|href)\s*=\s*"(?:https?:)?//', tag), (name, tag)
            assert "mathjax" not in text.lower() or "MathJax.Hub" not in text
        if name.endswith(".css"):
            assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", text), name


CUT = """() => Reveal.getSlides().flatMap(slide => { const at = Reveal.getIndices(slide);
    Reveal.slide(at.h, at.v); return [...slide.querySelectorAll("pre")].filter(
    pre => pre.scrollWidth > pre.clientWidth + 1).map(pre => pre.textContent.slice(0, 60)); })"""


@pytest.mark.parametrize("lesson", [1, 2, 3])
def test_slides_run_offline_at_most_40_with_code_that_fits(pack, browser, lesson):
    """A lesson's slides, opened with every request off the disk refused:
    reveal.js starts, no request leaves the machine, there are at most 40,
    and no code runs past a slide's right edge (it would, unwrapped)."""
    requested = []
    page = browser.new_page()
    page.route("**/*", lambda route: (requested.append(route.request.url),
                                      route.abort() if not route.request.url.startswith(
                                          "file:") else route.continue_()))
    page.goto((sites.PACK / "slides" / f"lesson_{lesson}.slides.html").as_uri())
    page.wait_for_function("() => window.Reveal && Reveal.isReady()")
    slides, maths = page.evaluate("() => [Reveal.getTotalSlides(), "
                                  "document.querySelectorAll('math').length]")
    cut = page.evaluate(CUT)
    page.add_style_tag(content=".reveal pre { white-space: pre !important; }")
    unwrapped = page.evaluate(CUT)
    page.close()
    assert 10 < slides <= 40, slides
    assert cut == [] and unwrapped != []
    assert maths > 10 or lesson != 2, "formulas are MathML"
    assert [url for url in requested if not url.startswith("file:")] == []


@pytest.mark.parametrize("paper", PAPER)
@pytest.mark.parametrize("name,most", [("assessment", 1), ("assessment_answers", 2),
                                       ("logistics", 1)])
def test_pack_handouts_print_on_their_pages(pack, browser, name, most, paper):
    page = browser.new_page()
    page.goto((sites.PACK / "book" / f"{name}.html").as_uri())
    page.emulate_media(media="print")
    pdf = page.pdf(format=paper)
    page.close()
    assert 1 <= pdf_pages(pdf) <= most, f"{name} prints on {pdf_pages(pdf)} {paper} pages"


# --- the assessment against the class items -----------------------------------

N = 8


def words(text):
    text = re.sub(r"\{\w+\}`([^`<]*?)(?:\s*<[^>]*>)?`", r"\1", text)   # roles
    return re.findall(r"[a-z0-9_.]+", text.lower().replace("`", ""))


def ngrams(text, n=N):
    tokens = words(text)
    return {tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)}


def assessment_questions():
    text = (BOOK / "assessment.md").read_text()
    parts = re.split(r"^\*\*(\d+)\.\*\* ", text, flags=re.M)
    return {int(parts[i]): parts[i + 1] for i in range(1, len(parts), 2)}


def class_items():
    """{name: text} of what students meet in class: each lesson's items
    (test_teaching_plan.py), every discussion question, the self-check."""
    items = {name: text for _, name, text in lesson_items()}
    teaching = (BOOK / "teaching_notes.md").read_text()
    discussion = teaching.split("## Discussion questions", 1)[1].split(":::{dropdown}")[0]
    items["discussion questions"] = discussion
    before = (BOOK / "before_class.md").read_text()
    items["before-class self-check"] = "\n".join(
        re.findall(r"^\*\*\d+\.\*\* .*?(?=^:::)", before, re.M | re.S))
    return items


def test_class_items_are_found():
    items = class_items()
    assert all(len(words(text)) > 20 for text in items.values()), items
    assert len(assessment_questions()) == 7


def test_no_assessment_question_repeats_a_class_item():
    items = {name: ngrams(text) for name, text in class_items().items()}
    for number, question in assessment_questions().items():
        for name, grams in items.items():
            shared = ngrams(question) & grams
            assert not shared, (f"question {number} shares {len(shared)} runs of {N} "
                                f"words with {name}, e.g. {' '.join(min(shared))!r}")


def test_the_ngram_check_finds_a_question_copied_from_an_exit_ticket():
    notes = yaml.safe_load(runsheet.NOTES.read_text())
    planted = "(4 points) " + notes["exit_tickets"][0]["questions"][0]
    assert ngrams(planted) & ngrams(class_items()["exit ticket 1"])
