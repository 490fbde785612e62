"""What `make generate` writes is up to date, and nothing is written twice
by hand: helper copies, setup cells, the student edition, the tables."""
import contextlib
import copy
import re
import shutil
import subprocess
import sys
import types

import nbformat
import pytest

from tools import copies, study
from tools.book import BOOK, ROOT, render, tags
from tools.generate import out_of_date, read_chapters, stray_files, wanted_files

CH4, CH5, CH7 = (BOOK / name for name in (
    "04_every_way_out.ipynb", "05_variance_pruning.ipynb",
    "07_tnvp_language_model.ipynb"))


@pytest.fixture(scope="module")
def chapters():
    return read_chapters()


def test_every_generated_file_is_up_to_date(chapters):
    wanted = wanted_files(chapters)
    stale = [str(p.relative_to(ROOT)) for p in out_of_date(wanted)]
    assert stale == [], "run `make generate`"
    assert stray_files(wanted) == []
    # each chapter of _toc.yml (read here as text, not by tools.book), and
    # only those, is written, and its student edition
    listed = {f"{name}.ipynb" for name in re.findall(
        r"^\s*- file: book/(\d\d_\w+)\s*$", (ROOT / "_toc.yml").read_text(), re.M)}
    assert len(listed) >= 7
    assert {p.name for p in wanted if p.parent == BOOK and p.suffix == ".ipynb"} == listed
    assert {p.name for p in wanted if p.parent == BOOK / "student"} == listed
    # and a table of each generator (tools.generate.GENERATORS)
    assert {"chapters_at_a_glance.md", "runsheet_1.html", "how_to_cite.md", "triage_rules.js",
            "study_findings_05.md"} <= {p.name for p in wanted}


def test_a_missing_or_changed_file_is_out_of_date(tmp_path):
    (tmp_path / "same.md").write_text("x")
    (tmp_path / "changed.md").write_text("old")
    wanted = {tmp_path / name: text for name, text in
              [("same.md", "x"), ("changed.md", "new"), ("missing.md", "x")]}
    assert out_of_date(wanted) == [tmp_path / "changed.md", tmp_path / "missing.md"]


def copy_cell(notebook, reference):
    return next(c for c in notebook.cells if reference in c.metadata.get("copy_of", []))


