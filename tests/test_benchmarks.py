"""The benchmark's statistics (the timings themselves stay out of the tests)."""
import math
import random

import pytest
import torch

from benchmarks.tnvp_speed import bare_kernel_tracker, interleaved, median_interval
from tools.exports import load_exports


def test_median_interval_uses_the_binomial_ranks():
    # n = 15: the 4th and 12th smallest values bound the median at 96.5%
    values = list(range(1, 16))
    random.Random(0).shuffle(values)
    assert median_interval(values) == (8, 4, 12)
    # n = 6: only the extremes do (1 - 2/64 = 96.9%)
    assert median_interval([6, 1, 5, 2, 4, 3]) == (3.5, 1, 6)


def test_median_interval_covers_the_median_at_least_95_percent_of_the_time():
    rng = random.Random(1)
    for n in (6, 15, 40):
        covered = sum(low <= 0.0 <= high for low, high in (
            median_interval([rng.gauss(0, 1) for _ in range(n)])[1:]
            for _ in range(2000)))
        assert covered / 2000 >= 0.94, (n, covered)


def test_median_interval_refuses_too_few_values_for_its_level():
    with pytest.raises(ValueError, match="5 values are too few for a 95% interval"):
        median_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    # 6 values give 96.9% but not 99%: no interval rather than a narrower one
    with pytest.raises(ValueError, match="6 values are too few for a 99% interval"):
        median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], level=0.99)
    assert median_interval(list(range(1, 9)), level=0.99)[1:] == (1, 8)


def test_interleaved_pairs_each_sample_in_time():
    calls = []

    def work(label, size):
        calls.append(label)
        sum(range(size))          # CPU time to measure

    results = interleaved(lambda: work("off", 20_000),
                          [lambda: work("on", 40_000), lambda: work("bare", 20_000)],
                          repeats=6, group=2)
    # a warm-up round, then 6 samples x 2 rounds, each round in turn
    assert calls == ["off", "on", "bare"] * 13
    assert len(results) == 2
    for result in results:
        without, with_stats, ratio, low, high = result
        assert low <= ratio <= high
        assert all(math.isfinite(x) for x in result)
    assert 1.2 < results[0][2] < 4      # twice the work takes longer, not 100x
    assert results[1][2] < results[0][2]
    assert results[0][0] == results[1][0]   # one baseline for both


def test_interleaved_needs_something_to_compare():
    with pytest.raises(ValueError, match="at least one run"):
        interleaved(lambda: None, [], repeats=6)


@pytest.mark.parametrize("notebook", ["05_variance_pruning.ipynb",
                                      "07_tnvp_language_model.ipynb"])
def test_bare_kernel_tracker_only_calls_the_kernel(notebook, monkeypatch):
    chapter = load_exports(notebook)
    summarized = []
    kernel = torch.batch_norm_update_stats

    def counting(batch, mean, variance, momentum):
        summarized.append(tuple(batch.shape))
        return kernel(batch, mean, variance, momentum)
    monkeypatch.setattr(torch, "batch_norm_update_stats", counting)
    layer = torch.nn.Linear(3, 5)
    tracker = bare_kernel_tracker(chapter.ActivationTracker)(0.9).attach(
        {"layer": layer})
    layer(torch.randn(4, 3))                 # a training batch
    layer(torch.randn(2, 6, 3))              # [batch, positions, neurons]
    layer.eval()
    layer(torch.randn(4, 3))                 # not a training batch
    tracker.detach()
    assert summarized == [(4, 5), (12, 5)]
    assert tracker.stats == {}               # the floor keeps nothing


def test_a_loop_is_stored_with_its_interval_and_floor_and_the_chapter_cell_holds_it(
        tmp_path, monkeypatch):
    from benchmarks.tnvp_speed import loop_record, machine
    from tools import bench
    record = loop_record("a loop", 15, (10.0, 10.51234, 1.051234, 1.03, 1.06),
                         (10.0, 10.4, 1.04, 1.02, 1.05))
    assert record == dict(loop="a loop", samples=15,
                          tracker=dict(without_ms=10.0, with_ms=10.5123, ratio=1.0512,
                                       low=1.03, high=1.06),
                          floor=dict(without_ms=10.0, with_ms=10.4, ratio=1.04,
                                     low=1.02, high=1.05))
    assert "logical cores" in machine()
    monkeypatch.setattr(bench, "RESULTS", tmp_path)
    with pytest.raises(FileNotFoundError, match="run `make bench`"):
        bench.bench_cell_source("tnvp_overhead")
    data = dict(torch="9.9.9", loops={"chapter 5": record})
    bench.save("tnvp_overhead", data)
    source = bench.bench_cell_source("tnvp_overhead")
    assert source.startswith("# @title The stored benchmark: measured by `make bench` "
                             "on torch 9.9.9\n")
    namespace = {}
    exec(source, namespace)
    assert namespace["BENCH"] == data
