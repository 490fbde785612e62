"""Chapter 7: TNVP on a small transformer language model's FFN neurons.

The helpers are the chapter's own `export` cells (loaded with load_exports),
the copies of chapters 4's and 5's included (tests/test_generated.py holds
the copies to their sources).
"""
import copy

import pytest
import torch

from tools.exports import load_exports

NOTEBOOK = "07_tnvp_language_model.ipynb"
ch = load_exports(NOTEBOOK)
DATA = dict(train=ch.make_corpus(0, 40000), valid=ch.make_corpus(1, 4096))
# --- the language -------------------------------------------------------------

def test_corpus_is_the_same_text_everywhere():
    words = " ".join(ch.VOCAB[t] for t in ch.make_corpus(1, 12))
    assert words == "a dog sees some big birds . the children that sleep chase"
    assert torch.equal(ch.make_corpus(0, 500), ch.make_corpus(0, 500))
    assert not torch.equal(ch.make_corpus(0, 500), ch.make_corpus(2, 500))


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10"])
def test_corpus_refuses_bad_lengths(bad):
    with pytest.raises(ValueError, match="num_tokens"):
        ch.make_corpus(0, bad)


def test_subject_and_verb_agree_in_simple_sentences():
    import random
    rng = random.Random(5)
    checked = 0
    for _ in range(300):
        words = ch.sentence(rng)
        if "that" in words:
            continue
        noun = next(i for i, w in enumerate(words)
                    if w in ch.NOUNS["sg"] + ch.NOUNS["pl"])
        number = "sg" if words[noun] in ch.NOUNS["sg"] else "pl"
        verb = words[noun + 1]
        assert verb in ch.TRANSITIVE[number] + ch.INTRANSITIVE[number], words
        checked += 1
    assert checked > 100


# --- the model ---------------------------------------------------------------

def test_model_is_causal():
    model = ch.make_lm(0).eval()
    tokens = ch.make_corpus(3, 32).view(2, 16)
    changed = tokens.clone()
    changed[:, 10:] = (changed[:, 10:] + 1) % len(ch.VOCAB)
    with torch.no_grad():
        a, b = model(tokens), model(changed)
    assert torch.allclose(a[:, :10], b[:, :10], atol=1e-6)
    assert not torch.allclose(a[:, 10:], b[:, 10:], atol=1e-3)


def test_model_refuses_a_too_long_context_and_bad_heads():
    with pytest.raises(ValueError, match="at most 16 tokens"):
        ch.make_lm(0)(torch.zeros(1, 17, dtype=torch.long))
    with pytest.raises(ValueError, match="multiple of heads"):
        ch.CausalSelfAttention(30, 4)


def test_ffn_holds_two_thirds_of_the_block_weights():
    model = ch.make_lm(0)
    attention = sum(p.numel() for b in model.blocks for p in b.attn.parameters())
    assert ch.ffn_parameters(model) > 1.9 * attention


# --- criteria and pruning ------------------------------------------------------

SMALL = dict(ch.CONFIG, warmup=4, every=2, steps=14)   # five cuts, 10 steps after


def test_neurons_to_keep_refuses_unknown_criteria_and_widths():
    ffn = ch.make_lm(0).blocks[0].ffn
    with pytest.raises(ValueError, match="unknown criterion"):
        ch.neurons_to_keep("taylor", ffn[0], ffn[2], None, 4, None)
    with pytest.raises(ValueError, match="width"):
        ch.neurons_to_keep("row_norm", ffn[0], ffn[2], None, 0, None)


def test_weight_norm_keeps_the_largest_rows():
    ffn = ch.make_lm(0).blocks[1].ffn
    keep = ch.neurons_to_keep("row_norm", ffn[0], ffn[2], None, 10, None)
    norms = ffn[0].weight.detach().norm(dim=1)
    assert keep.tolist() == sorted(norms.argsort(descending=True)[:10].tolist())


@pytest.mark.parametrize("criterion, compensate", [
    ("variance", True), ("within_batch", False), ("flap", True),
    ("row_norm", False), ("random", True)])
