"""Exact-match accuracy of an N×1 checkpoint split by the multiplier digit.

    python scripts/accuracy_by_multiplier.py <run>/checkpoints/last.ckpt [length] [--samples 1000]

Loads the checkpoint as ``abc_lightning.load`` does (its own config and biases, ABC's
calibrated lines included) and decodes ``samples`` random inputs of ``length`` digits
(default 20). docs/history.md's per-multiplier figures come from this.
"""

import argparse

import torch

from abc_lightning import load

parser = argparse.ArgumentParser()
parser.add_argument("checkpoint")
parser.add_argument("length", type=int, nargs="?", default=20)
parser.add_argument("--samples", type=int, default=1000)
args = parser.parse_args()
trained = load(args.checkpoint)
if trained.task.name != "nx1":
    parser.error(f"{args.checkpoint} is a {trained.task.name} model; this script splits N×1 by its multiplier")
data = trained.data.length_set(args.length, args.samples, salt=11).data
src, target = data.src.long(), data.tgt_out.long()
with torch.inference_mode():
    correct = (trained.module.model.generate(src, target.shape[1]) == target).all(1)
multiplier = src[:, -2]  # the multiplier's last copy (aligned) or the multiplier itself, just before EOS
for digit in range(10):
    chosen = multiplier == digit
    print(f"multiplier {digit}: {int(chosen.sum())} samples, {100 * correct[chosen].float().mean():.1f}%")
print(f"all: {100 * correct.float().mean():.2f}%")
