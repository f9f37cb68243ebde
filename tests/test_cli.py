"""The CLI parses every shipped config and turns bad input into one clear line, exit 2."""

import os
import warnings
from pathlib import Path

import pytest
import torch

from abc_lightning.cli import ABCLightningCLI, run_cli
from abc_lightning.cli import preflight

from tests.helpers import one_error_line

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))
DEBUG = str(ROOT / "configs" / "debug.yaml")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: str(p.relative_to(ROOT / "configs")))
def test_every_shipped_config_parses_and_builds(config):
    cli = ABCLightningCLI(args=["--config", str(config)], run=False)
    assert cli.model.model.d_model >= 1
    assert type(cli.datamodule).__name__ in config.read_text()


@pytest.mark.slow
def test_every_cell_reproduce_runs_parses_and_builds(monkeypatch):
    """The cells are generated (task registry × table rows), not files: build each one."""
    from abc_lightning import reproduce

    monkeypatch.chdir(ROOT)  # the cells name configs relative to the checkout, as printed in the tables
    cells = reproduce.all_cells()
    assert len(cells) > 100
    for cell in cells:
        cli = ABCLightningCLI(args=["--config", cell.config, *cell.overrides, "--trainer.logger=false"], run=False)
        assert cli.datamodule.task.name == cell.task, cell.key


def test_abs_parity_is_the_scaffolded_cell():
    cli = ABCLightningCLI(args=["--config", str(ROOT / "configs" / "abs.yaml"), "--data=Parity"], run=False)
    windows = [cb for cb in cli.trainer.callbacks if type(cb).__name__ == "AttentionWindow"]
    assert windows and windows[0].self_width_for(cli.datamodule) == 1 and windows[0].cross_width_for(cli.datamodule) == 1
    assert cli.model.model.position_index(4).tolist() == [0, 1, 2, 0]
    addition = ABCLightningCLI(args=["--config", str(ROOT / "configs" / "abs.yaml"), "--data=Addition"], run=False)
    window = next(cb for cb in addition.trainer.callbacks if type(cb).__name__ == "AttentionWindow")
    assert window.cross_width_for(addition.datamodule) == 0 and addition.datamodule.aligned  # the task's own window


@pytest.mark.parametrize("task,period", [("Parity", 3), ("Subtraction", 2), ("Nx3", 4)])
def test_abs_takes_the_task_s_own_cpi_period_unless_told_another(task, period):
    abs_yaml = str(ROOT / "configs" / "abs.yaml")
    cli = ABCLightningCLI(args=["--config", abs_yaml, f"--data={task}", "--trainer.logger=false"], run=False)
    assert cli.model.model.position_index.period == period
    assert cli.config.model.position_index.init_args.period == period  # the saved config holds the number
    told = ABCLightningCLI(args=["--config", abs_yaml, f"--data={task}", "--model.position_index.period=5",
                                 "--trainer.logger=false"], run=False)
    assert told.model.model.position_index.period == 5


def test_a_checkpoint_of_the_task_s_period_is_tested_with_the_config_it_was_trained_with(tmp_path):
    """The checkpoint holds the resolved number (2 for subtraction); the same config, still
    saying period: task, is the same run, not a conflicting one."""
    abs_yaml = str(ROOT / "configs" / "abs.yaml")
    common = ["--config", abs_yaml, "--data=Subtraction", f"--trainer.logger.init_args.save_dir={tmp_path}",
              "--data.val_lengths=[3]", "--data.val_samples=5", "--data.val_split_samples=5"]
    assert run_cli(["fit", *common, "--trainer.max_steps=2", "--trainer.max_epochs=1", "--model.warmup_steps=0",
                    "--model.lr_schedule=constant"]) == 0
    ckpt = next(tmp_path.glob("abs/version_0/checkpoints/last.ckpt"))
    import yaml

    from abc_lightning.runs.checkpoints import load_checkpoint, stored_config

    stored = yaml.safe_load(stored_config(load_checkpoint(ckpt)))
    assert stored["model"]["position_index"]["init_args"]["period"] == 2
    assert run_cli(["test", *common, "--ckpt_path", str(ckpt), "--data.test_lengths=[3]",
                    "--data.test_samples=5"]) == 0


