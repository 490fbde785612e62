"""Inference speed of dense vs TNVP-pruned vs mask-pruned MLPs (`make bench`).

Runs the timing helpers defined in book/05_variance_pruning.ipynb (its `export`
cells), so the chapter and this benchmark time the very same models: a
64 -> 2048 -> 2048 -> 10 MLP, cut to 1024 neurons per hidden layer by TNVP
(physically) or by torch.nn.utils.prune.ln_structured (masks), at batch sizes
1, 64 and 1024, with torch.utils.benchmark on one thread. The last line reads
`tnvp-speed: batch 1024 measured X.XXx ideal Y.YYx ratio Z.ZZ`, where ideal is
the ratio of multiply-accumulates and ratio = measured / ideal.

Then what TNVP's statistics cost during training, printed as
`tnvp-overhead: <what> ... ratio R` (R = time with statistics / without):

- one training step on a fixed batch, hooks on against off (chapter 5's
  `training_step_overhead`: alternating blocks, median CPU time of this
  thread), on chapter 5's MLP and on chapter 7's transformer language model;
- each chapter's own training loop, on two copies of the same model
  trained side by side, one with the chapter's ActivationTracker attached
  for the whole run and one without hooks, alternating: chapter 5's
  `train_epoch` over the digits (10 batches of 128 and a last one of 67),
  epoch by epoch, the tracker (decay 0.9) on the two ReLUs; chapter 7's
  `train_steps` in blocks of 64 steps, the tracker attached by its `watch`
  on the GELU of each block's FFN. Each sample holds as many merges of 64
  summaries as any other (64 epochs of chapter 5, one block of chapter 7).
  The ratio is the median over samples of each sample's ratio of this
  thread's CPU time with and without, the two measured in the same stretch
  of time; the line gives its distribution-free 95% interval
  (`median_interval`), so "at most 1.05" can be read off the upper end.

PyTorch's CPU kernels are held at the AVX2 level the project uses for
everything (the variables are set here unless the environment sets them),
and torch runs one thread.
"""
import os

from tools.book import CPU_KERNELS

for _name, _value in CPU_KERNELS.items():
    os.environ.setdefault(_name, _value)   # read when torch starts

import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from tools.exports import load_exports  # noqa: E402


def median_interval(values, level=0.95):
    """(median, low, high): the sample median and a distribution-free
    interval for the median, the order statistics whose ranks a Binomial(n,
    1/2) puts outside with probability at most 1 - level (at level 0.95 it
    needs n >= 6)."""
    values = sorted(values)
    n = len(values)
    tail = (1 - level) / 2
    # the largest j with P(Binomial(n, 1/2) < j) <= tail: [x_(j), x_(n+1-j)]
    j, below = 0, 0.0
    while j < n and below + math.comb(n, j) / 2 ** n <= tail:
        below += math.comb(n, j) / 2 ** n
        j += 1
    if j == 0:
        raise ValueError(f"{n} values are too few for a {level:.0%} interval "
                         "of the median")
    return statistics.median(values), values[j - 1], values[n - j]


def interleaved(run_off, run_on, repeats, group=1):
    """(ms without, ms with, ratio, low, high): `run_off()` and `run_on()`
    called alternately, one warm-up call each, then `repeats` samples of
    `group` calls of each; a sample is the mean CPU time of this thread per
    call over its group. The times are the medians of the samples; the
    ratio is the median of the samples' paired ratios (with / without, both
    measured in the same stretch of time, so a load that comes and goes
    moves both), with its 95% interval (median_interval)."""
    def timed(run):
        start = time.thread_time()
        run()
        return time.thread_time() - start
    timed(run_off), timed(run_on)
    off, on = [], []
    for _ in range(repeats):
        off_total = on_total = 0.0
        for _ in range(group):
            off_total += timed(run_off)
            on_total += timed(run_on)
        off.append(off_total / group)
        on.append(on_total / group)
    ratio, low, high = median_interval([b / a for a, b in zip(off, on)])
    return (1e3 * statistics.median(off), 1e3 * statistics.median(on),
            ratio, low, high)


