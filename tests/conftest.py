"""Shared fixtures, the run-alone check of the notebooks nbval runs, and
the order of the tests on `make test`'s three workers.

`make test` gives nbval a copy of each chapter in a folder of its own
(`_build/alone/<chapter>/`), where nothing of this repository is importable,
as in Colab; a chapter that writes files beside itself fails the run.

`make test` runs pytest on three workers with `--dist loadfile
--no-loadscope-reorder`: each file's tests run on one worker (a notebook's
cells share one kernel, a test file its module fixtures), but those of
SPREAD, sent one by one. The files are sent longest first (LONGEST), then
as collected, then SPREAD's short views, which fill the workers' ends.
"""
import os
import shutil
import tempfile

import nbformat
import pytest

from tools import downloads
from tools.book import ROOT, toc_notebooks
from tools.serve import serve

ALONE = ROOT / "_build" / "alone"
OWN_TMPDIR = pytest.StashKey[str]()
# Files whose tests are spread over the workers one by one (each test opens
# its own page; the browser and the server are per worker).
SPREAD = ("tests/test_browser.py",)
# The longest files (from `make test`'s --durations), longest first. Only
# the order depends on it.
LONGEST = (
    "tests/test_grade.py",
    "05_variance_pruning.ipynb",
    "07_tnvp_language_model.ipynb",
    "tests/test_chapter07.py",
    "tests/test_chapter05.py",
)


def pytest_configure(config):
    """Every temporary file of the run in a folder of its own, removed at
    its end: a test that looks for what it left there sees only this run's
    files. (SYSTEM_TMPDIR keeps the machine's, for the tests that name it.)"""
    os.environ.setdefault("SYSTEM_TMPDIR", tempfile.gettempdir())
    own = tempfile.mkdtemp(prefix="book-tests-")
    os.environ["TMPDIR"] = tempfile.tempdir = own
    config.stash[OWN_TMPDIR] = own


def pytest_unconfigure(config):
    shutil.rmtree(config.stash.get(OWN_TMPDIR, None) or "/nonexistent", ignore_errors=True)


@pytest.fixture(scope="session")
def site():
    """The built book (`make book`), served over HTTP with gzip from 127.0.0.1."""
    if not (downloads.HTML / "index.html").is_file():
        pytest.fail("the book is not built: run `make book` first")
    server = serve(downloads.HTML)
    yield server.url
    server.shutdown()


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium per test process (each xdist worker has its
    own), shared by every test file that opens a page or prints one."""
    sync_api = pytest.importorskip("playwright.sync_api")
    try:
        chromium = downloads.chromium()
    except downloads.DownloadsError as error:
        pytest.skip(str(error))
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=downloads.FLAGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def notebooks():
    """{path: notebook} for every notebook in _toc.yml."""
    return {path: nbformat.read(path, as_version=4) for path in toc_notebooks()}


def group_of(item):
    """The file an item belongs to, relative to the checkout ('tests/x.py',
    or the notebook's name for the copies under _build/alone)."""
    path = item.path
    if ALONE in path.parents:
        return path.name
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def pytest_collection_modifyitems(config, items):
    def rank(item):
        group = group_of(item)
        if group in SPREAD:
            return len(LONGEST) + 1
        return LONGEST.index(group) if group in LONGEST else len(LONGEST)

    items.sort(key=rank)    # stable: each file's tests keep their order
    for item in items:      # nbval's 5 s for a cell's outputs after its reply
        if hasattr(item, "output_timeout"):     # is short on a busy machine
            item.output_timeout = config.getoption("nbval_cell_timeout")


def pytest_xdist_make_scheduler(config, log):
    """--dist loadfile, but the tests of SPREAD each on their own."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SpreadScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid):
            file = nodeid.split("::", 1)[0]
            return nodeid if file in SPREAD else file

    return SpreadScheduling(config, log)


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
