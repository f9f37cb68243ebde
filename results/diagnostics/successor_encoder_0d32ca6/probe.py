"""Which random 60-digit inputs does the successor + T=3 encoder-window model of seed 0 at
0d32ca6 (results/table1_0d32ca6, AMD EPYC) get wrong? Prints each miss around its first wrong digit.

    OMP_NUM_THREADS=1 PYTHONPATH=<checkout of 0d32ca6> python results/diagnostics/successor_encoder_0d32ca6/probe.py \
        results/table1_0d32ca6/table1/runs/successor_T3_encoder_w1/fit/checkpoints/best.ckpt 60 20000
"""
import random, sys, torch
from abc_lightning.api import load
torch.set_num_threads(1)
m = load(sys.argv[1])
rng = random.Random(123)
L = int(sys.argv[2]); n = int(sys.argv[3])
xs = [str(rng.randint(10**(L-1), 10**L - 1)) for _ in range(n)]
bad = []
for i in range(0, n, 500):
    rows = m.predict_rows(xs[i:i+500])
    bad += [(x, r["output"]) for x, r in zip(xs[i:i+500], rows) if not r["correct"]]
print(f"{len(bad)} wrong of {n} at {L} digits")
for x, o in bad:
    t = str(int(x) + 1)
    diff = [k for k in range(max(len(t), len(o))) if k >= len(o) or k >= len(t) or o[k] != t[k]]
    k = diff[0] if diff else -1
    print(f"pos {k} (from right {len(t)-k}): in ...{x[max(0,k-8):k+8]}... want ...{t[max(0,k-8):k+8]}... got ...{o[max(0,k-8):k+8]}... len {len(o)} vs {len(t)}")
