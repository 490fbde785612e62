"""`make grade` (tools/grade.py: each notebook run in a bubblewrap sandbox
hands back data; the verdict is the grader's, against a reference run):
class folders with every kind of submission a teacher gets, honest and
hostile, each graded once (fay's, gil's and the roster's classes in threads
while the first is graded, then the first again, resumed); each case is
asserted on its rows, on the files around, and on the processes left.
Chapter 1 is the fastest to run; cases that do not interfere share a notebook.

The class:
amy    the shipped notebook and a vandal cell (`vandal`), then an IPython
       input transformer blanking every later cell
ana    every graded exercise's solution put back: full marks
bob    the shipped student notebook: zero, each check naming its exercise
cal    the answers, the first writing a warning to stderr, a pasted copy of
       check 2 and check 3 deleted: full marks (the checks are the grader's)
cy     a file that is not JSON
dee    an empty folder
vic    the answers, then a last cell deleting them from the data it hands back:
       zero (the reference never runs with its own answers in their place)
flo    the answers, then a last cell putting a dict of 20,000 colliding keys
       in that data: exercise 1 refused, the rest graded
deb    the answers after a cell making a folder 1,500 deep: graded, removed
dia    the answers, on a disk that fills up while it runs (its sandbox raises
       OSError): a row for each exercise, and the class graded
eve    the book's answers renamed as Colab saves a copy, a first code cell
       that raises, a cell that deletes every file in its folder; and the
       untouched notebook under the chapter's own name
ivy    chapter 2's notebook under chapter 1's file name, and a notebook from
       elsewhere
lee    only a symbolic link to ana's notebook
tia    nothing but tricks (TRICKS): the question's shapes, the book's value
       for its own exercise, an empty function
CHEATS tia's tricks after a cell attacking the grading (each said in
       tests/data/grade_cheats.json): each earns zero
=SUM(1), +1, -1, @x   names a spreadsheet would run (@x holds a notebook
       named =HYPERLINK(1).ipynb that is not JSON)
fay's class: fay, a cell that loops for ever, deaf to SIGINT (the cell
       time-out); folders named feedback, grades.csv and .hidden, each
       with a notebook; zoe, a symbolic link to ana's folder
gil's class: gil, a few short cells, then a process in a session of its
       own and a C call that ignores signals, past the notebook time-out
the roster's class: a Moodle export's folder of a student on the roster
       (the answers of her variant), one emptying BOOK_STUDENT and
       STUDENT_ID before the right answers, and a folder the roster does not name
"""
import copy
import csv
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import nbformat
import pytest

from tools import grade as grader
from tools.book import BOOK, ROOT, tags, toc_notebooks
from tools.student import GRADED, STUDENT

ONE = "01_reproduce_the_error"
TWO = "02_where_the_error_is_raised"
# (timeout, cell timeout) of each class: the grader's own, never reached;
# fay's cell never ends and is interrupted after 4 s; gil's notebook never
# ends and is stopped at 20 s: only a limit ends them, however busy the machine
LIMITS = {"submissions": (600, 120), "fay": (600, 4), "gil": (20, 120), "roll": (600, 120)}
MARK = f"vandal-{uuid.uuid4().hex[:12]}"
SPREADSHEET = ["=SUM(1)", "+1", "-1", "@x"]
# attacks on the grading, each a cell before tia's tricks: each earns 0
CHEATS = {name: code for name, code in json.loads(
    (Path(__file__).parent / "data" / "grade_cheats.json").read_text()).items() if name != "_"}
MAIN = ["amy", "ana", "bob", "cal", "cy", "deb", "dee", "dia", "eve", "flo", "ivy", "lee",
        "tia", "vic",
        *CHEATS,
        *SPREADSHEET]
ROLL = {"Ana Lopez_48213_assignsubmission_file_": "s-48213",
        "Env Cheat_48214_assignsubmission_file_": "s-48214"}
# tia's answers: the question's shapes, the book's answer to its own
# exercise on accumulation, and what passes a check that only tests that
# nothing raises
TRICKS = {1: "got_shape = [10, 90]\nexpected_shape = [10, 100]",
          2: "predicted_grad = -3.0",
          3: "def train_then_prune(layer, keep):\n    pass"}