def chapter5_loop_overhead(chapter, repeats=15, tracker_class=None):
    """Epochs of chapter 5's `train_epoch` (digits, batch 128, Adam at the
    chapter's lr 5e-3, seed 0) on two copies of the same MLP, alternating
    epoch by epoch: one with a tracker (decay 0.9) attached to both ReLUs
    for the whole run, as in the chapter's training, one without hooks.
    A sample is 64 epochs of each: 704 batches, 11 merges of 64 summaries,
    so every sample holds as many merges as any other (single epochs hold
    one or none, and their median would count one in every epoch)."""
    data, seed, batch_size = chapter.load_digit_data(), 0, 128
    plain, watched = chapter.make_mlp(seed), chapter.make_mlp(seed)
    plain_optimizer = torch.optim.Adam(plain.parameters(), lr=5e-3)
    watched_optimizer = torch.optim.Adam(watched.parameters(), lr=5e-3)
    tracker = (tracker_class or chapter.ActivationTracker)(0.9).attach(
        {pair: watched[act] for pair, (_, _, act) in enumerate(chapter.PAIRS)})
    epochs = {"off": 0, "on": 0}
    def epoch(model, optimizer, which):
        chapter.train_epoch(model, optimizer, data, epochs[which], seed, batch_size)
        epochs[which] += 1
    result = interleaved(lambda: epoch(plain, plain_optimizer, "off"),
                         lambda: epoch(watched, watched_optimizer, "on"),
                         repeats, group=64)
    tracker.detach()
    return result


def chapter7_loop_overhead(lm, repeats=40, steps=64, tracker_class=None):
    """Blocks of `steps` of chapter 7's `train_steps` (its CONFIG, corpus and
    batches, seed 0) on two copies of the same model, alternating: one with
    a tracker at the chapter's decay attached by its `watch` for the whole
    run, one without hooks. 64 steps hold one merge of 64 per block."""
    config, seed = lm.CONFIG, 0
    data = dict(train=lm.make_corpus(0, 40000), valid=lm.make_corpus(1, 4096))
    plain, watched = lm.make_lm(seed, config), lm.make_lm(seed, config)
    plain_optimizer = torch.optim.Adam(plain.parameters(), lr=config["lr"])
    watched_optimizer = torch.optim.Adam(watched.parameters(), lr=config["lr"])
    tracker = lm.watch((tracker_class or lm.ActivationTracker)(config["decay"]),
                       watched)
    first = {"off": 0, "on": 0}
    def block(model, optimizer, which):
        start = first[which]
        lm.train_steps(model, optimizer, data, seed, range(start, start + steps),
                       config)
        first[which] += steps
    result = interleaved(lambda: block(plain, plain_optimizer, "off"),
                         lambda: block(watched, watched_optimizer, "on"), repeats)
    tracker.detach()
    return result


def loop_line(label, without_ms, with_ms, ratio, low, high):
    return (f"tnvp-overhead: {label} {without_ms:.2f} ms without, "
            f"{with_ms:.2f} ms with statistics, ratio {ratio:.3f} "
            f"(95% interval {low:.3f} to {high:.3f})")


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    chapter = load_exports("05_variance_pruning.ipynb")
    lm = load_exports("07_tnvp_language_model.ipynb")
    print(f"torch {torch.__version__}, 1 thread, CPU kernels "
          f"{torch.backends.cpu.get_cpu_capability()}; times are medians in ms")
    print(chapter.format_speed_table(chapter.speed_table(min_run_time=1.0)))

    print(chapter.overhead_line("MLP 64-256-256-10, batch 128:",
                                *chapter.mlp_overhead(repeats=60)))
    model = lm.make_lm(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    context, batch = lm.CONFIG["context"], lm.CONFIG["batch_size"]
    windows = lm.make_corpus(0, batch * (context + 1)).view(batch, context + 1)
    modules = {i: block.ffn[1] for i, block in enumerate(model.blocks)}
    print(chapter.overhead_line(
        f"transformer LM (chapter 7), batch {batch}x{context} tokens:",
        *chapter.training_step_overhead(
            model, optimizer, lambda m: lm.lm_loss(m, windows), modules,
            repeats=60)))

    print(loop_line("chapter 5 training loop (train_epoch on the digits, "
                    "10 batches of 128 and one of 67), epoch",
                    *chapter5_loop_overhead(chapter)))
    print(loop_line("chapter 7 training loop (train_steps, blocks of 64 "
                    f"steps of {batch}x{context} tokens), block",
                    *chapter7_loop_overhead(lm)))
