"""Grade a class's student notebooks: `make grade SUBMISSIONS=folder`.

    python -m tools.grade FOLDER [--roster ROSTER.csv] [--regrade] [--jobs N]
        [--timeout 600] [--cell-timeout 120] [--memory-mb 6000]

FOLDER holds one sub-folder per student (an LMS export's), each with any of
the student notebooks (book/student/: their graded exercises are the bank's,
book/graded/, on no public page) under any file name; a notebook's
chapter is read from its exercise cells' ids. It writes FOLDER/grades.csv
(COLUMNS: a row per exercise graded, and one per file, folder or student not
graded, saying why) and FOLDER/feedback/STUDENT.md. Whatever a file holds or
is (nesting too deep, wrong types, not JSON, over NOTEBOOK_MB, binary; a
link, a folder or a pipe named like a notebook, a file beside the student
folders), it is a row, and the others are graded. A folder named like what
the grader writes or hidden is not graded, and the outputs go to the next
free names (`grades-1.csv`). Of a chapter handed in twice, the copy with
more answer cells changed is graded (the first by name on a tie). The
roster (`read_roster`: `id`, and `folder` and/or `email`) maps a folder,
Moodle's `_48213_assignsubmission_file_` ignored, to the student's id, which
picks the variants (BOOK_STUDENT: the grader runs its own copy of each
variant cell, before the answer, with STUDENT_ID that id); a folder it does
not name is a row saying so. Without a roster, the folder's name is the id.

The student's code computes; it never judges. Each notebook runs in the
sandbox (tools/grade_run.py) with the grader's checks (hidden tests kept) in
place of the student's, as probe code (`traced`): of each assert only the
student's side is evaluated and recorded, never the expected side, the
message, or a statement that only computes them, so the student's process
holds no value a check expects and its data has none to copy. A reference
run of the book's chapter (its solutions), in a sandbox no student's code
touched, runs the same probe code for each student's id and plain-data
answers, and the full checks from the same state in a forked child; this
process, which reads only data, gives a point when the two probe records
agree and every assert of the full run held (`verdict`), else says which
operand differed, what was expected and what was got (the limit, hidden
tests on the public pages: book/for_teachers.md).
Notebooks run in parallel (`--jobs`: as many as cores and memory allow),
a progress bar (tqdm) shows them; FOLDER/.grading/ keeps what was graded, so
an interrupted run resumes (--regrade runs it all again). grades.csv is safe
to open in a spreadsheet (`spreadsheet_safe`, after OWASP's advice).

The sandbox (`sandbox_argv`, bubblewrap: small, setuid-free, packaged by
Debian, exactly the mounts on its command line): no network, its own PID
namespace (every process a notebook starts dies with it), of the file system
only the system's folders, the virtualenv and its Python, read-only, a tmpfs
/tmp and its own working folder, the folders leading to them empty (no class
folder, no other section, no grades.csv); as root the notebook runs as
`nobody` with no capability under a process limit; address space, file size
and core files are limited; the environment is cleared but for the book's
CPU-kernel variables and BOOK_STUDENT. A notebook's time-out kills its
process group. Before the first student a canary checks that the sandbox
holds (`canary`), else the grader stops with what bwrap said.
"""
import argparse
import ast
import copy
import csv
import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
from tqdm import tqdm

import tools.student
from tools.book import tags
from tools.student import STUDENT

