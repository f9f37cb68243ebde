"""Stopping and result-writing callbacks."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import BasePredictionWriter, ProgressBar, Timer
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_only

from abc_lightning import markdown
from abc_lightning.runs import files
from abc_lightning.evaluation import rows_from_metrics, write_predictions
from abc_lightning.runs.provenance import cpu, git_commit
from abc_lightning.runs.folders import run_dir


class LineProgress(ProgressBar):
    """Progress for logs and pipes: one plain line per validation, no carriage returns or
    terminal codes. The CLI uses it in place of the progress bar when stdout is not a TTY."""

    def __init__(self) -> None:
        super().__init__()
        self._enabled, self._start = True, 0.0

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or not self._enabled or trainer.state.fn != "fit" or not trainer.is_global_zero:
            return
        shown = ", ".join(f"{k} {float(v):.4g}" for k, v in sorted(trainer.progress_bar_metrics.items()))
        print(f"epoch {trainer.current_epoch}, step {trainer.global_step}, "
              f"{time.perf_counter() - self._start:.0f} s: {shown}", flush=True)


class StopOnInterpolation(L.Callback):
    """Stop once ``monitor`` (in-distribution accuracy) has reached ``threshold`` on
    ``patience`` consecutive validations. It never looks at extrapolation lengths."""

    def __init__(self, monitor: str = "val/acc", threshold: float = 1.0, patience: int = 3) -> None:
        self.monitor, self.threshold, self.patience = monitor, threshold, patience
        self.streak = 0
        self.stopped = False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.monitor)
        self.streak = self.streak + 1 if value is not None and float(value) >= self.threshold else 0
        if self.streak >= self.patience:
            trainer.should_stop = self.stopped = True

    def state_dict(self) -> dict:
        return {"streak": self.streak}

    def load_state_dict(self, state_dict: dict) -> None:
        self.streak = state_dict.get("streak", 0)


def stop_reason(trainer: L.Trainer) -> str:
    """Why a fit ended: ``interpolated`` (a stopping rule: StopOnInterpolation, or ABC's
    retraining held the threshold for its patience), ``retraining budget`` (ABC's retraining
    ran the step budget it is given, ``retraining.budget``, whatever its accuracy then),
    ``time cap`` (``max_time`` ran out first: the run did not finish its budget and must be
    reported as capped), or ``step budget`` (``max_epochs``/``max_steps``)."""
    for cb in trainer.callbacks:
        if getattr(cb, "phase", None) == "done":
            return "interpolated" if cb.options.retraining.budget == "patience" else "retraining budget"
    if any(getattr(cb, "stopped", False) for cb in trainer.callbacks):
        return "interpolated"
    timer = next((cb for cb in trainer.callbacks if isinstance(cb, Timer)), None)
    if timer is not None and timer._duration is not None and timer.time_remaining("train") <= 0:
        return "time cap"
    return "step budget"


def short(text: str, keep: int = 24) -> str:
    """A long input or answer, shortened in the middle: ``9999…9999 (600 chars)``."""
    return text if len(text) <= 2 * keep + 3 else f"{text[:keep]}…{text[-keep:]} ({len(text)} chars)"


def markdown_table(rows: list[dict], title: str, failures: list[dict] = ()) -> str:
    """Per-length rows -> a small markdown table, with the worst-case columns where tested
    and, below it, the first wrong answer of each worst-case family that failed."""
    worst = any("worst" in r for r in rows)
    head = ["length", "samples", "accuracy %"] + (["worst-case inputs", "worst-case %", "failing families"] if worst else [])
    cells = []
    for r in rows:
        line = [r["length"], r.get("samples", ""), f"{r['accuracy']:.2f}"]
        if worst:
            failing = ", ".join(f"{name} {acc:g}" for name, acc in r.get("worst_families", {}).items() if acc < 100)
            line += [r.get("worst_samples", ""), f"{r['worst']:.2f}", failing or "–"] if "worst" in r else ["", "", ""]
        cells.append(line)
    lines = [f"### {title}", "", *markdown.table(head, cells, "rrr" + ("rrl" if worst else ""))]
    if failures:
        lines += ["", "First wrong answer per worst-case family:", ""]
        lines += [f"- {f['length']} digits, {f['family']}: `{short(f['input'])}` gave `{short(f['output'])}`, "
                  f"expected `{short(f['expected'])}`" for f in failures]
    return "\n".join(lines) + "\n"


class AccuracyTable(L.Callback):
    """Write the per-length accuracy table (JSON and markdown) of every fit and test run.

    Files go to ``trainer.log_dir``: ``val_accuracy.{json,md}`` after fit (last
    validation, the small validation sets) and ``test_accuracy.{json,md}`` after test.
    """

    def __init__(self) -> None:
        self._start = 0.0

    def on_fit_start(self, trainer, pl_module) -> None:
        self._start = time.perf_counter()

    on_test_start = on_fit_start

    @rank_zero_only
    def _write(self, trainer: L.Trainer, stage: str) -> None:
        dm = trainer.datamodule
        rows = rows_from_metrics(trainer.callback_metrics, stage)
        sizes = {ds.tag: len(ds) for ds in (dm._val if stage == "val" else dm._test)}
        for r in rows:
            r["samples"] = sizes.get(r["length"], "")
            if "worst" in r:
                r["worst_samples"] = sizes.get(f"worst@{r['length']}", "")
        failures = sorted(trainer.lightning_module.worst_failures.values(), key=lambda f: f["length"]) if stage == "test" else []
        out = run_dir(trainer)
        out.mkdir(parents=True, exist_ok=True)
        record = {"task": dm.task.name, "stage": stage, "rows": rows,
                  "seconds": round(time.perf_counter() - self._start, 1), "global_step": trainer.global_step}
        if stage == "val":
            record["stopped"] = stop_reason(trainer)
        if failures:
            record["worst_failures"] = failures
        title = f"{dm.task.name}: {stage} accuracy by length"
        files.write_text(out / f"{stage}_accuracy.json", json.dumps(record, indent=2))
        files.write_text(out / f"{stage}_accuracy.md", markdown_table(rows, title, failures))
        sweep_record = os.environ.get("ABC_LIGHTNING_SWEEP_RECORD")  # set by the local sweep runner
        if sweep_record and Path(sweep_record).is_dir():
            files.write_text(Path(sweep_record) / f"{stage}_accuracy.json",
                             json.dumps({**record, "run_dir": str(out)}, indent=2))
        for logger in trainer.loggers:
            if hasattr(logger, "log_table") and rows:  # W&B: a table per run, so a dashboard overlays a sweep
                columns = ["length", "accuracy", "samples"] + (["worst_case", "worst_case_samples"]
                                                               if "worst" in rows[0] else [])
                data = [[r["length"], r["accuracy"], r["samples"], r.get("worst"), r.get("worst_samples")][: len(columns)]
                        for r in rows]
                logger.log_table(key=f"{stage}/accuracy_by_length", columns=columns, data=data, step=trainer.global_step)
        many = len(failures) > 6  # then the terminal gets the table, and the file every example
        table = markdown_table(rows, title, () if many else failures)
        if many:
            table += f"\n{len(failures)} worst-case families failed somewhere; an example of each is in {stage}_accuracy.md\n"
        print(f"\n{table}written to {out}")

    def on_fit_end(self, trainer, pl_module) -> None:
        self._write(trainer, "val")

    def on_test_end(self, trainer, pl_module) -> None:
        self._write(trainer, "test")


class PredictionWriter(BasePredictionWriter):
    """``predict``'s answers, once every batch is decoded: all of them to the run's
    ``predictions.jsonl``, the first few printed (:func:`~abc_lightning.evaluation.write_predictions`)."""

    def __init__(self) -> None:
        super().__init__(write_interval="epoch")

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        def rows(outputs):  # batches of answer rows (per loader, with several), flattened
            return [row for item in outputs for row in (rows(item) if isinstance(item, list) else [item])]

        write_predictions(rows(predictions), run_dir(trainer))


class RunInfo(L.Callback):
    """Write ``run_info.json`` next to each run: seed, command, versions, git commit.

    The resolved config sits beside it as ``config.yaml`` (LightningCLI). Nothing from the
    environment is recorded, so API keys given by environment never reach a run's files.
    """

    def _write(self, trainer: L.Trainer, stage: str) -> None:
        import platform
        import sys

        import torch

        from abc_lightning.version import __version__

        if not trainer.is_global_zero:
            return
        versions = {"python": platform.python_version(), "torch": torch.__version__, "lightning": L.__version__,
                    "abc_lightning": __version__}
        info = {"stage": stage, "seed": os.environ.get("PL_GLOBAL_SEED"), "command": sys.argv,
                "git_commit": git_commit(), "versions": versions, "machine": platform.platform(), "cpu": cpu(),
                "device": device_name(trainer.strategy.root_device), "torch_threads": torch.get_num_threads(),
                "deterministic": torch.are_deterministic_algorithms_enabled()}
        out = run_dir(trainer)
        out.mkdir(parents=True, exist_ok=True)
        files.write_text(out / "run_info.json", json.dumps(info, indent=2))

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(trainer, "fit")

    def on_test_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._write(trainer, "test")


def device_name(device) -> str:
    """``cpu``, or the accelerator with its name: ``cuda:0 (NVIDIA H100 80GB HBM3)``."""
    import torch

    if device.type == "cuda":
        return f"{device} ({torch.cuda.get_device_name(device)})"
    return str(device)


class RunConfig(SaveConfigCallback):
    """LightningCLI's config saver, writing ``config.yaml`` into the run's own folder.

    Lightning's default writes to ``trainer.log_dir``, which for loggers other than CSV and
    TensorBoard (W&B, for one) is the shared ``save_dir``: runs that share it overwrite, or
    refuse, each other's config. Here the file goes to :func:`run_dir`, unique per run.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs["save_to_log_dir"] = False
        super().__init__(*args, **kwargs)

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        """Every checkpoint carries the resolved config of its run (YAML text: plain data, so
        it loads with ``weights_only=True``); see :mod:`abc_lightning.runs.checkpoints`."""
        from abc_lightning.runs.checkpoints import CONFIG_KEY

        checkpoint[CONFIG_KEY] = self.parser.dump(self.config, skip_none=False, skip_validation=True)

    def save_config(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        out = run_dir(trainer)
        out.mkdir(parents=True, exist_ok=True)
        self.parser.save(self.config, str(out / self.config_filename), skip_none=False, overwrite=True,
                         multifile=self.multifile)
