"""The one notebook runner (tools/run.py): a notebook alone in an empty
folder, stopped, kernel included, when it runs past its time-out; and every
wait of a run alone has the one limit it is given.

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


def one_cell_notebook(source):
    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell(source))
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                       "language": "python"}
    return notebook


def execute_with_slow_start(tmp_path, seconds, timeout):
    """execute_notebook.py's result for a one-cell notebook whose kernel
    starts `seconds` late, with --timeout `timeout`."""
    slow = tmp_path / "slow"
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(SLOW_START.replace("SECONDS", str(seconds)))
    folder = tmp_path / "folder"
    folder.mkdir()
    nbformat.write(one_cell_notebook("print('ran')"), folder / "one.ipynb")
    env = clean_environment()
    env["PYTHONPATH"] = str(slow)
    done = subprocess.run([sys.executable, str(EXECUTE), "one.ipynb", "--timeout", str(timeout)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_a_kernel_start_is_held_to_the_timeout_given(tmp_path):
    result = execute_with_slow_start(tmp_path, seconds=6, timeout=2)
    assert result["status"] == "fail"
    assert result["error"].startswith("the kernel did not start: RuntimeError"), result
    assert "cell" not in result       # no cell is blamed for it


def test_a_slow_kernel_start_within_the_timeout_passes(tmp_path):
    # Slower than nbclient's own default would allow is not needed to show
    # it: the same start passes when the limit given is longer than it.
    result = execute_with_slow_start(tmp_path, seconds=6, timeout=60)
    assert result["status"] == "pass", result


def test_run_alone_passes_its_cell_timeout_to_each_cell():
    notebook = one_cell_notebook("import time\ntime.sleep(8)")
    result, _ = run_alone(notebook, cell_timeout=2)
    assert result["status"] == "fail" and result.get("cell") == 1, result
    assert "CellTimeoutError" in result["error"], result


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


def test_a_quick_notebook_passes_within_its_timeout():
    result, executed = run_alone(notebook("print(6 * 7)"), timeout=120)
    assert result["status"] == "pass", result
    assert result["files_written"] == []
    assert executed.cells[0].outputs[0]["text"] == "42\n"


def test_a_run_past_its_timeout_is_stopped_kernel_included(tmp_path):
    """The cell notes its kernel's process id, then sleeps far longer than
    the time-out. The run must fail at its time-out, and leave no kernel
    sleeping (and holding its memory) behind."""
    pid_file = tmp_path / "kernel.pid"
    started = time.monotonic()
    result, executed = run_alone(notebook(
        f"import os, pathlib, time\npathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))\n"
        "time.sleep(600)"), timeout=30)   # a kernel can take 10 s to start on a busy machine
    elapsed = time.monotonic() - started
    assert pid_file.is_file(), "the notebook never started: the test proves nothing"
    assert result["status"] == "fail"
    assert result["error"] == "timed out after 30 s"
    assert result["files_written"] == [] and executed is None
    assert elapsed < 90, f"run_alone returned after {elapsed:.0f} s, not at its time-out"
    kernel = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(kernel) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(kernel), f"the stopped run's kernel (process {kernel}) is still running"


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), "60", True, None])
def test_a_timeout_that_is_not_a_positive_number_is_refused(timeout):
    with pytest.raises(ValueError, match="timeout must be a whole number of seconds"):
        run_alone(notebook("1"), timeout=timeout)