def test_a_period_measured_to_fail_warns_and_another_does_not(monkeypatch, tmp_path):
    """The warning is a measurement's: only a period the task lists in failing_periods."""
    from abc_lightning.tasks.subtraction import SubtractionTask as Subtraction

    args = ["--config", str(ROOT / "configs" / "abs.yaml"), "--data=Subtraction", "--model.position_index.period=3",
            "--trainer.logger=false", f"--trainer.default_root_dir={tmp_path}"]
    monkeypatch.setattr(Subtraction, "failing_periods", {3: "measured here"})
    with pytest.warns(UserWarning, match="subtraction with CPI period 3: measured here"):
        cli = ABCLightningCLI(args=args, run=False)
        preflight.check_together("fit", cli.trainer, cli.model, cli.datamodule, resuming=False)
    monkeypatch.setattr(Subtraction, "failing_periods", {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cli = ABCLightningCLI(args=args, run=False)
        preflight.check_together("fit", cli.trainer, cli.model, cli.datamodule, resuming=False)
    assert not [w for w in caught if "CPI period" in str(w.message)]


def error_line(capsys, args):
    """Run the CLI; return its single stderr error line (parser errors exit through SystemExit)."""
    try:
        code = run_cli(args)
    except SystemExit as exc:
        code = exc.code
    assert code == 2
    return one_error_line(capsys)


@pytest.mark.parametrize("override,expected", [
    (["--data=Exponent"], "data: unknown class 'Exponent'; choose one of"),
    (["--data.task=addition"], "data.task is gone since abc_lightning 0.2"),
    (["--model.positional=Foo"], "model.positional: unknown class 'Foo'"),
    (["--bias.self_width=-1"], "w >= 0"),
    (["--bias.self_widht=1"], "bias: AttentionWindow has no option 'self_widht'; its options: ['self_width', "),
    (['--trainer.callbacks=[{"class_path": "abc_lightning.callbacks.AttentionWindow"}]'], "is a bias strategy"),
    (["--model.position_index=CyclicIndex", "--model.position_index.period=0"], "T must be an integer >= 1"),
    (["--model.position_index=CyclicIndex", "--model.position_index.source_from=middle"],
     "source_from must be one of start, end"),
    (["--data.test_lengths=[6, 0]"], "cannot produce [0]"),
    (["--data.val_lengths=[20000]"], "cannot produce [20000]"),
    (["--model.heads=3"], "must divide d_model"),
    (["--data.batch_size=0"], "batch_size must be an integer >= 1"),
])
def test_bad_config_values_get_one_line(capsys, override, expected):
    # a step and a validation if the setting got through: the run would leave a checkpoint
    line = error_line(capsys, ["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=1",
                               "--trainer.limit_val_batches=1", *override])
    assert expected in line
    assert not Path("runs").exists() or not any(Path("runs").rglob("*")), "a refused run left a folder"


@pytest.mark.parametrize("name,expected", [
    ("abs_subtraction.yaml", "one config serves every task: --config configs/abs.yaml --data=Subtraction"),
    ("abs_signed_subtraction.yaml", "--config configs/abs.yaml --data=SignedSubtraction"),
    ("nothing.yaml", "'abs.yaml'"),
])
def test_missing_config_names_its_replacement(capsys, name, expected):
    line = error_line(capsys, ["fit", "--config", str(ROOT / "configs" / name)])
    assert f"{name} does not exist" in line and expected in line
    assert not Path("runs").exists() or not any(Path("runs").iterdir())


def plain_checkpoint(path: str, **extra) -> str:
    cli = ABCLightningCLI(args=["--config", DEBUG], run=False)
    torch.save({"state_dict": cli.model.state_dict(), **extra}, path)
    return path


def test_missing_checkpoint(capsys):
    assert "checkpoint not found: nowhere.ckpt" in error_line(capsys, ["test", "--config", DEBUG, "--ckpt_path", "nowhere.ckpt"])


def test_test_without_checkpoint(capsys):
    assert "pass --ckpt_path" in error_line(capsys, ["test", "--config", DEBUG])


def test_corrupt_checkpoint(capsys):
    Path("corrupt.ckpt").write_bytes(b"\x80\x04not a checkpoint")
    assert "cannot load checkpoint corrupt.ckpt" in error_line(capsys, ["test", "--config", DEBUG, "--ckpt_path", "corrupt.ckpt"])


def test_checkpoint_holding_a_pickled_callable_is_refused(capsys):
    plain_checkpoint("evil.ckpt", payload=os.system)
    line = error_line(capsys, ["test", "--config", DEBUG, "--ckpt_path", "evil.ckpt"])
    assert "refused" in line


def test_incompatible_checkpoint_names_the_mismatch(capsys):
    plain_checkpoint("small.ckpt")
    line = error_line(capsys, ["test", "--config", DEBUG, "--model.d_model=64", "--ckpt_path", "small.ckpt"])
    assert "does not fit the configured model" in line and "shape mismatch" in line


@pytest.mark.parametrize("bad,expected", [("12+34", "is not a successor input"), ("12a", "is not a successor input"),
                                          ("", "is not a successor input"),
                                          ("1 2 3 4 +", "has a space inside a number"),
                                          ("12 ", "starts or ends with a space")])
def test_malformed_predict_input(capsys, bad, expected):
    plain_checkpoint("ok.ckpt")
    line = error_line(capsys, ["predict", "--config", DEBUG, "--ckpt_path", "ok.ckpt", f"--data.predict_inputs=[{bad!r}]"])
    assert expected in line


def test_predict_needs_inputs(capsys):
    plain_checkpoint("ok.ckpt")
    assert "predict needs inputs" in error_line(capsys, ["predict", "--config", DEBUG, "--ckpt_path", "ok.ckpt"])


def test_init_from_copies_the_weights_of_another_checkpoint():
    torch.manual_seed(123)
    source = ABCLightningCLI(args=["--config", DEBUG, "--seed_everything=7"], run=False).model
    torch.save({"state_dict": source.state_dict()}, "source.ckpt")
    cli = ABCLightningCLI(args=["--config", DEBUG, "--model.init_from=source.ckpt", "--trainer.max_epochs=0",
                                "--trainer.logger=false", "--trainer.callbacks=[]"], run=False)
    assert not torch.equal(cli.model.model.head.weight, source.model.head.weight)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)  # setup("fit") warm-starts; zero epochs train nothing
    for key, value in source.state_dict().items():
        assert torch.equal(cli.model.state_dict()[key], value), key


def test_init_from_a_checkpoint_of_another_shape(capsys):
    plain_checkpoint("small.ckpt")
    line = error_line(capsys, ["fit", "--config", DEBUG, "--model.d_model=64", "--model.init_from=small.ckpt"])
    assert "init_from small.ckpt" in line and "shape mismatch" in line


def test_runs_started_together_never_share_a_version_folder(monkeypatch):
    from lightning.pytorch.loggers import CSVLogger

    Path("runs/debug/version_0").mkdir(parents=True)  # another run claimed it a moment ago
    monkeypatch.setattr(CSVLogger, "_get_next_version", lambda self: 0)  # ...after we looked
    cli = ABCLightningCLI(args=["--config", DEBUG], run=False)
    cli._claim_version()
    assert cli.trainer.logger.version == 1 and Path("runs/debug/version_1").is_dir()


def test_config_goes_to_each_runs_own_folder_whatever_the_primary_logger(tmp_path):
    from types import SimpleNamespace

    from abc_lightning.runs.folders import run_dir

    class WandbLogger:  # stands in for W&B as the primary logger (its save_dir is shared)
        save_dir = "runs"
        experiment = SimpleNamespace(dir=str(tmp_path / "wandb" / "run-abc" / "files"))

    assert run_dir(SimpleNamespace(loggers=[WandbLogger()], default_root_dir=".")) == tmp_path / "wandb/run-abc/files"
    for _ in range(2):  # two CSV runs sharing save_dir and name: two folders, two configs
        assert run_cli(["fit", "--config", DEBUG, "--trainer.max_steps=1", "--trainer.limit_val_batches=1",
                        "--data.val_lengths=[6]"]) == 0
    assert all(Path(f"runs/debug/version_{v}/config.yaml").is_file() for v in (0, 1))


PER_TASK = sorted((ROOT / "configs").glob("ab[sc]_*.yaml"))


def resolved(*args: str) -> dict:
    cli = ABCLightningCLI(args=[*args, "--trainer.logger=false"], run=False)
    config = cli.parser.dump(cli.config, skip_none=False, skip_validation=True)
    return {k: v for k, v in __import__("yaml").safe_load(config).items() if k != "config"}


def test_there_is_a_config_for_each_paper_cell_people_name():
    assert {p.name for p in PER_TASK} == {f"{s}_{t}.yaml" for s in ("abs", "abc")
                                           for t in ("successor", "addition", "parity", "nx1")} | {
                                               "abs_multiplication.yaml"}


@pytest.mark.parametrize("config", PER_TASK, ids=lambda p: p.name)
def test_each_per_task_config_is_its_base_config_with_the_task_flag(config):
    from abc_lightning.tasks import class_name, get_task

    base, task = config.stem.split("_", 1)
    assert resolved("--config", str(config)) == resolved("--config", str(ROOT / "configs" / f"{base}.yaml"),
                                                        f"--data={class_name(task)}", *get_task(task).cell_overrides)


@pytest.mark.parametrize("config", PER_TASK, ids=lambda p: p.name)
def test_each_per_task_config_holds_only_what_differs_from_its_base(config):
    lines = config.read_text().splitlines()
    settings = [ln for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(lines) <= 15 and settings[0] == f"config: {config.stem.split('_', 1)[0]}.yaml"
    assert all(":" in ln and not ln.startswith(" ") for ln in settings)  # dotted keys, no copied section
