"""Where do the N×1 + T=3 models of seeds 3 and 4 (Table 1 at f9c9dc6) miss the products
that are all nines? Decodes prefix + "9" * n × m for a range of n and prints, per model and
pattern, the n at which the answer is wrong and its first digits.

    OMP_NUM_THREADS=1 python results/diagnostics/nx1_nines/probe.py results/archive/table1_f9c9dc6/table1/runs
"""
import sys

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs = sys.argv[1]
coarse = [20, 58, 100, 200, 300, 400, 500, 550, 580, 590, 596, 597, 598, 599, 650]
for seed in (0, 3, 4):
    model = load(f"{runs}/abs_nx1{f'.seed{seed}' if seed else ''}/fit/checkpoints/best.ckpt")
    for prefix, mult in (("24", 4), ("124", 8), ("1", 9), ("49", 2), ("3", 3)):
        fine = list(range(50, 251)) if (seed, prefix) in ((3, "24"), (4, "124")) else []
        ns = sorted(set(coarse + fine))
        rows = model.predict_rows([prefix + "9" * n + f"*{mult}" for n in ns])
        wrong = [n for n, r in zip(ns, rows) if not r["correct"]]
        tops = sorted({r["output"][:2] for r in rows if not r["correct"]})
        print(f"seed {seed}, {prefix}9…9 × {mult}, n nines in {ns[0]}..{ns[-1]} ({len(ns)} values): "
              f"wrong at {len(wrong)}: {wrong} (answers start {tops}; n mod 3 of those: "
              f"{sorted({n % 3 for n in wrong})})", flush=True)
