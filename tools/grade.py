"""Grade a class's student notebooks with nbgrader: `make grade SUBMISSIONS=folder`.

    python -m tools.grade FOLDER [--timeout 600] [--cell-timeout 120] [--memory-mb 6000]

FOLDER holds one sub-folder per student, each with any of the student
notebooks (book/student/), under any file name (Colab saves "Copy of
01_reproduce_the_error.ipynb"). It writes FOLDER/grades.csv (COLUMNS: a row
per exercise graded, and one per file, folder or student not graded, saying
why) and FOLDER/feedback/STUDENT.md (the same, for the student). Whatever a
file holds or is (nesting too deep, wrong types, not JSON, over NOTEBOOK_MB,
binary; a link, a folder or a pipe named like a notebook, a file beside the
student folders), it is a row, and the others are graded. A student folder
named like what the grader writes (`feedback`, `grades.csv`) or hidden is not
graded, and the outputs go to the next free names (`grades-1.csv`, `feedback-1/`).

The grading is nbgrader's: each chapter is an assignment whose source is
`tools.student.grading_notebook(stem)` (the checks keep their hidden tests),
and `nbgrader autograde` runs each submission with those checks put back in
place of the student's copies (locked cells), under per-cell time-outs, errors
allowed, so that one exercise's failure costs only its point. Its nbgrader
metadata is cleaned first (`cleaned`): nbgrader refuses a notebook with two
cells of one id (a pasted check), and a student must not make a check worth
100 points or unlock it. A deleted check scores 0.
Why nbgrader: it grades a class locally, with no service to run, keeps grades
in a SQLite gradebook, locks the checks, and time-limits cells. otter-grader
grades a class only in Docker containers (`otter grade`); without Docker, one
notebook at a time (`otter run`).

The sandbox. Only the student's code is untrusted, and it runs only in the
kernel: nbgrader (its gradebook, the chapter templates, nbclient) runs
outside, as the grader, and starts each kernel through a kernel spec of its
own whose command is bubblewrap (`sandbox_argv`):
- no network: the kernel talks to nbclient over ZeroMQ `ipc` sockets in a
  folder bound into the sandbox, since the sandbox has its own loopback;
- its own PID namespace and --die-with-parent: when the kernel exits or
  nbgrader is killed, every process the notebook started dies with it (one
  of `Popen(..., start_new_session=True)` included);
- of the file system, only the system's folders, the virtualenv and its
  Python, read-only, a tmpfs /tmp, and its own working and socket folders
  writable; the folders leading to these are empty, so nothing beside them
  (the class folder, another section's, a grades.csv, the repository, the
  home folder, the grader's scratch folders) exists in the sandbox;
- run by root, the kernel becomes `nobody` with every capability dropped (a
  mistake in the binds leaves it no root's rights) under a process limit (a
  fork bomb stops); run by another user, bwrap makes a user namespace and the
  kernel stays that user, without the process limit (it would count all that
  user's processes); address space, file size and core files are limited;
- the environment is cleared but for HOME, TMPDIR, the book's CPU-kernel
  variables and BOOK_STUDENT (the student edition picks the student's variant
  of an exercise from it).
Before the first student, a canary checks that the sandbox holds (`canary`);
if not (bwrap unable to make namespaces, for one) the grader stops with what
bwrap said and grades no one.
nbgrader itself runs under an address-space limit too: nbclient keeps all a
notebook prints, and a notebook printing without end must fail its own
grading, not exhaust the grader's machine.
A cell's time-out interrupts the kernel by a message (the kernel spec's
`interrupt_mode`: a signal to bwrap would not reach the kernel); it bounds
the outputs that follow a cell's reply too, and the kernel's start has the
notebook's time-out (nbclient's own 4 s and 60 s fail a notebook on a busy
machine for no fault of the student's). A notebook's time-out kills
nbgrader's process group, bwrap with it and the kernel's PID namespace with
bwrap, whatever the kernel is doing (a C call that ignores signals included),
and the grader returns at once: nbgrader's output goes to a file, not a pipe
a stray process could hold open.

Why bubblewrap: a single small setuid-free program packaged by Debian, which
runs a command in fresh namespaces with exactly the mounts given on its
command line and nothing else to configure; the kernel spec calls it per
kernel, with no daemon. nsjail is not packaged by Debian 12 (built from
source, configured in protobuf files) and firejail is a setuid-root program
with a large profile system meant for desktop applications, whose past
privilege escalations make it a poor fit for a grader that runs as root.

Reading the grade (`verdicts`). The gradebook lies outside the sandbox, so
the notebook cannot write it; a check gets its points only if its cell in
nbgrader's output ran, raised nothing and printed `Exercise N: passed`: a
check blanked by an input transformer the notebook installed scores 0. A
check that passed but wrote a warning to stderr keeps its point: nbgrader
alone would give it 0 with no reason shown. The known limit: the checks run
in the student's kernel, so a notebook could still forge a check's output on
purpose (replace `print`, or patch what a check calls); the restored checks
and the success line make that a deliberate act, a row tells the teacher when
a student's cell uses the hooks it would take (`hooks_touched`), and hidden
tests check what the student cannot see.

Of a chapter handed in twice, the copy with more answer cells changed from
the stub is graded (the first by name on a tie), and a row names the other. A
notebook's chapter is read from its exercise cells' ids, not its file name.
grades.csv is safe to open in a spreadsheet (`spreadsheet_safe`, after OWASP's
CSV injection advice).
"""
import argparse
import csv
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

