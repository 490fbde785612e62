"""Chapter 5: TNVP's statistics, schedule, compensation and pruning step.

The helpers are the chapter's own `export` cells (loaded with load_exports).
"""
import copy
import re

import nbformat
import pytest
import torch
from torch import nn

from tools.book import BOOK
from tools.exports import load_exports

NOTEBOOK = "05_variance_pruning.ipynb"
ch = load_exports(NOTEBOOK)


# --- streaming statistics -------------------------------------------------

@pytest.mark.parametrize("seed", range(20))
def test_streaming_stats_equal_var_mean_of_the_concatenated_batches(seed):
    generator = torch.Generator().manual_seed(seed)
    neurons = int(torch.randint(1, 40, (), generator=generator))
    sizes = torch.randint(1, 50, (int(torch.randint(1, 8, (), generator=generator)),),
                          generator=generator).tolist()
    batches = [torch.randn(n, neurons, generator=generator, dtype=torch.float64) * 5 + 2
               for n in sizes]
    stats = ch.RunningStats(neurons)
    for batch in batches:
        stats.update(batch)
    variance, mean = torch.var_mean(torch.cat(batches), dim=0, correction=0)
    assert stats.count.item() == sum(sizes)
    assert torch.allclose(stats.mean, mean, rtol=0, atol=1e-10)
    assert torch.allclose(stats.variance, variance, rtol=1e-10, atol=1e-10)


def test_float32_batches_are_accumulated_in_float64():
    batches = [torch.rand(100, 3) for _ in range(10)]
    stats = ch.RunningStats(3)
    for batch in batches:
        stats.update(batch)
    variance, mean = torch.var_mean(torch.cat(batches).double(), dim=0, correction=0)
    assert stats.mean.dtype == torch.float64
    assert torch.allclose(stats.variance, variance, rtol=0, atol=1e-12)
    assert torch.allclose(stats.mean, mean, rtol=0, atol=1e-12)


@pytest.mark.parametrize("decay", [0.3, 0.9, 0.99])
def test_decay_gives_exponentially_weighted_statistics(decay):
    generator = torch.Generator().manual_seed(1)
    batches = [torch.randn(n, 4, generator=generator, dtype=torch.float64)
               for n in (3, 10, 1, 7, 20)]
    stats = ch.RunningStats(4, decay=decay)
    for batch in batches:
        stats.update(batch)
    weights = torch.cat([torch.full((len(b),), decay ** (len(batches) - 1 - t),
                                    dtype=torch.float64) for t, b in enumerate(batches)])
    values = torch.cat(batches)
    mean = (weights[:, None] * values).sum(0) / weights.sum()
    variance = (weights[:, None] * (values - mean) ** 2).sum(0) / weights.sum()
    assert torch.allclose(stats.mean, mean, rtol=0, atol=1e-12)
    assert torch.allclose(stats.variance, variance, rtol=0, atol=1e-12)


def test_keep_only_keeps_the_statistics_of_the_kept_neurons():
    batch = torch.randn(30, 6, dtype=torch.float64)
    stats = ch.RunningStats(6)
    stats.update(batch)
    stats.keep_only(torch.tensor([1, 4]))
    variance, mean = torch.var_mean(batch[:, [1, 4]], dim=0, correction=0)
    assert torch.allclose(stats.mean, mean) and torch.allclose(stats.variance, variance)
    stats.update(torch.randn(5, 2, dtype=torch.float64))   # the new width is accepted


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_neurons=0), "num_neurons"), (dict(num_neurons=2.0), "num_neurons"),
    (dict(num_neurons=True), "num_neurons"),
    (dict(num_neurons=3, decay=0.0), "decay"), (dict(num_neurons=3, decay=1.5), "decay"),
])
def test_running_stats_refuses_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ch.RunningStats(**kwargs)


def test_running_stats_refuses_bad_batches_and_unchanged_on_error():
    stats = ch.RunningStats(3)
    with pytest.raises(RuntimeError, match="no batch"):
        stats.variance  # noqa: B018  (the property raises)
    for bad in (torch.randn(4, 2), torch.randn(3), torch.randn(0, 3)):
        with pytest.raises(ValueError, match=r"\[batch, 3\]"):
            stats.update(bad)
    assert stats.count.item() == 0 and torch.equal(stats.mean, torch.zeros(3).double())


