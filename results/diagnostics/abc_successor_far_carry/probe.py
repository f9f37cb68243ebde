"""Where ABC successor writes a carry that is not there (seed 0 of the recipe search's
``abc_finetune05_nodrop`` candidate; its checkpoint is made by
``OMP_NUM_THREADS=1 python benchmarks/recipe.py run --candidates abc_finetune05_nodrop --cells abc_successor --seeds 0``).

Decodes inputs whose carry stops after the first column, with zeros or not in the columns
above it, and prints each raw answer (least significant digit first, ``&`` = EOS) beside the
expected one. Run from the repository root: ``python results/diagnostics/abc_successor_far_carry/probe.py``.
"""

import sys

import torch

from abc_lightning import load

CKPT = "runs/recipe/abc_finetune05_nodrop/table3/runs/abc_successor/fit/checkpoints/last.ckpt"
INPUTS = ["9", "19", "39", "89", "99", "119", "1019", "10019", "100019", "1000019", "10000019", "100000019",
          "309", "3009", "300009", "3000009", "1", "5", "10", "50", "501", "19999", "1234569"]

torch.set_num_threads(1)
model = load(sys.argv[1] if len(sys.argv) > 1 else CKPT)
print(f"{'input':>10}  {'raw answer':<13} {'expected':<13} right")
for row in model.predict_rows(INPUTS):
    print(f"{row['input']:>10}  {row['raw_output']:<13} {row['raw_expected']:<13} {row['correct']}")
for kind, lines in model.module.model.bias_sources["abc"].lines.items():
    for layer, calibrated in enumerate(lines if isinstance(lines, list) else [lines]):
        for d in calibrated.directions:
            kept = (d.values > float("-inf")).nonzero().tolist()
            print(f"{kind} layer {layer}: direction Δ={d.delta}, (head, offset c) with a line: "
                  f"{[(h, c + d.c_min) for h, c in kept]}")