import tools.student
from tools.student import STUDENT

COLUMNS = ["student", "notebook", "exercise", "points", "max_points", "failure"]
GRADE_ID = re.compile(r"^ch(\d\d)-exercise-(\d+)-(check|answer)$")
RESERVED = {"grades.csv", "feedback"}
A_FILE = "not graded: a file, not a student's folder (one sub-folder per student)"
KERNEL = "book-sandbox"
NOBODY = 65534
MEMORY_MB = 6000
GRADER_MEMORY_MB = 4000
PROCESSES = 512
FILE_MB = 1000
TMP_MB = 1000
NOTEBOOK_MB = 50
# the folders the sandbox shows, read-only: nothing else of the machine's
SYSTEM = ("/usr", "/etc", "/sys", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
PASSED = "Exercise {}: passed"
UNSAFE_START = ("=", "+", "-", "@", "\t", "\r")
HOOKS = re.compile(r"\b(input_transformers\w*|ast_transformers|events\.register|"
                   r"set_custom_exc|register_magic\w*|sys\.(?:stdout|__stdout__|displayhook)|"
                   r"builtins|__builtins__)\b")
# the CPU-kernel variables of the book (tools.book.CPU_KERNELS) and the like,
# passed into the sandbox
PASS_THROUGH = ("ATEN_", "MKL_", "ONEDNN_", "OMP_", "LANG", "LC_")


def shipped():
    """{chapter number: path of its student notebook}."""
    return {int(path.name[:2]): path for path in sorted(STUDENT.glob("[0-9][0-9]_*.ipynb"))}


def source_notebook(stem):
    """The nbgrader source of chapter `stem`: tools.student's grading notebook
    (the student notebook whose checks keep their hidden tests)."""
    made = tools.student.grading_notebook(stem)
    if isinstance(made, (str, Path)):
        return nbformat.read(made, as_version=4)
    return nbformat.from_dict(made)


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


def checks_of(notebook):
    """[(exercise number, grade id)] of a source notebook's checks."""
    found = [(int(m[2]), m[0]) for m in map(GRADE_ID.match, map(grade_id_of, notebook.cells))
             if m and m[3] == "check"]
    if not found:
        raise ValueError("no nbgrader check cell in the source notebook (run make generate)")
    return found


def error_line(cell):
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return first_line(f"{output.get('ename', '')}: {output.get('evalue', '')}"
                              if output.get("evalue") else output.get("ename", ""))
    return ""


def stdout_lines(cell):
    text = "".join(output.get("text", "") for output in cell.get("outputs", [])
                   if output.get("output_type") == "stream" and output.get("name") == "stdout")
    return [line.strip() for line in text.splitlines()]


def answered_count(notebook, stubs):
    """How many answer cells of `notebook` differ from the stubs ({grade id: source})."""
    return sum(1 for cell in notebook.cells
               if grade_id_of(cell) in stubs
               and cell.source.strip() != stubs[grade_id_of(cell)].strip())


def cleaned(notebook, source):
    """`notebook` with nbgrader metadata only on one cell per id of `source`
    (the source's metadata): for an answer, its first cell; for a check, the
    first after the kept answer cell (else the first). Returns (notebook,
    [grade ids of `source` missing from it])."""
    wanted = {grade_id_of(cell): cell.metadata["nbgrader"] for cell in source.cells
              if grade_id_of(cell)}
    places = {}
    for index, cell in enumerate(notebook.cells):
        if grade_id_of(cell) in wanted:
            places.setdefault(grade_id_of(cell), []).append(index)
    keep = {}
    for grade_id, indexes in places.items():
        answer = -1
        if grade_id.endswith("-check"):
            answer = places.get(grade_id.removesuffix("-check") + "-answer", [-1])[0]
        keep[grade_id] = next((i for i in indexes if i > answer), indexes[0])
    kept = set(keep.values())
    for index, cell in enumerate(notebook.cells):
        if "nbgrader" in cell.get("metadata", {}):
            if index in kept:
                cell.metadata["nbgrader"] = json.loads(json.dumps(wanted[grade_id_of(cell)]))
            else:
                del cell.metadata["nbgrader"]
    return notebook, [grade_id for grade_id in wanted if grade_id not in keep]


def hooks_touched(notebook, source):
    """(code cell number, hook) of the first cell of `notebook`, neither a check
    nor a cell of `source`, that uses one of HOOKS (it could blank or forge the checks)."""
    code_cells = [c for c in notebook.cells if c.cell_type == "code"]
    own = {cell.source for cell in source.cells}
    for number, cell in enumerate(code_cells, 1):
        if grade_id_of(cell).endswith("-check") or cell.source in own:
            continue
        found = HOOKS.search(cell.source)
        if found:
            return number, found[0]
    return None


def spreadsheet_safe(value):
    """`value`, prefixed with ' if a spreadsheet would run it as a formula."""
    return f"'{value}" if isinstance(value, str) and value.startswith(UNSAFE_START) else value


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


def sandbox_argv(work, ipc, student, memory_mb=MEMORY_MB, code=None):
    """The kernel spec's command: ipykernel in bubblewrap (the module's
    docstring), `work` its one writable folder, `ipc` the folder of its
    sockets and connection file; with `code`, that Python code instead of
    the kernel (the canary)."""
    venv = Path(os.path.realpath(sys.prefix))
    base = Path(os.path.realpath(sys.base_prefix))
    python = venv / "bin" / "python"
    argv = ["bwrap", *_binds([(venv, "--ro-bind"), (base, "--ro-bind"), (work, "--bind"),
                              (ipc, "--bind")])]
    argv += ["--chdir", str(work), "--unshare-ipc", "--unshare-pid", "--unshare-net",
             "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
             "--new-session", "--clearenv"]
    env = {key: value for key, value in os.environ.items() if key.startswith(PASS_THROUGH)}
    env |= dict(HOME="/tmp", TMPDIR="/tmp", PATH=f"{venv}/bin:/usr/local/bin:/usr/bin:/bin",
                MPLBACKEND="Agg", MPLCONFIGDIR="/tmp/matplotlib", IPYTHONDIR="/tmp/ipython",
                PYTHONDONTWRITEBYTECODE="1", BOOK_STUDENT=student)
    for key, value in sorted(env.items()):
        argv += ["--setenv", key, value]
    # as root in the sandbox: copy the connection file (readable by root alone)
    # to the sandbox's /tmp, then become nobody, without capabilities, limited
    limits = [f"--as={memory_mb * 2**20}", f"--fsize={FILE_MB * 2**20}", "--core=0"]
    become = ""
    if os.geteuid() == 0:
        limits.append(f"--nproc={PROCESSES}")
        become = (f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups "
                  "--inh-caps=-all --bounding-set=-all --no-new-privs ")
    else:
        argv += ["--unshare-user"]
    start = f"exec prlimit {' '.join(limits)} -- {become}{shlex.quote(str(python))} "
    script = ('cat "$1" > /tmp/.connection.json && chmod 0444 /tmp/.connection.json && '
              f'shift && {start}-m ipykernel_launcher -f /tmp/.connection.json "$@"'
              if code is None else f"{start}-c {shlex.quote(code)}")
    return argv + ["--", "/bin/sh", "-c", script, "sh", "{connection_file}"]


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
    ipc = Path(tempfile.mkdtemp(prefix="ipc-", dir=socket_folder()))
    try:
        if os.geteuid() == 0:
            os.chown(work, NOBODY, NOBODY)
        try:
            done = subprocess.run(sandbox_argv(work, ipc, "canary", memory_mb, code),
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                  errors="replace", timeout=timeout)
            said = (done.stderr + done.stdout).strip() or f"nothing (exit code {done.returncode})"
            held = done.returncode == 0 and done.stdout.strip() == f"the sandbox holds {user}"
        except subprocess.TimeoutExpired:
            said, held = f"nothing in {timeout} s", False
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ipc, ignore_errors=True)
    if not held:
        raise SystemExit("the grading sandbox (bubblewrap) does not hold, so nothing was "
                         f"graded; bwrap and the Python in it said:\n{said}")


