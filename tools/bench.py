"""The stored result of `make bench`, and the chapter cell that shows it.

`make bench` (benchmarks/tnvp_speed.py) measures what TNVP's statistics add
to each chapter's real training loop, with a 95% interval and the floor of
any tracker that summarizes every batch with one kernel call, and stores it
in book/_data/bench/<name>.json with the machine, torch and date of the
run. A chapter cell marked `"bench": "<name>"` receives it as
`BENCH = {...}` from `make generate` (a chapter runs alone, in Colab too: it
cannot read the file), and the cells after it print and check it.
"""
import json
import pprint

from tools.book import DATA

RESULTS = DATA / "bench"


def results_path(name):
    return RESULTS / f"{name}.json"


def load(name):
    path = results_path(name)
    if not path.is_file():
        raise FileNotFoundError(f"no stored benchmark {name!r} ({path}): run `make bench`")
    return json.loads(path.read_text())


def save(name, data):
    path = results_path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


def bench_cell_source(name):
    """The folded cell that holds the stored benchmark `name` in a chapter."""
    data = load(name)
    literal = pprint.pformat(data, width=96, compact=True, sort_dicts=False)
    return "\n".join([
        f"# @title The stored benchmark: measured by `make bench` on torch {data['torch']}",
        f"# From book/_data/bench/{name}.json, written by benchmarks/tnvp_speed.py;",
        "# `make generate` writes this cell.",
        f"BENCH = {literal}"])
