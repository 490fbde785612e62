"""Inference speed of dense vs TNVP-pruned vs mask-pruned MLPs (`make bench`).

Runs the timing helpers defined in book/05_variance_pruning.ipynb (its `export`
cells), so the chapter and this benchmark time the very same models: a
64 -> 2048 -> 2048 -> 10 MLP, cut to 1024 neurons per hidden layer by TNVP
(physically) or by torch.nn.utils.prune.ln_structured (masks), at batch sizes
1, 64 and 1024, with torch.utils.benchmark on one thread. The last line reads
`tnvp-speed: batch 1024 measured X.XXx ideal Y.YYx ratio Z.ZZ`, where ideal is
the ratio of multiply-accumulates and ratio = measured / ideal.

Then what TNVP's statistics cost during training: one training step with the
ActivationTracker's hooks on against off, in this process (chapter 5's
`training_step_overhead`: alternating blocks, median CPU time of this thread),
on chapter 5's MLP and on chapter 7's transformer language model, printed as
`tnvp-overhead: <model> ... ratio R` (R = step time with statistics / without).
"""
import torch

from tools.exports import load_exports

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    chapter = load_exports("05_variance_pruning.ipynb")
    print(f"torch {torch.__version__}, 1 thread; times are medians in ms")
    print(chapter.format_speed_table(chapter.speed_table(min_run_time=1.0)))

    print(chapter.overhead_line("MLP 64-256-256-10, batch 128:",
                                *chapter.mlp_overhead(repeats=60)))
    lm = load_exports("07_tnvp_language_model.ipynb")
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
