"""Exact-match accuracy of an N×1 checkpoint split by the multiplier digit.

    python scripts/accuracy_by_multiplier.py configs/baselines/nx1_sandwich.yaml <best.ckpt> [length]

The README's remark that N×1 Sandwich is right only when the multiplier is 0 comes from this
(1,000 samples at 20 digits).
"""

import sys

import torch

from abc_lightning.cli import ABCLightningCLI

config, ckpt = sys.argv[1], sys.argv[2]
length = int(sys.argv[3]) if len(sys.argv) > 3 else 20
cli = ABCLightningCLI(args=["--config", config, "--trainer.logger=false", "--wandb.mode=disabled"], run=False)
cli.model.warm_start(ckpt)
model = cli.model.model.eval()
data = cli.datamodule.length_set(length, 1000, salt=11).data
src, target = data.src.long(), data.tgt_out.long()
correct = (model.generate(src, target.shape[1]) == target).all(1)
multiplier = src[:, -2]  # natural form: "$ a * b &", b just before EOS
for digit in range(10):
    chosen = multiplier == digit
    print(f"multiplier {digit}: {int(chosen.sum())} samples, {100 * correct[chosen].float().mean():.1f}%")
print(f"all: {100 * correct.float().mean():.2f}%")