COLUMNS = ["student", "id", "notebook", "exercise", "points", "max_points", "failure"]
GRADE_ID = re.compile(r"^ch(\d\d)-exercise-(\d+)-(check|answer)$")
VARIANT_ID = re.compile(r"^graded-(\d+)-variant$")  # the bank's (book/graded/) cell ids
RESERVED = {"grades.csv", "feedback"}
A_FILE = "not graded: a file, not a student's folder (one sub-folder per student)"
NOBODY = 65534
MEMORY_MB = 6000
JOB_MB = 2000  # what a chapter's run holds, at most: the parallel runs fit in memory
PROCESSES = 512
FILE_MB = 1000
TMP_MB = 1000
NOTEBOOK_MB = 50
ANSWER_KB = 64  # of an exercise's answer values, as JSON: more is refused, never decoded
RUNNER = Path(__file__).with_name("grade_run.py")
# the folders the sandbox shows, read-only: nothing else of the machine's
SYSTEM = ("/usr", "/etc", "/sys", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
UNSAFE_START = ("=", "+", "-", "@", "\t", "\r")
# into the sandbox: the book's CPU-kernel variables (tools.book.CPU_KERNELS) and the like
PASS_THROUGH = ("ATEN_", "MKL_", "ONEDNN_", "OMP_", "LANG", "LC_")
MOODLE = re.compile(r"_\d+_assignsubmission_\w*$")


def shipped():
    """{chapter number: path of its student notebook}."""
    return {int(path.name[:2]): path for path in sorted(STUDENT.glob("[0-9][0-9]_*.ipynb"))}


def first_line(text):
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def grade_id_of(cell):
    """The cell's nbgrader id, '' if it has none or one that is not a string."""
    data = cell.get("metadata", {}).get("nbgrader", {})
    grade_id = data.get("grade_id", "") if isinstance(data, dict) else ""
    return grade_id if isinstance(grade_id, str) else ""


def chapter_of(notebook):
    """The chapter number the notebook's exercise cells name, or None."""
    chapters = {int(m[1]) for m in map(GRADE_ID.match, map(grade_id_of, notebook.cells)) if m}
    return chapters.pop() if len(chapters) == 1 else None


def answered_count(notebook, stubs):
    """How many answer cells of `notebook` differ from the stubs ({grade id: source})."""
    return sum(1 for cell in notebook.cells
               if grade_id_of(cell) in stubs
               and cell.source.strip() != stubs[grade_id_of(cell)].strip())


def spreadsheet_safe(value):
    """`value`, prefixed with ' if a spreadsheet would run it as a formula."""
    return f"'{value}" if isinstance(value, str) and value.startswith(UNSAFE_START) else value


# -- the checks, the runs and the verdict ----------------------------------

def traced(source, answers=()):
    """(full code, probe code, [[assert's text, [operand texts], [probe texts]]])
    of a check cell's `source`, `answers` the names its answer assigns. The
    probe code, all a student's process runs, records (`_g_probe`, `_g_try`)
    of each assert only the student's side: a comparison's sides but the
    last (of `in`, those not literals), a call's first argument and a
    method's object, what all()/any() test, the rest whole; the expected
    side, the message and what only computes them (`without_expectations`)
    are not in it. The full code, the reference's, records every operand and
    whether each assert held. id() numbers in order of first sight in both."""
    asserts = []

    def seen(node, texts):
        texts.append(ast.unparse(node))
        return ast.Call(ast.Name("_g_seen"), [node, ast.Constant(len(texts) - 1)], [])

    def operands(node, texts):
        if isinstance(node, ast.BoolOp):
            node.values = [operands(value, texts) for value in node.values]
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            node.operand = operands(node.operand, texts)
        elif isinstance(node, ast.Compare):
            node.left = seen(node.left, texts)
            node.comparators = [seen(c, texts) for c in node.comparators]
        elif all_or_any(node):
            node.args[0].elt = operands(node.args[0].elt, texts)
        elif isinstance(node, ast.Call) and node.args:
            node.args = [seen(arg, texts) for arg in node.args]
        else:
            return seen(node, texts)
        return node

    def probe(node, texts):
        texts.append(ast.unparse(node))
        return ast.Call(ast.Name("_g_try"), [ast.Constant(len(texts) - 1), ast.Lambda(
            ast.arguments([], [], None, [], [], None, []), node)], [])

    def probes(node, texts):
        """[expressions, each a record] of the student's side of `node`."""
        if isinstance(node, ast.BoolOp):
            return [p for value in node.values for p in probes(value, texts)]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return probes(node.operand, texts)
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            kept = ([s for s in sides if not literal(s)]
                    if any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
                    else sides[:-1])
            return [probe(side, texts) for side in kept]
        if all_or_any(node):  # [record for <its loops> for record in [records of elt]]
            loops = node.args[0].generators + [ast.comprehension(
                ast.Name("_g_record", ast.Store()), ast.List(probes(node.args[0].elt, texts)),
                [], 0)]
            return [ast.Starred(ast.ListComp(ast.Name("_g_record"), loops))]
        if isinstance(node, ast.Call) and node.args:
            kept = [node.func.value] if isinstance(node.func, ast.Attribute) else []
            return [probe(side, texts) for side in kept + [
                arg for arg in node.args[:1] if not literal(arg)]]
        return [probe(node, texts)]

    class Trace(ast.NodeTransformer):
        def __init__(self, probing):
            self.probing = probing

        def visit_Call(self, node):
            self.generic_visit(node)
            if isinstance(node.func, ast.Name) and node.func.id == "id":
                node.func = ast.Name("_g_id")
            return node

        def visit_Assert(self, node):
            self.generic_visit(node)
            if self.probing:
                texts = asserts[len(self.probed)][2]
                self.probed.append(node)
                probed = ast.List(probes(node.test, texts))
                self.expected |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} - {
                    n.id for n in ast.walk(probed) if isinstance(n, ast.Name)}
                return ast.Expr(ast.Call(ast.Name("_g_probe"), [
                    ast.Constant(len(self.probed)), ast.Lambda(
                        ast.arguments([], [], None, [], [], None, []), probed)], []))
            texts = []
            asserts.append([ast.unparse(node.test), texts, []])
            held = ast.Call(ast.Name("_g_held"), [ast.Constant(len(asserts)),
                                                  operands(node.test, texts)], [])
            fail = ast.Raise(ast.Call(ast.Name("AssertionError"),
                                      [node.msg] if node.msg else [], []))
            return ast.If(ast.UnaryOp(ast.Not(), held), [fail], [])

    full = ast.fix_missing_locations(Trace(False).visit(ast.parse(source)))
    probing = Trace(True)
    probing.probed, probing.expected = [], set()
    tree = probing.visit(ast.parse(source))
    tree = without_expectations(tree, set(answers), probing.expected)
    return ast.unparse(full), ast.unparse(ast.fix_missing_locations(tree)), asserts


