"""Inference speed of dense vs TNVP-pruned vs mask-pruned MLPs (`make bench`).

Runs the timing helpers defined in book/05_variance_pruning.ipynb (its `export`
cells), so the chapter and this benchmark time the very same models: a
64 -> 2048 -> 2048 -> 10 MLP, cut to 1024 neurons per hidden layer by TNVP
(physically) or by torch.nn.utils.prune.ln_structured (masks), at batch sizes
1, 64 and 1024, with torch.utils.benchmark on one thread. The last line reads
`tnvp-speed: batch 1024 measured X.XXx ideal Y.YYx ratio Z.ZZ`, where ideal is
the ratio of multiply-accumulates and ratio = measured / ideal.
"""
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from nbexport import load_exports  # noqa: E402

if __name__ == "__main__":
    torch.manual_seed(0)
    torch.set_num_threads(1)
    chapter = load_exports("05_variance_pruning.ipynb")
    print(f"torch {torch.__version__}, 1 thread; times are medians in ms")
    print(chapter.format_speed_table(chapter.speed_table(min_run_time=1.0)))
