"""The stored pruning study (tools/study.py, `make study`) is the study of
the chapters' code as it is now, and its runner caches by the right key."""
import pytest

from tools import study
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


def test_the_stored_study_cell_says_where_it_comes_from():
    source = study.study_cell_source(CHAPTERS[0])
    assert source.startswith("# @title The stored study")
    assert f"book/_generated/study/{CHAPTERS[0]}.json" in source
    namespace = {}
    exec(source, namespace)
    assert set(namespace["STUDY"]) == {"torch", "kernels", "environment", "runs"}