def answered(stem, folder=GRADED):
    """The student notebook of `stem` with the solutions of the notebook in
    `folder` put back in order: the graded exercises' (they compute each
    answer from the student's own variant, since the grader gives each
    kernel the student's id), or the book's own (BOOK)."""
    book = nbformat.read(folder / f"{stem}.ipynb", as_version=4)
    student = nbformat.read(STUDENT / f"{stem}.ipynb", as_version=4)
    solutions = [c.source for c in book.cells if "solution" in tags(c)]
    answers = [c for c in student.cells if "answer" in tags(c)]
    assert folder != GRADED or len(answers) == len(solutions), stem
    for cell, solution in zip(answers, solutions):
        cell.source = solution
    return student


def shipped(stem):
    return nbformat.read(STUDENT / f"{stem}.ipynb", as_version=4)


def new_cell(notebook, source):
    cell = nbformat.v4.new_code_cell(source)
    cell["id"] = f"planted-{len(notebook.cells)}"
    return cell


def with_code_last(notebook, source):
    notebook = copy.deepcopy(notebook)
    notebook.cells.append(new_cell(notebook, source))
    return notebook


# a folder deeper than shutil.rmtree can recurse, in the notebook's working folder
DEEP = "import os\nfor _ in range(1500):\n    os.mkdir('d')\n    os.chdir('d')\nos.chdir('/tmp')"
# a last cell rewriting the data the notebook hands back (data.json, in its folder)
REWRITE = "import json\ndata = json.load(open('data.json'))\n{}\njson.dump(data, open('data.json', 'w'))"


def with_code_first(notebook, source):
    """`notebook` with a code cell of `source` right after its setup cell."""
    notebook = copy.deepcopy(notebook)
    setup = next(i for i, c in enumerate(notebook.cells) if c.cell_type == "code")
    notebook.cells.insert(setup + 1, new_cell(notebook, source))
    return notebook


