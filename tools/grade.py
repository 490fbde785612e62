"""Grade a class's student notebooks with nbgrader: `make grade SUBMISSIONS=folder`.

    python -m tools.grade FOLDER [--timeout 600] [--cell-timeout 120] [--scratch DIR]

FOLDER holds one sub-folder per student, each with any of the student
notebooks (book/student/), under any file name (Colab saves "Copy of
01_reproduce_the_error.ipynb"). It writes

- FOLDER/grades.csv: one row per exercise of each notebook graded (student,
  notebook, exercise, points, max_points, failure: the first line of what
  went wrong), and one row per file that could not be graded and per student
  with no notebook, saying why;
- FOLDER/feedback/STUDENT.md: the same, for the student, with each failed
  check's message ("not yet: ...").

The grading is nbgrader's (the Jupyter project's grader, local, with its
SQLite gradebook): the student notebooks carry its cell metadata (tools.
student), each chapter is an nbgrader assignment whose source is the
shipped student notebook, and `nbgrader autograde` runs each submission
with the shipped checks put back in place of the student's copies (locked
cells), per-cell time-outs interrupting a cell that runs too long, and
errors allowed, so that one exercise's failure costs only its point. Each
notebook is autograded in its own nbgrader course, in a scratch folder that
holds a copy of the submission, with HOME and Jupyter's folders inside it,
under a wall-clock time-out for the whole notebook: a notebook that loops
forever, raises, deletes files or is not a notebook at all spoils only its
own rows. Nothing else is written: the scratch folders are removed, the
students' folders are only read.

Why nbgrader: it grades a class locally, with no service to run, keeps
grades in a SQLite gradebook, locks the checks, and time-limits cells.
otter-grader grades a class only in Docker containers (`otter grade`); it
runs without Docker only one notebook at a time (`otter run`).

The chapter of a notebook is read from its exercise cells' ids
(`ch01-exercise-1-check`), not from its file name.
"""
import argparse
import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from tools.student import STUDENT

COLUMNS = ["student", "notebook", "exercise", "points", "max_points", "failure"]
GRADE_ID = re.compile(r"^ch(\d\d)-exercise-(\d+)-(check|answer)$")
OWN_OUTPUTS = {"grades.csv", "feedback"}


def shipped():
    """{chapter number: path of its student notebook}."""
    return {int(path.name[:2]): path for path in sorted(STUDENT.glob("[0-9][0-9]_*.ipynb"))}


def first_line(text):
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else ""


def grade_ids(notebook):
    return [cell.metadata.get("nbgrader", {}).get("grade_id", "")
            for cell in notebook.cells]


def chapter_of(notebook):
    """The chapter number the notebook's exercise cells name, or None."""
    chapters = {int(m[1]) for m in map(GRADE_ID.match, grade_ids(notebook)) if m}
    return chapters.pop() if len(chapters) == 1 else None


def checks_of(path):
    """[(exercise number, grade id)] of a shipped student notebook."""
    notebook = nbformat.read(path, as_version=4)
    found = [(int(m[2]), m[0]) for m in map(GRADE_ID.match, grade_ids(notebook))
             if m and m[3] == "check"]
    if not found:
        raise ValueError(f"{path.name}: no nbgrader check cell (run make generate)")
    return found


def error_line(cell):
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return first_line(f"{output.get('ename', '')}: {output.get('evalue', '')}"
                              if output.get("evalue") else output.get("ename", ""))
    return ""