def all_or_any(node):
    return (isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("all", "any")
            and node.args and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)))


def literal(node):
    try:
        ast.literal_eval(node)
        return True
    except Exception:  # ValueError, or TypeError of an operator on literals
        return False


def without_expectations(tree, answers, expected):
    """`tree` less the statements (outside functions) that only compute what nothing
    left reads, an expected value: naming no answer nor a name holding one, raising
    or returning nothing, each defines or assigns names, or reads only names that an
    `expected` side or a dropped statement reads, and writes none a statement left reads."""
    def names(node, context=(ast.Load, ast.Del)):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                and isinstance(getattr(n, "ctx", ast.Load()), context)}

    local, holding = names(tree, ast.Store), set(answers)
    for node in [n for n in ast.walk(tree) if isinstance(n, (ast.Assign, ast.For))] * 3:
        if names(getattr(node, "value", None) or node.iter) & holding:  # it holds an answer
            holding |= names(ast.Tuple(getattr(node, "targets", [getattr(node, "target", None)])),
                             ast.Store)

    def written(statement):  # None: it stays
        if names(statement, (ast.Load, ast.Store)) & holding:
            return None
        if isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
            return {statement.name}
        if any(isinstance(n, (ast.Raise, ast.Return, ast.Global)) for n in ast.walk(statement)):
            return None
        if isinstance(statement, (ast.Assign, ast.AnnAssign)):  # and a target's object
            targets = ast.Tuple(getattr(statement, "targets", [getattr(statement, "target", None)]))
            return names(targets, (ast.Store, ast.Load)) or None
        read = names(statement) & local
        return read | names(statement, ast.Store) if read and read <= expected else None

    def head(statement):  # what a statement reads, but in the statements it holds
        part = copy.copy(statement)
        if not isinstance(statement, (ast.FunctionDef, ast.ClassDef)):
            part.body = part.orelse = part.finalbody = part.handlers = []
        return names(part)

    while True:
        inside = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.ClassDef))
                  for n in ast.walk(f)}
        lists = [(n, f, getattr(n, f)) for n in ast.walk(tree) if id(n) not in inside
                 for f in ("body", "orelse", "finalbody")
                 if isinstance(getattr(n, f, None), list) and getattr(n, f)]
        maybe = {id(s): w for _, _, ss in lists for s in ss if (w := written(s)) is not None}
        needed = set().union(*(head(s) for _, _, ss in lists for s in ss if id(s) not in maybe))
        while more := [s for _, _, ss in lists for s in ss if maybe.get(id(s), set()) & needed]:
            for s in more:
                maybe.pop(id(s))
                needed |= head(s)
        if not maybe:
            return tree
        for node, field, statements in lists:
            expected |= local & set().union(*(names(s, (ast.Load, ast.Store))
                                              for s in statements if id(s) in maybe))
            setattr(node, field, [s for s in statements if id(s) not in maybe] or [ast.Pass()])


@functools.lru_cache
def checks(stem):
    """{exercise number: (full code, probe code, asserts, names its answer
    assigns, its variant cell's code or None)} of chapter `stem`: the grading
    notebook's checks (hidden tests kept)."""
    found, names, variants = {}, {}, {}
    for cell in tools.student.grading_notebook(stem).cells:
        match = GRADE_ID.match(grade_id_of(cell))
        if variant := VARIANT_ID.match(cell.get("id", "")):
            variants[int(variant[1])] = cell.source
        elif match and match[3] == "answer":
            names[int(match[2])] = tools.student.stub_names(cell.source)
        elif match:
            its = names.get(int(match[2]), [])
            found[int(match[2])] = (*traced(cell.source, its), its, variants.get(int(match[2])))
    return found


def job_cell(cell, number, check=None, its=None, full=False):
    """A job's code cell; of a check, its probe code, and its full code if `full`;
    a variant cell runs with the grader's STUDENT_ID (tools/grade_run.py)."""
    if not check:
        return dict(code=cell.source, number=number, raises="raises-exception" in tags(cell),
                    variant=bool(VARIANT_ID.match(cell.get("id", ""))))
    return dict(code=its[1], number=number, check=check, names=its[3]) | (
        dict(full=its[0]) if full else {})


def student_cells(notebook, its_checks):
    """The job's cells of a student's notebook: its code cells, the grader's
    variant cell of exercise N before its answer cell, and the grader's check
    in place of the first check cell after the answer (after the answer cell
    if the check was deleted; first if both were)."""
    code = [c for c in notebook.cells if c.cell_type == "code"]
    kinds = [GRADE_ID.match(grade_id_of(c)) for c in code]
    replace, after, before = {}, {}, {}
    for number in its_checks:
        answer = next((i for i, m in enumerate(kinds)
                       if m and m.group(2, 3) == (str(number), "answer")), -1)
        if its_checks[number][4]:
            before.setdefault(max(answer, 0), []).append(dict(
                code=its_checks[number][4], number=0, variant=True))
        at = next((i for i, m in enumerate(kinds) if i > answer and m
                   and m.group(2, 3) == (str(number), "check")), None)
        if at is None:
            after.setdefault(answer, []).append(number)
        else:
            replace[at] = number
    cells = before.get(0, []) + [job_cell(None, 0, n, its_checks[n]) for n in after.get(-1, [])]
    for index, cell in enumerate(code):
        cells += before.get(index, []) if index else []
        cells.append(job_cell(cell, index + 1, replace.get(index), its_checks.get(
            replace.get(index))))
        cells += [job_cell(None, 0, n, its_checks[n]) for n in after.get(index, [])]
    return cells


