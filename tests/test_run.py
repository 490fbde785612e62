"""The one notebook runner (tools/run.py): a notebook alone in an empty
folder, stopped, kernel included, when it runs past its time-out; and every
wait of a run alone has the limit it is given.

A kernel's start and a cell's outputs used nbclient's own limits (60 s to
start, 4 s for the outputs after a cell's reply), whatever the runner was
told: on a busy machine, under `nice`, a run could fail, or lose outputs,
for reasons that were not the notebook's. These tests slow a kernel's start
down on purpose and check that the limit given is the one that holds.

A cell's printed text also came back in a number of pieces that depended
on timing alone: chapter 3's cells 72 and 80 were stored in 2 pieces each,
came back otherwise in each of 11 runs on a loaded machine (in 1 piece
in the 7 whose notebooks were kept), and cells 37, 69 and 87 (1 piece
stored) now and then in 2. The runner joins the pieces.
"""
import json
import os
import subprocess
import sys
import time

import nbformat
import pytest

from tools.run import EXECUTE, clean_environment, run_alone

# Loaded by the kernel's interpreter (through PYTHONPATH) before anything
# else: it holds the kernel's start back by SECONDS.
SLOW_START = """
import sys, time
if any("ipykernel" in part for part in sys.orig_argv):
    time.sleep(SECONDS)
"""
NEVER = 3600    # seconds: longer than any limit these tests give


def one_cell_notebook(source):
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell(source))
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    return notebook


def slow_python(tmp_path, seconds):
    """An interpreter whose kernels start `seconds` late (a script that runs
    this one with SLOW_START on its path)."""
    (tmp_path / "sitecustomize.py").write_text(SLOW_START.replace("SECONDS", str(seconds)))
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def test_a_kernel_that_does_not_start_is_held_to_the_startup_timeout(tmp_path):
    folder = tmp_path / "folder"
    folder.mkdir()
    nbformat.write(one_cell_notebook("print('ran')"), folder / "one.ipynb")
    done = subprocess.run([slow_python(tmp_path, NEVER), EXECUTE, "one.ipynb", "--timeout",
                           "120", "--startup-timeout", "2"], cwd=folder,
                          env=clean_environment(), capture_output=True, text=True, timeout=NEVER)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stderr[-2000:]
    result = json.loads(lines[-1][len("RESULT "):])
    assert result["status"] == "fail"
    assert result["error"] == ("the kernel did not start: "
                               "RuntimeError: Kernel didn't respond in 2 seconds"), result
    assert "cell" not in result       # no cell is blamed for it


def test_a_kernel_start_longer_than_the_cell_timeout_is_no_cells_fault(tmp_path):
    # No cell, so that no cell's run races its 1-s limit: only the start,
    # 3 s late, is timed, and run_alone gives it the run's whole time-out.
    result, _ = run_alone(nbformat.v4.new_notebook(), python=slow_python(tmp_path, 3),
                          cell_timeout=1)
    assert result["status"] == "pass", result


def test_run_alone_passes_its_cell_timeout_to_each_cell():
    # the cell never ends: whatever the machine's speed, the limit stops it
    notebook = one_cell_notebook(f"import time\ntime.sleep({NEVER})")
    result, _ = run_alone(notebook, cell_timeout=2)
    assert result["status"] == "fail" and result.get("cell") == 1, result
    assert result["error"] == ("CellTimeoutError: A cell timed out while it was being "
                               "executed, after 2 seconds."), result


@pytest.mark.parametrize("timeout", [0, -5, 2.5, True, "900", None])
@pytest.mark.parametrize("which", ["timeout", "cell_timeout"])
def test_run_alone_refuses_a_timeout_that_is_not_whole_seconds(which, timeout):
    with pytest.raises(ValueError, match=f"^{which} must be a whole number of seconds"):
        run_alone(one_cell_notebook("1"), **{which: timeout})


