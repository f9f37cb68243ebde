"""Is the global encoder where N×1's long-run misses come from (Table 1 at 2fe4081)?

For each global-encoder N×1 run (+ T=3 and NoPE + w=1, seeds 0-4): how spread the
encoder's attention is on ``199…9*5`` (20 digits, 47 source tokens; the largest weight a
query gives any key, averaged over heads and queries, and the attention's entropy in nats,
at most ln 47 = 3.85), and at which lengths from 6 to 60 digits the model gets
``19…9 × 5`` and ``1249…9 × 8`` wrong. Needs the runs of ``reproduce table1 --seeds 0 1 2 3
4 --only abs_nx1 nx1_nope_w1 --results <folder>`` at 2fe4081.

    OMP_NUM_THREADS=1 python results/diagnostics/nx1_nines/encoder.py <folder>/table1/runs
"""
import math
import sys

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs = sys.argv[1]
for cell in ("abs_nx1", "nx1_nope_w1"):
    for seed in range(5):
        model = load(f"{runs}/{cell}{f'.seed{seed}' if seed else ''}/fit/checkpoints/best.ckpt")
        weights = model.attention("1" + "9" * 19 + "*5")["encoder"][0]  # (heads, queries, keys)
        top = weights.max(-1).values.mean().item()
        entropy = -(weights.clamp_min(1e-12).log() * weights).sum(-1).mean().item()
        misses = []
        for top_digits, mult in (("1", 5), ("124", 8)):
            lengths = list(range(6, 61))
            rows = model.predict_rows([top_digits + "9" * (n - len(top_digits)) + f"*{mult}" for n in lengths])
            wrong = [n for n, r in zip(lengths, rows) if not r["correct"]]
            misses.append(f"{top_digits}9…9 × {mult} wrong at {len(wrong)} of 6-60 digits: {wrong}")
        print(f"{cell} seed {seed}: largest weight {top:.3f} (uniform {1 / weights.shape[-1]:.3f}), "
              f"entropy {entropy:.2f} of {math.log(weights.shape[-1]):.2f}; " + "; ".join(misses), flush=True)