def reference_job(stem, its_checks):
    """The job's cells of the book's chapter `stem` (its solutions), with the
    grader's checks, and where to fork: the exercises, or the first cell
    that reads the student's id if that comes first."""
    path = tools.student.chapter_path(stem)
    book = tools.student.class_chapter(nbformat.read(path, as_version=4), path)
    start = min([tools.student.exercises_start(book)] + [
        i for i, c in enumerate(book.cells) if "BOOK_STUDENT" in c.source])
    cells, answers, fork_at = [], 0, None
    for index, cell in enumerate(book.cells):
        if index >= start and fork_at is None:
            fork_at = len(cells)
        if cell.cell_type != "code":
            continue
        answers += "solution" in tags(cell)
        check = answers if "exercise-check" in tags(cell) else None
        cells.append(job_cell(cell, index + 1, check, its_checks.get(check), full=True))
    return dict(cells=cells, fork_at=fork_at)


def read_data(path):
    """The JSON in the file `path` (a regular file, not a link, at most
    NOTEBOOK_MB), or {"unreadable": why}: whatever a notebook left there."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > NOTEBOOK_MB * 2**20:
                raise ValueError(f"not a file or over {NOTEBOOK_MB} MB")
            return json.loads(f.read())
    except Exception as error:  # whatever it holds, it is data, never the end
        return {"unreadable": first_line(f"{type(error).__name__}: {error}")}


def sandboxed(job, student, limits, scratch_root, names=("data",)):
    """({name: data} of the files NAME.json a run of tools/grade_run.py on
    `job` wrote, in the sandbox as `student`; exit code, None if it timed out)."""
    timeout, memory_mb = limits[0] * (1 + len(job.get("requests", []))), limits[2]
    work = Path(tempfile.mkdtemp(prefix="grade-", dir=scratch_root))
    try:
        if os.geteuid() == 0:
            os.chown(work, NOBODY, NOBODY)
        (work / "job.json").write_text(json.dumps(job))
        argv = sandbox_argv(work, student, memory_mb, RUNNER.read_text(),
                            [str(work / "job.json"), str(work / "data.json")])
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
        return {name: read_data(work / f"{name}.json") for name in names
                if os.path.lexists(work / f"{name}.json")}, code
    finally:
        remove(work)


def remove(path):
    """Remove the folder `path` however deep a notebook made it (shutil.rmtree
    recurses, and its RecursionError is no OSError: ignore_errors lets it out)."""
    subprocess.run(["rm", "-rf", "--", str(path)], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def same(got, expected):
    """Whether the data `got` is `expected`'s: equal, floats within 1e-6 relative."""
    if type(got) is not type(expected):
        return False
    if isinstance(got, float):
        return abs(got - expected) <= 1e-9 + 1e-6 * abs(expected)
    if isinstance(got, list):
        return len(got) == len(expected) and all(map(same, got, expected))
    if isinstance(got, dict):
        return got.keys() == expected.keys() and all(same(got[k], expected[k]) for k in got)
    return got == expected


def shown(value):
    text = json.dumps(value)
    return text if len(text) <= 120 else text[:117] + "..."


def verdict(got, expected, held, asserts):
    """'' if the student's probes `got` are the reference's `expected` (the
    book's solutions, or the student's values, through the same probe code)
    and every assert of the reference's full run `held`, else why not, as the
    student can act on it."""
    for mine, theirs in zip(got + [None] * len(expected), expected):
        if not mine:
            return "the check did not run as the grader's does (stopped early or changed)"
        if mine[0] == "error":  # the student's own run raised: that first
            return mine[1]
        if theirs[0] == "error":
            return f"with your answer, the check raised {theirs[1]}"
        if mine[1] != theirs[1]:
            return "the check did not run as the grader's does (stopped early or changed)"
        test, _, texts = asserts[theirs[1] - 1]
        if len(mine[2]) != len(theirs[2]):
            return f"`{test}` looked at {len(mine[2])} values, expected {len(theirs[2])}"
        wrong = [f"`{texts[j]}` is {shown(got_value)}, expected {shown(value)}"
                 for (j, value), (k, got_value) in zip(theirs[2], mine[2])
                 if k != j or not same(got_value, value)]
        if wrong:
            return "; ".join(wrong[:2])[:600]
    if len(got) != len(expected):
        return "the check did not run as the grader's does"
    for entry, after in zip(held, held[1:] + [[""]]):
        if entry[0] == "error":
            return f"with your answer, the check raised {entry[1]}"
        if entry[3] is not True:
            if after[0] == "error" and after[1].startswith("AssertionError: "):
                return after[1].removeprefix("AssertionError: ")  # the assert's own words
            test, texts, _ = asserts[entry[1] - 1]
            return f"`{test}` does not hold: " + "; ".join(
                f"`{texts[j]}` is {shown(value)}" for j, value in entry[2])[:600]
    return ""


