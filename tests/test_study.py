"""The stored pruning study (tools/study.py, `make study`) is the study of
the chapters' code as it is now, and its runner caches by the right key."""
import nbformat
import pytest

from tools import study
from tools.book import BOOK, render
from tools.exports import load_exports

CHAPTERS = study.chapters_with_a_study()


def test_the_chapters_with_a_study_are_5_and_7():
    assert [stem[:2] for stem in CHAPTERS] == ["05", "07"]


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_stored_study_is_current(stem):
    """Every seed of every variant was run on the chapter's export code, the
    pins and the torch of today: `make study` would run nothing."""
    import torch
    data = study.load(stem)
    assert data, f"no stored study for {stem}: run `make study`"
    plan, missing = study.todo(stem, data, torch.__version__)
    assert missing == [], f"{len(missing)} seed runs out of date: run `make study`"
    assert data["kernels"] == study.KERNELS
    assert sorted(data["variants"]) == sorted(plan["variants"])
    for variant in plan["variants"]:
        assert len(data["variants"][variant]["seeds"]) == plan["seeds"]


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_key_changes_with_the_config_the_seed_and_the_torch(stem):
    config = load_exports(f"{stem}.ipynb").STUDY_PLAN["variants"]["main"]
    base = study.key(stem, "main", config, 0, "2.13.0")
    assert study.key(stem, "main", config, 0, "2.13.0") == base
    assert study.key(stem, "main", config, 1, "2.13.0") != base
    assert study.key(stem, "main", dict(config, lr=1.0), 0, "2.13.0") != base
    assert study.key(stem, "main", config, 0, "2.14.1") != base


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_key_follows_the_pins_that_can_change_the_numbers(stem, monkeypatch):
    """A new torch-pruning or scikit-learn changes the key; a new pin of the
    book's tooling (the grader, say) does not."""
    config = load_exports(f"{stem}.ipynb").STUDY_PLAN["variants"]["main"]
    pinned = study.pins()
    base = study.key(stem, "main", config, 0, "2.13.0")
    for name, version in (("torch-pruning", "0.0.1"), ("scikit-learn", "0.0.1")):
        assert name in pinned
        monkeypatch.setattr(study, "pins", lambda name=name, version=version: dict(pinned, **{name: version}))
        assert study.key(stem, "main", config, 0, "2.13.0") != base, name
    monkeypatch.setattr(study, "pins", lambda: dict(pinned, nbgrader="0.0.1", ruff="0.0.1"))
    assert study.key(stem, "main", config, 0, "2.13.0") == base


def chapter_helpers():
    """The namespace of chapter 5's `read-study` cell: read_study,
    live_against_stored (chapter 7 carries a copy)."""
    cell = next(c for c in nbformat.read(BOOK / f"{CHAPTERS[0]}.ipynb", 4).cells
                if c.get("id") == "read-study")
    namespace = {}
    exec(cell.source, namespace)
    return namespace


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_stored_study_cell_is_data_that_reads_back_as_the_study(stem):
    """One line per seed, and read_study gives back every number stored."""
    source = study.study_cell_source(stem)
    assert source.startswith("# @title The stored study")
    assert f"book/_data/study/{stem}.json" in source
    runs, data = study.study_data(stem)
    new, _ = study.study_data(stem, new=True)
    seeds = sum(len(seeds) for part in (runs, new) for seeds in part.values())
    assert len(source.splitlines()) == 4 + 1 + seeds + 1
    namespace = chapter_helpers()
    exec(source, namespace)
    stored = namespace["STUDY"]
    assert set(stored) == {"torch", "kernels", "environment", "runs", "new_seeds"}
    assert (stored["runs"], stored["new_seeds"], stored["torch"]) == (runs, new, data["torch"])


def test_a_live_seed_is_held_to_the_spread_of_the_stored_seeds():
    """live_against_stored passes seed 0 against itself and fails another
    seed in its place, or seed 0 with compensation broken (each method with
    compensation run as the same method without it)."""
    live_against_stored = chapter_helpers()["live_against_stored"]
    runs = study.study_data(CHAPTERS[0])[0]["main"]
    methods = {name: entry for name, entry in runs[0].items()
               if isinstance(entry, dict) and "final" in entry}
    distance, tolerance = live_against_stored(methods, runs)
    assert distance == 0 and tolerance > 0
    assert live_against_stored({n: runs[1][n] for n in methods}, runs)[0] >= tolerance
    broken = {name: dict(methods[name.replace(" + compensation", "")]) if "+ compensation" in name
              else entry for name, entry in methods.items()}
    broken["TNVP"] = dict(methods["TNVP, no compensation"])
    assert live_against_stored(broken, runs)[0] >= tolerance
    with pytest.raises(ValueError, match="other numbers"):
        live_against_stored({"TNVP": dict(methods["TNVP"], final=[1, 2])}, runs)


