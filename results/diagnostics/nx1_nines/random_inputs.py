"""Where do the global-encoder N×1 runs of Table 1 at 2fe4081 miss random inputs?

Draws fresh random 60-digit × 1-digit products (its own generator, not the test sets),
decodes them and, for each wrong answer, finds the column (least significant = 0) where it
first goes wrong and the run of equal carries that ends there: how many columns below it
carry the same value into the next. Prints how often a run of each length occurs in the
inputs at all (multipliers 0 and 1 carry 0 everywhere, hence the long runs), and per run
how many are wrong, the lengths of those runs at its misses, and the multiplier, digit and
carry in at the first wrong column of the first misses. Needs the runs of
``reproduce table1 --seeds 0 1 2 3 4 --only abs_nx1 nx1_nope_w1 --results <folder>`` at 2fe4081.

    OMP_NUM_THREADS=1 python results/diagnostics/nx1_nines/random_inputs.py <folder>/table1/runs
"""
import collections
import random
import sys

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs, length, n = sys.argv[1], 60, 5000


def carry_runs(a: int, b: int) -> list[int]:
    """Per column (least significant first): how many columns in a row below it, itself
    included, carry the same value out (the run of equal carries reaching it)."""
    digits, carry, runs_, last = [int(d) for d in str(a)[::-1]], 0, [], None
    for d in digits:
        carry = (d * b + carry) // 10
        runs_.append(runs_[-1] + 1 if runs_ and carry == last else 1)
        last = carry
    return runs_


# the same inputs for every run
rng = random.Random(7)
pairs = [(rng.randint(10 ** (length - 1), 10 ** length - 1), rng.randint(0, 9)) for _ in range(n)]
inputs = [f"{a}*{b}" for a, b in pairs]
carry_runs_of = [carry_runs(a, b) for a, b in pairs]
overall = collections.Counter(min(r, 6) for runs_ in carry_runs_of for r in runs_)
total = sum(overall.values())
print(f"{n} random {length}-digit products; share of columns with an equal-carry run of each length (6 = 6 or "
      f"more): { {k: round(v / total, 4) for k, v in sorted(overall.items())} }", flush=True)
for cell in ("abs_nx1", "nx1_nope_w1"):
    for seed in range(5):
        model = load(f"{runs}/{cell}{f'.seed{seed}' if seed else ''}/fit/checkpoints/best.ckpt")
        rows = model.predict_rows(inputs, batch_size=500)
        at_miss, where = collections.Counter(), []
        for (a, b), runs_, row in zip(pairs, carry_runs_of, rows):
            if row["correct"]:
                continue
            want, got = str(a * b)[::-1], row["output"][::-1]
            col = next(i for i in range(len(want)) if i >= len(got) or got[i] != want[i])
            at_miss[min(runs_[col - 1], 6) if 0 < col <= len(runs_) else 0] += 1
            digit = int(str(a)[::-1][col]) if col < length else None
            carry_in = 0 if col == 0 else (a % 10 ** col * b) // 10 ** col
            where.append(f"×{b} digit {digit} carry {carry_in} at column {col}")
        print(f"{cell} seed {seed}: {sum(at_miss.values())} of {n} wrong; equal-carry run into the first wrong "
              f"column: {dict(sorted(at_miss.items()))}", flush=True)
        if where:
            print("    first misses:", "; ".join(where[:6]), flush=True)
