"""Is a trained model length-invariant? Same operands, wider zero padding.

    python scripts/abc_length_probe.py <run>/checkpoints/last.ckpt [--samples 500]

Loads the checkpoint as ``abc_lightning.load`` does (its own config and biases, ABC's
calibrated lines included). ``samples`` random 6-digit operand tuples are written at the
training frame and at 1, 3 and 13 more leading zeros: the answers are the same, so a
length-invariant model is as accurate at every frame. Prints the exact-match accuracy and
the error rate of the first 8 output digits per frame, and how much the encoder output at
each token of the training frame changes (relative norm) when one leading zero is added.
docs/history.md's addition diagnosis comes from this.
"""

import argparse

import numpy as np
import torch

from abc_lightning import load
from abc_lightning.data import encode
from abc_lightning.tasks.base import pad_left, sample_decimal

parser = argparse.ArgumentParser()
parser.add_argument("checkpoint")
parser.add_argument("--samples", type=int, default=500)
args = parser.parse_args()
trained = load(args.checkpoint)
model, task, aligned = trained.module.model, trained.task, trained.data.aligned
rng = np.random.default_rng(0)
operands = [sample_decimal(rng, args.samples, 6, exhaustive=False) for _ in range(task.arity)]
if task.name == "nx1":
    operands[1] = rng.integers(0, 10, size=(args.samples, 1))
base = task.train_width


def written(width: int):
    return encode(task, [x if x.shape[1] == 1 else pad_left(x, width) for x in operands], aligned)


with torch.inference_mode():
    for width in (base, base + 1, base + 3, base + 13):
        data = written(width)
        target = data.tgt_out.long()
        wrong = model.generate(data.src.long(), target.shape[1]) != target
        print(f"frame {width}: {100 * (1 - wrong.any(1).float().mean()):.1f}% exact; error rate of output digits 1-8:",
              [round(float(x), 2) for x in wrong.float().mean(0)[:8]])
    memory = {w: model.encode(written(w).src.long())[0] for w in (base, base + 1)}
    # the training frame's tokens in the next one: each growing span grew one cell (one token,
    # or one column of `stride` tokens aligned) on its left, so a token moves right by that
    # much for every span starting at or before it
    starts = [start for start, _ in task.growing_segments(memory[base].shape[1], aligned)]
    stride = task.digit_stride(aligned) or 1
    keep = torch.tensor([j + stride * sum(start <= j for start in starts) for j in range(memory[base].shape[1])])
    change = (memory[base] - memory[base + 1][:, keep]).norm(dim=-1).mean(0) / memory[base].norm(dim=-1).mean(0)
    print("encoder output change per token of the training frame:", [round(float(x), 3) for x in change])