# -- the sandbox ----------------------------------------------------------

def _binds(paths):
    """bwrap's arguments showing the system's folders read-only, a tmpfs /tmp,
    and each of `paths` ([(path, --bind or --ro-bind)]) after the folders
    leading to it, made empty (0755) in the sandbox: nothing beside them."""
    argv = ["--dev", "/dev", "--proc", "/proc"]
    for name in SYSTEM:
        path = Path(name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            argv += ["--ro-bind", name, name]
    argv += ["--perms", "1777", "--size", str(TMP_MB * 2**20), "--tmpfs", "/tmp"]
    made = {Path("/"), Path("/tmp")}
    for path, mode in paths:
        if any(path.is_relative_to(name) for name in SYSTEM):
            continue  # the system's, already shown read-only
        for parent in reversed(path.parents):
            if parent not in made:
                argv += ["--dir", str(parent)]
                made.add(parent)
        argv += [mode, str(path), str(path)]
    return argv


def sandbox_argv(work, student, memory_mb=MEMORY_MB, code="", args=()):
    """bwrap's command running the Python `code` (with `args`) in the sandbox
    (the module's docstring), `work` its one writable folder."""
    venv = Path(os.path.realpath(sys.prefix))
    base = Path(os.path.realpath(sys.base_prefix))
    python = venv / "bin" / "python"
    argv = ["bwrap", *_binds([(venv, "--ro-bind"), (base, "--ro-bind"), (work, "--bind")])]
    argv += ["--chdir", str(work), "--unshare-ipc", "--unshare-pid", "--unshare-net",
             "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
             "--new-session", "--clearenv"]
    env = {key: value for key, value in os.environ.items() if key.startswith(PASS_THROUGH)}
    env |= dict(HOME="/tmp", TMPDIR="/tmp", PATH=f"{venv}/bin:/usr/local/bin:/usr/bin:/bin",
                MPLBACKEND="Agg", MPLCONFIGDIR="/tmp/matplotlib", IPYTHONDIR="/tmp/ipython",
                PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", PYTHONHASHSEED="0",
                BOOK_STUDENT=student)  # the same sets' order and one thread in every run
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    # as root in the sandbox: become nobody, without capabilities, limited
    limits = [f"--as={memory_mb * 2**20}", f"--fsize={FILE_MB * 2**20}", "--core=0"]
    become = ""
    if os.geteuid() == 0:
        limits.append(f"--nproc={PROCESSES}")
        become = (f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "
                  "--inh-caps=-all --bounding-set=-all --no-new-privs ")
    else:
        argv += ["--unshare-user"]
    command = [str(python), "-c", code, *args]
    return argv + ["--", "/bin/sh", "-c", f"exec prlimit {' '.join(limits)} -- {become}"
                   + " ".join(map(shlex.quote, command))]


def canary(folder, scratch_root, memory_mb, timeout):
    """Run a few lines of Python in the sandbox before the first student, and
    refuse to grade (SystemExit, with what bwrap and the Python said) unless
    they run as the sandbox's user, with no network and no sight of the class
    folder `folder`: a sandbox that does not hold would give every student 0."""
    user = NOBODY if os.geteuid() == 0 else os.getuid()
    code = ("import os, socket\n"
            f"assert not os.path.exists({str(folder.resolve())!r}), 'the class folder is seen'\n"
            "assert [n for _, n in socket.if_nameindex()] == ['lo'], 'the network is seen'\n"
            "print('the sandbox holds', os.getuid())")
    work = Path(tempfile.mkdtemp(prefix="canary-", dir=scratch_root))
    try:
        if os.geteuid() == 0:
            os.chown(work, NOBODY, NOBODY)
        try:
            done = subprocess.run(sandbox_argv(work, "canary", memory_mb, code),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  errors="replace", timeout=timeout)
            said = (done.stderr + done.stdout).strip() or f"nothing (exit code {done.returncode})"
            held = done.returncode == 0 and done.stdout.strip() == f"the sandbox holds {user}"
        except subprocess.TimeoutExpired:
            said, held = f"nothing in {timeout} s", False
    finally:
        remove(work)
    if not held:
        raise SystemExit("the grading sandbox (bubblewrap) does not hold, so nothing was "
                         f"graded; bwrap and the Python in it said:\n{said}")


def notebooks_in(folder):
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and not path.is_symlink()
                  and ".ipynb_checkpoints" not in path.parts and path.suffix == ".ipynb")


def row(student, notebook="", failure="", exercise="", points=0, most=0, ident=""):
    return {key: text(value) for key, value in dict(
        student=student, id=ident, notebook=notebook, exercise=exercise, points=_number(points),
        max_points=_number(most), failure=failure).items()}


def text(value):
    """`value`, what is not UTF-8 in it (a file name's bytes, a lone surrogate)
    escaped: \\xff."""
    if not isinstance(value, str):
        return value
    try:
        return value.encode(errors="surrogateescape").decode(errors="backslashreplace")
    except UnicodeEncodeError:
        return value.encode(errors="backslashreplace").decode()


