"""Execute one notebook top to bottom in a fresh kernel; print the result.

    python execute_notebook.py NOTEBOOK [--output PATH] [--keep-going]

A program, not a module of the `tools` package: `tools.run` starts it with
the interpreter under test (another venv's, another torch's), whose
environment needs only nbformat, nbclient and a kernel, not this repository.
It runs in the current folder, as a reader's notebook runs in its own.

Without --keep-going it stops at the first cell that raises an error it is
not tagged `raises-exception` for, and names that cell, its error and the
line that raised. With --keep-going it runs every cell and lists the cells
that raised. Its last line is `RESULT {json}`.

A cell's run and the outputs that follow its reply each wait at most
--timeout seconds; the kernel's start, --startup-timeout seconds (by
default as long). On a busy machine, and more so under `nice`, a kernel
can take minutes to start and a cell's outputs can come seconds after its
reply; nbclient's own defaults for these two waits (60 s to start; 4 s for
the outputs, after which it drops the rest without a word) are not used. A
kernel that does not start is reported as such, not as a failure of a
cell, and outputs that do not come in time fail the run instead of going
missing.
A cell's printed text is stored as one output per stream however many
pieces the kernel sent it in (more pieces on a busier machine).
"""
import argparse
import json
import sys
import time

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

# Asks the kernel, after a failed cell, which line of that cell raised.
FAILING_LINE = (
    "import sys, traceback\n"
    "frames = [f for f in traceback.extract_tb(sys.last_traceback)\n"
    "          if f.filename.startswith('<ipython-input-')\n"
    "          or '/ipykernel_' in f.filename]\n"
    "print(frames[-1].lineno if frames else 0)")


def stderr_lines(cell):
    return [line for output in cell.get("outputs", [])
            if output.output_type == "stream" and output.name == "stderr"
            for line in output.text.splitlines() if line.strip()]


def error_of(cell):
    error = next((o for o in cell.outputs if o.output_type == "error"), None)
    return f"{error.ename}: {error.evalue}".strip() if error else ""


def failing_line(client, notebook, cell):
    """The source line of `cell` that raised, or None if the kernel cannot say."""
    probe = nbformat.v4.new_code_cell(FAILING_LINE)
    notebook.cells.append(probe)
    try:
        client.execute_cell(probe, len(notebook.cells) - 1)
        number = int(probe.outputs[0]["text"].split()[-1])
    except (CellExecutionError, IndexError, KeyError, ValueError):
        return None
    finally:
        notebook.cells.pop()
    lines = cell.source.splitlines()
    return lines[number - 1].strip() if 0 < number <= len(lines) else None


def join_streams(cell):
    """Join each run of adjacent stream outputs of one name (stdout,
    stderr) into one output. The kernel sends a cell's printed text in
    pieces, one each time its buffer is flushed (every 0.2 s): how many
    pieces a cell's text comes in depends on how busy the machine is, what
    the text says does not."""
    joined = []
    for output in cell.get("outputs", []):
        last = joined[-1] if joined else None
        if (output.output_type == "stream" and last is not None
                and last.output_type == "stream" and last.name == output.name):
            last.text += output.text
        else:
            joined.append(output)
    cell.outputs = joined


def client_for(notebook, keep_going=False, timeout=900, startup_timeout=None):
    """The NotebookClient that runs `notebook`: `timeout` seconds for a
    cell, and for its outputs after its reply; `startup_timeout` (default
    `timeout`) for the kernel's start."""
    startup_timeout = timeout if startup_timeout is None else startup_timeout
    for value in (timeout, startup_timeout):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"timeout must be a whole number of seconds above 0, "
                             f"got {value!r}")
    return NotebookClient(notebook, timeout=timeout, startup_timeout=startup_timeout,
                          iopub_timeout=timeout, raise_on_iopub_timeout=True,
                          kernel_name="python3", record_timing=False,
                          allow_errors=keep_going, resources={"metadata": {"path": "."}})


def execute(path, keep_going=False, timeout=900, startup_timeout=None):
    """(executed notebook, result dict) for the notebook file `path`."""
    notebook = nbformat.read(path, as_version=4)
    stored = nbformat.read(path, as_version=4)
    client = client_for(notebook, keep_going, timeout, startup_timeout)
    result = {"status": "pass"}
    start = time.monotonic()
    started, index = False, None
    try:
        with client.setup_kernel():
            started = True
            for index, cell in enumerate(notebook.cells):
                try:
                    client.execute_cell(cell, index)
                except CellExecutionError:
                    result.update(status="fail", cell=index + 1, error=error_of(cell))
                    line = failing_line(client, notebook, cell)
                    if line:
                        result["line"] = line
                    break
    except (CellTimeoutError, DeadKernelError, RuntimeError) as error:
        result["status"] = "fail"
        result["error"] = f"{type(error).__name__}: {error}".strip().splitlines()[0]
        if not started:
            result["error"] = f"the kernel did not start: {result['error']}"
        elif isinstance(error, CellTimeoutError) and index is not None:
            result["cell"] = index + 1
    result["seconds"] = round(time.monotonic() - start, 1)
    for cell in notebook.cells:
        if cell.cell_type == "code":
            join_streams(cell)
    result["raised"] = [index + 1 for index, cell in enumerate(notebook.cells)
                        if cell.cell_type == "code" and error_of(cell)]
    # Text on stderr where the stored run printed none: nbval fails on it.
    result["new_stderr"] = [
        [index + 1, stderr_lines(cell)[0]]
        for index, (cell, old) in enumerate(zip(notebook.cells, stored.cells))
        if cell.cell_type == "code" and stderr_lines(cell) and not stderr_lines(old)]
    return notebook, result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("notebook")
    parser.add_argument("--output", help="write the executed notebook here")
    parser.add_argument("--keep-going", action="store_true",
                        help="run every cell, even after one raised")
    parser.add_argument("--timeout", type=int, default=900,
                        help="seconds a cell may run, and its outputs take")
    parser.add_argument("--startup-timeout", type=int,
                        help="seconds the kernel may take to start (default: --timeout)")
    args = parser.parse_args()
    notebook, result = execute(args.notebook, args.keep_going, args.timeout,
                               args.startup_timeout)
    if args.output:
        nbformat.write(notebook, args.output)
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
