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
    assert sorted(p.name for p in Path("runs/debug").iterdir()) == ["version_0", "version_1", "version_2"]
    ddp = json.loads(Path("runs/debug/version_1/test_accuracy.json").read_text())["rows"]
    single = json.loads(Path("runs/debug/version_2/test_accuracy.json").read_text())["rows"]
    assert [r["samples"] for r in ddp] == [101, 101]  # not 102: no padded repeats
    assert ddp == single
