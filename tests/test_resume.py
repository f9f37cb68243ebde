"""A real training subprocess killed with SIGKILL in each ABC phase, then resumed with
``fit --ckpt_path``, ends exactly where an uninterrupted run ends."""

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
STEPS_PER_EPOCH = 12


CONFIG = """
seed_everything: 0
trainer:
  max_epochs: 6
  limit_train_batches: {steps}
  limit_val_batches: 1
  enable_progress_bar: false
  logger:
    class_path: lightning.pytorch.loggers.CSVLogger
    init_args: {{save_dir: runs, name: debug, version: {version}}}
  callbacks:
    - class_path: lightning.pytorch.callbacks.ModelCheckpoint
      init_args: {{save_last: true}}
{kill}bias:
  class_path: abc_lightning.callbacks.AttentionBiasCalibration
  init_args:
    preset: paper
    phases: {{threshold: 0.0, patience: 2, retrain_patience: 3}}
    lines: {{samples: 16, kappa_cross: 1.0}}
    retraining: {{reinitialize: true, dropout: 0.2}}
model:
  d_model: 32
  heads: 2
  decoder_layers: 2
  feedforward: 64
  dropout: 0.1
  positional: Sinusoidal
  lr: 0.003
data:
  class_path: Successor
  init_args:
    batch_size: 64
    val_lengths: [6]
    val_samples: 50
    val_split_samples: 100
"""


def fit(version: str, kill: str = "", resume: bool = False) -> int:
    """One ``fit`` in a fresh process; ``kill`` adds the KillAt callback with those init_args."""
    killer = f"    - class_path: tests.killpoint.KillAt\n      init_args: {kill}\n" if kill else ""
    config = Path(f"{version}{'_resume' if resume else ''}.yaml")
    config.write_text(CONFIG.format(steps=STEPS_PER_EPOCH, version=version, kill=killer))
    args = [sys.executable, "-m", "abc_lightning", "fit", "--config", str(config)]
    if resume:
        args += ["--ckpt_path", str(Path("runs/debug") / version / "checkpoints" / "last.ckpt")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=600).returncode


def final_state(version: str) -> dict:
    return torch.load(Path("runs/debug") / version / "checkpoints" / "last.ckpt", weights_only=True)


@pytest.mark.slow
def test_sigkill_in_every_phase_then_resume_matches_an_uninterrupted_run():
    assert fit("full") == 0
    full = final_state("full")
    abc_full = full["callbacks"]["AttentionBiasCalibration"]
    assert abc_full["phase"] == "done"  # calibrated after epoch 1, retrained for three validations
    rng = random.Random(0)
    kills = {
        "interpolate": f'{{"step": {rng.randrange(STEPS_PER_EPOCH + 1, 2 * STEPS_PER_EPOCH)}}}',  # epoch 1
        "calibrate": '{"after_calibration": true}',  # calibrated, checkpoint not yet written
        "retrain": f'{{"step": {rng.randrange(3 * STEPS_PER_EPOCH + 1, 4 * STEPS_PER_EPOCH)}}}',  # epoch 3
    }
    for phase, kill in kills.items():
        assert fit(phase, kill) == -9, phase  # killed by SIGKILL
        assert fit(phase, resume=True) == 0, phase
        resumed = final_state(phase)
        assert resumed["global_step"] == full["global_step"], phase
        for key, value in full["state_dict"].items():
            assert torch.equal(value, resumed["state_dict"][key]), (phase, key)
        abc = resumed["callbacks"]["AttentionBiasCalibration"]
        assert abc["phase"] == "done" and abc["lines"]["cross"]["directions"][0]["values"].equal(
            abc_full["lines"]["cross"]["directions"][0]["values"]), phase