def scratch_env(scratch):
    """The environment of nbgrader and its kernels: every folder they write in
    is inside `scratch`."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("JUPYTER", "IPYTHON", "MPL"))}
    for name, sub in [("HOME", "home"), ("JUPYTER_CONFIG_DIR", "jupyter/config"),
                      ("JUPYTER_DATA_DIR", "jupyter/data"),
                      ("JUPYTER_RUNTIME_DIR", "jupyter/runtime"),
                      ("IPYTHONDIR", "ipython"), ("MPLCONFIGDIR", "matplotlib"),
                      ("TMPDIR", "tmp")]:
        (scratch / sub).mkdir(parents=True, exist_ok=True)
        env[name] = str(scratch / sub)
    # nbgrader runs `alembic` (its gradebook's migrations) from PATH
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env["MPLBACKEND"] = "Agg"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run(command, scratch, timeout):
    """Run `command` in `scratch`, in its own process group, killed whole at
    `timeout` seconds. Returns (exit code or None on time-out, output)."""
    process = subprocess.Popen(command, cwd=scratch, env=scratch_env(scratch),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return None, output


def nbgrader(*arguments):
    return [sys.executable, "-m", "nbgrader", *arguments,
            "--db=sqlite:///gradebook.db", "--CourseDirectory.root=."]


def assignment(stem, templates):
    """A scratch nbgrader course with the assignment `stem` generated (its
    gradebook knows the shipped checks), made once per chapter in `templates`."""
    course = templates / stem
    if not course.is_dir():
        source = course / "source" / stem
        source.mkdir(parents=True)
        shutil.copy(STUDENT / f"{stem}.ipynb", source / f"{stem}.ipynb")
        code, output = run(nbgrader("generate_assignment", stem, "--force",
                                    "--log-level=ERROR"), course, 300)
        if code != 0:
            shutil.rmtree(course, ignore_errors=True)
            raise RuntimeError(f"nbgrader generate_assignment {stem} failed:\n{output}")
        for scratch in ("home", "jupyter", "ipython", "matplotlib", "tmp"):
            shutil.rmtree(course / scratch, ignore_errors=True)
    return course


def autograde(notebook_path, stem, student, timeout, cell_timeout, templates):
    """Autograde one submission in a course of its own, in a scratch folder.
    Returns ({grade id: (points, max points)}, {grade id: failure}, problem,
    stray): `problem` says why nothing could be graded, else ''; `stray` is
    the first error outside the exercises that was not meant to happen."""
    scratch = Path(tempfile.mkdtemp(prefix="grade-", dir=templates))
    try:
        shutil.copytree(assignment(stem, templates), scratch, dirs_exist_ok=True)
        submitted = scratch / "submitted" / student / stem
        submitted.mkdir(parents=True)
        shutil.copy(notebook_path, submitted / f"{stem}.ipynb")
        code, output = run(nbgrader("autograde", stem, f"--student={student}", "--force",
                                    f"--Execute.timeout={cell_timeout}",
                                    "--log-level=ERROR"), scratch, timeout)
        if code is None:
            return {}, {}, (f"timed out: the notebook ran longer than {timeout} s and "
                            "was stopped"), ""
        graded = scratch / "autograded" / student / stem / f"{stem}.ipynb"
        grades = read_grades(scratch / "gradebook.db", stem, student)
        if code != 0 or not grades or not graded.is_file():
            return {}, {}, why_not_graded(output, code, cell_timeout), ""
        failures, answers, stray = {}, {}, ""
        notebook = nbformat.read(graded, as_version=4)
        code_cells = [c for c in notebook.cells if c.cell_type == "code"]
        for number, cell in enumerate(code_cells, 1):
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            match = GRADE_ID.match(grade_id)
            if not match:
                if (not stray and error_line(cell)
                        and "raises-exception" not in cell.metadata.get("tags", [])):
                    stray = f"code cell {number} raised {error_line(cell)}"
                continue
            line = error_line(cell)
            if match[3] == "answer" and line:
                answers[match[2]] = f"answer cell: {line}"
            elif match[3] == "check" and line:
                failures[grade_id] = answers.get(match[2]) or line
        return grades, failures, "", stray
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def why_not_graded(output, code, cell_timeout):
    """One line from nbgrader's output saying why it graded nothing."""
    errors = re.findall(r"^\s*((?:\w+\.)*\w*(?:Error|Exception)\b.*)$", output, re.M)
    if any("CellTimeoutError" in line for line in errors):
        return (f"stopped: a cell ran longer than {cell_timeout} s and did not stop "
                "when interrupted (CellTimeoutError)")
    if errors:
        return first_line(f"nbgrader could not grade it: {errors[-1]}")
    return f"nbgrader could not grade it (exit code {code})"


def read_grades(database, stem, student):
    """{grade id: (points, max points)} from nbgrader's SQLite gradebook."""
    from nbgrader.api import Gradebook, MissingEntry
    if not database.is_file():
        return {}
    with Gradebook(f"sqlite:///{database}") as gradebook:
        try:
            submission = gradebook.find_submission_notebook(stem, stem, student)
        except MissingEntry:
            return {}
        return {grade.name: (grade.score, grade.max_score) for grade in submission.grades}