def read_notebook(path, chapters):
    """(notebook, its chapter, '') or (None, None, why not graded), whatever the file holds."""
    try:
        size = path.stat().st_size
        if size > NOTEBOOK_MB * 2**20:
            return None, None, (f"not graded: {size / 2**20:.0f} MB, larger than a notebook "
                                f"of the book may be ({NOTEBOOK_MB} MB)")
        notebook = nbformat.read(path, as_version=4)
        chapter = chapter_of(notebook)
    except Exception as error:  # a bad file is a row, never the end
        return None, None, first_line(
            f"not a notebook, not graded: {type(error).__name__}: {error}")
    if chapter not in chapters:
        return None, None, ("not a student notebook of this book (no exercise cells of a "
                            "chapter), not graded")
    return notebook, chapter, ""


def read_roster(path):
    """{folder name or email, lower case: student id} of the roster CSV `path`."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        lines = list(csv.DictReader(handle))
    if not lines or "id" not in lines[0] or not {"folder", "email"} & set(lines[0]):
        raise SystemExit(f"{path}: a roster is a CSV with an 'id' column and a 'folder' "
                         "and/or an 'email' column, one row per student")
    roster = {}
    for number, line in enumerate(lines, 2):
        ident = (line.get("id") or "").strip()
        names = [(line.get(key) or "").strip().lower() for key in ("folder", "email")]
        if not ident or not any(names):
            raise SystemExit(f"{path}, line {number}: an id and a folder or an email, each row")
        for name in filter(None, names):
            if roster.setdefault(name, ident) != ident:
                raise SystemExit(f"{path}, line {number}: {name!r} names two students")
    return roster


def roster_id(name, roster):
    """The id of the student whose folder is `name` (None: not on the roster)."""
    if roster is None:
        return name
    name = name.strip().lower()
    return roster.get(name) or roster.get(MOODLE.sub("", name))


def collect(folder, student, chapters):
    """(rows, {chapter: [(file name, notebook)]}) of one student's folder: a
    row per thing named like a notebook that is not graded."""
    rows, found, others, handed = [], {}, [], False
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        if ".ipynb_checkpoints" in path.parts:
            continue
        if path.is_symlink():
            rows.append(row(student, name, "a symbolic link, not graded (hand in the file itself)"))
        elif path.is_dir():
            if path.suffix == ".ipynb":
                rows.append(row(student, name, "a folder, not a notebook, not graded"))
        elif not path.is_file():
            rows.append(row(student, name, "not a file (a pipe, a socket or a device), not graded"))
        elif path.suffix != ".ipynb":
            others.append(path.name)
        else:
            handed = True
            notebook, chapter, problem = read_notebook(path, chapters)
            if problem:
                rows.append(row(student, name, problem))
            else:
                found.setdefault(chapter, []).append((name, notebook))
    if not handed:
        seen = f" (only {', '.join(others[:3])})" if others else ""
        rows.append(row(student, failure=f"no notebook submitted{seen}"))
    return rows, found


def grade_chapter(copies, path, student):
    """(rows, shown name, notebook) of one chapter handed in as `copies`
    ([(file name, notebook)]): the copy with the most answered cells."""
    stem = path.stem
    stubs = {grade_id_of(c): c.source for c in nbformat.read(path, as_version=4).cells
             if grade_id_of(c).endswith("-answer")}
    counts = [answered_count(notebook, stubs) for _, notebook in copies]
    best = max(range(len(copies)), key=lambda i: (counts[i], -i))
    name, notebook = copies[best]
    rows = [row(student, other, (
        f"a second copy of {stem}.ipynb, not graded: {name} was graded "
        f"({counts[best]} answered cells against {counts[index]})"))
        for index, (other, _) in enumerate(copies) if index != best]
    return rows, f"{stem}.ipynb" if name == f"{stem}.ipynb" else f"{stem}.ipynb (file: {name})", \
        notebook


def kept(cache, key):
    """The file of `cache` keeping what was made from `key` (a resumed run reads it)."""
    return cache / (hashlib.sha256(json.dumps(key).encode()).hexdigest() + ".json")


def keep(path, made):
    path.with_suffix(".part").write_text(json.dumps(made))
    path.with_suffix(".part").replace(path)
    return made


def parallel(function, items, jobs, what):
    """[function(item)] of `items`, `jobs` at a time, with a progress bar."""
    with ThreadPoolExecutor(jobs) as pool:
        return list(tqdm(pool.map(function, items), total=len(items), desc=what, unit="notebook",
                         file=sys.stdout, mininterval=1))


def answer_values(values, number, names):
    """{name: data} of exercise `number`'s answer `names` in a notebook's
    `values`, for the reference run: a name the data lacks is None there,
    never the reference's own answer; None if they are over ANSWER_KB."""
    given = values.get(str(number)) if isinstance(values, dict) else None
    given = given if isinstance(given, dict) else {}
    answer = {name: given.get(name) for name in names}
    return answer if len(json.dumps(answer)) <= ANSWER_KB * 1024 else None


