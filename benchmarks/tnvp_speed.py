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
- each chapter's own training loop, on copies of the same model trained
  side by side, one with the chapter's ActivationTracker attached for the
  whole run and one without hooks, in turn: chapter 5's
  `train_epoch` over the digits (10 batches of 128 and a last one of 67),
  epoch by epoch, the tracker (decay 0.9) on the two ReLUs; chapter 7's
  `train_steps` in blocks of 64 steps, the tracker attached by its `watch`
  on the GELU of each block's FFN. Each sample holds about as many merges
  of 256 summaries as any other (64 epochs of chapter 5: 2 or 3, a
  difference of about 0.1% of the sample; 4 blocks of chapter 7: 1).
  The ratio is the median over samples of each sample's ratio of this
  thread's CPU time with and without, the two measured in the same stretch
  of time; the line gives its distribution-free 95% interval
  (`median_interval`), so "at most 1.05" can be read off the upper end.
  A third copy, trained in the same turns, carries `bare_kernel_tracker`:
  hooks that only call the summary kernel into one fixed row. Its ratio,
  on the line below each loop's, is the floor for any tracker that
  summarizes every batch of every watched layer with one kernel call; the
  distance between the two lines is what the tables, counts and merges add.

PyTorch's CPU kernels are held at the AVX2 level the project uses for
everything (the variables are set here unless the environment sets them),
and torch runs one thread.

The overhead lines are also stored, with the machine, torch and date of the
run, in book/_data/bench/tnvp_overhead.json (tools.bench), which
chapter 5 shows (`make generate` copies it into the chapter).
"""
import os

from tools.book import CPU_KERNELS

for _name, _value in CPU_KERNELS.items():
    os.environ.setdefault(_name, _value)   # read when torch starts

import datetime  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import torch  # noqa: E402

from tools import bench  # noqa: E402
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


def interleaved(run_off, runs_on, repeats, group=1):
    """[(ms without, ms with, ratio, low, high), one per run in `runs_on`]:
    `run_off()` and each of `runs_on` called in turn, one warm-up call each,
    then `repeats` samples of `group` rounds; a sample is the mean CPU time
    of this thread per call over its group. The times are the medians of
    the samples; a ratio is the median of the samples' paired ratios (with /
    without, all measured in the same stretch of time, so a load that comes
    and goes moves them alike), with its 95% interval (median_interval)."""
    if not runs_on:
        raise ValueError("runs_on must hold at least one run to compare")
    def timed(run):
        start = time.thread_time()
        run()
        return time.thread_time() - start
    runs = [run_off, *runs_on]
    for run in runs:
        timed(run)
    samples = [[] for _ in runs]
    for _ in range(repeats):
        totals = [0.0] * len(runs)
        for _ in range(group):
            for i, run in enumerate(runs):
                totals[i] += timed(run)
        for sample, total in zip(samples, totals):
            sample.append(total / group)
    off, results = samples[0], []
    for on in samples[1:]:
        ratio, low, high = median_interval([b / a for a, b in zip(off, on)])
        results.append((1e3 * statistics.median(off), 1e3 * statistics.median(on),
                        ratio, low, high))
    return results


def bare_kernel_tracker(tracker_class):
    """A subclass of `tracker_class` whose hooks keep only the summary
    kernel: each training batch (flattened to [rows, neurons] like the
    tracker's) has its mean and variance written by
    `torch.batch_norm_update_stats` into one fixed row per width, and
    nothing else happens: no tables, counts or merges, so its statistics are
    not kept. The floor of a tracker that calls the kernel once per batch
    and watched layer."""
    class BareKernel(tracker_class):
        def _hook(self, name):
            rows, summarize = {}, torch.batch_norm_update_stats

            def hook(module, inputs, output):
                if not module.training:
                    return
                batch = output.detach()
                if batch.dim() != 2:
                    batch = batch.reshape(-1, batch.shape[-1])
                row = rows.get(batch.shape[1])
                if row is None:
                    row = rows[batch.shape[1]] = torch.zeros(
                        2, batch.shape[1], dtype=batch.dtype)
                summarize(batch, row[0], row[1], 1.0)
            return hook
    return BareKernel


def copies_overhead(make, attach, tracker_class, advance, repeats, group):
    """interleaved's two results (the tracker's, then the bare kernel's) for
    three copies from `make()` -> (model, optimizer), taking turns: one
    without hooks, one with `tracker_class`, one with
    `bare_kernel_tracker(tracker_class)`, each tracker put on its copy by
    `attach(tracker_class, model)`. `advance(model, optimizer, position)`
    trains a copy one turn on and returns its new position."""
    runs = {}
    for which, cls in (("off", None), ("on", tracker_class),
                       ("bare", bare_kernel_tracker(tracker_class))):
        model, optimizer = make()
        runs[which] = [model, optimizer, cls and attach(cls, model), 0]

    def turn(which):
        run = runs[which]
        run[3] = advance(run[0], run[1], run[3])
    try:
        return interleaved(lambda: turn("off"),
                           [lambda: turn("on"), lambda: turn("bare")],
                           repeats, group)
    finally:
        for _, _, tracker, _ in runs.values():
            if tracker is not None:
                tracker.detach()


def chapter5_loop_overhead(chapter, repeats=15, tracker_class=None):
    """Epochs of chapter 5's `train_epoch` (digits, batch 128, Adam at the
    chapter's lr 5e-3, seed 0) on three copies of the same MLP, in turn
    epoch by epoch (copies_overhead): one without hooks, one with a tracker
    (decay 0.9) attached to both ReLUs for the whole run, as in the
    chapter's training, and one with `bare_kernel_tracker`'s hooks. A sample
    is 64 epochs of each: 704 batches, 2 or 3 merges of 256 summaries per
    layer, each merge about 0.05% of the sample, so every sample holds
    nearly as much merging as any other (single epochs hold one merge or
    none, and their median would count none)."""
    data, seed, batch_size = chapter.load_digit_data(), 0, 128

    def make():
        model = chapter.make_mlp(seed)
        return model, torch.optim.Adam(model.parameters(), lr=5e-3)

    def attach(cls, model):
        return cls(0.9).attach(
            {pair: model[act] for pair, (_, _, act) in enumerate(chapter.PAIRS)})

    def advance(model, optimizer, epoch):
        chapter.train_epoch(model, optimizer, data, epoch, seed, batch_size)
        return epoch + 1
    return copies_overhead(make, attach,
                           tracker_class or chapter.ActivationTracker,
                           advance, repeats, group=64)


def chapter7_loop_overhead(lm, repeats=40, steps=64, group=4,
                           tracker_class=None):
    """Blocks of `steps` of chapter 7's `train_steps` (its CONFIG, corpus and
    batches, seed 0) on three copies of the same model, in turn
    (copies_overhead): one without hooks, one with a tracker at the
    chapter's decay attached by its `watch` for the whole run, one with
    `bare_kernel_tracker`'s hooks on the same modules. The copies take turns
    every block; a sample is `group` blocks of each, so with 4 blocks of 64
    steps it holds exactly one merge of 256."""
    config, seed = lm.CONFIG, 0
    data = dict(train=lm.make_corpus(0, 40000), valid=lm.make_corpus(1, 4096))

    def make():
        model = lm.make_lm(seed, config)
        return model, torch.optim.Adam(model.parameters(), lr=config["lr"])

    def attach(cls, model):
        return lm.watch(cls(config["decay"]), model)

    def advance(model, optimizer, first):
        lm.train_steps(model, optimizer, data, seed, range(first, first + steps),
                       config)
        return first + steps
    return copies_overhead(make, attach, tracker_class or lm.ActivationTracker,
                           advance, repeats, group)


def loop_line(label, without_ms, with_ms, ratio, low, high, added="statistics"):
    return (f"tnvp-overhead: {label} {without_ms:.2f} ms without, "
            f"{with_ms:.2f} ms with {added}, ratio {ratio:.3f} "
            f"(95% interval {low:.3f} to {high:.3f})")


def machine():
    """The CPU's model name (from /proc/cpuinfo where there is one), its
    architecture and its number of logical cores."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model} ({platform.machine()}, {os.cpu_count()} logical cores)"


