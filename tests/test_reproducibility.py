"""Same seed and config -> identical checkpoints; every run records how it was made."""

import json
from pathlib import Path

import torch

from abc_lightning.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
DEBUG = str(ROOT / "configs" / "debug.yaml")
SHORT = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=15", "--data.val_samples=20",
         "--data.val_split_samples=40", "--trainer.enable_progress_bar=false"]


def fit(version: str) -> Path:
    assert run_cli(["fit", "--config", DEBUG, *SHORT, f"--trainer.logger.init_args.version={version}"]) == 0
    return Path("runs/debug") / version


def test_two_runs_with_one_seed_give_equal_checkpoints():
    a, b = fit("a"), fit("b")
    ckpt_a = torch.load(a / "checkpoints" / "last.ckpt", weights_only=True)
    ckpt_b = torch.load(b / "checkpoints" / "last.ckpt", weights_only=True)
    assert ckpt_a["global_step"] == ckpt_b["global_step"] == 15
    assert ckpt_a["state_dict"].keys() == ckpt_b["state_dict"].keys()
    for key, value in ckpt_a["state_dict"].items():
        assert torch.equal(value, ckpt_b["state_dict"][key]), key
    moments_a = ckpt_a["optimizer_states"][0]["state"]
    moments_b = ckpt_b["optimizer_states"][0]["state"]
    assert all(torch.equal(moments_a[k]["exp_avg"], moments_b[k]["exp_avg"]) for k in moments_a)
    assert (a / "metrics.csv").read_text() == (b / "metrics.csv").read_text()


def test_every_run_records_seed_versions_commit_and_config():
    run = fit("info")
    info = json.loads((run / "run_info.json").read_text())
    assert info["seed"] == "0" and info["stage"] == "fit"
    assert set(info["versions"]) >= {"torch", "lightning", "abc_lightning", "python"}
    assert "git_commit" in info and info["deterministic"] is True
    # the CPU's kernel family decides whether one seed on one thread gives the same model again
    assert info["cpu"].endswith(", " + torch.backends.cpu.get_cpu_capability())
    assert info["torch_threads"] == torch.get_num_threads() and info["device"] == "cpu"
    assert "seed_everything: 0" in (run / "config.yaml").read_text()