def test_tracker_records_training_batches_only_and_detaches():
    layer = nn.ReLU()
    tracker = ch.ActivationTracker(decay=1.0).attach({"h": layer})
    layer.eval()
    layer(torch.randn(5, 3))
    assert "h" not in tracker.stats
    layer.train()
    layer(torch.randn(5, 3))
    assert tracker.stats["h"].count.item() == 5
    with pytest.raises(RuntimeError, match="already attached"):
        tracker.attach({"h": layer})
    tracker.detach()
    layer(torch.randn(5, 3))
    assert tracker.stats["h"].count.item() == 5
    with pytest.raises(ValueError, match="decay"):
        ch.ActivationTracker(decay=0)


# --- schedule ---------------------------------------------------------------

def test_schedule_of_the_chapter():
    assert ch.pruning_schedule(256, 32, 0.25, 8, 2) == [
        (8, 192), (10, 144), (12, 108), (14, 81), (16, 60), (18, 45), (20, 33), (22, 32)]
    assert ch.pruning_schedule(256, 32, 0.5, 0, 3) == [(0, 128), (3, 64), (6, 32)]
    assert ch.pruning_schedule(32, 32, 0.5, 0, 1) == []


@pytest.mark.parametrize("start, target, fraction", [
    (256, 32, 0.25), (100, 1, 0.01), (10, 9, 0.9), (1000, 3, 0.7), (7, 1, 0.5)])
