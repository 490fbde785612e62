"""The claim markers of the chapters (tools/claims.py): each names a cell
that asserts and ran, and a marker broken in any of four ways is named."""
import copy
import re

import pytest

from tools import claims
from tools.book import BOOK
from tools.generate import read_chapters


@pytest.fixture(scope="module")
def chapters():
    return read_chapters()


def test_every_marker_names_a_cell_that_asserts_and_ran(chapters):
    assert claims.claims(chapters) and claims.problems(chapters) == []


def test_no_sentence_says_asserted_without_naming_its_cell(chapters):
    bare = [f"{path.name}#{cell.get('id')}" for path, notebook in chapters.items()
            for cell in notebook.cells if cell.cell_type == "markdown"
            and re.search(r"\([^()`]*\basserted\b(?!: `)[^()]*\)", cell.source)]
    assert bare == []


@pytest.mark.parametrize("break_it, said", [
    (lambda cell: cell.update(id="renamed"), "is no code cell of the chapter"),
    (lambda cell: cell.update(source=re.sub(r"(?m)^(\s*)assert\b", r"\1print", cell.source)),
     "asserts nothing"),
    (lambda cell: cell.metadata.setdefault("tags", []).append("raises-exception"), "raises"),
    (lambda cell: cell.update(outputs=[{"output_type": "error", "ename": "AssertionError",
                                        "evalue": "", "traceback": []}]), "raises"),
    (lambda cell: cell.update(execution_count=None), "never ran"),
])
def test_a_broken_marker_is_named(chapters, break_it, said):
    path = BOOK / "05_variance_pruning.ipynb"
    notebook = copy.deepcopy(chapters[path])
    target = claims.claims({path: notebook})[0][3][0]
    break_it(next(c for c in notebook.cells if c.get("id") == target))
    found = claims.problems({path: notebook})
    assert len(found) == 1 and found[0].startswith(f"{path.name}#") and said in found[0], found


def test_a_claim_on_the_stored_study_is_told_from_one_run_live():
    """A cell reading what the stored study's cell defines, directly or through
    another cell, reads numbers computed once; a name assigned again by a cell
    that reads nothing stored is live again."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    sources = [("stored", "STUDY = {'runs': [1, 2]}"), ("reads", "RUNS = STUDY['runs']"),
               ("claim", "assert RUNS == [1, 2]"), ("live", "RUNS = [3]"),
               ("claim-live", "assert RUNS == [3]"), ("magic", "%time x = sorted(RUNS)")]
    for cell_id, source in sources:
        cell = nbformat.v4.new_code_cell(source)
        cell["id"] = cell_id
        notebook.cells.append(cell)
    notebook.cells[0].metadata["study"] = "a chapter"
    assert claims.reading_stored(notebook) == {"stored", "reads", "claim"}


def test_the_claims_page_marks_the_stored_ones():
    text = claims.TABLE.read_text()
    assert claims.STORED_NOTE in text
    marked = [line for line in text.splitlines() if line.startswith("- " + claims.STORED_MARK)]
    assert marked and all("asserted: <a href=" in line or "shown: <a href=" in line
                          for line in marked)
    assert not any(">tp-ratios<" in line for line in marked)  # reads CONFIG, set live
    assert any(">study-finals<" in line for line in marked)


def test_every_marker_links_its_cell_on_the_built_page(chapters):
    """On the built chapter (make book), each marker's cell id is a link to
    an anchor on that cell's container (book/_ext/claim_links.py)."""
    from tools.downloads import HTML

    unlinked = []
    for path, _, _, targets in claims.claims(chapters):
        page = (HTML / "book" / f"{path.stem}.html").read_text()
        unlinked += [(path.stem, target) for target in targets
                     if f'href="#code-{target}"' not in page
                     or not re.search(rf'<div class="cell[^"]*" id="code-{target}">', page)]
    assert unlinked == []
