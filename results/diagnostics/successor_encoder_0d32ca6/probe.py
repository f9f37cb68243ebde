"""Which random 60-digit inputs does the successor + T=3 encoder-window model of seed 0 at
0d32ca6 (results/table1/, AMD EPYC) get wrong? Prints each miss around its first wrong digit.

    OMP_NUM_THREADS=1 PYTHONPATH=<checkout of 0d32ca6> python results/diagnostics/successor_encoder_0d32ca6/probe.py \
        results/table1/runs/successor_T3_encoder_w1/fit/checkpoints/best.ckpt 60 20000
"""
import random
import sys

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
model = load(sys.argv[1])
length, samples = int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(123)
inputs = [str(rng.randint(10 ** (length - 1), 10 ** length - 1)) for _ in range(samples)]
wrong = [row for row in model.predict_rows(inputs) if not row["correct"]]
print(f"{len(wrong)} wrong of {samples} at {length} digits")
for row in wrong:
    x, want, got = row["input"], row["expected"], row["output"]
    k = next((i for i in range(max(len(want), len(got))) if want[i:i + 1] != got[i:i + 1]), -1)
    print(f"pos {k} (from right {len(want) - k}): in ...{x[max(0, k - 8):k + 8]}... "
          f"want ...{want[max(0, k - 8):k + 8]}... got ...{got[max(0, k - 8):k + 8]}... len {len(got)} vs {len(want)}")
