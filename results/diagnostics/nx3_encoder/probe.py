"""Where does N×3 with every attention windowed (``nx3_T4_encoder_w1``) go wrong, and does
the global encoder (``abs_nx3``) go wrong at the same tokens?

Draws fresh random N-digit × 3-digit products (its own generator, not the test sets) and
decodes them with both seed-0 models of the beyond table. The answer is a scratchpad of
4 tokens a column: the digits q0, q1, q2 of the three partial products a × b_j that fall in
that column, then the product digit s. For every wrong answer it finds the first wrong
token: its slot (q0, q1, q2 or s; ``end`` where the model wrote the end mark for a digit or
a digit for it), its column (least significant = 0) and, for a q slot,
the multiplier digit b_j and the carry that partial product brings into that column (what
the token must infer from the row one column back); for s, the carry of the column sums.
Needs the runs of ``reproduce beyond --only nx3_T4_encoder_w1 abs_nx3 --seeds <S …> --results
<folder>``; seeds after the folder (default 0), and a cell whose run is missing is skipped.
``LABEL=<best.ckpt>`` arguments probe other N×3 checkpoints too.

    OMP_NUM_THREADS=1 python results/diagnostics/nx3_encoder/probe.py <folder>/beyond/runs [S …] [LABEL=CKPT …]
"""
import collections
import random
import sys
from pathlib import Path

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs = sys.argv[1]
seeds = [int(a) for a in sys.argv[2:] if "=" not in a] or [0]
others = [tuple(a.split("=", 1)) for a in sys.argv[2:] if "=" in a]


def models() -> list[tuple[int | None, str, Path]]:
    """(seed, label, checkpoint) of every model to probe: each seed's two cells, then the others."""
    cells = [(seed, cell, Path(runs) / f"{cell}{f'.seed{seed}' if seed else ''}" / "fit" / "checkpoints" / "best.ckpt")
             for seed in seeds for cell in ("nx3_T4_encoder_w1", "abs_nx3")]
    return cells + [(None, label, Path(path)) for label, path in others]

lengths, n = (10, 20, 60), 500
SLOTS = ("q0", "q1", "q2", "s")


def first_wrong(raw: str, want: str) -> int:
    return next((t for t in range(len(want)) if t >= len(raw) or raw[t] != want[t]), -1)


def carry_into(a: int, b: int, j: int, c: int) -> tuple[int, int]:
    """(multiplier digit b_j, carry into column c of the partial product a × b_j shifted by j)."""
    bj = b // 10 ** j % 10
    k = c - j
    return bj, (0 if k <= 0 else (a % 10 ** k) * bj // 10 ** k)


def sum_carry(a: int, b: int, c: int) -> int:
    """Carry into column c of the column sums of q0 + q1 + q2."""
    partials = [a * (b // 10 ** j % 10) * 10 ** j for j in range(3)]
    carry = 0
    for col in range(c):
        carry = (sum(p // 10 ** col % 10 for p in partials) + carry) // 10
    return carry


rng = random.Random(11)
for length in lengths:
    pairs = [(rng.randint(10 ** (length - 1), 10 ** length - 1), rng.randint(0, 999)) for _ in range(n)]
    inputs = [f"{a}*{b:03d}" for a, b in pairs]
    print(f"\n{n} random {length}-digit × 3-digit products", flush=True)
    wrong_sets = collections.defaultdict(set)
    for seed, cell, ckpt in models():
        name = cell if seed is None else f"{cell} seed {seed}"
        if not ckpt.exists():
            print(f"{name}: no run", flush=True)
            continue
        model = load(ckpt)
        rows = model.predict_rows(inputs, batch_size=250)
        slots, columns, details, wrong = collections.Counter(), collections.Counter(), [], set()
        phases, carries, off = collections.Counter(), collections.Counter(), collections.Counter()
        for i, ((a, b), row) in enumerate(zip(pairs, rows)):
            if row["correct"]:
                continue
            wrong.add(i)
            t = first_wrong(row["raw_output"], row["raw_expected"])
            c, j = divmod(t, 4)
            got = row["raw_output"][t] if t < len(row["raw_output"]) else ""
            if not (got.isdigit() and row["raw_expected"][t].isdigit()):
                slots["end"] += 1  # an end mark written, or expected, where the other has a digit
                columns[min(c * 10 // (length + 3), 9)] += 1
                details.append(f"end mark, col {c}: wrote {got or 'nothing'} for {row['raw_expected'][t]}")
                continue
            slots[SLOTS[j]] += 1
            phases[f"{SLOTS[j]}@{c % 4}"] += 1
            off[(int(got) - int(row["raw_expected"][t])) % 10] += 1
            columns[min(c * 10 // (length + 3), 9)] += 1
            if j < 3:
                bj, carry = carry_into(a, b, j, c)
                carries[carry] += 1
                details.append(f"{SLOTS[j]} col {c}: b_j {bj}, carry in {carry}, "
                               f"wrote {row['raw_output'][t]} for {row['raw_expected'][t]}")
            else:
                details.append(f"s col {c}: column-sum carry in {sum_carry(a, b, c)}, "
                               f"wrote {row['raw_output'][t]} for {row['raw_expected'][t]}")
        wrong_sets[seed, cell] = wrong
        print(f"{name}: {len(wrong)} of {n} wrong; first wrong token by slot {dict(slots)}; "
              f"by tenth of the answer's columns {dict(sorted(columns.items()))}; by slot@(column mod 4) "
              f"{dict(sorted(phases.items()))}; q slots by the partial product's carry in "
              f"{dict(sorted(carries.items()))}; written minus right, mod 10 {dict(sorted(off.items(), key=str))}",
              flush=True)
        for d in details[:8]:
            print("    " + d, flush=True)
    for seed in seeds:
        both = wrong_sets[seed, "nx3_T4_encoder_w1"] & wrong_sets[seed, "abs_nx3"]
        print(f"seed {seed}, wrong in both: {len(both)}", flush=True)
