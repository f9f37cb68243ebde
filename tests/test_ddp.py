"""Two-process DDP (gloo on CPU) counts every test sample exactly once and writes one run folder."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEBUG = str(ROOT / "configs" / "debug.yaml")


def cli(*args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "abc_lightning", *args], env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_ddp_test_matches_one_process_without_double_counting():
    common = ["--config", DEBUG, "--trainer.enable_progress_bar=false"]
    cli("fit", *common, "--trainer.max_epochs=1", "--trainer.limit_train_batches=30", "--data.val_samples=20")
    ckpt = "runs/debug/version_0/checkpoints/last.ckpt"
    lengths = ["--data.test_samples=101", "--data.test_lengths=[6, 7]", "--ckpt_path", ckpt]  # 101: odd on purpose
    cli("test", *common, *lengths, "--trainer.strategy=ddp", "--trainer.devices=2", "--trainer.accelerator=cpu")
    cli("test", *common, *lengths)
    assert sorted(p.name for p in Path("runs/debug/version_0/test").iterdir()) == ["version_0", "version_1"]
    ddp = json.loads(Path("runs/debug/version_0/test/version_0/test_accuracy.json").read_text())["rows"]
    single = json.loads(Path("runs/debug/version_0/test/version_1/test_accuracy.json").read_text())["rows"]
    assert [r["samples"] for r in ddp] == [101, 101]  # not 102: no padded repeats
    assert ddp == single


@pytest.mark.slow
def test_ddp_fit_gives_the_per_length_accuracy_of_one_process_on_the_same_data():
    # Rank r takes every 2nd index of the epoch's permutation, so two ranks with batch 32
    # see, step by step, exactly the 64 samples one process sees; DDP averages the gradients.
    common = ["--config", DEBUG, "--trainer.enable_progress_bar=false", "--trainer.max_epochs=1",
              "--trainer.limit_train_batches=20", "--data.val_samples=101", "--data.val_lengths=[6, 20]",
              "--trainer.num_sanity_val_steps=0"]
    cli("fit", *common, "--data.batch_size=64")
    cli("fit", *common, "--data.batch_size=32", "--trainer.strategy=ddp", "--trainer.devices=2",
        "--trainer.accelerator=cpu")
    single = json.loads(Path("runs/debug/version_0/val_accuracy.json").read_text())["rows"]
    ddp = json.loads(Path("runs/debug/version_1/val_accuracy.json").read_text())["rows"]
    assert [r["samples"] for r in ddp] == [101, 101]
    assert ddp == single
