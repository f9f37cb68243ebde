"""Test one retrained ABC run under both rules for moving vertical cross-attention lines.

    python scripts/abc_vertical_rule.py <run dir>/config.yaml <run dir> [--kinds cross decoder]
        [--lengths 6 10 20 60] [--samples 1000]

``<run dir>`` is a fit's ``runs/<name>/version_N`` (its ``checkpoints/last.ckpt`` and
``abc/lines.pt`` are read; its ``config.yaml`` says whether it retrained without
positions). With ``align: segments`` the two rules agree at the calibration size, so the
retraining is the same under both and only the extension to longer inputs differs:
``left`` keeps a vertical line's place value (the segment rule for every line), ``nearest``
keeps a line in an operand's left half on that operand's start. Prints exact-match accuracy
per length for each rule (applied to the lines of ``--kinds``; other kinds keep the run's
rule), on the same samples. Without segments (decoder self-attention) ``nearest`` moves a
line in the right half of Ā with the end of the sequence. The README's comparison comes from this.
"""

import argparse

import torch
import yaml

from abc_lightning.biases.abc import load_calibrated_bias
from abc_lightning.cli import ABCLightningCLI

parser = argparse.ArgumentParser()
parser.add_argument("config")
parser.add_argument("run")
parser.add_argument("--lengths", type=int, nargs="+", default=[6, 10, 20, 60])
parser.add_argument("--samples", type=int, default=1000)
parser.add_argument("--kinds", nargs="+", default=["cross"], help="the kinds whose vertical lines get each rule")
args = parser.parse_args()

saved = yaml.safe_load(open(f"{args.run}/config.yaml"))
abc = next(c["init_args"] for c in saved["trainer"]["callbacks"] if c["class_path"].endswith("AttentionBiasCalibration"))
cli = ABCLightningCLI(args=["--config", args.config, "--trainer.logger=false", "--wandb.mode=disabled"], run=False)
cli.model.load_state_dict(torch.load(f"{args.run}/checkpoints/last.ckpt", weights_only=True)["state_dict"])
model, dm = cli.model.model.eval(), cli.datamodule
model.use_positional = abc.get("retrain_positional", "keep") != "none"
for rule in ("left", "nearest"):
    bias = load_calibrated_bias(f"{args.run}/abc/lines.pt", soft=abc.get("soft", False))  # fresh lines, empty cache
    for kind in args.kinds:
        for entry in bias.lines[kind] if isinstance(bias.lines[kind], list) else [bias.lines[kind]]:
            entry.vertical = rule
    model.install_bias("abc", bias)
    row = []
    with torch.inference_mode():
        for length in args.lengths:
            ds = dm.length_set(length, args.samples, salt=7).data
            target = ds.tgt_out.long()
            out = model.generate(ds.src.long(), target.shape[1])[:, : target.shape[1]]
            row.append(f"{length}: {100 * float((out == target).all(1).float().mean()):.2f}%")
    print(f"vertical {rule:8s}", "  ".join(row), flush=True)
