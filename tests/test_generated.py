"""What `make generate` writes is up to date, and nothing is written twice
by hand: helper copies, setup cells, the student edition, the tables."""
import ast
import copy
import shutil
import subprocess
import sys
from collections import defaultdict

import pytest

from tools import copies, study
from tools.book import BOOK, ROOT, render, toc_notebooks
from tools.generate import out_of_date, read_chapters, stray_files, wanted_files

CH4, CH5, CH7 = (BOOK / name for name in (
    "04_every_way_out.ipynb", "05_variance_pruning.ipynb",
    "07_tnvp_language_model.ipynb"))


@pytest.fixture(scope="module")
def chapters():
    return read_chapters()


def tags(cell):
    return cell.metadata.get("tags", [])


def test_every_generated_file_is_up_to_date(chapters):
    wanted = wanted_files(chapters)
    stale = [str(p.relative_to(ROOT)) for p in out_of_date(wanted)]
    assert stale == [], "run `make generate`"
    assert stray_files(wanted) == []


def copy_cell(notebook, reference):
    return next(c for c in notebook.cells if reference in c.metadata.get("copy_of", []))


def test_a_hand_edited_copy_is_rewritten(chapters):
    edited = copy.deepcopy(chapters)
    cell = copy_cell(edited[CH7], "04_every_way_out.ipynb#prune-linear-pair")
    cell.source = cell.source.replace('raise TypeError("LBFGS', 'print("LBFGS')
    assert cell.source != copy_cell(chapters[CH7], "04_every_way_out.ipynb#prune-linear-pair").source
    regenerated = copies.with_generated_cells(edited)
    assert render(regenerated[CH7]) == render(chapters[CH7])


def test_a_source_edited_without_generating_leaves_its_copies_stale(chapters):
    edited = copy.deepcopy(chapters)
    source = next(c for c in edited[CH4].cells if c.get("id") == "prune-linear-pair")
    before = source.source
    source.source = source.source.replace("in place and atomically", "in place, not atomically")
    assert source.source != before, "the edit must change the source, or the test proves nothing"
    regenerated = copies.with_generated_cells(edited)
    for path in (CH5, CH7):
        assert render(regenerated[path]) != render(edited[path]), path.name


def test_generate_check_fails_on_a_hand_edited_copy(tmp_path):
    """The command itself, on a scratch copy of the repository's files."""
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():          # (a file deleted but not yet committed)
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, tmp_path / name)

    def check():
        return subprocess.run([sys.executable, "-m", "tools.generate", "--check"],
                              cwd=tmp_path, capture_output=True, text=True)

    assert check().returncode == 0, check().stdout
    chapter = tmp_path / "book" / CH7.name
    text = chapter.read_text()
    edited = text.replace("only groups=1", "only groups=1 or more", 1)
    if edited == text:
        edited = text.replace("LBFGS keeps", "LBFGS holds", 1)
    assert edited != text
    chapter.write_text(edited)
    done = check()
    assert done.returncode == 1
    assert f"out of date: book/{CH7.name}" in done.stdout


@pytest.mark.parametrize("reference, error, message", [
    ("04_every_way_out.ipynb#no-such-cell", LookupError, "no cell with id 'no-such-cell'"),
    ("05_variance_pruning.ipynb#copy-prune-linear-pair", ValueError, "names a copy"),
], ids=["missing source cell", "copy of a copy"])
def test_a_copy_must_name_an_existing_source_cell(chapters, reference, error, message):
    broken = copy.deepcopy(chapters)
    copy_cell(broken[CH7], "04_every_way_out.ipynb#prune-linear-pair").metadata[
        "copy_of"] = [reference]
    with pytest.raises(error, match=message):
        copies.with_generated_cells(broken)


def test_every_setup_cell_installs_only_known_packages_pinned():
    source = copies.setup_source(["torchviz", "torch-pruning"])
    assert '"torchviz==' in source and '"torch-pruning==' in source
    with pytest.raises(ValueError, match="cannot install"):
        copies.setup_source(["numpy"])


def top_level_definitions(chapters):
    """{name: {(chapter, source of the definition, generated?)}} for every
    function and class defined at a cell's top level."""
    found = defaultdict(set)
    for path, notebook in chapters.items():
        for cell in notebook.cells:
            if cell.cell_type != "code":
                continue
            python = "\n".join(line for line in cell.source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            for node in ast.parse(python).body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    found[node.name].add((path.name, ast.unparse(node),
                                          "generated" in tags(cell)))
    return found


def names_written_twice(chapters):
    """Names that two chapters define by hand, or define differently (but
    for the names a study asks each chapter to define for itself)."""
    problems = []
    for name, places in sorted(top_level_definitions(chapters).items()):
        if name in study.PROTOCOL:
            continue
        by_hand = {chapter for chapter, _, generated in places if not generated}
        sources = {source for _, source, _ in places}
        chapters_defining = {chapter for chapter, _, _ in places}
        if len(chapters_defining) > 1 and (len(sources) > 1 or len(by_hand) > 1):
            problems.append(name)
    return problems


def test_one_name_one_meaning_across_chapters(chapters):
    """A function or class defined in two chapters is one definition, written
    by hand once and copied by `make generate` elsewhere."""
    assert names_written_twice(chapters) == []


def test_the_name_check_finds_a_planted_redefinition(chapters):
    planted = copy.deepcopy(chapters)
    cell = next(c for c in planted[CH7].cells
                if c.cell_type == "code" and "generated" not in tags(c)
                and "def " in c.source)
    cell.source += "\n\ndef graph_nodes(outputs):\n    return []\n"
    assert names_written_twice(planted) == ["graph_nodes"]
    by_hand = copy.deepcopy(chapters)
    copy_of_outcome = next(c for c in by_hand[BOOK / "03_what_holds_the_old_shape.ipynb"].cells
                           if "generated" in tags(c) and "def outcome" in c.source)
    copy_of_outcome.metadata["tags"] = ["export"]       # the same code, typed by hand
    assert names_written_twice(by_hand) == ["outcome"]


def test_no_helper_cell_is_written_twice_by_hand(chapters):
    """No two hand-written cells that define helpers have the same code."""
    seen = {}
    for path, notebook in chapters.items():
        for index, cell in enumerate(notebook.cells):
            if cell.cell_type != "code" or "generated" in tags(cell):
                continue
            if not any(line.startswith(("def ", "class ")) for line in cell.source.splitlines()):
                continue
            key = " ".join(cell.source.split())
            assert key not in seen, f"{path.name} cell {index} repeats {seen.get(key)}"
            seen[key] = f"{path.name} cell {index}"


def test_every_chapter_of_the_toc_is_generated():
    assert set(read_chapters()) == set(toc_notebooks())
