"""Where does the ABC addition model of seed 4 at 2fe4081 (AMD EPYC, Table 3's regeneration)
go wrong on random sums? Prints each miss's first wrong column (0 = least significant),
the digit sums of the columns around it, and how those columns compare with all columns.

    OMP_NUM_THREADS=1 python results/diagnostics/abc_addition_seed4_2fe4081/probe.py \
        <results>/table3/runs/abc_addition.seed4/fit/checkpoints/last.ckpt 60 3000

(from a checkout of 2fe4081, after `reproduce table3 --seeds 4 --only abc_addition --results <results>`)
"""
import collections
import random
import sys

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
model = load(sys.argv[1])
length, samples = int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(123)
pairs = [(str(rng.randint(10 ** (length - 1), 10 ** length - 1)), str(rng.randint(10 ** (length - 1), 10 ** length - 1)))
         for _ in range(samples)]
rows = model.predict_rows([f"{a}+{b}" for a, b in pairs], batch_size=500)

nines_below = collections.Counter()  # columns of digit sum 9 just below the first wrong one
every_column = collections.Counter()  # the same count for every column of every input
wrong = single = 0
for (a, b), row in zip(pairs, rows):
    sums = [int(x) + int(y) for x, y in zip(a[::-1], b[::-1])]
    run, runs = 0, []
    for s in sums:
        runs.append(min(run, 6))
        run = run + 1 if s == 9 else 0
    every_column.update(runs)
    if row["correct"]:
        continue
    wrong += 1
    want, got = row["expected"][::-1], row["output"][::-1]
    bad = [i for i in range(max(len(want), len(got))) if want[i:i + 1] != got[i:i + 1]]
    single += len(bad) == 1
    i = bad[0]
    if i < length:
        nines_below[runs[i]] += 1
    around = ",".join(str(sums[k]) if 0 <= k < length else "-" for k in (i - 2, i - 1))
    print(f"column {i}: digit sums below {around}, its own {sums[i] if i < length else '-'}; "
          f"want {want[i:i + 1]} got {got[i:i + 1] or '-'}")
print(f"{wrong} wrong of {samples} at {length} digits ({single} by one digit): "
      f"{wrong / (samples * length):.1e} per column")
print("9-sum columns just below the first wrong column:", dict(sorted(nines_below.items())))
print("the same, over every column:", {k: round(v / (samples * length), 4) for k, v in sorted(every_column.items())})
