"""Where do the global-encoder subtraction runs of the beyond table (``abs_subtraction``) go
wrong, and does the encoder-window row (``subtraction_T2_encoder_w1``) of the same seed?

Draws fresh random N-digit differences a − b (a ≥ b, both of N digits; its own generator,
not the test sets) and decodes them with each seed's two models. For each wrong answer it
finds the column (least significant = 0) where it first goes wrong and the run of equal
borrows that ends there: how many columns below it, itself included, pass the same borrow
up. Then it decodes 10…0 − 9…9 (= 1, a borrow through every column) at a few lengths and
prints where the answer goes wrong. Needs the runs of ``reproduce beyond --seeds 0 1 2 3 4
--only abs_subtraction subtraction_T2_encoder_w1 --results <folder>``.

    OMP_NUM_THREADS=1 python results/diagnostics/subtraction_encoder/probe.py <folder>/beyond/runs
"""
import collections
import random
import sys
from pathlib import Path

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs, n = sys.argv[1], 1000


def checkpoint(cell: str, seed: int) -> Path:
    return Path(runs) / f"{cell}{f'.seed{seed}' if seed else ''}" / "fit" / "checkpoints" / "best.ckpt"


present = [s for s in range(5) if all(checkpoint(c, s).exists() for c in ("abs_subtraction", "subtraction_T2_encoder_w1"))]
print(f"seeds with both runs: {present}", flush=True)


def borrow_runs(a: int, b: int, length: int) -> tuple[list[int], list[int]]:
    """Per column (least significant first): the borrow it passes up, and the run of equal
    borrows out that reaches it."""
    da, db = str(a).zfill(length)[::-1], str(b).zfill(length)[::-1]
    borrow, borrows, runs_ = 0, [], []
    for x, y in zip(da, db):
        borrow = int(int(x) - int(y) - borrow < 0)
        runs_.append(runs_[-1] + 1 if borrows and borrow == borrows[-1] else 1)
        borrows.append(borrow)
    return borrows, runs_


rng = random.Random(5)
for length in (60, 200):
    pairs = []
    for _ in range(n):
        a, b = (rng.randint(10 ** (length - 1), 10 ** length - 1) for _ in range(2))
        pairs.append((max(a, b), min(a, b)))
    inputs = [f"{a}-{b}" for a, b in pairs]
    print(f"\n{n} random {length}-digit differences", flush=True)
    for seed in present:
        for cell in ("abs_subtraction", "subtraction_T2_encoder_w1"):
            model = load(checkpoint(cell, seed))
            rows = model.predict_rows(inputs, batch_size=500)
            at_run, where = collections.Counter(), []
            for (a, b), row in zip(pairs, rows):
                if row["correct"]:
                    continue
                want, got = str(a - b)[::-1], row["output"][::-1]
                col = next((i for i in range(len(want)) if i >= len(got) or got[i] != want[i]), len(want))
                borrows, runs_ = borrow_runs(a, b, length)
                at_run[min(runs_[col - 1], 6) if 0 < col <= len(runs_) else 0] += 1
                where.append(f"column {col} (borrow in {borrows[col - 1] if 0 < col <= len(borrows) else 0})")
            print(f"{cell} seed {seed}: {sum(at_run.values())} of {n} wrong; equal-borrow run into the first "
                  f"wrong column: {dict(sorted(at_run.items()))}" + (f"; first: {', '.join(where[:5])}" if where else ""),
                  flush=True)

print("\n10…0 − 9…9 (= 1): the answer, most significant first", flush=True)
for seed in present:
    for cell in ("abs_subtraction", "subtraction_T2_encoder_w1"):
        model = load(checkpoint(cell, seed))
        outs = model.predict([f"1{'0' * (k - 1)}-{'9' * (k - 1)}" for k in (10, 20, 30, 40, 60)])
        print(f"{cell} seed {seed}: " + "; ".join(f"{k} digits: {o if len(o) < 30 else o[:12] + '…' + o[-12:]}"
                                                 for k, o in zip((10, 20, 30, 40, 60), outs)), flush=True)
