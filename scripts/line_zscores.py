"""Per-layer z-scores of the strongest attention line, per head and direction.

    python scripts/line_zscores.py configs/abc_nx1.yaml results/baselines/runs/nx1_vanilla/fit/checkpoints/best.ckpt

Decodes 256 training inputs with the checkpoint's model, averages cross-attention weights per
head (as ABC does with ``source: weights``, ``reduce: sum``) and prints, for every decoder
layer and direction Δ, the largest line z-score of each head and the bound √(C − 1). This is
how the README's "which layer holds the digit-reading line" figures were read.
"""

import sys

import torch

from abc_lightning.biases.calibration import average_lines, max_z
from abc_lightning.callbacks.abc import average_attention
from abc_lightning.cli import ABCLightningCLI

config, ckpt = sys.argv[1], sys.argv[2]
cli = ABCLightningCLI(args=["--config", config, "--trainer.logger=false", "--wandb.mode=disabled"], run=False)
cli.model.warm_start(ckpt)
model = cli.model.model.eval()
dm = cli.datamodule
dm.setup("fit")
idx = torch.randperm(len(dm._train), generator=torch.Generator().manual_seed(0))[:256].tolist()
batch = dm._train.__getitems__(idx)
averaged = average_attention(model, batch["src"], batch["tgt_out"].shape[1], "weights")
for layer, a in enumerate(averaged["cross"]):
    print(f"layer {layer + 1}, cross-attention {tuple(a.shape)}")
    for delta in (1, -1, 0):
        values, present, _ = average_lines(a, delta, "sum")
        v = values[:, present]
        z = ((v - v.mean(1, keepdim=True)) / v.std(1, keepdim=True)).max(1).values
        print(f"  Δ = {delta:+d}: max z per head {[round(x, 2) for x in z.tolist()]}, bound {max_z(int(present.sum())):.2f}")
