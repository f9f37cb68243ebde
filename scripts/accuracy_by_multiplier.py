"""Exact-match accuracy of an N×1 checkpoint split by the multiplier digit.

    python scripts/accuracy_by_multiplier.py configs/baseline.yaml --data=Nx1 --model.positional=Sandwich <best.ckpt> [length] [--no-positions]

The README's remark that N×1 Sandwich is right only when the multiplier is 0 comes from this
(1,000 samples at 20 digits), and so do the per-multiplier figures of the ABC N×1 run with
union and segments only. For an ABC run the calibrated bias beside the checkpoint
(``<run>/abc/lines.pt``) is installed; ``--no-positions`` for ``retrain_positional: none``.
"""

import sys
from pathlib import Path

import torch

from abc_lightning.biases.abc import load_calibrated_bias
from abc_lightning.cli import ABCLightningCLI

args = [a for a in sys.argv[1:] if a != "--no-positions"]
length = int(args.pop()) if args[-1].isdigit() else 20
config, overrides, ckpt = args[0], args[1:-1], args[-1]
cli = ABCLightningCLI(args=["--config", config, *overrides, "--trainer.logger=false", "--wandb.mode=disabled"], run=False)
cli.model.warm_start(ckpt)
model = cli.model.model.eval()
lines = Path(ckpt).resolve().parents[1] / "abc" / "lines.pt"
if lines.exists():
    model.install_bias("abc", load_calibrated_bias(lines))
model.set_positional("--no-positions" not in sys.argv)
data = cli.datamodule.length_set(length, 1000, salt=11).data
src, target = data.src.long(), data.tgt_out.long()
correct = (model.generate(src, target.shape[1]) == target).all(1)
multiplier = src[:, -2]  # natural form: "$ a * b &", b just before EOS
for digit in range(10):
    chosen = multiplier == digit
    print(f"multiplier {digit}: {int(chosen.sum())} samples, {100 * correct[chosen].float().mean():.1f}%")
print(f"all: {100 * correct.float().mean():.2f}%")
