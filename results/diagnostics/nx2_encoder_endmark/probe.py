"""Which lengths does N×2 with every attention windowed (``nx2_T3_encoder_w1``) get its
worst cases wrong at, and how? Decodes the task's worst-case set at every length in a
range with the beyond table's models of the seeds given, and prints, per length, the
inputs it gets wrong and where the answer first goes wrong.

    OMP_NUM_THREADS=1 python results/diagnostics/nx2_encoder_endmark/probe.py <folder>/beyond/runs SEED …
"""
import sys
from pathlib import Path

import torch

from abc_lightning.api import load

torch.set_num_threads(1)
runs, seeds = sys.argv[1], [int(a) for a in sys.argv[2:]] or [1]
lengths = list(range(6, 41)) + list(range(590, 611))
for seed in seeds:
    ckpt = Path(runs) / f"nx2_T3_encoder_w1{f'.seed{seed}' if seed else ''}" / "fit" / "checkpoints" / "best.ckpt"
    model = load(ckpt)
    print(f"## nx2_T3_encoder_w1 seed {seed}", flush=True)
    for length in lengths:
        cases = [(fam, ops) for fam, items in model.task.worst_cases(length).items() for ops in items]
        inputs = [(model.task.operator or "").join(ops) for _, ops in cases]
        rows = model.predict_rows(inputs)
        bad = []
        for (fam, ops), row in zip(cases, rows):
            if row["correct"]:
                continue
            out, want = row["raw_output"], row["raw_expected"]
            t = next((i for i in range(len(want)) if i >= len(out) or out[i] != want[i]), -1)
            bad.append(f"{fam} {ops[0][:3]}…×{ops[1]}: token {t} of {len(want)}, wrote "
                       f"{out[t] if t < len(out) else 'nothing'!r} for {want[t]!r}")
        print(f"{length}: {len(cases) - len(bad)}/{len(cases)} right" + ("; " + "; ".join(bad) if bad else ""), flush=True)
