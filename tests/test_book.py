"""The book's structure: toc, configuration, stored outputs."""
import copy
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest
import yaml

from tools import copies
from tools.sites import CLASS_PAGES, TEACHER_PAGES
from tools.book import BOOK, ROOT, tags, toc_entries, toc_notebooks, torch_pin
from tools.exports import export_cells, load_exports


def code_cells(notebook):
    return [(i, c) for i, c in enumerate(notebook.cells) if c.cell_type == "code"]


def test_every_toc_entry_exists_and_every_page_is_in_the_toc():
    """Every page of book/ is in the toc, but the teacher's pages, which
    only the teacher's pack holds (tools/sites.py)."""
    pages = {str(p.relative_to(ROOT).with_suffix(""))
             for p in BOOK.iterdir() if p.suffix in (".md", ".ipynb")}
    entries = set(toc_entries())
    teachers = {f"book/{name}" for name in set(TEACHER_PAGES) - set(CLASS_PAGES)}
    assert entries - pages == set(), "toc entries without a page"
    assert teachers <= pages, "a teacher's page is missing"
    assert entries & teachers == set(), "a teacher's page is in the public toc"
    assert pages - entries - teachers == set(), "pages missing from _toc.yml"


def test_chapters_are_numbered_in_toc_order():
    names = [p.name for p in toc_notebooks()]
    assert names, "the toc lists no notebook"
    numbers = [int(re.match(r"(\d\d)_", n).group(1)) for n in names]
    assert numbers == list(range(1, len(names) + 1)), names


def test_every_code_cell_has_a_stored_execution(notebooks):
    missing = [f"{p.name} cell {i}" for p, nb in notebooks.items()
               for i, c in code_cells(nb)
               if c.source.strip() and c.execution_count is None]
    assert missing == []


def test_execution_counts_run_in_order(notebooks):
    """Stored outputs come from one top-to-bottom run of a fresh kernel."""
    for path, nb in notebooks.items():
        counts = [c.execution_count for _, c in code_cells(nb)]
        assert counts == list(range(1, len(counts) + 1)), path.name


def test_failing_cells_are_tagged_and_keep_their_error(notebooks):
    for path, nb in notebooks.items():
        for i, cell in code_cells(nb):
            has_error = any(o.output_type == "error" for o in cell.outputs)
            tagged = "raises-exception" in tags(cell)
            assert has_error == tagged, (
                f"{path.name} cell {i}: error output {has_error}, "
                f"raises-exception tag {tagged}")


def test_first_code_cell_is_the_guarded_setup(notebooks):
    """The setup cell (written by `make generate` from tools.copies) ran and
    printed the reader's torch; each package it installs is guarded."""
    for path, nb in notebooks.items():
        _, first = code_cells(nb)[0]
        assert "setup" in first.metadata, path.name
        for package in first.metadata["setup"]["install"]:
            module = copies.INSTALLABLE[package]
            assert f"    import {module}  #" in first.source, (path.name, package)
        assert first.source.count("except ModuleNotFoundError") == len(
            first.metadata["setup"]["install"]), path.name
        assert "torch.manual_seed(" in first.source, path.name
        printed = "".join(o.get("text", "") for o in first.outputs)
        assert re.search(r"^torch \d+\.\d+", printed, re.M), path.name


def machine_paths():
    """Folders of this machine that a stored output must not show: the
    checkout, the venv, the interpreter's prefix, home, the temp folder."""
    # the machine's temporary folder (tests/conftest.py gives the run one of
    # its own inside it) and the run's
    system_tmp = Path(os.environ.get("SYSTEM_TMPDIR", tempfile.gettempdir()))
    return sorted(str(p) for p in {ROOT, Path(sys.prefix), Path(sys.base_prefix),
                                   Path.home(), system_tmp, Path(tempfile.gettempdir())}
                  if len(p.parts) > 1)


def test_no_machine_specific_text_in_stored_outputs(notebooks):
    """Absolute paths would make nbval compare noise, and tell nothing to a
    reader on another machine."""
    for path, nb in notebooks.items():
        text = "".join(str(c.get("outputs", "")) for c in nb.cells)
        found = [folder for folder in machine_paths() if folder in text]
        assert found == [], (path.name, found)


# A folder of someone's machine: a home (Linux, macOS, Windows: the last as
# a notebook stores it, its backslashes doubled, too), root's, or /work.
SOMEONES_FOLDER = re.compile(
    r"(?<![\w.~-])(?:/home/[^/\s\"'\\]+|/root|/work|/Users/[^/\s\"'\\]+"
    r"|[A-Za-z]:(?:\\\\?|/)Users(?:\\\\?|/)[^\\/\s\"']+)(?=[/\\\s\"']|$)")


