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

def test_ffn_keep_refuses_unknown_criteria_and_widths():
    ffn = ch.make_lm(0).blocks[0].ffn
    with pytest.raises(ValueError, match="unknown criterion"):
        ch.ffn_keep("taylor", ffn, None, 4, None)
    with pytest.raises(ValueError, match="width"):
        ch.ffn_keep("weight_norm", ffn, None, 0, None)


def test_weight_norm_and_torch_pruning_scores():
    ffn = ch.make_lm(0).blocks[1].ffn
    keep = ch.ffn_keep("weight_norm", ffn, None, 10, None)
    norms = ffn[0].weight.detach().norm(dim=1)
    assert keep.tolist() == sorted(norms.argsort(descending=True)[:10].tolist())
    keep = ch.ffn_keep("torch_pruning", ffn, None, 10, None)
    with torch.no_grad():
        score = ffn[0].weight.square().sum(1) + ffn[2].weight.square().sum(0)
    assert keep.tolist() == sorted(score.argsort(descending=True)[:10].tolist())


@pytest.mark.parametrize("criterion, compensate", [
    ("variance", True), ("random", False), ("weight_norm", True),
    ("torch_pruning", False)])
def test_prune_ffns_keeps_every_weight_training(criterion, compensate):
    model = ch.make_lm(1)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    tracker = ch.watch(ch.ActivationTracker(0.9), model)
    ch.train_steps(model, optimizer, DATA, 0, range(3), ch.CONFIG)
    ch.prune_ffns(model, optimizer, tracker, 20, criterion, compensate,
                  torch.Generator().manual_seed(0))
    assert [b.ffn[0].out_features for b in model.blocks] == [20, 20]
    assert [len(tracker.stats[i].mean) for i in (0, 1)] == [20, 20]
    before = [p.detach().clone() for p in model.parameters()]
    ch.train_steps(model, optimizer, DATA, 0, range(3, 4), ch.CONFIG)
    tracker.detach()
    held = {id(p) for g in optimizer.param_groups for p in g["params"]}
    for p, old in zip(model.parameters(), before):
        assert id(p) in held and not torch.equal(p, old)


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
