"""Is a retrained ABC model length-invariant? Same operands, wider zero padding.

    python scripts/abc_length_probe.py <run dir>/config.yaml <run dir> [--no-positions]

``<run dir>`` is a fit's ``runs/<name>/version_N`` (its ``checkpoints/last.ckpt`` and
``abc/lines.pt`` are read); ``--no-positions`` for runs with ``retrain_positional: none``.
500 random 6-digit operand pairs are written at operand widths 8 (the training width), 9,
11 and 21: the answers are the same, so an invariant model is as accurate at every width.
Prints the exact-match accuracy and the error rate of the first 8 output digits per width,
and how much the encoder output at each token of the width-8 layout changes (relative
norm) when one leading zero is added. The README's addition diagnosis comes from this.
"""

import sys

import numpy as np
import torch

from abc_lightning.biases.abc import load_calibrated_bias
from abc_lightning.cli import ABCLightningCLI
from abc_lightning.tasks.base import pad_left, sample_decimal

config, run = sys.argv[1], sys.argv[2]
cli = ABCLightningCLI(args=["--config", config, "--trainer.logger=false", "--wandb.mode=disabled"], run=False)
cli.model.load_state_dict(torch.load(f"{run}/checkpoints/last.ckpt", weights_only=True)["state_dict"])
model, task = cli.model.model.eval(), cli.datamodule.task
model.install_bias("abc", load_calibrated_bias(f"{run}/abc/lines.pt"))
model.use_positional = "--no-positions" not in sys.argv
rng = np.random.default_rng(0)
operands = [sample_decimal(rng, 500, 6, exhaustive=False) for _ in range(task.arity)]
if task.name == "nx1":
    operands[1] = rng.integers(0, 10, size=(500, 1))


def written(width: int) -> list[np.ndarray]:
    return [pad_left(operands[0], width)] + [x if x.shape[1] == 1 else pad_left(x, width) for x in operands[1:]]


with torch.inference_mode():
    for width in (8, 9, 11, 21):
        src = torch.as_tensor(task.source(written(width))).long()
        target = torch.as_tensor(task.target(written(width))).long()
        wrong = model.generate(src, target.shape[1] + 1)[:, : target.shape[1]] != target
        print(f"width {width}: {100 * (1 - wrong.any(1).float().mean()):.1f}% exact; error rate of output digits 1-8:",
              [round(float(x), 2) for x in wrong.float().mean(0)[:8]])
    memory = {w: model.encode(torch.as_tensor(task.source(written(w))).long())[0] for w in (8, 9)}
    # the width-8 layout's tokens in the width-9 layout: each operand grew one column on its
    # left, so a token moves right by the number of operands starting at or before it
    starts = [start for start, _ in task.growing_segments(memory[8].shape[1])]
    keep9 = torch.tensor([j + sum(start <= j for start in starts) for j in range(memory[8].shape[1])])
    change = (memory[8] - memory[9][:, keep9]).norm(dim=-1).mean(0) / memory[8].norm(dim=-1).mean(0)
    print("encoder output change per token of the width-8 layout:", [round(float(x), 3) for x in change])