def index_of(notebook, grade_id):
    return next(i for i, c in enumerate(notebook.cells)
                if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def tree(folder):
    """{relative path: sha256} of every file under `folder`."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()}


def vandal(folder, scratch):
    """A cell that tries every harm it can and raises a report of what it did:
    {attempt: 1 if it worked, else 0}, and a few facts of its sandbox."""
    return f'''import json, os, pathlib, resource, socket, sqlite3, subprocess, sys
CLASS, SCRATCH, MARK = {str(folder)!r}, {str(scratch)!r}, {MARK!r}
done = {{}}
def attempt(key, action):
    try:
        action()
        done[key] = 1
    except Exception:
        done[key] = 0
def write(path):
    return lambda: pathlib.Path(path).write_text("vandal")
def poison():
    hits = 0
    for root in (SCRATCH, *pathlib.Path.cwd().parents):
        if root in ("/", pathlib.Path("/")):
            continue
        for path in pathlib.Path(root).rglob("gradebook.db"):
            db = sqlite3.connect(path)
            db.execute("update grade set manual_score = 1, extra_credit = 100")
            db.commit()
            hits += 1
        for path in pathlib.Path(root).rglob("*.ipynb"):
            path.write_text("{{}}")
            hits += 1
    assert hits
attempt("repo", write({str(ROOT)!r} + "/" + MARK))
attempt("venv", write({sys.prefix!r} + "/" + MARK))
attempt("home", write({str(Path.home())!r} + "/" + MARK))
attempt("tmp", write("/tmp/" + MARK))
attempt("see", lambda: os.listdir(CLASS)[0])
attempt("peer", lambda: os.remove(CLASS + "/ana/{ONE}.ipynb"))
attempt("peer_write", write(CLASS + "/bob/{ONE}.ipynb"))
attempt("grader", poison)
attempt("net", lambda: socket.create_connection(("1.1.1.1", 53), timeout=3))
attempt("mem", lambda: bytearray(9 * 2**30))
attempt("root", lambda: os.setuid(0))
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)", MARK],
                 start_new_session=True)
done.update(uid=os.getuid(), nproc=resource.getrlimit(resource.RLIMIT_NPROC)[0],
            student=os.environ.get("BOOK_STUDENT"))
raise RuntimeError("report " + json.dumps(done, separators=(",", ":")))'''


def build(root):
    """The class folders under `root`; returns {student: folder}."""
    folder = root / "submissions"
    students = {name: folder / name for name in MAIN}
    students |= {name: root / name / name for name in ["fay", "gil"]}
    students |= {name: root / "fay" / name for name in ["feedback", "grades.csv", ".hidden"]}
    for path in students.values():
        path.mkdir(parents=True)
    (root / "fay" / ".ipynb_checkpoints").mkdir()
    (root / "fay" / "zoe").symlink_to(students["ana"], target_is_directory=True)
    right = answered(ONE)
    nbformat.write(right, students["ana"] / f"{ONE}.ipynb")
    nbformat.write(with_code_last(right, REWRITE.format("data['values'] = {}")),
                   students["vic"] / f"{ONE}.ipynb")
    nbformat.write(with_code_first(right, DEEP), students["deb"] / f"{ONE}.ipynb")
    nbformat.write(right, students["dia"] / f"{ONE}.ipynb")
    flood = "[[n * (2 ** 61 - 1), 0] for n in range(20000)]"  # keys of one hash
    nbformat.write(with_code_last(right, REWRITE.format(
        f"data['values']['1']['got_shape'] = {{'dict': {flood}}}")), students["flo"] / f"{ONE}.ipynb")
    for name in ["feedback", "grades.csv", ".hidden"]:
        nbformat.write(right, students[name] / f"{ONE}.ipynb")

    amy = with_code_first(shipped(ONE), vandal(folder, root))
    setup = next(i for i, c in enumerate(amy.cells) if c.cell_type == "code")
    amy.cells.insert(setup + 2, new_cell(
        amy, "get_ipython().input_transformers_post.append(lambda lines: [])"))
    nbformat.write(amy, students["amy"] / f"{ONE}.ipynb")

    (students["bob"] / f"{ONE}.ipynb").write_bytes((STUDENT / f"{ONE}.ipynb").read_bytes())

    cal = copy.deepcopy(right)
    last = cal.cells[index_of(cal, "ch01-exercise-3-answer")]
    last.source += ("\n\n\nimport sys\n_train_then_prune = train_then_prune\n\n\n"
                    "def train_then_prune(layer, keep):\n"
                    "    print('a warning, on stderr', file=sys.stderr)\n"
                    "    return _train_then_prune(layer, keep)\n")
    pasted = copy.deepcopy(cal.cells[index_of(cal, "ch01-exercise-2-check")])
    pasted["id"] = "pasted-check"
    del cal.cells[index_of(cal, "ch01-exercise-3-check")]
    cal.cells.append(pasted)
    nbformat.write(cal, students["cal"] / f"{ONE}.ipynb")

    (students["cy"] / f"{ONE}.ipynb").write_text('{"cells": [ this is not JSON')
    eve = with_code_first(right, (
        "import os, shutil\n"
        "for name in os.listdir('.'):\n"
        "    shutil.rmtree(name) if os.path.isdir(name) else os.remove(name)"))
    nbformat.write(with_code_first(eve, 'raise RuntimeError("a typo at the top")'),
                   students["eve"] / f"Copy of {ONE}.ipynb")
    nbformat.write(shipped(ONE), students["eve"] / f"{ONE}.ipynb")
    (students["eve"] / "notes.txt").write_text("the student's own notes")
    nbformat.write(answered(TWO), students["ivy"] / f"{ONE}.ipynb")
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]),
                   students["ivy"] / "scratch.ipynb")
    (students["lee"] / f"{ONE}.ipynb").symlink_to(students["ana"] / f"{ONE}.ipynb")
    tia = shipped(ONE)
    for number, trick in TRICKS.items():
        tia.cells[index_of(tia, f"ch01-exercise-{number}-answer")].source = trick
    nbformat.write(tia, students["tia"] / f"{ONE}.ipynb")
    for name, cheat in CHEATS.items():
        nbformat.write(with_code_first(tia, cheat), students[name] / f"{ONE}.ipynb")
    (students["@x"] / "=HYPERLINK(1).ipynb").write_text("not JSON")

    fay = shipped(ONE)  # the loop first: it is the first cell to raise, however busy
    fay.cells.insert(0, new_cell(fay, (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)  # deaf to interrupts\n"
        "while True:\n    time.sleep(0.1)")))
    nbformat.write(fay, students["fay"] / f"{ONE}.ipynb")
    gil = with_code_first(right, (
        "import ctypes, signal, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(900)', {MARK!r}],\n"
        "                 start_new_session=True)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "ctypes.CDLL(None).sleep(1000)  # in C: deaf to every signal but SIGKILL"))
    for _ in range(3):
        gil = with_code_first(gil, "import time\ntime.sleep(1)")
    nbformat.write(gil, students["gil"] / f"{ONE}.ipynb")
    roll = root / "roll"
    (roll / "stranger").mkdir(parents=True)
    nbformat.write(right, roll / "stranger" / f"{ONE}.ipynb")
    (root / "roster.csv").write_text("id,folder,email\n" + "".join(
        f"{ident},{name.split('_')[0]},\n" for name, ident in ROLL.items()))
    for name in ROLL:
        (roll / name).mkdir()
    nbformat.write(right, roll / next(iter(ROLL)) / f"{ONE}.ipynb")
    nbformat.write(with_code_first(right, "import os\nos.environ['BOOK_STUDENT'] = ''\n"
                                          "STUDENT_ID = ''"),
                   roll / list(ROLL)[1] / f"{ONE}.ipynb")
    return students


def processes_naming(*texts):
    """The command lines of live processes that name any of `texts`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if any(text in line for text in texts):
                found.append(line)
    return found


def read_rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("class")
    folder = root / "submissions"
    outside = root / "beside.txt"
    outside.write_text("a file beside the submissions: it must survive")
    build(root)
    before = {name: tree(root / name) for name in LIMITS}
    scratches = {name: root / f"scratch-{name}" for name in LIMITS}
    for path in scratches.values():
        path.mkdir()
    seconds, sandboxed = {}, grader.sandboxed

    def timed(job, student, *args):  # grader.sandboxed, timing each run by its student
        if student == "dia":
            raise OSError(28, "No space left on device")
        start = time.monotonic()
        try:
            return sandboxed(job, student, *args)
        finally:
            seconds.setdefault(student, time.monotonic() - start)

    def grade(name, **options):
        timeout, cell_timeout = LIMITS[name]
        grader.grade(root / name, timeout=timeout, cell_timeout=cell_timeout,
                     scratch_root=scratches[name], jobs=1 if name != "submissions" else 2,
                     **options)

    classes = [threading.Thread(target=grade, args=(name,)) for name in ["fay", "gil"]]
    classes.append(threading.Thread(target=grade, args=("roll",),
                                    kwargs=dict(roster=root / "roster.csv")))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(grader, "sandboxed", timed)
        for thread in classes:
            thread.start()
        try:
            grade("submissions")
        finally:
            for thread in classes:
                thread.join()
    left = processes_naming(MARK, str(root))
    rows = read_rows(folder / "grades.csv") + read_rows(root / "gil" / "grades.csv")
    rows += read_rows(root / "fay" / "grades-1.csv") + read_rows(root / "roll" / "grades.csv")
    first = (folder / "grades.csv").read_text()
    with pytest.MonkeyPatch.context() as patch:  # resumed: nothing runs again
        patch.setattr(grader, "sandboxed", lambda job, student, *args: pytest.fail("ran again")
                      if student != "dia" else timed(job, student, *args))
        grade("submissions")
    for path in scratches.values():
        assert list(path.iterdir()) == [], f"scratch folders left in {path}"
        path.rmdir()
    return dict(root=root, folder=folder, rows=rows, before=before, outside=outside,
                seconds=seconds, left=left, first=first)


def rows_of(graded, student):
    return [r for r in graded["rows"] if r["student"] == student]


def test_columns_and_one_feedback_file_per_student(graded):
    assert list(graded["rows"][0]) == grader.COLUMNS
    names = {path.stem for path in (graded["folder"] / "feedback").glob("*.md")}
    assert names == set(MAIN)
    assert "Total: 3 of 3 points." in (graded["folder"] / "feedback/ana.md").read_text()


def test_nothing_but_the_grades_and_feedback_is_written(graded):
    root = graded["root"]
    for name, before in graded["before"].items():
        after = {k: v for k, v in tree(root / name).items() if not re.match(
            r"(grades(-1)?\.csv|feedback(-1)?/[^/]*\.md|\.grading/\w+\.json)$", k)}
        assert after == before, f"a student's folder of {name} changed"
    assert graded["outside"].read_text().endswith("must survive")
    assert sorted(p.name for p in root.iterdir()) == [
        "beside.txt", "fay", "gil", "roll", "roster.csv", "submissions"]


def test_a_submission_made_of_tricks_scores_zero(graded):
    rows = rows_of(graded, "tia")
    assert [(r["exercise"], r["points"]) for r in rows] == [("1", "0"), ("2", "0"), ("3", "0")], rows
    # each lost point says why: what was expected, what the notebook gave
    assert rows[0]["failure"] == (
        "got_shape: the node returned [3, 81] on your Linear(106, 3) with 81 columns kept; "
        "your answer was [10, 90]"), rows


def test_in_every_chapter_a_copy_of_the_public_book_earns_nothing(tmp_path):
    """A class of two over all the chapters: the book's public solutions pasted
    into the answer cells in order (a verbatim copy of the public book) earn
    no point; the graded exercises' own solutions earn every point."""
    for name, folder in [("copycat", BOOK), ("honest", GRADED)]:
        (tmp_path / "class" / name).mkdir(parents=True)
        for path in toc_notebooks():
            nbformat.write(answered(path.stem, folder), tmp_path / "class" / name / path.name)
    (tmp_path / "scratch").mkdir()
    grader.grade(tmp_path / "class", timeout=600, cell_timeout=120,
                 scratch_root=tmp_path / "scratch", jobs=2)
    points = {}
    for row in read_rows(tmp_path / "class" / "grades.csv"):
        if row["exercise"]:
            points.setdefault(row["student"], []).append(int(row["points"]))
    items = sum(len(grader.checks(path.stem)) for path in toc_notebooks())
    assert points["copycat"] == [0] * items and points["honest"] == [1] * items, points


def test_each_attack_on_the_grading_earns_nothing(graded):
    for name in CHEATS:
        assert [(r["exercise"], r["points"]) for r in rows_of(graded, name)
                if r["exercise"]] == [("1", "0"), ("2", "0"), ("3", "0")], name


EXPECTED_ONLY = {stem: texts for stem, texts in json.loads(
    (Path(__file__).parent / "data" / "grade_expected_only.json").read_text()).items() if stem != "_"}


@pytest.mark.parametrize("stem", EXPECTED_ONLY)
def test_a_students_job_holds_no_expected_side_message_or_reference(stem):
    """A student's job has each check as probe code (with what runs the answer); only
    the reference's has the rest."""
    its = grader.checks(stem)
    student = json.dumps(grader.student_cells(
        nbformat.read(STUDENT / f"{stem}.ipynb", as_version=4), its))
    reference = json.dumps(grader.reference_job(stem, its))
    for text in EXPECTED_ONLY[stem]["gone"]:
        assert text in reference and text not in student, text
    for text in EXPECTED_ONLY[stem]["kept"]:
        assert text in student, text


def test_all_correct_gets_full_marks(graded):
    rows = rows_of(graded, "ana")
    assert [(r["notebook"], r["exercise"], r["points"], r["max_points"], r["failure"])
            for r in rows] == [(f"{ONE}.ipynb", str(n), "1", "1", "") for n in (1, 2, 3)]


def test_answers_missing_from_the_data_are_none_in_the_reference_not_its_own(graded):
    assert [r["points"] for r in rows_of(graded, "vic")] == ["0"] * 3


def test_an_oversized_answer_is_refused_before_it_is_decoded(graded):
    rows = rows_of(graded, "flo")
    assert [(r["exercise"], r["points"]) for r in rows] == [("1", "0"), ("2", "1"), ("3", "1")]
    assert rows[0]["failure"].startswith(f"the answer's data is over {grader.ANSWER_KB} KB")


def test_a_folder_too_deep_for_rmtree_is_removed_and_the_class_graded(graded):
    assert [r["points"] for r in rows_of(graded, "deb")] == ["1"] * 3


def test_a_run_the_grader_cannot_make_is_a_row_and_retried_on_resume(graded):
    rows = rows_of(graded, "dia")
    assert [r["points"] for r in rows] == ["0"] * 3
    assert all(r["failure"] == "the grader could not run this notebook (OSError: [Errno 28] "
               "No space left on device); grade again" for r in rows), rows


def test_the_shipped_student_notebook_gets_zero_naming_each_exercise(graded):
    rows = rows_of(graded, "bob")
    assert [r["points"] for r in rows] == ["0"] * 3
    for n, row in enumerate(rows, 1):
        assert row["failure"].startswith(
            f"NotImplementedError: Exercise {n} is not answered yet"), row


def test_not_json_and_empty_folder_each_get_a_row_saying_so(graded):
    [cy] = rows_of(graded, "cy")
    assert cy["failure"].startswith("not a notebook, not graded: NotJSONError")
    assert rows_of(graded, "dee") == [dict(student="dee", id="", notebook="", exercise="",
                                           points="0", max_points="0",
                                           failure="no notebook submitted")]


def test_a_notebook_raising_at_the_top_is_graded_cell_by_cell(graded):
    rows = rows_of(graded, "eve")[1:]
    # errors are allowed: the answers below the typo (and below a cell deleting
    # its folder's files: only its copy's) still run and pass; a row says what raised
    assert [r["points"] for r in rows] == ["0", "1", "1", "1"], rows
    assert rows[0]["exercise"] == "" and rows[0]["failure"] == (
        "outside the exercises, code cell 2 raised RuntimeError: a typo at the top "
        "(the checks ran anyway)")


def test_of_two_copies_of_a_chapter_the_answered_one_is_graded(graded):
    rows = rows_of(graded, "eve")
    assert rows[0]["notebook"] == f"{ONE}.ipynb" and rows[0]["failure"] == (
        f"a second copy of {ONE}.ipynb, not graded: Copy of {ONE}.ipynb was graded "
        "(3 answered cells against 0)")
    assert {r["notebook"] for r in rows[1:]} == {f"{ONE}.ipynb (file: Copy of {ONE}.ipynb)"}


def test_of_two_copies_equally_answered_the_first_by_name_is_graded():
    right, other = answered(ONE), answered(ONE)
    rows, shown, notebook = grader.grade_chapter([("a.ipynb", right), ("b.ipynb", other)],
                                                 STUDENT / f"{ONE}.ipynb", "ana")
    assert rows == [grader.row("ana", "b.ipynb", (
        f"a second copy of {ONE}.ipynb, not graded: a.ipynb was graded "
        "(3 answered cells against 3)"))]
    assert shown == f"{ONE}.ipynb (file: a.ipynb)" and notebook is right


def test_another_chapter_is_graded_as_that_chapter_and_a_stranger_is_not(graded):
    rows = rows_of(graded, "ivy")
    chapter_two = [r for r in rows if r["notebook"].startswith(TWO)]
    assert [r["exercise"] for r in chapter_two] == ["1", "2", "3"]
    assert all(r["points"] == "1" and r["notebook"].endswith(f"(file: {ONE}.ipynb)")
               for r in chapter_two), chapter_two
    [stranger] = [r for r in rows if r["notebook"] == "scratch.ipynb"]
    assert stranger["failure"].startswith("not a student notebook of this book")


def test_stderr_a_pasted_check_and_a_deleted_check(graded):
    # a warning on stderr is no wrong answer; the checks are the grader's: a
    # pasted copy changes nothing, and check 3, deleted, runs after its answer
    rows = rows_of(graded, "cal")
    assert [(r["exercise"], r["points"], r["max_points"], r["failure"]) for r in rows] == [
        (str(n), "1", "1", "") for n in (1, 2, 3)]


def test_a_symbolic_link_is_not_followed(graded):
    assert [r["failure"] for r in rows_of(graded, "lee")] == [
        "a symbolic link, not graded (hand in the file itself)", "no notebook submitted"]


def test_the_vandal_harms_nothing_and_scores_nothing(graded):
    rows = rows_of(graded, "amy")
    stray = rows[0]["failure"]
    assert stray.startswith("outside the exercises, code cell 2 raised RuntimeError: report "), stray
    report = json.loads(stray.split("report ", 1)[1].removesuffix(" (the checks ran anyway)"))
    # /tmp is the sandbox's own tmpfs: writing there works and reaches nothing
    assert report == dict(repo=0, venv=0, home=0, tmp=1, see=0, peer=0, peer_write=0,
                          grader=0, net=0, mem=0, root=0, uid=grader.NOBODY,
                          nproc=grader.PROCESSES, student="amy"), report
    for place in [ROOT, Path(sys.prefix), Path.home(), Path("/tmp")]:
        assert not (place / MARK).exists(), place
    # the input transformer blanked the checks: they recorded nothing, no points
    assert [(r["exercise"], r["points"], r["failure"]) for r in rows[1:]] == [
        (str(n), "0", "the check did not run as the grader's does (stopped early or changed)")
        for n in (1, 2, 3)]


def test_no_process_of_a_notebook_outlives_its_grading(graded):
    assert graded["left"] == []


def test_a_cell_that_never_ends_is_stopped_and_says_so(graded):
    rows = rows_of(graded, "fay")
    assert rows[0]["failure"] == (
        f"outside the exercises, code cell 1 raised TimeoutError: the cell ran longer than "
        f"{LIMITS['fay'][1]} s and was stopped (the checks ran anyway)"), rows
    assert [(r["exercise"], r["points"]) for r in rows[1:]] == [("1", "0"), ("2", "0"),
                                                               ("3", "0")]


def test_a_notebook_stuck_in_c_is_stopped_at_its_time_out(graded):
    rows = rows_of(graded, "gil")
    timeout = LIMITS["gil"][0]
    assert [r["points"] for r in rows] == ["0"] * 3
    assert all(r["failure"] == f"timed out: the notebook ran longer than {timeout} s "
               "and was stopped" for r in rows), rows
    # the sandbox and the notebook's processes are stopped, and the grader goes
    # on, at the time-out, long before the cell's time-out or the C call's end
    assert timeout <= graded["seconds"]["gil"] < LIMITS["gil"][1], graded["seconds"]


def test_reserved_hidden_and_linked_folders_get_a_row_and_move_the_outputs(graded):
    fay = graded["root"] / "fay"
    rows = read_rows(fay / "grades-1.csv")
    refused = {r["student"]: r["failure"] for r in rows if r["student"] != "fay"}
    assert refused == {name: (
        "not graded: the folder's name is hidden (starts with a dot) or one the grader "
        "writes (grades.csv, feedback); rename the folder and grade again")
        for name in [".hidden", "feedback", "grades.csv"]} | {"zoe": (
            "not graded: the folder is a symbolic link; put the student's folder itself "
            "in the class folder")}
    assert sorted(p.name for p in (fay / "feedback-1").iterdir()) == ["fay.md"]


def test_spreadsheet_formulas_are_escaped(graded):
    text = (graded["folder"] / "grades.csv").read_text()
    for name in SPREADSHEET:
        assert f"\n'{name}," in text, name
    assert ",'=HYPERLINK(1).ipynb," in text
    assert grader.spreadsheet_safe("\tx") == "'\tx" and grader.spreadsheet_safe("a=b") == "a=b"


def test_the_kernel_gets_the_student_and_nothing_writable_but_its_folder(tmp_path):
    argv = grader.sandbox_argv(tmp_path / "work", "=ana")
    pairs = list(zip(argv, argv[1:]))
    assert ("--setenv", "BOOK_STUDENT") in pairs and argv[argv.index("BOOK_STUDENT") + 1] == "=ana"
    writable = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert writable == [str(tmp_path / "work")]
    for flag in ["--unshare-net", "--unshare-pid", "--die-with-parent", "--clearenv"]:
        assert flag in argv


def test_every_bad_file_is_a_row_and_the_others_are_graded(tmp_path):
    folder, name = tmp_path / "class", os.fsdecode(b"n\xffme")
    ints = shipped(ONE)
    for cell in ints.cells:
        if "nbgrader" in cell.metadata:
            cell.metadata["nbgrader"]["grade_id"] = 1
    files = {"deep": ('{"cells": ' + "[" * 200_000).encode(), "binary": bytes(range(256)) * 64,
             "types": b'{"cells": 5, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}',
             "ints": nbformat.writes(ints).encode(), name: b"["}
    for student, content in files.items():
        (folder / student).mkdir(parents=True)
        (folder / student / f"{ONE}.ipynb").write_bytes(content)
    (folder / "huge").mkdir()
    with open(folder / "huge" / f"{ONE}.ipynb", "wb") as handle:
        handle.truncate((grader.NOTEBOOK_MB + 1) * 2**20)  # sparse: no disk used
    (folder / "dir" / f"{ONE}.ipynb").mkdir(parents=True)
    (folder / "pipe").mkdir()
    os.mkfifo(folder / "pipe" / f"{ONE}.ipynb")  # reading it would wait for ever
    (folder / "link").mkdir()
    (folder / "link" / f"{ONE}.ipynb").symlink_to("/etc/hostname")
    (folder / "stray.ipynb").write_text("{}")
    (folder / "ana").mkdir()
    nbformat.write(answered(ONE), folder / "ana" / f"{ONE}.ipynb")
    assert grader.main([str(folder)]) == 0
    rows = [(r["student"], r["notebook"], r["points"], r["failure"])
            for r in read_rows(folder / "grades.csv")]
    unread = "not a notebook, not graded: "
    nothing = ("no notebook submitted", "0")
    assert rows == [
        ("stray.ipynb", "", "0",
         "not graded: a file, not a student's folder (one sub-folder per student)"),
        *[("ana", f"{ONE}.ipynb", "1", "")] * 3,
        ("binary", f"{ONE}.ipynb", "0", unread + "UnicodeDecodeError: 'utf-8' codec can't "
         "decode byte 0x80 in position 128: invalid start byte"),
        ("deep", f"{ONE}.ipynb", "0", unread + "RecursionError: maximum recursion depth "
         "exceeded while decoding a JSON array from a unicode string"),
        ("dir", f"{ONE}.ipynb", "0", "a folder, not a notebook, not graded"),
        ("dir", "", *reversed(nothing)),
        ("huge", f"{ONE}.ipynb", "0", f"not graded: {grader.NOTEBOOK_MB + 1} MB, larger than "
         f"a notebook of the book may be ({grader.NOTEBOOK_MB} MB)"),
        ("ints", f"{ONE}.ipynb", "0", "not a student notebook of this book (no exercise "
         "cells of a chapter), not graded"),
        ("link", f"{ONE}.ipynb", "0", "a symbolic link, not graded (hand in the file itself)"),
        ("link", "", *reversed(nothing)),
        ("n\\xffme", f"{ONE}.ipynb", "0",
         unread + "NotJSONError: Notebook does not appear to be JSON: '['"),
        ("pipe", f"{ONE}.ipynb", "0", "not a file (a pipe, a socket or a device), not graded"),
        ("pipe", "", *reversed(nothing)),
        ("types", f"{ONE}.ipynb", "0", rows[-1][3])], rows
    assert rows[-1][3].startswith(unread), rows[-1]
    # one nbgrader id of the wrong type does not hide the chapter of the others
    ints.cells[index_of(shipped(ONE), "ch01-exercise-2-check")].metadata["nbgrader"][
        "grade_id"] = "ch01-exercise-2-check"
    assert grader.chapter_of(ints) == 1


def test_a_sandbox_that_does_not_hold_stops_the_grading_with_bwraps_words(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    said = "bwrap: No permissions to create a new namespace"
    (bin_dir / "bwrap").write_text(f"#!/bin/sh\necho '{said}' >&2\nexit 1\n")
    (bin_dir / "bwrap").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "class" / "ana").mkdir(parents=True)
    nbformat.write(shipped(ONE), tmp_path / "class" / "ana" / f"{ONE}.ipynb")
    with pytest.raises(SystemExit) as stopped:
        grader.grade(tmp_path / "class")
    assert str(stopped.value) == ("the grading sandbox (bubblewrap) does not hold, so nothing "
                                  f"was graded; bwrap and the Python in it said:\n{said}")
    assert sorted(p.name for p in (tmp_path / "class").iterdir()) == ["ana"]


def test_the_sandbox_shows_the_system_and_its_own_folders_and_nothing_beside(tmp_path):
    """No other section's files, no grades.csv beside the class folder: each
    folder leading to one the sandbox needs holds only the way to it."""
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "grades.csv").write_text("beside")
    bound = [Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix)] + [work]
    bound = [p for p in bound if not any(p.is_relative_to(s) for s in grader.SYSTEM)]
    expected = {}
    for path in bound:
        for child in [path, *path.parents][:-1]:
            expected.setdefault(str(child.parent), set()).add(child.name)
    expected["/"] |= {"dev", "proc", "tmp"} | {
        name.strip("/") for name in grader.SYSTEM if os.path.lexists(name)}
    code = ("import json, os\n"
            f"print(json.dumps({{p: sorted(os.listdir(p)) for p in {sorted(expected)!r}}}))")
    done = subprocess.run(grader.sandbox_argv(work, "x", code=code),
                          capture_output=True, text=True, check=True, timeout=600)
    assert json.loads(done.stdout) == {k: sorted(v) for k, v in expected.items()}


