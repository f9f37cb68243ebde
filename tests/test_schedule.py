"""The learning-rate schedule: warmup, then constant or a decay to min_lr_ratio at the step budget."""

import math
from pathlib import Path

import pytest

from abc_lightning.cli import ABCLightningCLI, run_cli
from abc_lightning.training.module import lr_factor
from tests.test_cli import DEBUG, error_line


def test_warmup_then_cosine_reaches_the_floor_at_the_budget():
    f = [lr_factor(s, "cosine", warmup=10, total=110) for s in range(130)]
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert f[60] == pytest.approx(0.5)  # half-way through the decay
    assert all(a >= b for a, b in zip(f[9:], f[10:]))  # never rises after the warmup
    assert f[110] == f[129] == 0.0
    assert lr_factor(60, "linear", 10, 110) == pytest.approx(0.5)
    assert lr_factor(110, "linear", 10, 110, floor=0.1) == pytest.approx(0.1)
    assert lr_factor(60, "cosine", 10, 110, floor=0.2) == pytest.approx(0.2 + 0.8 * 0.5)
    assert [lr_factor(s, "constant", 4, None) for s in (0, 3, 50)] == [0.25, 1.0, 1.0]


def test_a_fit_ends_its_decay_on_its_last_step(tmp_path):
    cli = ABCLightningCLI(args=["fit", "--config", DEBUG, "--trainer.max_epochs=2", "--trainer.limit_train_batches=5",
                                "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false",
                                f"--trainer.logger.init_args.save_dir={tmp_path}", "--model.lr_schedule=cosine",
                                "--model.warmup_steps=2", "--model.lr=0.01"])
    assert cli.trainer.global_step == 10
    lr = cli.trainer.optimizers[0].param_groups[0]["lr"]
    assert lr == pytest.approx(0.01 * lr_factor(10, "cosine", 2, 10)) and lr == 0.0
    assert math.isclose(cli.trainer.lr_scheduler_configs[0].scheduler.base_lrs[0], 0.01)


@pytest.mark.parametrize("override,expected", [
    (["--model.lr_schedule=step"], "model.lr_schedule must be one of constant, cosine, linear, got 'step'"),
    (["--model.min_lr_ratio=2"], "model.min_lr_ratio must be in [0, 1], got 2"),
    (["--model.lr_schedule=cosine", "--trainer.max_epochs=-1"], "set trainer.max_epochs or trainer.max_steps"),
    (["--model.lr_schedule=linear", "--trainer.max_steps=5", "--model.warmup_steps=5"],
     "trainer.max_steps=5 must exceed model.warmup_steps=5"),
])
def test_bad_schedules_get_one_line_before_any_run(capsys, tmp_path, override, expected):
    line = error_line(capsys, ["fit", "--config", DEBUG, f"--trainer.logger.init_args.save_dir={tmp_path}", *override])
    assert expected in line
    assert not any(Path(tmp_path).iterdir())