def nbgrader_env(scratch):
    """The environment of nbgrader: every folder it writes in is in `scratch`;
    its one kernel spec is the sandbox's."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("JUPYTER", "IPYTHON", "MPL", "JPY", "PYTHONPATH"))}
    for name, sub in [("HOME", "home"), ("JUPYTER_CONFIG_DIR", "jupyter/config"),
                      ("JUPYTER_DATA_DIR", "jupyter/data"),
                      ("JUPYTER_RUNTIME_DIR", "jupyter/runtime"),
                      ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "matplotlib"),
                      ("TMPDIR", "tmp")]:
        (scratch / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(scratch / sub)
    # nbgrader runs `alembic` (its gradebook's migrations) from PATH
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(command, cwd, env_root, timeout, log):
    """Run nbgrader's `command` in `cwd` under GRADER_MEMORY_MB, its process
    group killed at `timeout` seconds (the module's docstring), its output in
    the file `log`. Returns (exit code or None on time-out, output). The limit
    is a soft one: the kernel's sandbox, started by nbgrader, sets its own
    (raising a hard limit needs a capability root may lack in a container)."""
    command = ["prlimit", f"--as={GRADER_MEMORY_MB * 2**20}:unlimited", "--", *command]
    with open(log, "w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=nbgrader_env(env_root),
                                   stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            code = None
    return code, Path(log).read_text(errors="replace")


def nbgrader(*arguments):
    return [sys.executable, "-m", "nbgrader", *arguments,
            "--db=sqlite:///gradebook.db", "--CourseDirectory.root=.", "--log-level=ERROR"]


def assignment(stem, templates):
    """(course folder, source notebook) of a scratch nbgrader course with the
    assignment `stem` generated (its gradebook knows the checks), made once in `templates`."""
    course = templates / stem / "course"
    source_path = course / "source" / stem / f"{stem}.ipynb"
    if not course.is_dir():
        source_path.parent.mkdir(parents=True)
        nbformat.write(source_notebook(stem), source_path)
        code, output = run(nbgrader("generate_assignment", stem, "--force"), course,
                           templates / stem / "env", 300, templates / stem / "log.txt")
        if code != 0:
            shutil.rmtree(templates / stem, ignore_errors=True)
            raise SystemExit(f"nbgrader generate_assignment {stem} failed:\n{output}")
    return course, nbformat.read(source_path, as_version=4)


def autograde(notebook, stem, student, limits, templates):
    """Autograde one submission (a notebook, cleaned) in a course of its own,
    its kernel in the sandbox. Returns ({grade id: max points}, output
    notebook or None, problem): `problem` says why nothing could be graded."""
    timeout, cell_timeout, memory_mb = limits
    course, _ = assignment(stem, templates)
    scratch = Path(tempfile.mkdtemp(prefix="grade-", dir=templates))
    ipc = Path(tempfile.mkdtemp(prefix="ipc-", dir=socket_folder()))
    try:
        shutil.copytree(course, scratch / "course")
        submitted = scratch / "course" / "submitted" / student_id(student) / stem
        submitted.mkdir(parents=True)
        nbformat.write(notebook, submitted / f"{stem}.ipynb")
        work = scratch / "work"
        work.mkdir()
        for path in (work, ipc):
            if os.geteuid() == 0:
                os.chown(path, NOBODY, NOBODY)
        spec = scratch / "env" / "jupyter" / "data" / "kernels" / KERNEL
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps(dict(
            argv=sandbox_argv(work, ipc, student, memory_mb), language="python",
            display_name="Python 3 (grading sandbox)", interrupt_mode="message")))
        code, output = run(nbgrader(
            "autograde", stem, f"--student={student_id(student)}", "--force",
            f"--Execute.timeout={cell_timeout}", f"--Execute.iopub_timeout={cell_timeout}",
            f"--Execute.startup_timeout={timeout}", f"--Execute.kernel_name={KERNEL}",
            "--KernelManager.transport=ipc", f"--KernelManager.ip={ipc}/kernel",
            f"--KernelManager.connection_file={ipc}/kernel.json",
            "--KernelSpecManager.ensure_native_kernel=False"),
            scratch / "course", scratch / "env", timeout, scratch / "log.txt")
        if code is None:
            return {}, None, (f"timed out: the notebook ran longer than {timeout} s and "
                              "was stopped")
        graded = (scratch / "course" / "autograded" / student_id(student) / stem
                  / f"{stem}.ipynb")
        most = max_points(scratch / "course" / "gradebook.db", stem)
        if code != 0 or not most or not graded.is_file():
            return {}, None, why_not_graded(output, code, cell_timeout)
        return most, nbformat.read(graded, as_version=4), ""
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        shutil.rmtree(ipc, ignore_errors=True)


def socket_folder():
    """A folder for the kernel's sockets ("<folder>/kernel-<n>"): the temporary
    folder, or /tmp if its path is long, since a Unix socket's path holds at
    most 107 bytes (sockaddr_un.sun_path)."""
    folder = tempfile.gettempdir()
    return folder if len(folder) <= 60 else "/tmp"


def why_not_graded(output, code, cell_timeout):
    """One line from nbgrader's output saying why it graded nothing."""
    errors = re.findall(r"^\s*((?:\w+\.)*\w*(?:Error|Exception)\b.*)$", output, re.M)
    if any("CellTimeoutError" in line for line in errors):
        return (f"stopped: a cell ran longer than {cell_timeout} s and did not stop "
                "when interrupted (CellTimeoutError)")
    if errors:
        return first_line(f"nbgrader could not grade it: {errors[-1]}")
    return f"nbgrader could not grade it (exit code {code})"


def max_points(database, stem):
    """{grade id: max points} of the assignment in nbgrader's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry
    if not database.is_file():
        return {}
    with Gradebook(f"sqlite:///{database}") as gradebook:
        try:
            notebook = gradebook.find_notebook(stem, stem)
        except MissingEntry:
            return {}
        return {cell.name: float(cell.max_score) for cell in notebook.grade_cells}


def verdicts(graded, checks, most):
    """[(number, grade id, points, max points, failure)] of nbgrader's output
    notebook, and the first unexpected error outside the exercises ('' if none)."""
    cells, answers, stray = {}, {}, ""
    code_cells = [c for c in graded.cells if c.cell_type == "code"]
    for number, cell in enumerate(code_cells, 1):
        grade_id = grade_id_of(cell)
        match = GRADE_ID.match(grade_id)
        if not match:
            if (not stray and error_line(cell)
                    and "raises-exception" not in cell.metadata.get("tags", [])):
                stray = f"code cell {number} raised {error_line(cell)}"
            continue
        cells[grade_id] = cell
        if match[3] == "answer" and error_line(cell):
            answers[match[2]] = f"answer cell: {error_line(cell)}"
    rows = []
    for number, grade_id in checks:
        top = most.get(grade_id, 1.0)
        cell = cells.get(grade_id)
        if cell is None:
            failure = "check cell missing: the exercise's check cell was deleted"
        elif error_line(cell):
            failure = answers.get(str(number)) or error_line(cell)
        elif cell.get("execution_count") is None or not cell.get("outputs"):
            failure = ("the check did not run or printed nothing (its line "
                       f"'{PASSED.format(number)}' is missing)")
        elif PASSED.format(number) not in stdout_lines(cell):
            failure = f"the check did not print '{PASSED.format(number)}'"
        else:
            failure = ""
        rows.append((number, grade_id, 0 if failure else top, top, failure))
    return rows, stray


def student_id(folder_name):
    """An id nbgrader accepts, from a student's folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", folder_name).strip("._") or "student"


def notebooks_in(folder):
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and not path.is_symlink()
                  and ".ipynb_checkpoints" not in path.parts and path.suffix == ".ipynb")


