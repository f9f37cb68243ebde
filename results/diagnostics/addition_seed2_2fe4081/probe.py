"""Where do the addition runs of seed 2 (Table 1 at 2fe4081) make their rare column errors?

Each of the seed's three addition cells errs in Table 1: + T=3 and the encoder window once
in 10,000 at 60 digits, NoPE + w=1 at 99.82% there and 90-92% at 599-601. This draws fresh
random sums (its own generator, not the test sets), decodes them and, for each wrong answer,
prints the column (least significant = 0) where it first goes wrong with the digit sums of
the columns around it, and a count of (previous column's sum, this column's sum) over the
first wrong columns. Needs the runs of ``reproduce table1 --seeds 2 --only abs_addition
addition_nope_w1 addition_T3_encoder_w1 --results <folder>`` at 2fe4081.

    OMP_NUM_THREADS=1 python results/diagnostics/addition_seed2_2fe4081/probe.py <folder>/table1/runs
"""
import collections
import random
import sys

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs = sys.argv[1]
for cell, length, n in (("abs_addition", 60, 20000), ("addition_T3_encoder_w1", 60, 20000),
                        ("addition_nope_w1", 60, 20000), ("addition_nope_w1", 600, 300)):
    model = load(f"{runs}/{cell}.seed2/fit/checkpoints/best.ckpt")
    rng = random.Random(123)
    pairs = [(rng.randint(10 ** (length - 1), 10 ** length - 1), rng.randint(10 ** (length - 1), 10 ** length - 1))
             for _ in range(n)]
    rows = model.predict_rows([f"{a}+{b}" for a, b in pairs], batch_size=500)
    contexts = collections.Counter()
    shown = []
    for (a, b), row in zip(pairs, rows):
        if row["correct"]:
            continue
        want, got = str(a + b)[::-1], row["output"][::-1]
        col = next(i for i in range(len(want)) if i >= len(got) or got[i] != want[i])
        a_, b_ = str(a)[::-1], str(b)[::-1]
        def s(k):
            return int(a_[k]) + int(b_[k]) if 0 <= k < length else None
        contexts[(s(col - 1), s(col))] += 1
        if len(shown) < 5:
            shown.append(f"col {col}: sums {s(col - 2)},{s(col - 1)},[{s(col)}],{s(col + 1)}, "
                         f"want {want[col]} got {got[col] if col < len(got) else '-'}")
    print(f"{cell} seed 2, {length} digits: {sum(contexts.values())} of {n} wrong; first wrong column's "
          f"(previous sum, own sum): {dict(contexts.most_common())}", flush=True)
    for line in shown:
        print("   ", line)
