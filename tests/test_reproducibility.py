"""Same seed and config -> identical checkpoints; every run records how it was made."""

import json
from pathlib import Path

import torch

from abc_lightning.cli import ABCLightningCLI, run_cli

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


def test_one_seed_flag_seeds_the_data_split_too():
    def data_seed(*args):
        return ABCLightningCLI(args=["--config", DEBUG, "--trainer.logger=false", *args], run=False).datamodule.seed

    assert data_seed("--seed_everything=3") == 3
    assert data_seed("--seed_everything=3", "--data.seed=5") == 5  # given: kept
    assert data_seed() == 0  # debug.yaml's seed_everything
    assert data_seed("--seed_everything=false") == 0


def test_the_saved_config_holds_the_data_seed_and_a_resume_keeps_it():
    args = ["fit", "--config", DEBUG, *SHORT, "--seed_everything=4", "--trainer.logger.init_args.version=s"]
    assert run_cli(args) == 0
    run = Path("runs/debug/s")
    assert "seed: 4" in (run / "config.yaml").read_text().split("data:")[1]
    resumed = [a.replace("max_epochs=1", "max_epochs=2") for a in args] + ["--ckpt_path", str(run / "checkpoints" / "last.ckpt")]
    assert run_cli(resumed) == 0
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 30