def stored_files():
    """{name: text} of every text file in git but the code of tools/ (the
    grader hides /root and /home) and tests/ (which plants such folders):
    the notebooks, both editions, what is generated, the data, the docs."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.split("\0")
    texts = {}
    for name in names:
        if name and not name.startswith(("tests/", "tools/")) and (ROOT / name).is_file():
            try:
                texts[name] = (ROOT / name).read_text()
            except UnicodeDecodeError:    # a font, a picture
                pass
    return texts


def folders_named(texts):
    found = {name: SOMEONES_FOLDER.findall(text) for name, text in texts.items()}
    return {name: folders for name, folders in found.items() if folders}


def test_no_stored_file_names_a_folder_of_someones_machine():
    assert folders_named(stored_files()) == {}


@pytest.mark.parametrize("planted", [
    "/home/alice/pruning/x.py", "/Users/bob/Desktop", "C:\\Users\\carol\\book", "c:/Users/dan",
    "/root/.cache/torch", "/work/main/book"])
def test_a_stored_folder_of_a_machine_is_found(planted, notebooks):
    """Planted in a stored output and in a generated file; names that are
    not someone's folder pass."""
    path, notebook = next(iter(notebooks.items()))
    notebook = nbformat.from_dict(copy.deepcopy(notebook))
    cell = next(c for c in notebook.cells if c.cell_type == "code")
    cell.outputs = [nbformat.v4.new_output("stream", text=f"File {planted}: line 3\n")]
    texts = stored_files()
    texts[str(path.relative_to(ROOT))] = nbformat.writes(notebook)
    texts["book/_generated/table.md"] = f"made in `{planted}`"
    assert list(folders_named(texts)) == [str(path.relative_to(ROOT)), "book/_generated/table.md"]
    assert folders_named({"page.md": "~/.cache/torch /content/x /usr/lib/python3 "
                                     "https://example.org/home/page /homework/x"}) == {}


def test_machine_paths_include_the_checkout_and_the_venv():
    assert str(ROOT) in machine_paths() and sys.prefix in machine_paths()
    assert os.environ["SYSTEM_TMPDIR"] in machine_paths()


def test_the_run_has_a_temporary_folder_of_its_own():
    """tests/conftest.py: this run's temporary files, those of the programs
    it starts too, go to a folder of its own inside the machine's."""
    own = Path(tempfile.gettempdir())
    assert own.name.startswith("book-tests-") and own.is_dir()
    assert Path(os.environ["SYSTEM_TMPDIR"]) in own.parents
    child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert own in Path(child).parents


def test_config_renders_stored_outputs_and_links_colab():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] in ("off", "cache")
    assert config["execute"]["allow_errors"] is False
    assert config["launch_buttons"]["colab_url"].startswith("https://colab")
    assert config["html"]["use_repository_button"] is True
    assert config["repository"]["url"].startswith("https://github.com/")


def test_requirements_are_pinned():
    lines = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines and all(re.fullmatch(r"[\w.-]+==[\w.+-]+", line) for line in lines), lines
    assert f"torch=={torch_pin()}" in lines
    assert any(line.startswith("jupyter-book==1.0.") for line in lines)


def test_export_loader_runs_the_tagged_cells():
    chapter = load_exports("01_reproduce_the_error.ipynb")
    assert chapter.outcome(lambda: None) == "works"
    assert chapter.outcome(lambda: 1 / 0) == "ZeroDivisionError: division by zero"
    with pytest.raises(TypeError, match="needs a function"):
        chapter.outcome(42)


def test_export_loader_refuses_what_is_not_there(tmp_path):
    with pytest.raises(FileNotFoundError):
        export_cells("no_such_chapter.ipynb")


def test_pins_releases_and_chapter_numbers_are_read_strictly(tmp_path, monkeypatch):
    from tools import book
    (tmp_path / "requirements.txt").write_text(
        "Torch==2.13.0  # the CPU wheel\nscikit_learn==1.7.1\nnbval>=0.11\n# x==1\n")
    (tmp_path / "releases.txt").write_text("2.5.1  # the floor\n\n2.13.0\n")
    monkeypatch.setattr(book, "REQUIREMENTS", tmp_path / "requirements.txt")
    monkeypatch.setattr(book, "RELEASES", tmp_path / "releases.txt")
    assert book.pins() == {"torch": "2.13.0", "scikit-learn": "1.7.1"}
    assert book.torch_releases() == ["2.5.1", "2.13.0"]
    for bad in ("2.5\n", "", "2.5.1\nlatest\n"):
        (tmp_path / "releases.txt").write_text(bad)
        with pytest.raises(ValueError, match="one release like 2.5.1 per line"):
            book.torch_releases()
    assert book.chapter_number("book/07_tnvp.ipynb") == 7
    with pytest.raises(ValueError, match="is not a chapter"):
        book.chapter_number("book/intro.md")
    assert book.version_tuple("2.10.0+cpu") == (2, 10, 0) < book.version_tuple("2.10.1")