def exercise_rows(job, result, reference, limits):
    """The rows of one graded notebook, from its data and the reference's."""
    student, ident, stem, shown_as, _ = job
    data, rows = result["data"] if isinstance(result["data"], dict) else {}, []
    if isinstance(data.get("stray"), str) and data["stray"]:
        rows.append(row(student, shown_as, first_line(
            f"outside the exercises, {data['stray']} (the checks ran anyway)"), ident=ident))
    for number, (_, _, asserts, names, _) in checks(stem).items():
        try:
            got = data.get("traces", {}).get(str(number))
            expected = reference.get("traces", {}).get(str(number))
            held = reference.get("held", {}).get(str(number))
            if result["code"] == "failed":
                failure = result["failed"]
            elif answer_values(data.get("values"), number, names) is None:
                failure = (f"the answer's data is over {ANSWER_KB} KB: not graded (an answer "
                           "of this book is a few numbers, a name or a function)")
            elif expected is None or held is None:
                failure = f"the grader's reference run failed: {reference.get('unreadable')}"
            elif got is None:
                failure = (f"timed out: the notebook ran longer than {limits[0]} s and was "
                           "stopped" if result["code"] is None else first_line(
                               "the notebook ended before this check ran (exit code "
                               f"{result['code']}) {data.get('unreadable', '')}"))
            else:
                failure = verdict(got, expected, held, asserts)
        except Exception as error:  # whatever the data is, a row
            failure = first_line(f"the data the notebook handed back is not the grader's "
                                 f"({type(error).__name__}: {error})")
        rows.append(row(student, shown_as, failure, number, 0 if failure else 1, 1, ident))
    return rows


