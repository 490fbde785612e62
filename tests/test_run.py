"""The one notebook runner (tools/run.py): a notebook alone in an empty
folder, stopped, kernel included, when it runs past its time-out."""
import os
import time

import nbformat
import pytest

from tools.run import run_alone


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
    with pytest.raises(ValueError, match="timeout must be a positive number"):
        run_alone(notebook("1"), timeout=timeout)
