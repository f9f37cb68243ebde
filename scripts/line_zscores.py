"""Per-layer z-scores of the strongest attention line, per head and direction.

    python scripts/line_zscores.py configs/abc.yaml --data=Nx1 results/baselines/runs/nx1_vanilla/fit/checkpoints/best.ckpt

Decodes 256 training inputs with the checkpoint's model, averages cross-attention weights per
head (as ABC does with ``source: weights``, ``reduce: sum``) and prints, for every decoder
layer and direction Δ, the largest line z-score of each head and the bound √(C − 1). This is
how the README's "which layer holds the digit-reading line" figures were read.
"""

import sys

import torch

from abc_lightning.biases.calibration import average_lines, max_z
from abc_lightning.evaluation import average_attention
from abc_lightning.cli import ABCLightningCLI

config, overrides, ckpt = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
cli = ABCLightningCLI(args=["--config", config, *overrides, "--trainer.logger=false", "--wandb.mode=disabled"], run=False)
cli.model.warm_start(ckpt)
model = cli.model.model.eval()
dm = cli.datamodule
train = dm.train_set
idx = torch.randperm(train.src.shape[0], generator=torch.Generator().manual_seed(0))[:256]
averaged = average_attention(model, train.src[idx].long(), train.tgt_out.shape[1], "weights")
for layer, a in enumerate(averaged["cross"]):
    print(f"layer {layer + 1}, cross-attention {tuple(a.shape)}")
    for delta in (1, -1, 0):
        values, present, _ = average_lines(a, delta, "sum")
        v = values[:, present]
        z = ((v - v.mean(1, keepdim=True)) / v.std(1, keepdim=True)).max(1).values
        print(f"  Δ = {delta:+d}: max z per head {[round(x, 2) for x in z.tolist()]}, bound {max_z(int(present.sum())):.2f}")
