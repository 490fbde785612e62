"""How long `make grade` takes for a class (`make bench-grade`): 30 students
handing in the three notebooks of lesson 1 (chapters 1 to 3), each with the
book's answers (those of a student's own variant where an exercise has one,
as tests/test_grade.py puts them back), graded with the grader's defaults
(as many notebooks at a time as cores and memory allow), then graded again
(resumed: nothing runs). The last line reads
`grading-speed: 90 notebooks in X s (N at a time, C cores); resumed in Y s`.

    python -m benchmarks.grading_speed [--students 30] [--folder DIR]
"""
import argparse
import os
import tempfile
import time
from pathlib import Path

import nbformat

from tests.test_grade import answered
from tools import grade as grader

LESSON_ONE = ["01_reproduce_the_error", "02_where_the_error_is_raised",
              "03_what_holds_the_old_shape"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--folder", type=Path, help="the class folder (default: a temporary one)")
    args = parser.parse_args(argv)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="class-"))
    for number in range(args.students):
        student = folder / f"Student {number:02d}_{48200 + number}_assignsubmission_file_"
        student.mkdir(parents=True, exist_ok=True)
        for stem in LESSON_ONE:
            nbformat.write(answered(stem), student / f"Copy of {stem}.ipynb")
    jobs = grader.default_jobs()
    start = time.monotonic()
    rows = grader.grade(folder)
    spent = time.monotonic() - start
    start = time.monotonic()
    again = grader.grade(folder)
    resumed = time.monotonic() - start
    points = sum(row["points"] for row in rows if row["exercise"] != "")
    assert again == rows, "a resumed run graded otherwise"
    print(f"grading-speed: {args.students * len(LESSON_ONE)} notebooks in {spent:.0f} s "
          f"({jobs} at a time, {os.cpu_count()} cores), {points} points of "
          f"{args.students * 9}; resumed in {resumed:.1f} s")


if __name__ == "__main__":
    main()