def loop_record(description, repeats, result, floor):
    """What is stored of one loop's comparison: the tracker's and the floor's
    (ms without, ms with, ratio, low, high)."""
    keys = ("without_ms", "with_ms", "ratio", "low", "high")
    return dict(loop=description, samples=repeats,
                tracker={k: round(v, 4) for k, v in zip(keys, result)},
                floor={k: round(v, 4) for k, v in zip(keys, floor)})


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    chapter = load_exports("05_variance_pruning.ipynb")
    lm = load_exports("07_tnvp_language_model.ipynb")
    print(f"torch {torch.__version__}, 1 thread, CPU kernels "
          f"{torch.backends.cpu.get_cpu_capability()}; times are medians in ms")
    print(chapter.format_speed_table(chapter.speed_table(min_run_time=1.0)))

    step = {}
    step["chapter 5's MLP"] = chapter.mlp_overhead(repeats=60)
    print(chapter.overhead_line("MLP 64-256-256-10, batch 128:", *step["chapter 5's MLP"]))
    model = lm.make_lm(0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    context, batch = lm.CONFIG["context"], lm.CONFIG["batch_size"]
    windows = lm.make_corpus(0, batch * (context + 1)).view(batch, context + 1)
    modules = {i: block.ffn[1] for i, block in enumerate(model.blocks)}
    step["chapter 7's language model"] = chapter.training_step_overhead(
        model, optimizer, lambda m: lm.lm_loss(m, windows), modules, repeats=60)
    print(chapter.overhead_line(
        f"transformer LM (chapter 7), batch {batch}x{context} tokens:",
        *step["chapter 7's language model"]))

    chapter5_repeats, chapter7_repeats = 15, 40
    loops = {
        "chapter 5": ("train_epoch on the digits (10 batches of 128 and one of 67), "
                      "64 epochs per sample", chapter5_repeats,
                      chapter5_loop_overhead(chapter, repeats=chapter5_repeats)),
        "chapter 7": (f"train_steps, 4 blocks of 64 steps of {batch}x{context} tokens "
                      "per sample", chapter7_repeats,
                      chapter7_loop_overhead(lm, repeats=chapter7_repeats)),
    }
    for name, (description, _, (tracker_result, bare_result)) in loops.items():
        print(loop_line(f"{name} training loop ({description}):", *tracker_result))
        print(loop_line("  the floor: the same loop, its hooks only calling "
                        "the summary kernel,", *bare_result, added="them"))
    bench.save("tnvp_overhead", dict(
        torch=torch.__version__,
        python=platform.python_version(),
        machine=machine(),
        kernels=torch.backends.cpu.get_cpu_capability(),
        threads=torch.get_num_threads(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        step={name: dict(zip(("without_ms", "with_ms", "ratio"),
                             (round(v, 4) for v in values)))
              for name, values in step.items()},
        loops={name: loop_record(description, repeats, *results)
               for name, (description, repeats, results) in loops.items()}))
    print(f"stored in {bench.results_path('tnvp_overhead')}")