def test_schedule_shrinks_strictly_to_the_target_on_time(start, target, fraction):
    schedule = ch.pruning_schedule(start, target, fraction, warmup=5, every=3)
    epochs, widths = zip(*schedule)
    assert list(epochs) == [5 + 3 * i for i in range(len(schedule))]
    assert widths[-1] == target
    assert all(a > b for a, b in zip((start,) + widths, widths))
    assert all(b >= max(target, int((a * (1 - fraction)) // 1))
               for a, b in zip((start,) + widths, widths))


@pytest.mark.parametrize("args, message", [
    ((256, 32, 0.0, 8, 2), "fraction"), ((256, 32, 1.0, 8, 2), "fraction"),
    ((256, 32, -0.1, 8, 2), "fraction"), ((256, 32, 1.5, 8, 2), "fraction"),
    ((256, 32, "0.5", 8, 2), "fraction"),
    ((256, 0, 0.5, 8, 2), "target_width"), ((256, -3, 0.5, 8, 2), "target_width"),
    ((256, 2.5, 0.5, 8, 2), "target_width"), ((16, 32, 0.5, 8, 2), "start_width"),
    ((256, 32, 0.5, -1, 2), "warmup"), ((256, 32, 0.5, 8, 0), "every"),
    ((256, 32, 0.5, 8, True), "every"),
])
def test_schedule_refuses_bad_arguments(args, message):
    with pytest.raises(ValueError, match=message):
        ch.pruning_schedule(*args)


# --- compensation and the pruning step --------------------------------------

@pytest.mark.parametrize("seed", range(10))
def test_compensation_equals_dense_with_removed_neurons_replaced_by_their_mean(seed):
    torch.manual_seed(seed)
    n_in, hidden, n_out = torch.randint(1, 20, (3,)).tolist()
    hidden += 1
    dense = nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))
    x = torch.randn(64, n_in)
    with torch.no_grad():
        activations = dense[1](dense[0](x))
    stats = ch.RunningStats(hidden)
    stats.update(activations)
    keep = torch.randperm(hidden)[:max(1, hidden // 2)].sort().values
    removed = torch.ones(hidden, dtype=torch.bool)
    removed[keep] = False
    pruned = copy.deepcopy(dense)
    ch.prune_neurons(pruned[0], pruned[2], keep, mean=stats.mean)
    replaced = activations.clone()
    replaced[:, removed] = stats.mean[removed].float()
    with torch.no_grad():
        assert torch.allclose(pruned(x), dense[2](replaced), rtol=0, atol=1e-5)


def test_a_constant_neuron_is_pruned_without_changing_the_output():
    torch.manual_seed(3)
    dense = nn.Sequential(nn.Linear(5, 4), nn.ReLU(), nn.Linear(4, 2)).double()
    with torch.no_grad():
        dense[0].weight[1] = 0.0
        dense[0].bias[1] = 1.25
    x = torch.randn(50, 5, dtype=torch.float64)
    stats = ch.RunningStats(4)
    with torch.no_grad():
        stats.update(dense[1](dense[0](x)))
    assert stats.variance[1].item() == 0.0
    pruned = copy.deepcopy(dense)
    ch.prune_neurons(pruned[0], pruned[2], [0, 2, 3], mean=stats.mean)
    uncompensated = copy.deepcopy(dense)
    ch.prune_neurons(uncompensated[0], uncompensated[2], [0, 2, 3])
    with torch.no_grad():
        assert torch.allclose(pruned(x), dense(x), rtol=0, atol=1e-14)
        assert not torch.allclose(uncompensated(x), dense(x), atol=1e-3)


def snapshot(model):
    return [(name, p, p.detach().clone()) for name, p in model.named_parameters()]


def unchanged(model, before):
    return all(p is q and torch.equal(q, old) for (_, p, old), (_, q) in
               zip(before, model.named_parameters()))


@pytest.mark.parametrize("keep, mean, error", [
    ([0, 0, 1], None, ValueError), ([], None, ValueError), ([0, 9], None, ValueError),
    ([0.5], None, TypeError), ([0, 1], torch.zeros(3), ValueError),
])
def test_bad_prunes_raise_and_leave_the_model_untouched(keep, mean, error):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    optimizer = torch.optim.Adam(model.parameters())
    before = snapshot(model)
    with pytest.raises(error):
        ch.prune_neurons(model[0], model[2], keep, optimizer, mean)
    assert unchanged(model, before)
    assert model[0].out_features == 4


def test_neurons_to_keep_refuses_unknown_criteria_and_widths():
    first, second = nn.Linear(3, 5), nn.Linear(5, 2)
    with pytest.raises(ValueError, match="unknown criterion"):
        ch.neurons_to_keep("taylor", first, second, None, 2, None)
    with pytest.raises(ValueError, match="width"):
        ch.neurons_to_keep("row_norm", first, second, None, 0, None)
    keep = ch.neurons_to_keep("row_norm", first, second, None, 2, None)
    norms = first.weight.detach().norm(dim=1)
    assert keep.tolist() == sorted(norms.argsort(descending=True)[:2].tolist())


def stats_with(variance, within):
    """A RunningStats whose variance and within-batch part are given."""
    stats = ch.RunningStats(len(variance))
    stats.count = torch.tensor(1.0, dtype=torch.float64)
    stats.sum_sq = torch.tensor(variance, dtype=torch.float64)
    stats.within_sq = torch.tensor(within, dtype=torch.float64)
    return stats


def test_flap_scores_variance_times_the_outgoing_column_squared():
    first, second = nn.Linear(3, 4), nn.Linear(4, 2)
    with torch.no_grad():
        second.weight.copy_(torch.tensor([[1.0, 0.0, 3.0, 0.5], [0.0, 0.1, 4.0, 0.5]]))
    stats = stats_with([1.0, 4.0, 0.01, 2.0], [1.0, 4.0, 0.01, 2.0])
    scores = ch.neuron_scores("flap", first, second, stats, None)
    assert torch.allclose(scores, torch.tensor([1.0, 0.04, 0.25, 1.0], dtype=torch.float64))
    # neuron 1 varies most but carries little on: FLAP removes it, TNVP keeps it
    assert ch.neurons_to_keep("flap", first, second, stats, 3, None).tolist() == [0, 2, 3]
    assert ch.neurons_to_keep("variance", first, second, stats, 3, None).tolist() == [0, 1, 3]


def test_temporal_part_reports_the_share_and_the_changed_neurons():
    same = stats_with([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0])
    assert ch.temporal_part(same, torch.tensor([2, 3])) == (0.0, 0)
    # neuron 0's variance is all temporal: by the within-batch part it goes
    drifting = stats_with([5.0, 2.0, 3.0, 4.0], [0.0, 2.0, 3.0, 4.0])
    share, changed = ch.temporal_part(drifting, torch.tensor([0, 3]))
    assert changed == 1 and share == pytest.approx(0.0)


def test_paired_gives_the_t_interval_and_the_p_of_the_differences():
    from scipy import stats
    c = ch.paired([1.0, 2.0, 3.0, 4.0], [0.0, 1.5, 2.0, 4.5])
    differences = [1.0, 0.5, 1.0, -0.5]
    mean = sum(differences) / 4
    sd = (sum((d - mean) ** 2 for d in differences) / 3) ** 0.5
    half = 3.182446305284263 * sd / 2          # t(0.975, 3 degrees of freedom)
    assert c["mean"] == pytest.approx(mean)
    assert (c["low"], c["high"]) == pytest.approx((mean - half, mean + half))
    assert (c["lower"], c["ties"], c["n"]) == (1, 0, 4)
    assert c["p"] == pytest.approx(stats.ttest_rel([1.0, 2.0, 3.0, 4.0],
                                                   [0.0, 1.5, 2.0, 4.5]).pvalue)
    assert ch.paired([1.0, 2.0], [1.0, 2.0])["p"] == 1.0        # no difference at all
    assert ch.paired([1.0, 2.0], [0.0, 1.0])["p"] == 0.0        # the same one every seed
    with pytest.raises(ValueError, match="equally long"):
        ch.paired([1.0, 2.0], [1.0])


def test_holm_multiplies_the_sorted_p_values_step_down():
    assert ch.holm([0.01, 0.04, 0.03, 0.5]) == pytest.approx([0.04, 0.09, 0.09, 0.5])
    assert ch.holm([0.3, 0.9]) == pytest.approx([0.6, 0.9])
    assert ch.holm([0.02]) == [0.02]
    assert ch.holm([0.5, 0.6, 0.7]) == [1.0, 1.0, 1.0]             # never above 1


def test_a_verdict_is_the_holm_adjusted_one_of_its_family():
    clear = ch.paired([0.0, 0.1, 0.2], [1.0, 1.2, 1.1])          # p about 0.003
    with pytest.raises(ValueError, match="Holm-adjusted"):
        ch.verdict(clear)
    alone = ch.holm_family({("a", "b"): clear}, "the drop")
    assert alone["comparisons"]["a", "b"]["verdict"] == "lower"
    higher = ch.paired([2.0, 2.1, 2.3], [1.0, 1.2, 1.1])
    assert ch.holm_family({("a", "b"): higher}, "x")["comparisons"]["a", "b"]["verdict"] == "higher"
    # the same comparison among nineteen others is no longer a verdict
    noise = ch.paired([1.0, 2.0, 3.0], [1.5, 1.5, 3.5])
    crowd = {("a", "b"): clear, **{(f"m{i}", "b"): noise for i in range(19)}}
    family = ch.holm_family(crowd, "the drop")
    assert family["comparisons"]["a", "b"]["p_holm"] == pytest.approx(20 * clear["p"])
    assert family["comparisons"]["a", "b"]["verdict"] == "indistinguishable at 3 seeds"
    assert family["comparisons"]["a", "b"]["family"] == 20
    with pytest.raises(ValueError, match="at least one"):
        ch.holm_family({}, "the drop")
    with pytest.raises(ValueError, match="in both orders"):
        ch.holm_family({("a", "b"): clear, ("b", "a"): clear}, "the drop")
    assert ch.once([("a", "b"), ("c", "b"), ("b", "a"), ("a", "b")]) == [("a", "b"), ("c", "b")]


def test_the_power_rule_and_the_recommendation():
    from scipy import stats
    # 1.96 + 0.84 standard errors, with t's quantiles at 39 degrees of freedom
    assert ch.detectable(1.0, 40, 1) == pytest.approx(
        (stats.t.ppf(0.975, 39) + stats.t.ppf(0.8, 39)) / 40 ** 0.5)
    assert ch.detectable(1.0, 40, 25) > ch.detectable(1.0, 40, 1)   # Holm's strictest level
    n = ch.seeds_needed(1.0, 0.5, 25)
    assert ch.detectable(1.0, n, 25) <= 0.5 < ch.detectable(1.0, n - 1, 25)
    down, up, same = ([0.0, 0.1, 0.2], [1.0, 1.2, 1.1]), ([2.0, 2.1, 2.3], [1.0, 1.2, 1.1]), (
        [1.0, 2.0, 3.0], [1.5, 1.5, 3.5])
    family = ch.holm_family({("a", "T"): ch.paired(*down), ("b", "T"): ch.paired(*same),
                             ("dense", "T"): ch.paired(*up)}, "x")
    assert ch.recommendation(family, "lower", ["a", "b"], "T") == (
        "On x: 1 of 2 methods are better than T by a verdict (a): choose among them, which "
        "the family does not rank; worse than T: 0.")
    assert ch.recommendation(family, "higher", ["a", "b"], "T") == (
        "On x: T, or one of the 1 methods indistinguishable from it (b); worse than T: 1.")


def test_say_renders_a_declared_comparison_and_nothing_else():
    families = {"drop": ch.holm_family(
        {("a", "b"): ch.paired([0.0, 0.1, 0.2], [1.0, 1.2, 1.1]),
         ("c", "b"): ch.paired([1.0, 2.0, 3.0], [1.5, 1.5, 3.5])}, "the drop", " points")}
    assert ch.say(families, "a", "b", "drop") == (
        "On the drop, a is lower than b (a minus b: -1.00 points [-1.25, -0.75] unadjusted "
        "95%, Holm-adjusted p = 0.007 in a family of 2, 3 seeds).")
    assert ch.say(families, "b", "a", "drop") == (   # the same comparison, read backwards
        "On the drop, b is higher than a (b minus a: +1.00 points [+0.75, +1.25] unadjusted "
        "95%, Holm-adjusted p = 0.007 in a family of 2, 3 seeds).")
    assert ch.comparison(families["drop"], "b", "a")["lower"] == 0
    assert ch.say(families, "c", "b", "drop").startswith(
        "On the drop, c and b are indistinguishable at 3 seeds (c minus b: -0.17 points")
    with pytest.raises(ValueError, match="not in the declared family"):
        ch.say(families, "a", "c", "drop")
    with pytest.raises(ValueError, match="no declared family"):
        ch.say(families, "a", "b", "final")


@pytest.mark.parametrize("criterion, compensate", [
    ("variance", True), ("variance", False), ("random", False), ("row_norm", True)])
def test_a_prune_step_during_training_keeps_every_weight_training(criterion, compensate):
    model = ch.make_mlp(0, hidden=16)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    tracker = ch.ActivationTracker(0.9).attach(
        {pair: model[act] for pair, (_, _, act) in enumerate(ch.PAIRS)})
    x, y = torch.randn(40, 64), torch.randint(0, 10, (40,))
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    old_loss = nn.functional.cross_entropy(model(x), y)   # a graph left alive
    ch.prune_step(model, optimizer, tracker, 5, criterion, compensate,
                  torch.Generator().manual_seed(0))
    assert ch.widths(model) == [5, 5]
    assert [len(tracker.stats[p].mean) for p in (0, 1)] == [5, 5]
    loss = nn.functional.cross_entropy(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.step()
    assert ch.every_weight_updated(model, optimizer, before)
    assert old_loss.grad_fn is not None


def test_every_weight_updated_catches_a_parameter_the_optimizer_lost():
    model = ch.make_mlp(0, hidden=8)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model[0].weight = nn.Parameter(model[0].weight.detach().clone())   # test3's trap
    nn.functional.cross_entropy(model(torch.randn(4, 64)), torch.tensor([1, 2, 3, 4])
                                ).backward()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.step()
    assert not ch.every_weight_updated(model, optimizer, before)


def test_speed_line_format():
    rows = [(1024, 10.0, 2.5, 10.1, 4.0, 3.87, 0.99)]
    last = ch.format_speed_table(rows).splitlines()[-1]
    assert re.fullmatch(r"tnvp-speed: batch 1024 measured \d+\.\d\dx ideal \d+\.\d\dx "
                        r"ratio \d+\.\d\d", last), last
    assert last == "tnvp-speed: batch 1024 measured 4.00x ideal 3.87x ratio 1.03"


# --- the notebook itself ------------------------------------------------------

def test_timing_cells_are_excluded_from_comparison_and_hold_no_assert():
    notebook = nbformat.read(BOOK / NOTEBOOK, as_version=4)
    timing = [c for c in notebook.cells if c.cell_type == "code"
              and "speed_table(" in c.source and "def " not in c.source]
    assert timing, "no cell shows the speed table"
    for cell in timing:
        assert cell.source.startswith("# NBVAL_IGNORE_OUTPUT")
        assert "assert" not in cell.source


@pytest.mark.parametrize("keep", [[0, 9], [0, -9]])
def test_out_of_range_keep_raises_value_error_with_or_without_mean(keep):
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    before = snapshot(model)
    for mean in (None, torch.zeros(4)):
        with pytest.raises(ValueError, match="out of range"):
            ch.prune_neurons(model[0], model[2], keep, None, mean)
        assert unchanged(model, before)


# --- buffered statistics and the Torch-Pruning peer ----------------------------

@pytest.mark.parametrize("decay", [1.0, 0.9, 0.3])
def test_update_many_equals_update_in_turn(decay):
    generator = torch.Generator().manual_seed(2)
    batches = [torch.randn(n, 6, generator=generator, dtype=torch.float64) * 2 + 1
               for n in (4, 9, 1, 12, 7)]
    one, many = ch.RunningStats(6, decay), ch.RunningStats(6, decay)
    one.update(batches[0])
    many.update(batches[0])
    for batch in batches[1:]:
        one.update(batch)
    counts = torch.tensor([float(len(b)) for b in batches[1:]])
    means = torch.stack([b.mean(0) for b in batches[1:]])
    sum_sqs = torch.stack([(b - b.mean(0)).square().sum(0) for b in batches[1:]])
    many.update_many(counts, means, sum_sqs)
    assert torch.allclose(one.count, many.count, rtol=1e-14)
    assert torch.allclose(one.mean, many.mean, rtol=0, atol=1e-12)
    assert torch.allclose(one.variance, many.variance, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("counts, means, sum_sqs", [
    (torch.tensor([]), torch.zeros(0, 3), torch.zeros(0, 3)),
    (torch.tensor([2.0, 0.0]), torch.zeros(2, 3), torch.zeros(2, 3)),
    (torch.tensor([2.0]), torch.zeros(1, 4), torch.zeros(1, 3)),
    (torch.tensor([2.0]), torch.zeros(1, 3), torch.zeros(2, 3)),
])
def test_update_many_refuses_bad_summaries_and_changes_nothing(counts, means, sum_sqs):
    stats = ch.RunningStats(3)
    with pytest.raises(ValueError):
        stats.update_many(counts, means, sum_sqs)
    assert stats.count.item() == 0 and torch.equal(stats.mean, torch.zeros(3).double())


@pytest.mark.parametrize("merge_every", [1, 3, 16])
def test_buffered_tracker_matches_merging_each_batch_in_float64(merge_every):
    layer = nn.ReLU()
    reference = ch.ActivationTracker(0.9, merge_every=1).attach({"h": layer})
    buffered = ch.ActivationTracker(0.9, merge_every=merge_every).attach({"h2": layer})
    generator = torch.Generator().manual_seed(0)
    # the batch size changes, and one batch has one row (no unbiased variance)
    for size in (8, 8, 8, 5, 8, 1, 8, 8, 8, 3):
        layer(torch.randn(size, 2, 7, generator=generator) + 0.3)   # 3-D output
    exact, fast = reference.stats["h"], buffered.stats["h2"]
    assert exact.count.item() == pytest.approx(fast.count.item(), rel=1e-12)
    assert torch.allclose(exact.mean, fast.mean, rtol=0, atol=1e-6)
    assert torch.allclose(exact.variance, fast.variance, rtol=1e-5, atol=1e-9)
    buffered.detach()
    assert all(used == 0 for _, used in buffered._buffers.values())
    reference.detach()


def test_batched_tracker_keeps_two_numbers_per_neuron_and_batch_not_the_batch():
    layer = nn.ReLU()
    tracker = ch.ActivationTracker(0.9, merge_every=16).attach({"h": layer})
    layer(torch.randn(512, 7))
    (means, variances, *_), used = tracker._buffers["h"]
    assert used == 1
    assert means.shape == variances.shape == (16, 7)
    tracker.detach()


def test_batched_tracker_takes_half_precision_outputs():
    layer = nn.ReLU()
    reference = ch.ActivationTracker(0.9, merge_every=1).attach({"h": layer})
    batched = ch.ActivationTracker(0.9, merge_every=4).attach({"h2": layer})
    generator = torch.Generator().manual_seed(1)
    for _ in range(6):
        layer((torch.randn(32, 5, generator=generator) + 0.3).to(torch.bfloat16))
    exact, fast = reference.stats["h"], batched.stats["h2"]
    assert torch.allclose(exact.variance, fast.variance, rtol=1e-5, atol=1e-9)
    reference.detach(), batched.detach()


def test_batch_of_another_size_takes_the_next_row_and_keeps_the_tables():
    layer = nn.ReLU()
    tracker = ch.ActivationTracker(0.9, merge_every=16).attach({"h": layer})
    generator = torch.Generator().manual_seed(2)
    layer(torch.randn(128, 7, generator=generator))
    (means, *_), _ = tracker._buffers["h"]
    for size in (128, 67, 128, 1, 128):     # an epoch's end, then the next one
        layer(torch.randn(size, 7, generator=generator))
    (means_after, *_), used = tracker._buffers["h"]
    assert means_after is means and used == 6     # nothing merged, no new table
    assert "h" not in tracker._stats
    assert tracker.stats["h"].count.item() == pytest.approx(
        sum(0.9 ** (5 - i) * n for i, n in enumerate((128, 128, 67, 128, 1, 128))))
    tracker.stats["h"].keep_only(torch.arange(5))      # a prune: a new width
    layer(torch.randn(128, 5, generator=generator))
    (means_new, *_), used = tracker._buffers["h"]
    assert means_new is not means and means_new.shape == (16, 5) and used == 1
    tracker.detach()
    assert tracker.stats["h"].count.item() > 128 and len(tracker.stats["h"].mean) == 5


def test_buffered_tracker_within_float32_rounding_with_a_short_batch():
    """The chapter's check: 26 batches, one of 67 rows, decay 0.9."""
    relu = nn.ReLU()
    one_by_one = ch.ActivationTracker(decay=0.9, merge_every=1).attach({"h": relu})
    buffered = ch.ActivationTracker(decay=0.9).attach({"h": relu})
    generator = torch.Generator().manual_seed(0)
    for size in [128] * 20 + [67] + [128] * 5:
        relu(torch.randn(size, 40, generator=generator) + 0.5)
    exact, fast = one_by_one.stats["h"], buffered.stats["h"]
    relative = ((fast.variance - exact.variance).abs() / exact.variance).max()
    assert torch.allclose(fast.count, exact.count, rtol=1e-12)
    assert torch.allclose(fast.mean, exact.mean, rtol=0, atol=1e-6)
    assert relative.item() < 1e-6
    one_by_one.detach(), buffered.detach()


def test_buffered_tracker_makes_the_pruning_decisions_of_merging_every_batch():
    """Seed 0's TNVP branch, as the chapter runs it: the warm-up watched by
    the default tracker and by the float64 reference (merge_every=1) at
    once, then the branch from each; every cut keeps the same neurons."""
    config = dict(hidden=256, target_width=32, fraction=0.25, warmup=8,
                  every=2, epochs=30, batch_size=128, lr=5e-3, decay=0.9)
    schedule = ch.pruning_schedule(config["hidden"], config["target_width"],
                                   config["fraction"], config["warmup"],
                                   config["every"])
    data, seed = ch.load_digit_data(), 0
    assert len(data["y_train"]) % config["batch_size"] == 67  # a short batch
    model = ch.make_mlp(seed, config["hidden"])
    optimizer = torch.optim.Adam(model.parameters(), lr=config["lr"])
    modules = {pair: model[act] for pair, (_, _, act) in enumerate(ch.PAIRS)}
    buffered = ch.ActivationTracker(config["decay"]).attach(modules)
    reference = ch.ActivationTracker(config["decay"], merge_every=1).attach(modules)
    for epoch in range(config["warmup"]):
        ch.train_epoch(model, optimizer, data, epoch, seed, config["batch_size"])
    buffered.detach(), reference.detach()
    for pair in modules:
        exact, fast = reference.stats[pair], buffered.stats[pair]
        alive = exact.variance > 0
        assert torch.equal(fast.variance[~alive], exact.variance[~alive])
        relative = ((fast.variance - exact.variance)[alive].abs()
                    / exact.variance[alive]).max()
        assert relative.item() < 1e-5
    runs = [ch.run_branch((model, optimizer, tracker), "variance", True,
                          schedule, config, data, seed)
            for tracker in (reference, buffered)]
    cuts = [[keep for cut in run["cuts"] for _, keep, _ in cut.values()]
            for run in runs]
    assert len(cuts[0]) == len(cuts[1]) == len(schedule) * len(ch.PAIRS)
    assert all(torch.equal(a, b) for a, b in zip(*cuts))
    for counts in ("before", "after", "final"):
        assert runs[0][counts] == runs[1][counts]


@pytest.mark.parametrize("merge_every", [0, -1, 2.0, True])
def test_tracker_refuses_bad_merge_every(merge_every):
    with pytest.raises(ValueError, match="merge_every"):
        ch.ActivationTracker(0.9, merge_every=merge_every)


def torch_pruning_setup(hidden=16):
    """A trained step of chapter 5's MLP, its tracker with statistics, and
    Torch-Pruning's pruner for the schedule 16 -> 12 -> 8."""
    model = ch.make_mlp(0, hidden=hidden)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    pruner = ch.torch_pruning_pruner(model, [(0, 12), (1, 8)], hidden)
    tracker = ch.watch_hidden(ch.ActivationTracker(0.9), model)
    x, y = torch.randn(40, 64), torch.randint(0, 10, (40,))
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    return model, optimizer, pruner, tracker, x, y


def test_torch_pruning_pruner_cuts_to_the_schedule_and_moved_state_trains():
    model, optimizer, pruner, tracker, x, y = torch_pruning_setup()
    for width in (12, 8):
        ch.torch_pruning_cut(pruner, ch.mlp_layers(model), model, optimizer, tracker, compensate=False)
        assert ch.widths(model) == [width, width]
        assert [len(tracker.stats[p].mean) for p in (0, 1)] == [width, width]
    assert model[4].out_features == 10                  # the classifier is left alone
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.step()
    assert ch.every_weight_updated(model, optimizer, before)


def test_torch_pruning_with_compensation_folds_the_removed_means_in():
    model, optimizer, pruner, tracker, x, y = torch_pruning_setup()
    mean = tracker.stats[1].mean.clone()                # the second hidden layer
    old_weight, old_bias = model[4].weight.detach().clone(), model[4].bias.detach().clone()
    ch.torch_pruning_cut(pruner, ch.mlp_layers(model), model, optimizer, tracker, compensate=True)
    kept = [j for j in range(16) if any(torch.equal(model[4].weight[:, k], old_weight[:, j])
                                        for k in range(12))]
    removed = sorted(set(range(16)) - set(kept))
    assert len(removed) == 4
    expected = old_bias + (old_weight[:, removed].double() @ mean[removed]).float()
    assert torch.allclose(model[4].bias.detach(), expected, atol=1e-6)


def test_torch_pruning_without_moving_the_state_leaves_the_optimizer_stale():
    model, optimizer, pruner, tracker, x, y = torch_pruning_setup()
    ch.torch_pruning_cut(pruner, ch.mlp_layers(model), model, None, tracker, compensate=False)
    nn.functional.cross_entropy(model(x), y).backward()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer.step()
    assert not ch.every_weight_updated(model, optimizer, before)


def test_move_optimizer_state_refuses_a_wrong_keep_and_changes_nothing():
    import torch_pruning as tp
    model = ch.make_mlp(0, hidden=8)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    nn.functional.cross_entropy(model(torch.randn(4, 64)),
                                torch.tensor([1, 2, 3, 4])).backward()
    optimizer.step()
    before = dict(model.named_parameters())
    graph = tp.DependencyGraph().build_dependency(model, example_inputs=torch.zeros(1, 64))
    graph.get_pruning_group(model[2], tp.prune_linear_out_channels, idxs=[0, 1]).prune()
    params = [list(g["params"]) for g in optimizer.param_groups]
    state = {id(p): s for p, s in optimizer.state.items()}
    with pytest.raises(ValueError, match="one dimension cut to 5"):
        ch.move_optimizer_state(optimizer, before, model, torch.arange(5))
    assert all(a is b for g, old in zip(optimizer.param_groups, params)
               for a, b in zip(g["params"], old))
    assert {id(p): s for p, s in optimizer.state.items()} == state


def test_overhead_line_format():
    line = ch.overhead_line("mlp", 1.0, 1.05, 1.05)
    assert re.fullmatch(r"tnvp-overhead: .* ratio \d+\.\d\d", line), line


@pytest.mark.parametrize("decay", [1.0, 0.8])
def test_within_variance_is_the_weighted_mean_of_the_batch_variances(decay):
    """Law of total variance: variance = within-batch part + the part of
    the moving batch means; `update` and `update_many` agree on it."""
    generator = torch.Generator().manual_seed(3)
    batches = [torch.randn(n, 4, generator=generator, dtype=torch.float64) * s + m
               for n, s, m in ((6, 1.0, 0.0), (9, 2.0, 3.0), (5, 0.5, -1.0))]
    one, many = ch.RunningStats(4, decay), ch.RunningStats(4, decay)
    for batch in batches:
        one.update(batch)
    many.update_many(torch.tensor([6.0, 9.0, 5.0]),
                     torch.stack([b.mean(0) for b in batches]),
                     torch.stack([b.var(0, correction=0) * len(b) for b in batches]))
    weights = [decay ** (len(batches) - 1 - t) * len(b) for t, b in enumerate(batches)]
    expected = sum(w * b.var(0, correction=0) for w, b in zip(weights, batches)) / sum(weights)
    for stats in (one, many):
        assert torch.allclose(stats.within_variance, expected, rtol=1e-12, atol=0)
        assert (stats.variance >= stats.within_variance - 1e-12).all()
    one.keep_only(torch.tensor([0, 2]))
    assert torch.allclose(one.within_variance, expected[[0, 2]], rtol=1e-12, atol=0)


def test_torch_pruning_leaves_a_traced_model_in_eval_mode_and_the_helper_restores_it():
    """Why torch_pruning_pruner calls model.train(): the library's tracing
    leaves the model in eval mode, where the tracker records nothing."""
    import torch_pruning as tp
    model = ch.make_mlp(0, hidden=8)
    tp.pruner.BasePruner(model, example_inputs=torch.zeros(1, 64),
                         importance=tp.importance.GroupMagnitudeImportance(p=2),
                         ignored_layers=[model[-1]])
    assert not model.training
    model = ch.make_mlp(0, hidden=8)
    ch.torch_pruning_pruner(model, [(0, 6)], 8)
    assert model.training