def test_a_hand_edited_copy_is_rewritten(chapters):
    edited = copy.deepcopy(chapters)
    cell = copy_cell(edited[CH7], "04_every_way_out.ipynb#pair-surgery-checks")
    cell.source = cell.source.replace('raise TypeError("LBFGS', 'print("LBFGS')
    assert cell.source != copy_cell(chapters[CH7], "04_every_way_out.ipynb#pair-surgery-checks").source
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


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A scratch copy of the repository's files, up to date: each test edits
    a chapter there, runs `tools.generate --check` and puts the file back."""
    root = tmp_path_factory.mktemp("repository")
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                             text=True, check=True).stdout.split("\0")
    for name in filter(None, tracked):
        if (ROOT / name).is_file():          # (a file deleted but not yet committed)
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(ROOT / name, root / name)
    done = generate_check(root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def generate_check(root):
    return subprocess.run([sys.executable, "-m", "tools.generate", "--check"],
                          cwd=root, capture_output=True, text=True)


@contextlib.contextmanager
def edited(path, change):
    """The notebook at `path` changed by `change(notebook)` while in the block."""
    text = path.read_text()
    notebook = nbformat.reads(text, as_version=4)
    change(notebook)
    path.write_text(render(notebook))
    try:
        yield
    finally:
        path.write_text(text)


def cell_by_id(notebook, cell_id):
    return next(c for c in notebook.cells if c.get("id") == cell_id)


def test_generate_check_fails_on_a_hand_edited_copy(scratch):
    """The command itself names the cell, shows the diff and says where the
    edit belongs."""
    chapter = scratch / "book" / CH7.name
    text = chapter.read_text()
    edited_text = text.replace("LBFGS keeps", "LBFGS holds", 1)
    assert edited_text != text
    chapter.write_text(edited_text)
    try:
        done = generate_check(scratch)
    finally:
        chapter.write_text(text)
    assert done.returncode == 1
    assert f"out of date: book/{CH7.name}" in done.stdout
    assert (f"{CH7.name}#copy-pair-surgery-checks: copy edited by hand: move your edit into "
            "the source cell 04_every_way_out.ipynb#pair-surgery-checks, then run "
            "`make generate`") in done.stdout
    assert "an edit left here is lost" in done.stdout
    diff = [line.strip() for line in done.stdout.splitlines()]
    assert any(line.startswith("-") and "LBFGS holds" in line for line in diff)
    assert any(line.startswith("+") and "LBFGS keeps" in line for line in diff)


def test_generate_check_tells_a_stale_copy_from_a_hand_edit(scratch):
    """A source edited without `make generate`: its copies are stale (their
    text is what `make generate` wrote), and `make generate` loses nothing."""
    def change(notebook):
        cell = cell_by_id(notebook, "prune-linear-pair")
        assert "in place and atomically" in cell.source
        cell.source = cell.source.replace("in place and atomically", "in place, atomically", 1)

    with edited(scratch / "book" / CH4.name, change):
        done = generate_check(scratch)
    assert done.returncode == 1
    for path in (CH5, CH7):
        assert (f"{path.name}#copy-prune-linear-pair: stale copy (its source changed since "
                "`make generate` wrote it): run `make generate`") in done.stdout
    assert "edited by hand" not in done.stdout


def test_generate_check_fails_on_a_generated_cell_without_its_source(scratch):
    """A copy whose copy_of was removed, its `generated` tag kept, then edited:
    nothing would compare it with its source again."""
    def change(notebook):
        cell = cell_by_id(notebook, "copy-pair-surgery-checks")
        del cell.metadata["copy_of"]
        cell.source = cell.source.replace("LBFGS keeps", "LBFGS holds", 1)

    with edited(scratch / "book" / CH7.name, change):
        done = generate_check(scratch)
    assert done.returncode == 1, done.stdout
    assert (f"{CH7.name}#copy-pair-surgery-checks is tagged `generated` but names no "
            "source") in done.stdout


def test_generate_check_fails_on_a_copied_name_assigned_otherwise(scratch):
    """Chapter 7 copies MERGE_EVERY = 256 from chapter 5; a hand cell of
    chapter 7 that sets it to 64 gives the name a second meaning."""
    def change(notebook):
        cell = next(c for c in notebook.cells if c.cell_type == "code"
                    and "copy_of" not in c.metadata and "setup" not in c.metadata
                    and "study" not in c.metadata)
        cell.source += "\nMERGE_EVERY = 64"

    with edited(scratch / "book" / CH7.name, change):
        done = generate_check(scratch)
    assert done.returncode == 1, done.stdout
    assert "one name, two meanings: `MERGE_EVERY`" in done.stdout
    assert "(by hand): MERGE_EVERY = 64" in done.stdout
    assert "(copy): MERGE_EVERY = 256" in done.stdout


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


def names_written_twice(chapters):
    """Names that two chapters define or assign against the rule of
    tools.copies.names_defined_twice, in the chapters as generated."""
    generated = copies.with_generated_cells(chapters)
    return sorted(copies.names_defined_twice(generated, own=study.PROTOCOL))


def test_one_name_one_meaning_across_chapters(chapters):
    """A function or class defined in two chapters is one definition, written
    by hand once and copied by `make generate` elsewhere; so is a name a
    copy assigns."""
    assert names_written_twice(chapters) == []


def first_hand_cell(notebook, containing=""):
    return next(c for c in notebook.cells
                if c.cell_type == "code" and "generated" not in tags(c)
                and "setup" not in c.metadata and containing in c.source)


def test_the_name_check_finds_a_planted_redefinition(chapters):
    planted = copy.deepcopy(chapters)
    first_hand_cell(planted[CH7], "def ").source += (
        "\n\ndef graph_nodes(outputs):\n    return []\n")
    assert names_written_twice(planted) == ["graph_nodes"]
    by_hand = copy.deepcopy(chapters)
    copy_of_outcome = next(c for c in by_hand[BOOK / "03_what_holds_the_old_shape.ipynb"].cells
                           if "generated" in tags(c) and "def outcome" in c.source)
    del copy_of_outcome.metadata["copy_of"]             # the same code, typed by hand
    copy_of_outcome.metadata["tags"] = ["export"]
    assert names_written_twice(by_hand) == ["outcome"]


def test_the_name_check_covers_assignments(chapters):
    """A copied constant set otherwise by hand, in the copying chapter or
    any other, fails; so does a copied function's name assigned by hand. A
    constant that only hand cells assign is each chapter's own."""
    assert "MERGE_EVERY = 256" in copy_cell(chapters[CH7], "05_variance_pruning.ipynb"
                                            "#activation-tracker").source
    for chapter, line, name in [(CH7, "MERGE_EVERY = 64", "MERGE_EVERY"),
                                (CH4, "MERGE_EVERY = 64", "MERGE_EVERY"),
                                (CH5, "prune_linear_pair = print", "prune_linear_pair")]:
        planted = copy.deepcopy(chapters)
        first_hand_cell(planted[chapter]).source += "\n" + line
        assert names_written_twice(planted) == [name], line
    own = copy.deepcopy(chapters)
    first_hand_cell(own[CH4]).source += "\nA_CHAPTERS_OWN = 1"
    first_hand_cell(own[CH7]).source += "\nA_CHAPTERS_OWN = 2"
    assert names_written_twice(own) == []
    same = copy.deepcopy(chapters)                 # typed again, even identically
    first_hand_cell(same[CH7]).source += "\nMERGE_EVERY = 256"
    assert names_written_twice(same) == ["MERGE_EVERY"]


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