def row(student, notebook="", failure="", exercise="", points=0, most=0):
    return {key: text(value) for key, value in dict(
        student=student, notebook=notebook, exercise=exercise, points=_number(points),
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


def grade_student(folder, limits, chapters, templates):
    """The rows of one student's folder: one per thing named like a notebook
    that is not graded, one per exercise of each chapter graded."""
    student = folder.name
    rows, found, others, handed = [], {}, [], False  # found: {chapter: [(name, notebook)]}
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
        return rows + [row(student, failure=f"no notebook submitted{seen}")]
    for chapter, copies in sorted(found.items()):
        stem = chapters[chapter].stem
        try:
            rows += grade_chapter(copies, chapters[chapter], student, limits, templates)
        except Exception as error:  # a bad notebook is a row, never the end
            rows.append(row(student, copies[0][0], first_line(
                f"not graded: the grader failed on this copy of {stem}.ipynb "
                f"({type(error).__name__}: {error})")))
    return rows


def grade_chapter(copies, path, student, limits, templates):
    """The rows of one chapter handed in as `copies` ([(file name, notebook)]):
    the copy with the most answered cells is graded."""
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
    shown = f"{stem}.ipynb" if name == f"{stem}.ipynb" else f"{stem}.ipynb (file: {name})"
    return rows + grade_notebook(notebook, stem, student, shown, limits, templates)


def grade_notebook(notebook, stem, student, shown, limits, templates):
    _, source = assignment(stem, templates)
    checks = checks_of(source)
    notebook, missing = cleaned(notebook, source)
    most, graded, problem = autograde(notebook, stem, student, limits, templates)
    rows = []
    if problem:
        for number, grade_id in checks:
            failure = ("check cell missing: the exercise's check cell was deleted"
                       if grade_id in missing else problem)
            rows.append(row(student, shown, failure, number, 0, most.get(grade_id, 1)))
        return rows
    found, stray = verdicts(graded, checks, most)
    if stray:
        rows.append(row(student, shown, first_line(
            f"outside the exercises, {stray} (the checks ran anyway)")))
    touched = hooks_touched(notebook, source)
    if touched:
        rows.append(row(student, shown, first_line(
            f"for the teacher: code cell {touched[0]} uses {touched[1]}, which can change "
            "how the checks run or what they print; read the notebook")))
    for number, _, points, top, failure in found:
        rows.append(row(student, shown, failure, number, points, top))
    return rows


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


def grade(folder, timeout=600, cell_timeout=120, scratch_root=None, memory_mb=MEMORY_MB):
    """Grade every student's folder of `folder`, write grades.csv and feedback/,
    return the rows; scratch folders go in `scratch_root` (default: the system's)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SystemExit(f"SUBMISSIONS={folder}: not a folder")
    for name, value in [("timeout", timeout), ("cell_timeout", cell_timeout),
                        ("memory_mb", memory_mb)]:
        if not isinstance(value, int) or value < 1:
            raise SystemExit(f"{name}={value!r}: a whole number of at least 1")
    if shutil.which("bwrap") is None:
        raise SystemExit("bubblewrap (bwrap) is missing: the notebooks run in its "
                         "sandbox (Debian/Ubuntu: apt-get install bubblewrap)")
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
        else:
            students.append(path)
    if not students and all(r["failure"] == A_FILE for r in rows):
        raise SystemExit(f"{folder}: no student folder in it (one sub-folder per student)")
    canary(folder, scratch_root, memory_mb, timeout)
    templates = Path(tempfile.mkdtemp(prefix="grading-", dir=scratch_root))
    try:
        for path in students:
            print(f"grading {text(path.name)} ...", flush=True)
            try:
                per_student[path.name] = grade_student(
                    path, (timeout, cell_timeout, memory_mb), chapters, templates)
            except Exception as error:  # a bad folder is a row, never the end
                per_student[path.name] = [row(path.name, failure=first_line(
                    f"not graded: the grader failed on this folder ({type(error).__name__}: "
                    f"{error})"))]
            rows += per_student[path.name]
    finally:
        shutil.rmtree(templates, ignore_errors=True)
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
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds a whole notebook may run (default 600)")
    parser.add_argument("--cell-timeout", type=int, default=120,
                        help="seconds one cell may run before it is interrupted (default 120)")
    parser.add_argument("--memory-mb", type=int, default=MEMORY_MB,
                        help=f"address space of a notebook's kernel (default {MEMORY_MB})")
    args = parser.parse_args(argv)
    grade(args.folder, args.timeout, args.cell_timeout, memory_mb=args.memory_mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
