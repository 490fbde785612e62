"""The book's structure: toc, configuration, stored outputs."""
import os
import re
import subprocess

import nbformat
import pytest
import yaml

from tools import copies
from tools.book import BOOK, ROOT, toc_entries, toc_notebooks, torch_pin
from tools.exports import export_cells, load_exports


def code_cells(notebook):
    return [(i, c) for i, c in enumerate(notebook.cells) if c.cell_type == "code"]


def tags(cell):
    return cell.metadata.get("tags", [])


def test_every_toc_entry_exists_and_every_page_is_in_the_toc():
    pages = {str(p.relative_to(ROOT).with_suffix(""))
             for p in BOOK.iterdir() if p.suffix in (".md", ".ipynb")}
    entries = set(toc_entries())
    assert entries - pages == set(), "toc entries without a page"
    assert pages - entries == set(), "pages missing from _toc.yml"


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


def test_no_machine_specific_text_in_stored_outputs(notebooks):
    """Addresses and absolute paths would make nbval compare noise."""
    for path, nb in notebooks.items():
        text = nbformat.writes(nb)
        assert "/work/" not in text, path.name
        assert "/root/" not in text, path.name


def test_config_renders_stored_outputs_and_links_colab():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] in ("off", "cache")
    assert config["execute"]["allow_errors"] is False
    assert config["launch_buttons"]["colab_url"].startswith("https://colab")
    assert config["html"]["use_repository_button"] is True
    assert config["repository"]["url"].startswith("https://github.com/")


def pages_address_step():
    pages = yaml.safe_load((ROOT / ".github" / "workflows" / "pages.yml").read_text())
    steps = pages["jobs"]["build"]["steps"]
    names = [step.get("name", "") for step in steps]
    index = next(i for i, name in enumerate(names) if "repository's address" in name)
    assert names[index + 1] == "Build the book", "the address is set before the build"
    return steps[index]


def run_pages_address_step(tmp_path, repository, config_text=None):
    """Run the workflow's address step on a copy of _config.yml."""
    step = pages_address_step()
    assert step["env"]["REPOSITORY"] == "${{ github.repository }}"
    (tmp_path / "_config.yml").write_text(
        config_text or (ROOT / "_config.yml").read_text())
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", step["run"]], cwd=tmp_path,
                          env={"PATH": os.environ["PATH"], "REPOSITORY": repository},
                          capture_output=True, text=True)
    return done, yaml.safe_load((tmp_path / "_config.yml").read_text())


def test_pages_workflow_publishes_with_the_repository_it_runs_in(tmp_path):
    done, config = run_pages_address_step(tmp_path, "someone/pruning-book")
    assert done.returncode == 0, done.stderr
    assert config["repository"]["url"] == "https://github.com/someone/pruning-book"
    assert "YOUR-" not in (tmp_path / "_config.yml").read_text()


def test_pages_workflow_refuses_to_publish_a_placeholder(tmp_path):
    done, _ = run_pages_address_step(tmp_path, "")
    assert done.returncode != 0
    # an address the step cannot replace (not on the url line) still stops it
    stray = (ROOT / "_config.yml").read_text() + "# see YOUR-ACCOUNT/YOUR-REPOSITORY\n"
    done, _ = run_pages_address_step(tmp_path, "someone/pruning-book", stray)
    assert done.returncode != 0 and "placeholder" in done.stderr


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


def test_github_workflows_test_and_publish_the_book():
    workflows = ROOT / ".github" / "workflows"
    test = yaml.safe_load((workflows / "test.yml").read_text())
    pages = yaml.safe_load((workflows / "pages.yml").read_text())
    test_steps = [s.get("run", s.get("uses", "")) for s in test["jobs"]["test"]["steps"]]
    assert any("make test" in s for s in test_steps)
    assert any("make book-strict" in s for s in test_steps)
    assert pages["permissions"] == {"contents": "read", "pages": "write",
                                    "id-token": "write"}
    build = [s.get("uses", "") for s in pages["jobs"]["build"]["steps"]]
    assert any(u.startswith("actions/upload-pages-artifact@") for u in build)
    assert pages["jobs"]["build"]["steps"][-1]["with"]["path"] == "_build/html"
    deploy = pages["jobs"]["deploy"]
    assert deploy["needs"] == "build"
    assert deploy["steps"][0]["uses"].startswith("actions/deploy-pages@")
    for workflow in (test, pages):
        # torch from the CPU index: the default wheel pulls CUDA, several GB
        steps = [s.get("run", "") for job in workflow["jobs"].values()
                 for s in job["steps"]]
        assert any("torch==2.13.0" in s and "whl/cpu" in s for s in steps)
