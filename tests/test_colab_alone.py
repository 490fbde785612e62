"""Each chapter runs alone, as in a fresh Colab runtime.

Colab opens one notebook by itself: nothing from this repository is there,
and torchviz is not installed. These tests recreate both conditions.
"""
import ast
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv

import nbformat
import pytest

from tools.book import toc_notebooks

CHAPTERS = toc_notebooks()

RUN_ALONE = r"""
import sys, nbformat
from nbclient import NotebookClient
notebook = nbformat.read(sys.argv[1], as_version=4)
notebook.cells.append(nbformat.v4.new_code_cell(
    "import importlib.util\n"
    "for name in ('book_files', 'nbexport', 'conftest'):\n"
    "    assert importlib.util.find_spec(name) is None, name\n"
    "print('nothing from the repository is importable')"))
client = NotebookClient(notebook, timeout=600, kernel_name="python3",
                        resources={"metadata": {"path": "."}})
client.execute()  # raises on any error outside a `raises-exception` cell
print(notebook.cells[-1].outputs[0]["text"].strip())
"""


def clean_environment():
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")}
    env["PYTHONNOUSERSITE"] = "1"
    return env


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.name for p in CHAPTERS])
def test_chapter_runs_alone_in_an_empty_folder(path, tmp_path):
    shutil.copy(path, tmp_path / path.name)
    result = subprocess.run(
        [sys.executable, "-c", RUN_ALONE, path.name], cwd=tmp_path,
        env=clean_environment(), capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith(
        "nothing from the repository is importable")
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], (
        "the chapter wrote files into its folder")


def torchviz_guard(notebook_path):
    """The install guard: the first statement of the chapter's setup cell."""
    notebook = nbformat.read(notebook_path, as_version=4)
    setup = next(c for c in notebook.cells if c.cell_type == "code")
    python = "\n".join(line for line in setup.source.splitlines()
                       if not line.lstrip().startswith("%"))
    guard = ast.parse(python).body[0]
    assert isinstance(guard, ast.Try), "the setup cell starts with try/except"
    return ast.unparse(guard)


COUNT_PIP_CALLS = r"""
import subprocess
calls = []
real_run = subprocess.run
def recording_run(*args, **kwargs):
    calls.append(args)
    return real_run(*args, **kwargs)
subprocess.run = recording_run
exec(GUARD)
import torchviz
print(len(calls))
"""


def test_setup_installs_torchviz_when_missing_and_skips_when_present(tmp_path):
    """A venv that has everything the book needs except torchviz."""
    guard = torchviz_guard(CHAPTERS[0])
    runtime = tmp_path / "runtime"
    venv.create(runtime, with_pip=True)
    python = runtime / "bin" / "python"
    own_site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip()
    # Everything from this environment's site-packages, except torchviz.
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    for entry in os.scandir(sysconfig.get_paths()["purelib"]):
        if not entry.name.lower().startswith("torchviz"):
            (overlay / entry.name).symlink_to(entry.path)
    (runtime / own_site / "overlay.pth").write_text(f"{overlay}\n")
    script = COUNT_PIP_CALLS.replace("GUARD", json.dumps(guard))

    def run():
        return subprocess.run([python, "-c", script], capture_output=True,
                              text=True, timeout=600, env=clean_environment())

    missing = subprocess.run([python, "-c", "import torchviz"],
                             capture_output=True, env=clean_environment())
    assert missing.returncode != 0, "torchviz should be missing at first"
    first = run()
    assert first.returncode == 0, first.stderr[-3000:]
    assert first.stdout.split() == ["1"], "pip ran once to install torchviz"
    assert any(p.name.startswith("torchviz") for p in (runtime / own_site).iterdir())
    second = run()
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout.split() == ["0"], "pip must not run when torchviz is there"