def chapter_after(change):
    """{path: text} of the chapters as `make generate` writes them after
    `change(chapter 4's prune-linear-pair cell)`."""
    from tools import copies
    from tools.generate import read_chapters
    chapters = read_chapters()
    cell = next(c for c in chapters[BOOK / "04_every_way_out.ipynb"].cells
                if c.get("id") == "prune-linear-pair")
    change(cell)
    return {path.stem: render(notebook)
            for path, notebook in copies.with_generated_cells(chapters).items()}


@pytest.mark.parametrize("stem", CHAPTERS)
def test_a_docstring_or_comment_leaves_the_key_a_code_change_changes_it(stem, monkeypatch):
    """A one-word change of a docstring of chapter 4, copied into the
    chapter, or a new comment, leaves the study current; a change of code
    does not."""
    config = load_exports(f"{stem}.ipynb").STUDY_PLAN["variants"]["main"]
    base = study.key(stem, "main", config, 0, "2.13.0")
    real = study.export_cells

    def key_after(change):
        text = chapter_after(change)[stem]
        monkeypatch.setattr(study, "export_cells", lambda name, _=None: real(name, text))
        try:
            return study.key(stem, "main", config, 0, "2.13.0")
        finally:
            monkeypatch.setattr(study, "export_cells", real)

    def replace(old, new):
        def change(cell):
            assert old in cell.source
            cell.source = cell.source.replace(old, new, 1)
        return change

    signature = "model=None):\n"
    assert key_after(replace("in place and atomically", "in place and at once")) == base
    assert key_after(replace(signature, signature + "    # a comment\n")) == base
    assert key_after(replace(signature, signature + "    keep = list(keep)\n")) != base
    # a definition no run reaches (a statistic for the tables) leaves it;
    # a statement outside any definition changes it
    unused = "\n\n\ndef statistic_for_a_table(values):\n    return sum(values)\n"
    assert key_after(lambda cell: setattr(cell, "source", cell.source + unused)) == base
    assert key_after(lambda cell: setattr(cell, "source", cell.source + "\nLIMIT = 3\n")) != base


@pytest.mark.parametrize("stem", CHAPTERS)
def test_the_new_seeds_are_current_and_reverse_no_verdict(stem):
    """`make study-check` stored NEW_SEEDS seeds after the study's own, on
    today's code, and no verdict of the stored study reverses on them,
    alone or pooled with the stored seeds."""
    import torch
    data = study.load(stem, new=True)
    assert data, f"no new seeds for {stem}: run `make study-check`"
    plan, missing = study.todo(stem, data, torch.__version__, new=True)
    assert missing == [], f"{len(missing)} new seed runs out of date: run `make study-check`"
    for variant in plan["variants"]:
        seeds = sorted(map(int, data["variants"][variant]["seeds"]))
        assert seeds == list(range(plan["seeds"], plan["seeds"] + study.NEW_SEEDS))
    report = study.check_new_seeds(stem)
    assert {name: r["flipped"] for against in report.values()
            for name, r in against.items() if r["flipped"]} == {}
    assert sum(r["stored"] for r in report["new"].values()) > 0


def test_compare_verdicts_tells_a_reversal_from_a_weakening():
    def families(*verdicts):
        return {"drop": {"comparisons": {(f"m{i}", "TNVP"): {"verdict": v}
                                         for i, v in enumerate(verdicts)}}}
    stored = families("lower", "higher", "indistinguishable at 40 seeds", "lower", "higher")
    new = families("lower", "indistinguishable at 10 seeds", "higher", "higher",
                   "indistinguishable at 10 seeds")
    report = study.compare_verdicts(stored, new)["drop"]
    assert report == dict(comparisons=5, stored=4, new=3, same=1, weakened=2,
                          strengthened=1, flipped=[["m3", "TNVP"]])
