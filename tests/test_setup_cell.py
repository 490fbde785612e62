"""The setup cell installs what Colab lacks, and only when it is missing.

(That each chapter runs alone in an empty folder, as Colab opens it, is
checked where nbval runs it: `make test` runs each chapter's copy in a
folder of its own, and tests/conftest.py fails the run if a chapter leaves a
file there.)
"""
import ast
import json
import os
import subprocess
import sysconfig
import venv

from tools import copies
from tools.run import clean_environment

def torchviz_guard():
    """The install guard of a setup cell that installs torchviz: its first
    statement (tools.copies writes every chapter's setup cell from it)."""
    setup = copies.setup_source(["torchviz"])
    python = "\n".join(line for line in setup.splitlines()
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
    guard = torchviz_guard()
    runtime = tmp_path / "runtime"
    venv.create(runtime)   # pip comes from the overlay below, as everything else
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
