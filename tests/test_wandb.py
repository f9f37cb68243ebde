"""W&B without a server or an account: offline runs hold metrics, heatmaps and the config."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from abc_lightning.cli import wandb_logging

ROOT = Path(__file__).resolve().parents[1]
DEBUG = str(ROOT / "configs" / "debug.yaml")
DUMMY_KEY = "dummysecretkey0123456789abcdef0123456789"
HEATMAPS = '{"class_path": "abc_lightning.callbacks.AttentionHeatmaps", "init_args": {"every_n_epochs": 1}}'


def wandb_records(path: Path) -> list:
    """Records of a W&B run file (``run-*.wandb``): a LevelDB-style log of protobuf records."""
    from wandb.proto import wandb_internal_pb2 as pb

    raw, block, pos, buf, out = path.read_bytes(), 32768, 7, b"", []
    assert raw[:4] == b":W&B"
    while pos + 7 <= len(raw):
        left = block - pos % block
        length, kind = int.from_bytes(raw[pos + 4 : pos + 6], "little"), raw[pos + 6]
        if left < 7 or (kind == 0 and length == 0):  # block trailer / padding
            pos += left
            continue
        buf += raw[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last fragment of one
            record = pb.Record()
            record.ParseFromString(buf)
            out.append(record)
            buf = b""
    return out


def test_modes_without_account_or_network(monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", os.getcwd())  # no ~/.netrc
    monkeypatch.delenv("WANDB_MODE", raising=False)
    assert wandb_logging.resolve_mode("auto") == ("offline", "no API key (WANDB_API_KEY or ~/.netrc)")
    monkeypatch.setenv("WANDB_API_KEY", DUMMY_KEY)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    assert wandb_logging.resolve_mode("auto") == ("offline", "the W&B server cannot be reached")
    monkeypatch.setenv("WANDB_MODE", "disabled")
    assert wandb_logging.resolve_mode("auto")[0] == "disabled"
    assert wandb_logging.resolve_mode("offline")[0] == "offline"


@pytest.mark.slow
def test_offline_fit_writes_metrics_heatmaps_and_config_and_never_the_api_key():
    env = {**os.environ, "WANDB_API_KEY": DUMMY_KEY, "WANDB_BASE_URL": "http://127.0.0.1:9", "OMP_NUM_THREADS": "1"}
    env.pop("WANDB_MODE")  # auto: a key but no server -> offline
    proc = subprocess.run([sys.executable, "-m", "abc_lightning", "fit", "--config", DEBUG, "--trainer.max_epochs=2",
                           "--trainer.limit_train_batches=10", "--data.val_samples=20",
                           "--trainer.enable_progress_bar=false", f"--trainer.callbacks+={HEATMAPS}"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("W&B logs offline (the W&B server cannot be reached)") == 1
    run = Path("runs/debug/version_0")
    (offline,) = run.glob("wandb/offline-run-*")  # W&B inside the run's own folder
    records = wandb_records(next(offline.glob("run-*.wandb")))  # the process has exited: W&B has finished
    history = {item.key or "/".join(item.nested_key) for r in records if r.HasField("history") for item in r.history.item}
    assert {"val/acc", "val/acc@6", "val/acc@20", "val/loss"} <= history
    assert {"heatmaps/cross_attention_L20/filenames", "heatmaps/decoder_bias_L6/filenames",
            "heatmaps/accuracy_by_length/filenames"} <= history
    config = {item.key for r in records if r.HasField("config") for item in r.config.update}
    assert {"model.d_model", "data.class_path", "trainer.max_epochs"} <= config
    images = list(offline.glob("files/media/images/heatmaps/*.png"))
    assert len(images) == len(list(run.glob("heatmaps/*.png"))) > 10  # the same images, also as plain PNGs
    for path in Path("runs").rglob("*"):  # the key given by environment is nowhere on disk
        if path.is_file():
            assert DUMMY_KEY.encode() not in path.read_bytes(), path


def test_disabled_leaves_only_the_csv_run(capsys):
    from abc_lightning.cli import run_cli

    assert run_cli(["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
                    "--data.val_samples=10", "--trainer.enable_progress_bar=false", "--wandb.mode=disabled"]) == 0
    assert Path("runs/debug/version_0/metrics.csv").exists() and not list(Path("runs").rglob("wandb"))
