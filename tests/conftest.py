"""Shared fixtures, and the run-alone check of the notebooks nbval runs.

`make test` gives nbval a copy of each chapter in a folder of its own
(`_build/alone/<chapter>/`), so each chapter's kernel starts in a folder
where nothing of this repository is importable, as in Colab. After the
session, each such folder must still hold its notebook alone: a chapter
that writes files fails the run.
"""
import nbformat
import pytest

from tools.book import ROOT, toc_notebooks

ALONE = ROOT / "_build" / "alone"


@pytest.fixture(scope="session")
def notebooks():
    """{path: notebook} for every notebook in _toc.yml."""
    return {path: nbformat.read(path, as_version=4) for path in toc_notebooks()}


def files_left_beside(notebook_paths):
    """{notebook: [other files in its folder]} for each notebook given."""
    left = {}
    for path in notebook_paths:
        others = sorted(p.name for p in path.parent.iterdir() if p != path)
        if others:
            left[str(path.relative_to(ROOT))] = others
    return left


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):    # an xdist worker: the
        return                                    # controller checks once
    run = [ROOT / arg for arg in session.config.args if str(arg).endswith(".ipynb")]
    alone = [path for path in run if ALONE in path.parents]
    left = files_left_beside(alone)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line(f"FAILED: chapters wrote files beside themselves: {left}",
                            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
