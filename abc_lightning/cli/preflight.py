"""The checks a run passes before anything of it exists (no run folder, no W&B run): a
mistake found here is one line, and nothing is left behind. The CLI calls them once the
model, data and trainer are built (:meth:`abc_lightning.cli.ABCLightningCLI.before_fit` and
the other stages)."""

from __future__ import annotations

import warnings

from abc_lightning.cli import bounds
from abc_lightning.errors import ConfigError


def check_stage(stage: str, trainer, datamodule) -> None:
    """An evaluation that would evaluate nothing (and exit 0 with an empty table)."""
    if stage == "fit":
        return
    key = "val" if stage == "validate" else stage
    if getattr(trainer, f"limit_{key}_batches") == 0:
        raise ConfigError(f"trainer.limit_{key}_batches=0: this {stage} would evaluate nothing")
    if stage == "test" and not datamodule.test_lengths:
        raise ConfigError("data.test_lengths is empty: test needs at least one length, e.g. [6, 60]")


def check_together(stage: str, trainer, module, datamodule, resuming: bool) -> None:
    """Every check that needs the model, data and callbacks together: lengths the model can
    hold, the memory they ask for (:mod:`~abc_lightning.cli.bounds`), ``init_from`` (unless a fit resumes), the learning-rate schedule's budget, each
    callback's own ``check_data`` and ``check_model``, and a CPI period measured to fail on the task (a warning)."""
    if stage == "predict":
        datamodule.setup("predict")  # malformed inputs fail here, before any model work
    tokens = datamodule.max_tokens(stage)
    module.model.check_length(tokens)
    device = trainer.strategy.root_device
    if stage == "fit":
        bounds.check_fit(module, datamodule, datamodule.train_tokens(), device)
        bounds.check_samples("data.val_samples", datamodule.val_samples, len(datamodule.val_lengths), tokens)
    elif stage in ("test", "validate"):
        samples, lengths = ((datamodule.test_samples, datamodule.test_lengths) if stage == "test" else
                            (datamodule.val_samples, datamodule.val_lengths))
        bounds.check_samples(f"data.{'test' if stage == 'test' else 'val'}_samples", samples, len(lengths), tokens)
    if stage == "fit" and module.hparams.get("init_from") and not resuming:
        module.init_weights(module.hparams.init_from)
    if stage == "fit":
        module.check_schedule(trainer)
    for callback in trainer.callbacks:
        if hasattr(callback, "check_data"):
            callback.check_data(datamodule)
        if hasattr(callback, "check_model"):
            callback.check_model(module)
    period = getattr(module.model.position_index, "period", None)
    task = datamodule.task
    if period in task.failing_periods and stage == "fit":
        warnings.warn(f"{task.name} with CPI period {period}: {task.failing_periods[period]} (its own period "
                      f"is {task.cpi_period}: --model.position_index.period=task)", stacklevel=3)


def check_budget(trainer, max_time, ckpt: dict | None, ckpt_path: str | None) -> None:
    """A fit must have steps to train: a zero budget, or a checkpoint that has already
    trained its whole budget, would exit 0 having done nothing."""
    loop = trainer.fit_loop
    for key, value in (("max_epochs", loop.max_epochs), ("max_steps", loop.max_steps),
                       ("limit_train_batches", trainer.limit_train_batches)):
        if value == 0:
            raise ConfigError(f"trainer.{key}=0: this fit would train nothing")
    if max_time is not None and not isinstance(max_time, dict) and not any(
            ch.isdigit() and ch != "0" for ch in str(max_time)):
        raise ConfigError(f"trainer.max_time={max_time}: this fit would train nothing")
    if ckpt is None:
        return
    steps = ckpt.get("global_step", 0)
    epochs = ckpt.get("loops", {}).get("fit_loop", {}).get("epoch_progress", {}).get("current", {}).get(
        "processed", ckpt.get("epoch", 0))
    if loop.max_epochs not in (None, -1) and epochs >= loop.max_epochs:
        raise ConfigError(f"{ckpt_path} has trained {epochs} epochs ({steps} steps), all of trainer.max_epochs="
                          f"{loop.max_epochs}: to train on, raise it, e.g. --trainer.max_epochs={epochs + 1}")
    if loop.max_steps not in (None, -1) and steps >= loop.max_steps:
        raise ConfigError(f"{ckpt_path} has trained {steps} steps, all of trainer.max_steps={loop.max_steps}: "
                          "to train on, raise it")