def test_generate_check_fails_on_a_file_that_no_generator_writes(scratch):
    """book/_generated/ holds derived files only: one that no generator
    writes (left behind when a generator stops writing it) fails the check."""
    orphan = scratch / "book" / "_generated" / "orphan_table.md"
    orphan.write_text("| a table nothing writes any more |\n")
    try:
        done = generate_check(scratch)
    finally:
        orphan.unlink()
    assert done.returncode == 1, done.stdout      # for the orphan, and nothing else
    assert done.stdout.splitlines() == ["generated by nothing: book/_generated/orphan_table.md"]


def test_make_generate_shows_the_hand_edit_it_rewrites(scratch):
    """`make generate` still rewrites a hand-edited copy, but not silently:
    the edit is printed, so it can be moved into its source."""
    chapter = scratch / "book" / CH7.name
    text = chapter.read_text()
    chapter.write_text(text.replace("LBFGS keeps", "LBFGS holds", 1))
    done = subprocess.run([sys.executable, "-m", "tools.generate"], cwd=scratch,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert chapter.read_text() == text
    assert "rewriting a cell that may hold a hand edit; it is lost, but for this diff" \
        in done.stdout
    assert any(line.strip().startswith("-") and "LBFGS holds" in line
               for line in done.stdout.splitlines())


def report(chapters, path, cell_id):
    """cell_report of one cell of the chapters as they are (`chapters`)."""
    wanted = copies.with_generated_cells(chapters)[path]
    index = next(i for i, c in enumerate(wanted.cells) if c.get("id") == cell_id)
    return copies.cell_report(path, index, chapters[path].cells[index],
                              wanted.cells[index], chapters)


def test_a_copy_of_several_cells_is_one_cell_per_source(chapters):
    """A copy cell naming several source cells becomes, in order, one copy
    cell per source, each titled by its source; a hand edit of one names
    that one source."""
    several = copy.deepcopy(chapters)
    first = cell_by_id(several[CH7], "copy-pair-surgery-checks")
    index = several[CH7].cells.index(first)
    del several[CH7].cells[index + 1]                  # copy-pair-surgery-surroundings
    first.metadata["copy_of"] = ["04_every_way_out.ipynb#pair-surgery-checks",
                                 "04_every_way_out.ipynb#pair-surgery-surroundings"]
    def cells(notebook):
        return [(cell.get("id"), cell.source, cell.metadata) for cell in notebook.cells]
    assert cells(copies.with_generated_cells(several)[CH7]) == cells(chapters[CH7])
    for part, old, new in [("prune-linear-pair", "in place and atomically", "in place"),
                           ("pair-surgery-checks", "LBFGS keeps", "LBFGS holds")]:
        edited_chapters = copy.deepcopy(chapters)
        cell = cell_by_id(edited_chapters[CH7], f"copy-{part}")
        assert old in cell.source
        cell.source = cell.source.replace(old, new, 1)
        kind, lines = report(edited_chapters, CH7, f"copy-{part}")
        assert kind == "edited"
        assert f"move your edit into the source cell 04_every_way_out.ipynb#{part}," in lines[0]
        assert lines[1] == f"--- {CH7.name}#copy-{part} (in the notebook)"


def test_a_copy_without_its_hash_is_not_called_stale(chapters):
    """Without copy_hash nothing tells a stale copy from a hand edit: the
    report says so rather than advise `make generate` alone."""
    edited_chapters = copy.deepcopy(chapters)
    cell = cell_by_id(edited_chapters[CH7], "copy-pair-surgery-checks")
    del cell.metadata["copy_hash"]
    cell.source = cell.source.replace("LBFGS keeps", "LBFGS holds", 1)
    kind, lines = report(edited_chapters, CH7, "copy-pair-surgery-checks")
    assert kind == "unknown"
    assert "if you edited it, move your edit into" in lines[0]


def test_every_copy_records_the_hash_of_what_was_written(chapters):
    found = 0
    for notebook in chapters.values():
        for cell in notebook.cells:
            if "copy_of" in cell.metadata:
                assert cell.metadata["copy_hash"] == copies.digest(cell.source)
                found += 1
    assert found >= 6


def test_a_generated_tag_needs_a_source(chapters):
    broken = copy.deepcopy(chapters)
    del cell_by_id(broken[CH7], "copy-prune-linear-pair").metadata["copy_of"]
    with pytest.raises(ValueError, match="is tagged `generated` but names no source"):
        copies.with_generated_cells(broken)
    study_cell = copy.deepcopy(chapters)
    del next(c for c in study_cell[CH5].cells if "study" in c.metadata).metadata["study"]
    with pytest.raises(ValueError, match="is tagged `generated` but names no source"):
        copies.with_generated_cells(study_cell)


def test_every_generated_cell_names_its_source(chapters):
    for path, notebook in chapters.items():
        for cell in notebook.cells:
            if "generated" in tags(cell):
                assert set(cell.metadata) & set(copies.SOURCES), (path.name, cell.get("id"))


def test_each_source_cell_names_the_chapters_that_copy_it(chapters):
    """The first line (under a title) of a copied cell names the chapters
    with a copy; the copies leave that line out; a cell no longer copied
    loses it."""
    title, note = cell_by_id(chapters[CH4], "pair-surgery-checks").source.split("\n")[:2]
    assert title.startswith("# @title ") and note == (
        "# Copied into chapters 5, 6 and 7 by `make generate`: edit it here, not in the "
        "copies.")
    loss = cell_by_id(chapters[BOOK / "01_reproduce_the_error.ipynb"], "question-loss")
    assert loss.source.startswith("# Copied into chapter 4 by `make generate`: edit it "
                                  "here, not in the copy.\n")
    for notebook in chapters.values():
        for cell in notebook.cells:
            if "copy_of" in cell.metadata:
                assert copies.COPIED_INTO not in cell.source
    no_longer = copy.deepcopy(chapters)
    for path in (CH5, CH7):
        no_longer[path].cells.remove(
            copy_cell(no_longer[path], "04_every_way_out.ipynb#prune-linear-pair"))
    regenerated = copies.with_generated_cells(no_longer)
    source = cell_by_id(regenerated[CH4], "prune-linear-pair").source
    assert source.startswith("def prune_linear_pair(")
    assert copies.with_copied_into("# @title T\nx = 1", [7, 5]) == (
        "# @title T\n# Copied into chapters 5 and 7 by `make generate`: edit it here, "
        "not in the copies.\nx = 1")
    assert copies.with_copied_into(copies.with_copied_into("x = 1", [5]), []) == "x = 1"


@pytest.mark.parametrize("marker, origin", [
    ("setup", "tools/copies.py (SETUP) and the pins of requirements.txt"),
    ("study", "book/_data/study/05_variance_pruning.json (`make study`)"),
    ("bench", "book/_data/bench/tnvp_overhead.json (`make bench`)"),
])
def test_a_setup_or_study_cell_edited_names_where_to_edit(chapters, marker, origin):
    edited_chapters = copy.deepcopy(chapters)
    cell = next(c for c in edited_chapters[CH5].cells if marker in c.metadata)
    cell.source += "\nprint('edited')"
    kind, lines = report(edited_chapters, CH5, cell.get("id"))
    assert kind == "rewritten"
    assert f"written by `make generate` from {origin}: if you edited it" in lines[0]
    assert lines[-1] == "-print('edited')"


# Found by mutation testing (mutmut): changes to tools/copies.py and tools/generate.py
# that the tests above let through.

def test_the_install_list_reads_submodule_imports_past_magics_and_shell_lines():
    cell = nbformat.v4.new_code_cell("%matplotlib inline\n!nvidia-smi\nimport torchviz.dot\n"
                                     "from torch_pruning.pruner import algorithms")
    assert copies.imported_installables([cell]) == ["torchviz", "torch-pruning"]


def test_top_level_names_keeps_every_name_of_a_cell():
    names = copies.top_level_names("!ls\n%time y = 2\ndef f():\n    pass\nX = 1\nclass C:\n    pass")
    assert [(name, kind) for name, kind, _ in names] == [("f", "def"), ("X", "assign"), ("C", "def")]


def test_the_name_check_finds_a_copied_name_reassigned_in_its_source_chapter(chapters):
    planted = copy.deepcopy(chapters)
    first_hand_cell(planted[CH4]).source += "\nprune_linear_pair = print"
    assert names_written_twice(planted) == ["prune_linear_pair"]


def test_the_setup_cell_is_the_first_code_cell_and_the_only_one(chapters):
    """Not marked: refused, rather than its code overwritten by the setup code."""
    no_setup, two = copy.deepcopy(chapters), copy.deepcopy(chapters)
    del next(c for c in no_setup[CH7].cells if c.cell_type == "code").metadata["setup"]
    [c for c in two[CH7].cells if c.cell_type == "code"][1].metadata["setup"] = {"install": []}
    for broken, message in [(no_setup, "the first code cell must be the setup cell"),
                            (two, "only the first code cell is a setup cell")]:
        with pytest.raises(ValueError, match=message):
            copies.with_generated_cells(broken)


def moved_after_setup(notebook, cell):
    notebook.cells.remove(cell)
    notebook.cells.insert(next(i for i, c in enumerate(notebook.cells)
                               if c.cell_type == "code") + 1, cell)


def test_a_copy_right_after_the_setup_cell_is_rewritten_too(chapters):
    moved = copy.deepcopy(chapters)
    cell = cell_by_id(moved[CH7], "copy-prune-linear-pair")
    original, cell.source = cell.source, "edited by hand"
    moved_after_setup(moved[CH7], cell)
    regenerated = copies.with_generated_cells(moved)[CH7]
    assert cell_by_id(regenerated, "copy-prune-linear-pair").source == original


def test_copies_after_a_stored_benchmark_are_generated_too(chapters):
    moved = copy.deepcopy(chapters)
    moved_after_setup(moved[CH5], next(c for c in moved[CH5].cells if "bench" in c.metadata))
    for cell in moved[CH5].cells:
        cell.metadata.pop("copy_hash", None)
    regenerated = [c for c in copies.with_generated_cells(moved)[CH5].cells
                   if "copy_of" in c.metadata]
    assert regenerated and all(c.metadata["copy_hash"] == copies.digest(c.source)
                               for c in regenerated)


def test_a_part_whose_source_has_no_title_keeps_the_copy_title(chapters):
    several = copy.deepcopy(chapters)
    several[CH7].cells.remove(cell_by_id(several[CH7], "copy-prune-linear-pair"))
    first = cell_by_id(several[CH7], "copy-pair-surgery-checks")
    first.metadata["copy_of"] = ["04_every_way_out.ipynb#prune-linear-pair",
                                 "04_every_way_out.ipynb#pair-surgery-checks"]
    assert not cell_by_id(several[CH4], "prune-linear-pair").source.startswith("# @title")
    split = copies.one_copy_per_source(CH7, several[CH7], several)
    assert cell_by_id(split, "copy-prune-linear-pair").metadata["copy_title"] == \
        first.metadata["copy_title"]


def test_an_empty_copy_of_is_refused_with_what_it_needs(chapters):
    empty = copy.deepcopy(chapters)
    copy_cell(empty[CH7], "04_every_way_out.ipynb#prune-linear-pair").metadata["copy_of"] = []
    with pytest.raises(ValueError, match="a list of one cell"):
        copies.with_generated_cells(empty)


def test_a_table_that_reads_the_chapters_gets_them_as_about_to_be_written(chapters,
                                                                           monkeypatch):
    """One run of `make generate` is enough: a generator whose `generated()`
    takes `chapters` is given the chapters as generated, not read from disk."""
    from tools import generate
    seen = {}

    def table(chapters=None):
        seen["chapters"] = chapters
        return {}
    monkeypatch.setitem(sys.modules, "a_table", types.SimpleNamespace(generated=table))
    monkeypatch.setattr(generate, "GENERATORS", ["a_table"])
    wanted = copy.deepcopy(chapters)
    generate.wanted_files(chapters, wanted)
    assert seen["chapters"] is wanted


def test_stray_files_are_found_in_both_generated_folders(tmp_path, monkeypatch):
    from tools import generate
    monkeypatch.setattr(generate, "BOOK", tmp_path)
    monkeypatch.setattr(generate, "GENERATED", tmp_path / "_generated")
    for name in ["student/kept.ipynb", "student/orphan.ipynb", "_generated/kept.md",
                 "_generated/old/orphan.md"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    wanted = {tmp_path / "student/kept.ipynb": "x", tmp_path / "_generated/kept.md": "x"}
    assert generate.stray_files(wanted) == [tmp_path / "_generated/old/orphan.md",
                                            tmp_path / "student/orphan.ipynb"]


def test_a_copy_of_that_is_not_a_list_is_refused_by_name(chapters):
    broken = copy.deepcopy(chapters)
    reference = "04_every_way_out.ipynb#prune-linear-pair"
    copy_cell(broken[CH7], reference).metadata["copy_of"] = reference
    with pytest.raises(ValueError, match="copy_of must be a list"):
        copies.with_generated_cells(broken)