def execute_notebook_module():
    sys.path.insert(0, str(EXECUTE.parent))
    try:
        import execute_notebook
    finally:
        sys.path.remove(str(EXECUTE.parent))
    return execute_notebook


def test_the_client_waits_for_outputs_as_long_as_for_a_cell():
    execute_notebook = execute_notebook_module()
    client = execute_notebook.client_for(one_cell_notebook("1"), timeout=123)
    assert (client.timeout, client.startup_timeout, client.iopub_timeout) == (123, 123, 123)
    client = execute_notebook.client_for(one_cell_notebook("1"), timeout=5, startup_timeout=60)
    assert (client.timeout, client.startup_timeout, client.iopub_timeout) == (5, 60, 5)
    # Outputs that do not come in time fail the run instead of being dropped.
    assert client.raise_on_iopub_timeout is True


def test_adjacent_pieces_of_a_stream_are_joined_in_order():
    new = nbformat.v4
    cell = new.new_code_cell("")
    cell.outputs = [new.new_output("stream", name="stdout", text="a\n"),
                    new.new_output("stream", name="stdout", text="b\n"),
                    new.new_output("display_data", data={"text/plain": "picture"}),
                    new.new_output("stream", name="stdout", text="c\n"),
                    new.new_output("stream", name="stderr", text="d\n"),
                    new.new_output("stream", name="stderr", text="e\n")]
    execute_notebook_module().join_streams(cell)
    assert [(o.output_type, o.get("name"), o.get("text")) for o in cell.outputs] == [
        ("stream", "stdout", "a\nb\n"), ("display_data", None, None),
        ("stream", "stdout", "c\n"), ("stream", "stderr", "d\ne\n")]


def test_text_printed_in_pieces_is_stored_as_one_output():
    # The kernel flushes printed text every 0.2 s: a pause splits it.
    notebook = one_cell_notebook("import time\nprint('before')\ntime.sleep(1)\nprint('after')")
    result, executed = run_alone(notebook)
    assert result["status"] == "pass", result
    assert [(o.output_type, o.text) for o in executed.cells[0].outputs] == [
        ("stream", "before\nafter\n")]

def notebook(*sources):
    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_quick_notebook_passes():
    result, executed = run_alone(notebook("print(6 * 7)"))
    assert result["status"] == "pass", result
    assert result["files_written"] == []
    assert executed.cells[0].outputs[0]["text"] == "42\n"


def test_a_run_past_its_timeout_is_stopped_kernel_included(tmp_path, monkeypatch):
    """The cell notes its kernel's process id, then sleeps far longer than
    the time-out. The run must fail at its time-out, and leave no kernel
    sleeping (and holding its memory) behind. The test holds the clock:
    the time-out runs out once the cell runs, however long the kernel took
    to start."""
    pid_file = tmp_path / "kernel.pid"
    communicate = subprocess.Popen.communicate

    def time_runs_out_once_the_cell_runs(process, timeout=None):
        if timeout is None:                      # after the stop: what is left
            return communicate(process)
        assert timeout == 30, "run_alone does not wait for the run with its time-out"
        while not pid_file.is_file() and process.poll() is None:
            time.sleep(0.1)
        raise subprocess.TimeoutExpired(process.args, timeout)

    monkeypatch.setattr(subprocess.Popen, "communicate", time_runs_out_once_the_cell_runs)
    result, executed = run_alone(notebook(
        f"import os, pathlib, time\npathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        f"time.sleep({NEVER})"), timeout=30)
    assert pid_file.is_file(), "the notebook never started: the test proves nothing"
    assert result["status"] == "fail"
    assert result["error"] == "timed out after 30 s"
    assert result["files_written"] == [] and executed is None
    kernel = int(pid_file.read_text())
    deadline = time.monotonic() + 60   # to end; it would sleep for an hour
    while alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(kernel), f"the stopped run's kernel (process {kernel}) is still running"


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), "60", True, None])
def test_a_timeout_that_is_not_a_positive_number_is_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be a whole number of seconds"):
        run_alone(notebook("1"), timeout=timeout)
