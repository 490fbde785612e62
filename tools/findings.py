"""The study's comparative sentences for the Markdown pages, written from the data.

A page that compares pruning methods (the teacher's guide, the teaching
notes, the assessment's answers) does not type the comparison: it includes
a file of book/_generated/ written here, whose every sentence is `say`
(the function of chapter 5's `paired-comparison` cell that the chapters
print their verdicts with) applied to the stored study
(book/_data/study/, `make study`) and the chapter's own declared
families (`study_verdicts`). A sentence can therefore say no more than the
study: its end point, the paired difference with its 95% interval, the
Holm-adjusted p within its family and the seed count.

`generated()` returns {path: text}; `make generate` writes them.
"""
import nbformat

from tools.book import BOOK, GENERATED, ROOT
from tools.exports import load_exports
from tools.study import study_data

HEADER = ("% Written by `python -m tools.findings` from the stored study "
          "(book/_data/study/{stem}.json) and the chapter's `say`; not edited by hand.\n\n")

# {file name: (chapter stem, [(first, second, family)])}: the comparisons
# each page quotes. Every pair must be in the chapter's declared family
# (`say` refuses one that is not).
COMPENSATION_05 = [("TNVP", "TNVP, no compensation"),
                   ("FLAP criterion + compensation", "FLAP criterion"),
                   ("row norm + compensation", "row norm"),
                   ("random + compensation", "random")]
PAGES = {
    "study_findings_05.md": ("05_variance_pruning", [
        *[(a, b, "drop") for a, b in COMPENSATION_05],
        *[(a, "TNVP", end) for a in ("FLAP criterion + compensation", "row norm + compensation",
                                     "Torch-Pruning, Adam moved + compensation")
          for end in ("drop", "recovered", "final")],
        ("within-batch variance + compensation", "TNVP", "drop"),
        ("one-shot (VBP-style)", "TNVP", "final"),
    ]),
    "study_answer_05.md": ("05_variance_pruning", [
        ("TNVP", "TNVP, no compensation", "drop"),
        ("FLAP criterion + compensation", "TNVP", "drop"),
        ("FLAP criterion + compensation", "TNVP", "final"),
    ]),
    "study_findings_07.md": ("07_tnvp_language_model", [
        *[(a, "TNVP", ("main", end)) for a in ("random", "weight norm", "FLAP criterion")
          for end in ("jump", "final")],
        ("TNVP", "TNVP, no compensation", ("main", "jump")),
        ("random + compensation", "TNVP", ("2x width", "jump")),
        ("dense", "TNVP", ("main", "final")),
    ]),
}


def verdicts(stem, chapters=None):
    """(the chapter's exports, its study_verdicts of the stored study), from
    `chapters` ({path: notebook} about to be written) if given, else the disk."""
    notebook = (chapters or {}).get(BOOK / f"{stem}.ipynb")
    chapter = load_exports(f"{stem}.ipynb", notebook and nbformat.writes(notebook))
    runs, _ = study_data(stem)
    return chapter, chapter.study_verdicts(runs, chapter.STUDY_PLAN["data"]())


def page_text(stem, rows, found=None):
    """A Markdown list: one `say` sentence per (first, second, family)."""
    chapter, families = found or verdicts(stem)
    seeds = len(study_data(stem)[0]["main"])
    lines = [HEADER.format(stem=stem),
             f"From the stored study of {{doc}}`{stem}` ({seeds} seeds"
             f"{' per width' if stem.startswith('07') else ''}; each verdict "
             "Holm-adjusted within its declared family):\n\n"]
    lines += [f"- {chapter.say(families, first, second, family)}\n"
              for first, second, family in rows]
    return "".join(lines)


def generated(chapters=None):
    """{path: text} of the files this module writes (from `chapters`, as in verdicts)."""
    cache, files = {}, {}
    for name, (stem, rows) in PAGES.items():
        if stem not in cache:
            cache[stem] = verdicts(stem, chapters)
        files[GENERATED / name] = page_text(stem, rows, cache[stem])
    return files


if __name__ == "__main__":
    for path, text in generated().items():
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")
