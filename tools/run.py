"""The one notebook runner: a chapter alone in an empty folder, as in Colab.

Used by the student edition's test, the versions matrix (`make versions`,
on another venv's interpreter) and to refresh a chapter's stored outputs:

    python -m tools.run book/05_variance_pruning.ipynb            # run, report
    python -m tools.run --write book/05_variance_pruning.ipynb    # and store

Each run copies the notebook, and nothing else, into a new empty folder and
executes it there with `execute_notebook.py` in a fresh kernel of the
interpreter given, with an environment cleaned of anything that would let
it import this repository. Afterwards the folder must hold the notebook
alone: a chapter that writes files fails.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat


EXECUTE = Path(__file__).with_name("execute_notebook.py")
# Variables that would let a kernel see this repository or another setup.
UNSET = ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "VIRTUAL_ENV",
         "JUPYTER_PATH", "JUPYTER_DATA_DIR", "MPLBACKEND")


def clean_environment(venv=None):
    """os.environ without variables that leak this repository or a setup;
    with `venv`, that venv's bin first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env["PYTHONNOUSERSITE"] = "1"
    if venv is not None:
        env["VIRTUAL_ENV"] = str(venv)
        env["PATH"] = f"{Path(venv) / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_alone(notebook, *, python=sys.executable, venv=None, keep_going=False,
              timeout=3600, cell_timeout=900, name=None, nice=False):
    """Run `notebook` (a path or a NotebookNode) alone; return (result, executed).

    `result` is execute_notebook.py's dict (status, cell, error, line,
    seconds, raised, new_stderr) plus `files_written` (names the run left
    beside the notebook); `executed` is the notebook with its new outputs.
    `cell_timeout` (whole seconds) bounds a cell's run, and its outputs
    after its reply; the cell it stops is named. `timeout` (whole seconds)
    bounds the run as a whole, the kernel's start included (on a busy
    machine a start can take minutes; that is no cell's fault): a run that
    takes longer is stopped, kernel included, and fails ("timed out after
    N s"; `executed` is None).
    """
    for label, value in (("timeout", timeout), ("cell_timeout", cell_timeout)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{label} must be a whole number of seconds above 0, "
                             f"got {value!r}")
    if isinstance(notebook, (str, Path)):
        name = name or Path(notebook).name
        notebook = nbformat.read(notebook, as_version=4)
    if not isinstance(notebook, nbformat.NotebookNode):
        raise TypeError(f"run_alone() needs a notebook or its path, got "
                        f"{type(notebook).__name__}")
    name = name or "notebook.ipynb"
    with tempfile.TemporaryDirectory(prefix="alone-") as scratch:
        folder = Path(scratch) / "folder"
        folder.mkdir()
        output = Path(scratch) / "executed.ipynb"
        nbformat.write(notebook, folder / name)
        command = [str(python), str(EXECUTE), name, "--output", str(output),
                   "--timeout", str(cell_timeout), "--startup-timeout", str(timeout)]
        if keep_going:
            command.append("--keep-going")
        if nice:
            command = ["nice", "-n", "10", *command]
        # a session of its own, stopped whole at the time-out; the kernel (in a
        # session of its own too) ends itself when its parent has gone
        with subprocess.Popen(command, cwd=folder, env=clean_environment(venv),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, start_new_session=True) as process:
            try:
                stdout, stderr = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
                return {"status": "fail", "error": f"timed out after {timeout} s",
                        "seconds": timeout, "raised": [], "new_stderr": [],
                        "files_written": []}, None
        lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            return {"status": "fail", "error": f"runner failed: {tail}",
                    "seconds": 0, "raised": [], "new_stderr": [],
                    "files_written": []}, None
        result = json.loads(lines[-1][len("RESULT "):])
        result["files_written"] = sorted(p.name for p in folder.iterdir() if p.name != name)
        executed = nbformat.read(output, as_version=4) if output.is_file() else None
        return result, executed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--write", action="store_true",
                        help="store the new outputs in the notebook when it passes")
    args = parser.parse_args()
    failed = 0
    for path in args.notebooks:
        result, executed = run_alone(path.resolve())
        ok = result["status"] == "pass" and not result["files_written"]
        failed += not ok
        print(f"{path}: {result['status']} in {result['seconds']} s"
              + (f", cell {result['cell']}: {result['error']}" if "cell" in result else "")
              + (f", wrote {result['files_written']}" if result["files_written"] else ""))
        if ok and args.write:
            nbformat.write(executed, path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
