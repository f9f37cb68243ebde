"""The command line's surface: one error line per mistake, nothing left behind, no noise."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch
import yaml

from abc_lightning import reproduce
from abc_lightning.reproduce import sweep
from abc_lightning.cli import ABCLightningCLI, run_cli

ROOT = Path(__file__).resolve().parents[1]
DEBUG = str(ROOT / "configs" / "debug.yaml")
FIT = ["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--data.val_samples=10"]


def fails_cleanly(capsys, args: list[str], keep: set[str] = frozenset()) -> str:
    """Run the CLI in-process: exit 2, one error line, no traceback, and no file or folder
    left in the working directory beyond ``keep``. Returns the error line."""
    try:
        code = run_cli(args)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.startswith("abc_lightning: error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert {p.name for p in Path.cwd().iterdir()} <= set(keep), sorted(p.name for p in Path.cwd().rglob("*"))
    return lines[0]


@pytest.fixture
def wandb_offline(monkeypatch):
    """W&B on (offline), so a run that started would leave a wandb/ folder behind."""
    monkeypatch.setenv("WANDB_MODE", "offline")


# ---- one test per cause of a traceback or a leftover folder --------------------------------
def test_optimizer_settings_are_checked_when_the_model_is_built(capsys, wandb_offline):
    assert "model.lr must be > 0, got -1.0" in fails_cleanly(capsys, [*FIT, "--model.lr=-1"])
    assert "model.betas" in fails_cleanly(capsys, [*FIT, "--model.betas=[0.9, 1.5]"])


def test_checkpoint_keywords_need_a_fit_in_the_same_process(capsys, wandb_offline):
    line = fails_cleanly(capsys, ["test", "--config", DEBUG, "--ckpt_path", "best"])
    assert "--ckpt_path best only names a checkpoint inside one fit" in line


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_gpu_accelerator_without_a_gpu(capsys, wandb_offline):
    assert "torch sees no CUDA GPU" in fails_cleanly(capsys, [*FIT, "--trainer.accelerator=gpu"])


def test_other_trainer_misconfigurations_are_one_line(capsys, wandb_offline):
    line = fails_cleanly(capsys, [*FIT, "--trainer.accelerator=cpu", "--trainer.devices=-2"])
    assert line.startswith("abc_lightning: error: trainer: ")


@pytest.mark.parametrize("kind", ["missing", "truncated", "other architecture"])
def test_init_from_is_checked_before_the_run_starts(capsys, wandb_offline, kind):
    path = Path("source.ckpt")
    if kind != "missing":
        d_model = 64 if kind == "other architecture" else 32
        model = ABCLightningCLI(args=["--config", DEBUG, f"--model.d_model={d_model}"], run=False).model
        torch.save({"state_dict": model.state_dict()}, path)
        if kind == "truncated":
            path.write_bytes(path.read_bytes()[:200])
    line = fails_cleanly(capsys, [*FIT, f"--model.init_from={path}"], keep={"source.ckpt"})
    assert {"missing": "checkpoint not found", "truncated": "cannot load checkpoint",
            "other architecture": "shape mismatch"}[kind] in line


def test_positions_too_short_for_the_lengths(capsys, wandb_offline):
    line = fails_cleanly(capsys, [*FIT, "--model.positional=Learned", "--model.positional.max_position=16"])
    assert "raise its max_position" in line


def test_callbacks_check_the_data_before_the_run_starts(capsys, wandb_offline):
    line = fails_cleanly(capsys, ["fit", "--config", str(ROOT / "configs" / "abs.yaml"), "--data=Addition",
                                  "--data.aligned=false"])
    assert "needs aligned input" in line


def test_a_run_that_fails_before_learning_anything_is_removed(capsys, wandb_offline, monkeypatch):
    from abc_lightning.training import callbacks as training
    from abc_lightning.errors import ConfigError

    def fail(self, trainer, pl_module):
        raise ConfigError("late")

    monkeypatch.setattr(training.LineProgress, "on_train_start", fail)  # the progress line of a piped run
    assert "late" in fails_cleanly(capsys, FIT)


# ---- no writes outside runs/ --------------------------------------------------------------
def test_without_a_logger_a_run_still_writes_only_under_runs(capsys):
    heatmaps = '{"class_path": "abc_lightning.callbacks.AttentionHeatmaps", "init_args": {"every_n_epochs": 1}}'
    assert run_cli([*FIT, "--trainer.logger=false", f"--trainer.callbacks+={heatmaps}"]) == 0
    assert [p.name for p in Path.cwd().iterdir()] == ["runs"]
    run = Path("runs/no_logger/version_0")
    assert (run / "config.yaml").is_file() and (run / "val_accuracy.md").is_file()
    assert list(run.glob("checkpoints/*.ckpt")) and list(run.glob("heatmaps/*.png"))


# ---- noise ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_a_fit_prints_progress_our_notices_and_one_table(tmp_path):
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1"}
    env.pop("WANDB_SILENT", None)
    proc = subprocess.run([sys.executable, "-m", "abc_lightning", *FIT[:3], "--trainer.max_epochs=2"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    foreign = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("abc_lightning: ")]
    assert not foreign, foreign  # no warnings, tips, banners or GPU/TPU lines from other packages
    assert "\x1b" not in proc.stdout + proc.stderr and "\r" not in proc.stdout  # piped: no terminal codes
    assert [ln.split(",")[1].strip() for ln in proc.stdout.splitlines() if ln.startswith("epoch ")] == \
        ["step 100", "step 200"]  # one progress line per validation
    assert proc.stdout.count("| length | samples | accuracy % |") == 1
    test = subprocess.run([sys.executable, "-m", "abc_lightning", "test", "--config", DEBUG, "--ckpt_path",
                           "runs/debug/version_0/checkpoints/best.ckpt"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert test.returncode == 0, test.stderr
    assert [ln for ln in test.stderr.splitlines() if not ln.startswith("abc_lightning: ")] == []
    assert "DataLoader" not in test.stdout and test.stdout.count("| length | samples | accuracy % |") == 1


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as exit_:
        run_cli(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "usage: python -m abc_lightning" in out and "__main__.py" not in out
    for name in ("fit", "validate", "test", "predict", "reproduce", "sweep"):
        assert f"\n  {name} " in out, name


# ---- reproduce ----------------------------------------------------------------------------
@pytest.mark.parametrize("args,expected", [(["--only", "successor_w2"], "--only successor_w2: no such cell"),
                                           (["--jobs", "0"], "--jobs must be >= 1")])
def test_reproduce_refuses_work_it_cannot_do(capsys, args, expected):
    with pytest.raises(SystemExit) as exit_:
        reproduce.main(["table1", *args])
    assert exit_.value.code == 2 and expected in capsys.readouterr().err
    assert not Path("results").exists()


def test_rebuilding_a_table_keeps_the_commit_and_date_its_cells_were_made_at(capsys):
    out = Path("results")
    (out / "table1").mkdir(parents=True)
    cell = reproduce.table1_cells()[2]
    record = {"rows": [{"length": 6, "accuracy": 100.0}], "train_seconds": 1.0, "steps": 10, "command": "x"}
    (out / "table1" / f"{cell.key}.json").write_text(json.dumps(record))
    (out / "table1.json").write_text(json.dumps({"commit": "abc1234", "date": "2020-01-02", "cells": [record]}))
    assert reproduce.main(["table1", "--table-only", "--results", str(out)]) == 0
    assert "Commit `abc1234`, 2020-01-02" in (out / "table1.md").read_text()
    record.update(commit="def5678", date="2021-03-04")  # a cell re-run at another commit names it
    (out / "table1" / f"{cell.key}.json").write_text(json.dumps(record))
    reproduce.main(["table1", "--table-only", "--results", str(out)])
    assert "Commit `def5678`, 2021-03-04" in (out / "table1.md").read_text()


# ---- sweeps ---------------------------------------------------------------------------------
def toy_sweep(tmp_path: Path, parameters: dict, script: str) -> Path:
    spec = {"name": "toy", "method": "grid", "metric": {"name": "val/acc@60"}, "parameters": parameters,
            "command": ["python", "-c", script, "${args}"]}
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_sweep_puts_one_run_on_each_gpu(tmp_path, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # two GPUs, as torch would see them
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    log = tmp_path / "gpus.txt"
    script = (f"import os, sys, time; open({str(log)!r}, 'a').write(os.environ['CUDA_VISIBLE_DEVICES'] + '\\n'); "
              "time.sleep(0.3)")
    path = toy_sweep(tmp_path, {"a": {"values": [1, 2, 3, 4]}}, script)
    assert sweep.main([str(path), "--gpus", "0,1", "--out", str(tmp_path / "records")]) == 0
    seen = log.read_text().split()
    assert len(seen) == 4 and set(seen) == {"0", "1"}  # each run sees exactly one GPU, and both are used
    assert sweep.main([str(path), "--gpus", "0,0"]) == 2
    assert sweep.main([str(path), "--gpus", "0,1", "--parallel", "3"]) == 2


def test_a_finished_sweep_has_a_summary_table_and_figure(tmp_path):
    # each fake run writes the record the CLI's AccuracyTable copies for a sweep
    script = ("import json, os, sys; a = {k: float(v) for k, v in (x[2:].split('=') for x in sys.argv[1:])}; "
              "acc = 10 * a['lr'] + a['w']; "
              "json.dump({'rows': [{'length': 6, 'accuracy': 100.0}, {'length': 60, 'accuracy': acc}], "
              "'seconds': 1.5, 'global_step': 200}, "
              f"open(os.path.join(os.environ[{sweep.RECORD_ENV!r}], 'val_accuracy.json'), 'w')); "
              "json.dump({'rows': [{'length': 60, 'accuracy': acc, 'worst': acc / 2}]}, "
              f"open(os.path.join(os.environ[{sweep.RECORD_ENV!r}], 'test_accuracy.json'), 'w'))")
    path = toy_sweep(tmp_path, {"lr": {"values": [1, 2]}, "w": {"values": [0, 1, 2]}, "T": {"values": [3, 4]}}, script)
    out = tmp_path / "records"
    assert sweep.main([str(path), "--parallel", "2", "--out", str(out)]) == 0
    with (out / "toy" / "summary.csv").open() as fh:
        import csv

        rows = list(csv.DictReader(fh))
    assert len(rows) == 12 and all(r["status"] == "ok" for r in rows)
    for r in rows:
        assert float(r["val/acc@60"]) == 10 * float(r["lr"]) + float(r["w"])
        assert r["train s"] == "1.5" and r["steps"] == "200"
        assert float(r["test/worst@60"]) == float(r["test/acc@60"]) / 2  # the worst-case column, beside
    columns = list(rows[0])
    assert columns.index("test/acc@60") < columns.index("test/worst@60") < columns.index("train s")
    assert (out / "toy" / "summary.md").read_text().count("\n| ") == 13  # header + 12 rows
    from matplotlib.image import imread

    image = imread(out / "toy" / "summary.png")
    assert image.shape[0] > 200 and image.shape[1] > 400  # two facets (T=3, T=4) side by side
    (out / "toy" / "summary.png").unlink()
    assert sweep.main([str(path), "--out", str(out), "--summary"]) == 0  # on demand, nothing re-run
    assert (out / "toy" / "summary.png").exists()


def test_sweep_values_and_counts_are_checked_before_anything_runs(tmp_path, capsys):
    path = toy_sweep(tmp_path, {"a": {"values": [1, None]}}, "pass")
    assert sweep.main([str(path)]) == 2
    assert "null value" in capsys.readouterr().err
    path = toy_sweep(tmp_path, {"a": {"values": [1]}}, "pass")
    assert sweep.main([str(path), "--count", "-1"]) == 2
    assert sweep.main([str(path), "--parallel", "0"]) == 2
    assert not Path("runs").exists()


def test_a_dry_run_checks_keys_against_the_cli(tmp_path, capsys):
    spec = sweep.load(ROOT / "sweeps" / "abs_grid.yaml")
    spec["parameters"] = {"model.lrr": {"values": [0.1]}}  # sic
    spec["command"] = [str(ROOT / c) if c.startswith("configs/") else c for c in spec["command"]]
    (tmp_path / "typo.yaml").write_text(yaml.safe_dump(spec))
    assert sweep.main([str(tmp_path / "typo.yaml"), "--dry-run"]) == 2
    assert "--model.lrr=0.1" in capsys.readouterr().err


# ---- packaging ------------------------------------------------------------------------------
def test_the_license_is_an_spdx_string():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"


def test_our_warnings_read_as_one_notice_line_and_others_keep_their_format():
    import warnings

    from abc_lightning import cli

    cli.quiet_third_party()
    ours = str(Path(cli.__file__).parent / "callbacks" / "abc.py")
    assert warnings.formatwarning("κ too high", UserWarning, ours, 311) == "abc_lightning: warning: κ too high\n"
    theirs = warnings.formatwarning("deprecated", DeprecationWarning, "/elsewhere/lib.py", 7, line="x = 1")
    assert theirs.startswith("/elsewhere/lib.py:7: DeprecationWarning: deprecated")