def default_jobs():
    """As many notebooks at a time as cores, and as JOB_MB fit in free memory."""
    free = re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text())
    return max(1, min(os.cpu_count() or 1, int(free[1]) // 1024 // JOB_MB if free else 1))


def _number(value):
    value = float(value or 0)
    return int(value) if value.is_integer() else round(value, 2)


def feedback(student, rows):
    scored = [row for row in rows if row["exercise"] != ""]
    total = sum(row["points"] for row in scored)
    most = sum(row["max_points"] for row in scored)
    lines = [f"# Feedback for {student}", "", f"Total: {_number(total)} of {_number(most)} points.", ""]
    for row in rows:
        where = row["notebook"] or "(no notebook)"
        if row["exercise"] == "":
            lines.append(f"- {where}: {row['failure']}")
        else:
            verdict = ("passed" if row["points"] == row["max_points"] and not row["failure"]
                       else f"not yet ({row['failure'] or 'no points'})")
            lines.append(f"- {where}, exercise {row['exercise']}: "
                         f"{row['points']} of {row['max_points']}, {verdict}")
    return "\n".join(lines) + "\n"


def free_name(folder, name):
    """`name` in `folder`, or the first of name-1, name-2, ... (before the
    suffix) not taken by something else than what the grader writes."""
    stem, suffix = (name[:-4], ".csv") if name.endswith(".csv") else (name, "")
    for n in range(1000):
        path = folder / (name if n == 0 else f"{stem}-{n}{suffix}")
        if not path.exists() or (suffix and path.is_file() and not path.is_symlink()) or (
                not suffix and path.is_dir() and not path.is_symlink()
                and not notebooks_in(path)):
            return path
    raise SystemExit(f"{folder}: no free name for {name}")


def grade(folder, timeout=600, cell_timeout=120, scratch_root=None, memory_mb=MEMORY_MB,
          roster=None, jobs=None, regrade=False):
    """Grade every student's folder of `folder`, write grades.csv and feedback/,
    return the rows; scratch folders go in `scratch_root` (default: the system's)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SystemExit(f"SUBMISSIONS={folder}: not a folder")
    jobs = default_jobs() if jobs is None else jobs
    for name, value in [("timeout", timeout), ("cell_timeout", cell_timeout),
                        ("memory_mb", memory_mb), ("jobs", jobs)]:
        if not isinstance(value, int) or value < 1:
            raise SystemExit(f"{name}={value!r}: a whole number of at least 1")
    if shutil.which("bwrap") is None:
        raise SystemExit("bubblewrap (bwrap) is missing: the notebooks run in its "
                         "sandbox (Debian/Ubuntu: apt-get install bubblewrap)")
    roster = None if roster is None else read_roster(roster)
    chapters = shipped()
    grades_csv = free_name(folder, "grades.csv")
    feedback_dir = free_name(folder, "feedback")
    rows, per_student, students = [], {}, []
    for path in sorted(folder.iterdir()):
        name = path.name
        if path in (grades_csv, feedback_dir):
            continue
        if path.is_symlink() and path.is_dir():
            rows.append(row(name, failure="not graded: the folder is a symbolic link; put the "
                            "student's folder itself in the class folder"))
        elif not path.is_dir() or path.is_symlink():
            if not name.startswith(".") and not re.fullmatch(r"grades(-\d+)?\.csv", name):
                rows.append(row(name, failure=A_FILE))
        elif name.startswith(".") or name in RESERVED or re.fullmatch(
                r"(grades-\d+\.csv|feedback-\d+)", name):
            if notebooks_in(path):
                rows.append(row(name, failure=(
                    "not graded: the folder's name is hidden (starts with a dot) or one the "
                    "grader writes (grades.csv, feedback); rename the folder and grade again")))
        elif roster_id(name, roster) is None:
            rows.append(row(name, failure=(
                "not graded: a roster mismatch, not a wrong answer: no row of the roster "
                "names this folder (its folder or email column); add one and grade again")))
        else:
            students.append(path)
    if not students and all(r["failure"] == A_FILE for r in rows):
        raise SystemExit(f"{folder}: no student folder in it (one sub-folder per student)")
    canary(folder, scratch_root, memory_mb, timeout)
    limits, todo = (timeout, cell_timeout, memory_mb), []
    for path in students:
        name, ident = path.name, roster_id(path.name, roster)
        try:
            per_student[name], found = collect(path, name, chapters)
            for chapter, copies in sorted(found.items()):
                more, shown_as, notebook = grade_chapter(copies, chapters[chapter], name)
                per_student[name] += more
                stem = chapters[chapter].stem
                job = dict(cells=student_cells(notebook, checks(stem)),
                           cell_timeout=cell_timeout)
                todo.append((name, ident, stem, shown_as, job))
        except Exception as error:  # a bad folder is a row, never the end
            per_student[name] = [row(name, failure=first_line(
                f"not graded: the grader failed on this folder ({type(error).__name__}: "
                f"{error})"))]
    cache = folder / ".grading"
    cache.mkdir(exist_ok=True)

    def run_student(item):
        path = kept(cache, [RUNNER.read_text(), item[1], item[4], limits])
        if path.is_file() and not regrade:
            return json.loads(path.read_text())
        try:
            files, code = sandboxed(item[4], item[1], limits, scratch_root)
            return keep(path, dict(data=files.get("data", {}), code=code))
        except Exception as error:  # a full disk, say: a row (not kept: a resumed run retries)
            return dict(data={}, code="failed", failed=first_line(
                f"the grader could not run this notebook ({type(error).__name__}: {error}); "
                "grade again"))

    results, asked = parallel(run_student, todo, jobs, "notebooks run"), []
    for (_, ident, stem, _, _), result in zip(todo, results):
        data = result["data"] if isinstance(result["data"], dict) else {}
        values = data.get("values") if isinstance(data.get("values"), dict) else {}
        inject = {str(n): answer_values(values, n, its[3]) for n, its in checks(stem).items()}
        asked.append([RUNNER.read_text(), stem, ident, inject, limits])

    def run_reference(stem):
        job = reference_job(stem, checks(stem)) | dict(cell_timeout=cell_timeout)
        paths = {f"r{i}": kept(cache, key) for i, key in enumerate(asked) if key[1] == stem}
        requests = [dict(key=k, student=asked[int(k[1:])][2], inject=asked[int(k[1:])][3])
                    for k, path in paths.items() if regrade or not path.is_file()]
        try:
            files = sandboxed(job | dict(requests=requests, request_timeout=limits[0]), "",
                              limits, scratch_root,
                              [r["key"] for r in requests])[0] if requests else {}
            for k, made in files.items():
                if k in paths and "unreadable" not in made:
                    keep(paths[k], made)
        except Exception:  # its students' rows say the reference run did not finish
            pass

    parallel(run_reference, sorted({key[1] for key in asked}), jobs, "reference runs")
    for item, result, key in zip(todo, results, asked):
        path = kept(cache, key)
        reference = json.loads(path.read_text()) if path.is_file() else {
            "unreadable": "it did not finish"}
        per_student[item[0]] += exercise_rows(item, result, reference, limits)
    for name in per_student:
        rows += per_student[name]
    with open(grades_csv, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows({key: spreadsheet_safe(value) for key, value in r.items()}
                         for r in rows)
    feedback_dir.mkdir(exist_ok=True)
    for name, its_rows in per_student.items():
        (feedback_dir / f"{name}.md").write_text(feedback(text(name), its_rows),
                                                 encoding="utf-8")
    print(f"wrote {grades_csv} and {feedback_dir}/", flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--roster", type=Path, help="CSV: id, folder and/or email per student")
    parser.add_argument("--regrade", action="store_true",
                        help="run again what an earlier run graded (kept in FOLDER/.grading)")
    parser.add_argument("--jobs", type=int, help="notebooks run at a time "
                        f"(default: as many as cores, and {JOB_MB} MB each of free memory)")
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds a whole notebook may run (default 600)")
    parser.add_argument("--cell-timeout", type=int, default=120,
                        help="seconds one cell may run before it is stopped (default 120)")
    parser.add_argument("--memory-mb", type=int, default=MEMORY_MB,
                        help=f"address space of a notebook's process (default {MEMORY_MB})")
    args = parser.parse_args(argv)
    grade(args.folder, args.timeout, args.cell_timeout, memory_mb=args.memory_mb,
          roster=args.roster, jobs=args.jobs, regrade=args.regrade)
    return 0


if __name__ == "__main__":
    sys.exit(main())
