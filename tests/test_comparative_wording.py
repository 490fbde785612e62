"""Comparisons between pruning methods are written from the data, never by
hand: the hand-written prose of chapters 5 and 7 (their summaries
included) and of the pages that discuss the study holds no sentence that
names a method and compares ("lower", "beats", "loses less", "no other",
...). Such sentences are printed by the chapters' `say`, or included from
book/_generated/ (tools/findings.py), so that they cannot say more than
the stored study. A question (a prediction) is not a claim."""
import re

import nbformat
import pytest
import yaml

from tools.book import BOOK
from tools.findings import PAGES

CHAPTERS = ["05_variance_pruning.ipynb", "07_tnvp_language_model.ipynb"]
PAGES_WITH_THE_STUDY = ["cheat_sheet.md", "teachers_guide.md", "teaching_notes.md",
                        "assessment.md", "assessment_answers.md", "intro.md",
                        "before_class.md"]
NOTES = BOOK / "_data" / "teacher_notes.yml"

COMPARATIVE = re.compile(
    r"\b(lower|higher|beats?|beaten|los(?:es|e|ing) (?:less|more)|every (?:stored )?seed"
    r"|no other|better|worse|best|worst|outperform\w*|on a par|as (?:well|good) as"
    r"|(?:below|above) zero|(?:smaller|larger|less|more|fewer|cheaper|costlier) than"
    r"|wins?|ahead of|behind|furthest|about half a point)\b", re.I)
METHOD = re.compile(r"TNVP|FLAP|row norm|weight norm|random|mask|Torch-Pruning|one-shot"
                    r"|VBP|within-batch|compensat|criteri|method|dense|decay", re.I)


def sentences(text):
    """The sentences of Markdown `text`, without code spans, maths and link
    targets; a list item or a paragraph ends a sentence."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\$[^$]*\$", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"[\"“][^\"”]*\?[\"”]", " ", text)     # a quoted question
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.|\|) )", text):
        for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z*(\[\"])|\s\|\s",   # a table's cells too
                                 " ".join(block.split())):
            yield re.sub(r"^(?:[-*]|\d+\.)\s+", "", sentence.strip())


def comparisons(text):
    """The sentences of `text` that name a method and compare, and are not
    questions."""
    return [s for s in sentences(text)
            if COMPARATIVE.search(s) and METHOD.search(s)
            and not s.rstrip("*_)\" ").endswith("?")]


def hand_written():
    """{place: text} of every hand-written paragraph this test reads."""
    texts = {}
    for name in CHAPTERS:
        notebook = nbformat.read(BOOK / name, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "markdown":
                texts[f"{name}#{cell.get('id')}"] = cell.source
    for name in PAGES_WITH_THE_STUDY:
        texts[name] = (BOOK / name).read_text()

    def strings(value, place):
        if isinstance(value, dict):
            for key, item in value.items():
                yield from strings(item, f"{place}, {key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from strings(item, f"{place}, {index}")
        elif isinstance(value, str):
            yield place, value

    texts.update(strings(yaml.safe_load(NOTES.read_text()), "teacher_notes.yml"))
    return texts


def test_no_hand_written_sentence_compares_methods():
    found = {place: comparisons(text) for place, text in hand_written().items()}
    found = {place: hits for place, hits in found.items() if hits}
    assert found == {}, "\n".join(
        f"{place}: {hit}" for place, hits in found.items() for hit in hits)


@pytest.mark.parametrize("planted", [
    "FLAP's criterion loses less per cut than TNVP.",
    "With compensation, TNVP beats random in every seed.",
    "Compensation lowers the jump of no other method.",
    "Row norm + compensation is on a par with FLAP's criterion.",
    "The Torch-Pruning rows end higher, by about half a point.",
])
def test_a_planted_comparison_is_found(planted, monkeypatch):
    """The test above fails on a comparison typed into a chapter's summary
    or into a page; a question about the same methods passes."""
    real = nbformat.read
    summary_cell = "cell-64"

    def read(path, *args, **kwargs):
        notebook = real(path, *args, **kwargs)
        if str(path).endswith(CHAPTERS[0]):
            cell = next(c for c in notebook.cells if c.get("id") == summary_cell)
            cell.source += f"\n- {planted}"
        return notebook

    monkeypatch.setattr(nbformat, "read", read)
    with pytest.raises(AssertionError, match=re.escape(planted)):
        test_no_hand_written_sentence_compares_methods()
    assert comparisons(f"Some words.\n\n{planted}") == [planted]
    assert comparisons(f"**Predict.** {planted[:-1]}?") == []


# Every trigger of COMPARATIVE and of METHOD, each checked on its own: one
# taken out of a pattern fails its own case.
COMPARING = ["lower", "higher", "beat", "beats", "beaten", "loses less", "lose more",
             "losing less", "every seed", "every stored seed", "no other", "better", "worse",
             "best", "worst", "outperforms", "on a par", "as well as", "as good as", "below zero",
             "above zero", "smaller than", "larger than", "less than", "more than", "fewer than",
             "cheaper than", "costlier than", "win", "wins", "ahead of", "behind", "furthest",
             "about half a point"]
NAMING = ["TNVP", "FLAP", "row norm", "weight norm", "random", "mask", "Torch-Pruning",
          "one-shot", "VBP", "within-batch", "compensation", "criterion", "method", "dense",
          "decay"]


@pytest.mark.parametrize("words", COMPARING)
def test_each_comparing_word_makes_a_comparison(words):
    assert comparisons(f"TNVP ends {words} here.") == [f"TNVP ends {words} here."]
    assert comparisons(f"The run ends {words} here.") == []    # no method named


@pytest.mark.parametrize("name", NAMING)
def test_each_method_word_names_a_method(name):
    assert comparisons(f"The {name} run ends lower.") == [f"The {name} run ends lower."]
    assert comparisons(f"The {name} run ends here.") == []     # no comparison


def test_the_reader_splits_sentences_and_skips_code_maths_and_questions():
    text = ("TNVP is shown. Then `lower than random` in code. Ask \"is TNVP better?\" now.\n\n"
            "- maths: $\\text{TNVP lower than random}$\n- random is higher than dense")
    assert comparisons(text) == ["random is higher than dense"]


def test_the_pages_include_the_generated_sentences():
    """Each generated file of sentences is included by a page the test reads."""
    pages = "".join((BOOK / name).read_text() for name in PAGES_WITH_THE_STUDY)
    for name in PAGES:
        assert f"_generated/{name}" in pages, name


@pytest.mark.parametrize("name", sorted(PAGES))
def test_a_findings_page_counts_its_seeds_per_width_only_where_the_study_has_two(name):
    from tools.study import study_data
    stem = PAGES[name][0]
    runs, _ = study_data(stem)
    seeds = f"{len(runs['main'])} seeds" + (" per width" if len(runs) > 1 else "")
    assert f"{{doc}}`{stem}` ({seeds}; each verdict" in (BOOK / "_generated" / name).read_text()