def student_id(folder_name):
    """An id nbgrader accepts, from a student's folder name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", folder_name).strip("._") or "student"


def notebooks_in(folder):
    return sorted(path for path in folder.rglob("*")
                  if path.is_file() and ".ipynb_checkpoints" not in path.parts
                  and path.suffix == ".ipynb")


def grade_student(folder, timeout, cell_timeout, chapters, templates):
    """The rows of one student's folder."""
    student = folder.name
    rows, graded = [], {}
    files = notebooks_in(folder)
    others = sorted(path for path in folder.rglob("*") if path.is_file()
                    and path.suffix != ".ipynb" and ".ipynb_checkpoints" not in path.parts)
    if not files:
        seen = f" (only {', '.join(p.name for p in others[:3])})" if others else ""
        return [dict(student=student, notebook="", exercise="", points=0, max_points=0,
                     failure=f"no notebook submitted{seen}")]
    for path in files:
        name = str(path.relative_to(folder))
        try:
            notebook = nbformat.read(path, as_version=4)
        except (json.JSONDecodeError, UnicodeDecodeError, nbformat.reader.NotJSONError,
                nbformat.ValidationError, ValueError, KeyError, TypeError) as error:
            rows.append(dict(student=student, notebook=name, exercise="", points=0,
                             max_points=0, failure=first_line(
                                 f"not a notebook, not graded: {type(error).__name__}: {error}")))
            continue
        chapter = chapter_of(notebook)
        if chapter not in chapters:
            rows.append(dict(student=student, notebook=name, exercise="", points=0,
                             max_points=0, failure="not a student notebook of this book "
                             "(no exercise cells of a chapter), not graded"))
            continue
        stem = chapters[chapter].stem
        if chapter in graded:
            rows.append(dict(student=student, notebook=name, exercise="", points=0,
                             max_points=0, failure=f"a second copy of {stem}.ipynb "
                             f"(graded: {graded[chapter]}), not graded"))
            continue
        graded[chapter] = name
        shown = f"{stem}.ipynb" if name == f"{stem}.ipynb" else f"{stem}.ipynb (file: {name})"
        checks = checks_of(chapters[chapter])
        grades, failures, problem, stray = autograde(path, stem, student_id(student),
                                                     timeout, cell_timeout, templates)
        if stray:
            rows.append(dict(student=student, notebook=shown, exercise="", points=0,
                             max_points=0, failure=first_line(
                                 f"outside the exercises, {stray} (the checks ran anyway)")))
        for number, grade_id in checks:
            points, most = grades.get(grade_id, (0, 1))
            failure = problem or failures.get(grade_id, "")
            if not problem and grade_id not in grades:
                failure = "the exercise's check cell is missing from the notebook"
            rows.append(dict(student=student, notebook=shown, exercise=number,
                             points=_number(points), max_points=_number(most),
                             failure=failure))
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
            verdict = ("passed" if row["points"] == row["max_points"] and not
                       row["failure"].startswith(("answer", "timed", "nbgrader"))
                       else f"not yet ({row['failure'] or 'no points'})")
            lines.append(f"- {where}, exercise {row['exercise']}: "
                         f"{row['points']} of {row['max_points']}, {verdict}")
    return "\n".join(lines) + "\n"


def grade(folder, timeout=600, cell_timeout=120, scratch_root=None):
    """Grade every student's folder of `folder`; write grades.csv and
    feedback/; return the rows. The scratch folders are made, and removed,
    in `scratch_root` (default: $GRADE_SCRATCH, else the system's temporary
    folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SystemExit(f"SUBMISSIONS={folder}: not a folder")
    scratch_root = scratch_root or os.environ.get("GRADE_SCRATCH") or None
    if scratch_root is not None and not Path(scratch_root).is_dir():
        raise SystemExit(f"scratch folder {scratch_root}: not a folder")
    chapters = shipped()
    students = sorted(path for path in folder.iterdir()
                      if path.is_dir() and path.name not in OWN_OUTPUTS
                      and not path.name.startswith("."))
    if not students:
        raise SystemExit(f"{folder}: no student folder in it (one sub-folder per student)")
    rows, per_student = [], {}
    templates = Path(tempfile.mkdtemp(prefix="grading-", dir=scratch_root))
    try:
        for path in students:
            print(f"grading {path.name} ...", flush=True)
            per_student[path.name] = grade_student(path, timeout, cell_timeout, chapters,
                                                   templates)
            rows += per_student[path.name]
    finally:
        shutil.rmtree(templates, ignore_errors=True)
    with open(folder / "grades.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (folder / "feedback").mkdir(exist_ok=True)
    for name, its_rows in per_student.items():
        (folder / "feedback" / f"{name}.md").write_text(feedback(name, its_rows))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--timeout", type=int, default=600,
                        help="seconds a whole notebook may run (default 600)")
    parser.add_argument("--cell-timeout", type=int, default=120,
                        help="seconds one cell may run before it is interrupted (default 120)")
    parser.add_argument("--scratch", type=Path, default=None,
                        help="folder to make the scratch folders in (default: "
                        "$GRADE_SCRATCH, else the system's temporary folder)")
    args = parser.parse_args(argv)
    grade(args.folder, args.timeout, args.cell_timeout, args.scratch)
    where = args.folder / "grades.csv"
    print(f"wrote {where} and {args.folder / 'feedback'}/")
    print(where.read_text(), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