def test_prune_ffns_keeps_every_weight_training(criterion, compensate):
    model = ch.make_lm(1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tracker = ch.watch(ch.ActivationTracker(0.9), model)
    ch.train_steps(model, optimizer, DATA, 0, range(3), ch.CONFIG)
    diagnostics = ch.prune_ffns(model, optimizer, tracker, 20, criterion,
                                compensate, torch.Generator().manual_seed(0))
    assert len(diagnostics) == 2 and all(0 <= share < 1 for share, _ in diagnostics)
    assert [b.ffn[0].out_features for b in model.blocks] == [20, 20]
    assert [len(tracker.stats[i].mean) for i in (0, 1)] == [20, 20]
    old = [p.detach().clone() for p in model.parameters()]
    ch.train_steps(model, optimizer, DATA, 0, range(3, 4), ch.CONFIG)
    tracker.detach()
    assert ch.all_weights_updated(model, optimizer, old)


def test_the_variance_branch_cuts_to_the_schedule():
    snapshot = ch.lm_warm_up(0, SMALL, DATA)
    result = ch.run_lm_branch(snapshot, "variance", True, ch.lm_schedule(SMALL),
                              SMALL, DATA, 0)
    assert result["widths"] == [[w, w] for _, w in ch.lm_schedule(SMALL)]
    assert all(result["updated"]) and len(result["before"]) == 5
    assert [b.ffn[0].out_features for b in snapshot[0].blocks] == [128, 128]


# --- Torch-Pruning, through its own pruner ---------------------------------------

def test_ffn_pruner_cuts_only_the_ffn_to_the_schedule():
    model = ch.make_lm(0)
    schedule = ch.lm_schedule(ch.CONFIG)
    others = {name: tuple(p.shape) for name, p in model.named_parameters()
              if ".ffn." not in name}
    pruner = ch.ffn_pruner(model, schedule, ch.CONFIG["ffn_width"])
    for _, width in schedule:
        pruner.step()
        assert [b.ffn[0].out_features for b in model.blocks] == [width, width]
        assert [b.ffn[2].in_features for b in model.blocks] == [width, width]
    assert {name: tuple(p.shape) for name, p in model.named_parameters()
            if ".ffn." not in name} == others
    model(torch.zeros(2, 16, dtype=torch.long))         # still runs


@pytest.mark.parametrize("mode", list(ch.TORCH_PRUNING_MODES.values()))
def test_torch_pruning_branch_cuts_to_the_schedule_and_every_weight_trains(mode):
    snapshot = ch.lm_warm_up(1, SMALL, DATA)
    schedule = ch.lm_schedule(SMALL)
    result = ch.run_lm_torch_pruning_branch(snapshot, mode, schedule, SMALL, DATA, 1)
    assert result["widths"] == [[w, w] for _, w in schedule]
    assert len(result["updated"]) == 5 and all(result["updated"])
    optimizer, model = result["optimizer"], result["model"]
    held = [p for group in optimizer.param_groups for p in group["params"]]
    assert len(held) == len(list(model.parameters()))
    assert all(any(p is q for q in held) for p in model.parameters())
    assert [b.ffn[0].out_features for b in snapshot[0].blocks] == [128, 128]


def test_moved_adam_state_is_the_old_state_of_the_kept_neurons():
    model = ch.make_lm(3)
    pruner = ch.ffn_pruner(model, [(0, 100)], ch.CONFIG["ffn_width"])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tracker = ch.watch(ch.ActivationTracker(0.9), model)
    ch.train_steps(model, optimizer, DATA, 0, range(2), ch.CONFIG)
    old_weight = model.blocks[0].ffn[0].weight.detach().clone()
    old_moment = optimizer.state[model.blocks[0].ffn[0].weight]["exp_avg"].clone()
    ch.torch_pruning_cut(pruner, ch.ffn_layers(model), model, optimizer, tracker, False)
    tracker.detach()
    new = model.blocks[0].ffn[0].weight
    keep = [int((old_weight == row).all(1).nonzero()) for row in new.detach()]
    assert len(keep) == 100 and keep == sorted(keep)
    assert torch.equal(optimizer.state[new]["exp_avg"], old_moment[keep])


def test_torch_pruning_compensation_replaces_removed_neurons_by_their_mean():
    model = ch.make_lm(2).double()
    pruner = ch.ffn_pruner(model, [(0, 40)], ch.CONFIG["ffn_width"])
    tracker = ch.watch(ch.ActivationTracker(1.0, merge_every=1), model)
    model(DATA["train"][:16 * 16].view(16, 16))
    tracker.detach()
    ffn = copy.deepcopy(model.blocks[0].ffn)
    x = torch.randn(4, 16, 32, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        hidden = ffn[1](ffn[0](x))
    mean = tracker.stats[0].mean.clone()
    ch.torch_pruning_cut(pruner, ch.ffn_layers(model), model, None, tracker, True)
    first = model.blocks[0].ffn[0].weight.detach()
    keep = [int((ffn[0].weight.detach() == row).all(1).nonzero()) for row in first]
    removed = torch.ones(128, dtype=torch.bool)
    removed[keep] = False
    replaced = hidden.clone()
    replaced[..., removed] = mean[removed]
    with torch.no_grad():
        assert torch.allclose(model.blocks[0].ffn(x), ffn[2](replaced), atol=1e-12)


def test_move_state_refuses_a_cut_it_cannot_follow():
    model = ch.make_lm(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    before = dict(model.named_parameters())
    model.head.weight = torch.nn.Parameter(model.head.weight.detach()[:30, :20].clone())
    with pytest.raises(ValueError, match="not one dimension"):
        ch.move_optimizer_state(optimizer, before, model, torch.arange(30))


# --- the study --------------------------------------------------------------------

def test_study_plan_has_two_widths_on_the_same_steps():
    plan = ch.STUDY_PLAN
    assert plan["seeds"] >= 30 and list(plan["variants"]) == ["main", "2x width"]
    main, wide = (ch.lm_schedule(c) for c in plan["variants"].values())
    assert [s for s, _ in main] == [s for s, _ in wide]
    assert [2 * w for _, w in main][0] == wide[0][1] and wide[-1][1] == 64
    assert torch.equal(plan["data"]()["valid"], DATA["valid"])


def test_study_verdicts_declare_a_family_per_width_and_end_point():
    """Every pruned method against TNVP, compensation pairs and the other
    pairs, at each width and end point; dense against each method at the
    end; every verdict Holm-adjusted within its family."""
    from tools.study import study_data
    runs, _ = study_data("07_tnvp_language_model")
    families = ch.study_verdicts(runs)
    assert sorted(families) == sorted((v, e) for v in ch.STUDY_PLAN["variants"]
                                      for e in ch.END_POINTS)
    pruned = [n for n in [*ch.METHODS, *ch.TORCH_PRUNING_MODES] if n != "dense"]
    for (_variant, end_point), family in families.items():
        pairs = family["comparisons"]
        assert {(n, "TNVP") for n in pruned if n != "TNVP"} <= set(pairs)
        assert all(ch.comparison(family, *pair) for pair in ch.COMPENSATION_PAIRS)
        assert len({frozenset(pair) for pair in pairs}) == len(pairs)   # each one once
        assert (("dense", "TNVP") in pairs) == (end_point == "final")
        assert all(c["family"] == len(pairs) and c["p_holm"] >= c["p"]
                   for c in pairs.values())


def test_study_record_is_plain_rounded_json():
    import json
    record = ch.study_seed(0, SMALL, DATA)
    assert json.loads(json.dumps(record)) == record
    assert set(record["methods"]) == set(ch.METHODS) | set(ch.TORCH_PRUNING_MODES)
    assert record["widths_as_scheduled"] and record["every_weight_updated"]
    for name, entry in record["methods"].items():
        numbers = entry["before"] + entry["after"] + [entry["final"]]
        assert all(round(x, 6) == x for x in numbers)
        assert len(entry["after"]) == (0 if name == "dense" else 5)
        assert ("temporal" in entry) == (ch.METHODS.get(name, (None,))[0] == "variance")
    assert len(record["methods"]["TNVP"]["temporal"]) == 5 * 2


def test_compensation_replaces_removed_neurons_by_their_mean():
    torch.manual_seed(0)
    ffn = ch.make_lm(2).blocks[0].ffn.double()
    x = torch.randn(4, 16, 32, dtype=torch.float64)
    stats = ch.RunningStats(128)
    with torch.no_grad():
        hidden = ffn[1](ffn[0](x))
    stats.update(hidden.reshape(-1, 128))
    keep = torch.arange(0, 128, 3)
    pruned = copy.deepcopy(ffn)
    ch.prune_neurons(pruned[0], pruned[2], keep, mean=stats.mean)
    replaced = hidden.clone()
    removed = torch.ones(128, dtype=torch.bool)
    removed[keep] = False
    replaced[..., removed] = stats.mean[removed]
    with torch.no_grad():
        assert torch.allclose(pruned(x), ffn[2](replaced), atol=1e-12)


def test_perplexity_of_a_zero_head_is_the_vocabulary_size():
    model = ch.make_lm(0)
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
    value = ch.perplexity(model, DATA["valid"], 16)
    assert abs(value - len(ch.VOCAB)) < 1e-3