def test_the_roster_maps_an_lms_export_and_a_mismatch_is_a_mismatch(graded):
    """Graded under the roster's id (her variant), not the folder's name; a
    notebook emptying BOOK_STUDENT and STUDENT_ID is graded on the roster's
    variant all the same: the grader runs the variant cells with that id."""
    ana, cheat = (rows_of(graded, name) for name in ROLL)
    assert [(r["id"], r["points"], r["failure"]) for r in ana] == [("s-48213", "1", "")] * 3
    assert [(r["id"], r["points"]) for r in cheat] == [("s-48214", "1")] * 3, cheat
    assert [r["failure"] for r in rows_of(graded, "stranger")] == [
        "not graded: a roster mismatch, not a wrong answer: no row of the roster names "
        "this folder (its folder or email column); add one and grade again"]


def test_a_resumed_run_runs_nothing_again_and_grades_the_same(graded):
    assert (graded["folder"] / "grades.csv").read_text() == graded["first"]


@pytest.mark.parametrize("roster, says", [("id,name\n1,ana", "a roster is a CSV with an 'id'"),
                                          ("id,folder\n1,ana\n2,Ana", "3: 'ana' names two"),
                                          ("id,folder,email\n,ana,", "2: an id and a folder")])
def test_a_bad_roster_is_a_clear_error(tmp_path, roster, says):
    (tmp_path / "roster.csv").write_text(roster)
    with pytest.raises(SystemExit, match=re.escape(says)):
        grader.read_roster(tmp_path / "roster.csv")
