"""In the grading sandbox (tools.grade runs it as `python -c CODE JOB DATA`):
JOB's code cells in an IPython shell, each under a time-out, each check as
its probe code (tools.grade.traced); after each check it writes DATA, plain
data (`encode`): the answer values and what the probes recorded. It judges
nothing. A variant cell runs with STUDENT_ID the roster's id, read from the
environment before any cell could change it. A reference run (JOB has
"requests") runs the book's chapter up to "fork_at" once, then forks per
student: the child takes the student's id and plain-data answers and runs
the rest, each check's full code first in a child of its own ("held"), then
its probe code; it writes its data. A student's child that outlives "request_timeout" is killed: its data is
missing, and the next student's runs."""
import json
import os
import signal
import sys
import time

import torch


def encode(value, depth=0):
    """`value` as JSON data, one key naming what is not a JSON type."""
    kind = type(value)
    if value is None or kind in (bool, int, str):
        return value
    if kind is float:
        return value if abs(value) < float("inf") else {"float": repr(value)}
    if depth > 20:
        return {"object": "nested too deep"}
    if kind in (list, tuple, set, frozenset, torch.Size):
        items = [encode(item, depth + 1) for item in value]
        return (items if kind is list else {"set": sorted(items, key=json.dumps)}
                if kind in (set, frozenset) else {"tuple": items})
    if kind is dict:
        pairs = [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]
        return {"dict": sorted(pairs, key=lambda pair: json.dumps(pair[0]))}
    if kind in (torch.Tensor, torch.nn.Parameter) and value.numel() <= 10**6:
        return {"tensor": [str(value.dtype), encode(value.detach().tolist(), depth + 1)]}
    return {"type" if isinstance(value, type) else "object": getattr(kind, "__name__", "?")
            if not isinstance(value, type) else value.__qualname__}


def decode(data):
    """The value `encode` made `data` from; an error if it was no plain data."""
    if isinstance(data, list):
        return [decode(item) for item in data]
    if not isinstance(data, dict):
        return data
    [(kind, body)] = data.items()
    if kind == "tensor":
        return torch.tensor(decode(body[1]), dtype=getattr(torch, body[0].split(".")[-1]))
    made = {"float": float, "tuple": tuple, "set": set, "dict": dict}[kind]  # or KeyError
    return made(body) if kind == "float" else made(
        map(tuple, decode(body)) if kind == "dict" else decode(body))


def first_line(error):
    text = f"{type(error).__name__}: {error}".strip().rstrip(":")
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]


def main(job_path, data_path):
    from IPython.core.interactiveshell import InteractiveShell
    job = json.loads(open(job_path).read())
    shell = InteractiveShell.instance()
    data = {"values": {}, "traces": {}, "stray": ""}
    student = os.environ.get("BOOK_STUDENT", "")  # the roster's, read before any cell runs
    recorded, seen_ids = [], {}

    def seen(value, operand):
        recorded.append([operand, encode(value)])
        return value

    def attempt(operand, thunk):
        try:
            return [operand, encode(thunk())]
        except TimeoutError:
            raise
        except Exception as error:
            return [operand, {"error": first_line(error)}]

    def probed(number, thunk):
        try:
            trace.append(["probe", number, thunk()])
        except TimeoutError:
            raise
        except Exception as error:
            trace.append(["error", first_line(error)])

    def held(number, test):
        ok = bool(test)
        trace.append(["assert", number, list(recorded), ok])
        recorded.clear()
        return ok

    def ident(value):
        return seen_ids.setdefault(id(value), (len(seen_ids), value))[0]

    def timeout(*_):
        raise TimeoutError(f"the cell ran longer than {job['cell_timeout']} s and was stopped")

    def execute(code):
        signal.signal(signal.SIGALRM, timeout)
        signal.setitimer(signal.ITIMER_REAL, job["cell_timeout"])
        try:
            result = shell.run_cell(code, store_history=False, silent=True)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        return result.error_before_exec or result.error_in_exec

    def run(cell, inject):
        nonlocal trace
        number = cell.get("check")
        if cell.get("variant"):  # a variant drawn for the roster's id, whatever a cell did
            shell.user_ns["STUDENT_ID"] = student
        if number:
            for name, value in (inject.get(str(number)) or {}).items():
                try:  # the student's plain-data answers, in the reference run
                    if name in cell["names"]:
                        shell.user_ns[name] = decode(value)
                except Exception:  # a function or an object stays the book's (its
                    own = shell.user_ns.get(name)  # probes compare the student's); data: None
                    if not callable(own) and type(own).__module__ in ("builtins", "torch"):
                        shell.user_ns[name] = None
            data["values"][number] = {name: encode(shell.user_ns.get(name))
                                      for name in cell["names"]}
            seen_ids.clear()
            torch.manual_seed(number)
            shell.user_ns.update(_g_seen=seen, _g_held=held, _g_id=ident,
                                 _g_probe=probed, _g_try=attempt)
            if "full" in cell:
                data.setdefault("held", {})[number] = run_full(cell["full"])
            trace = data["traces"][number] = []
        error = execute(cell["code"])
        if number:
            if error:
                trace.append(["error", first_line(error)])
            with open(data_path + ".part", "w") as handle:
                json.dump(data, handle)
            os.replace(data_path + ".part", data_path)
        elif error and not data["stray"] and not cell.get("raises"):
            data["stray"] = f"code cell {cell['number']} raised {first_line(error)}"

    def run_full(code):
        """The full code's trace, run in a child forked at this state."""
        nonlocal trace
        path = data_path + ".held"
        if (child := os.fork()) == 0:
            try:
                trace = []
                error = execute(code)
                trace += [["error", first_line(error)]] if error else []
                with open(path, "w") as handle:
                    json.dump(trace, handle)
            finally:
                os._exit(0)
        os.waitpid(child, 0)  # this child: a chapter's own may end meanwhile
        if not os.path.exists(path):
            return [["error", "the reference's check ended its process"]]
        with open(path) as handle:
            held = json.load(handle)
        os.remove(path)
        return held

    trace = []
    cells = job["cells"]
    if "requests" not in job:
        for cell in cells:
            run(cell, {})
        return
    for cell in cells[:job["fork_at"]]:
        run(cell, {})
    for request in job["requests"]:
        child = os.fork()
        if child == 0:
            try:
                os.environ["BOOK_STUDENT"] = student = request["student"]
                data_path = os.path.join(os.path.dirname(data_path), request["key"] + ".json")
                for cell in cells[job["fork_at"]:]:
                    run(cell, request["inject"])
            finally:
                os._exit(0)
        deadline = time.monotonic() + job["request_timeout"]
        while os.waitpid(child, os.WNOHANG) == (0, 0):  # one student's data stalls no other
            if time.monotonic() > deadline:
                os.kill(child, signal.SIGKILL)
                os.waitpid(child, 0)
                break
            time.sleep(0.05)


if __name__ == "__main__":
    main(*sys.argv[1:3])
