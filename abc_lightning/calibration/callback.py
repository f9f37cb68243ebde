"""Attention Bias Calibration as a phase machine: interpolate → calibrate → retrain → done.

One ``fit`` runs the phases. **interpolate**: a plain model trains until its validation
accuracy holds ``phases.threshold`` for ``phases.patience`` checks. **calibrate**:
:func:`abc_lightning.calibration.bias.calibrate_model` turns the attention on S_gen into lines.
**retrain**: the bias is installed and training goes on until the threshold holds
``phases.retrain_patience`` checks (or for its step budget). The options are a preset
(:mod:`abc_lightning.calibration.options`) and what differs from it. Lines, phase and timings are
checkpoint state (``fit --ckpt_path`` resumes in any phase; ``test``/``predict`` install the
checkpoint's lines) and are written beside the run (``abc/lines.pt``, ``abc/phases.json``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal

from lightning.pytorch.utilities import rank_zero_only

from abc_lightning.errors import ConfigError
from abc_lightning.runs import files
from abc_lightning.calibration.bias import (CalibratedBias, calibrate_model, draw_bias_figures, pack_lines, unpack_lines,
                                             unread_message)
from abc_lightning.calibration.options import Extension, Lines, Phases, Retraining, resolve
from abc_lightning.training.strategy import BiasStrategy
from abc_lightning.runs.folders import run_dir

PHASES = ("interpolate", "retrain", "done")


class AttentionBiasCalibration(BiasStrategy):
    """ABC (Duan, Shi and Xu, appendix D and Algorithm 1).

    Args:
        preset: the option set to start from: ``paper`` or ``project`` (this project's own).
        phases: when the phases change (threshold, patience, retrain_patience).
        lines: how lines are found (samples, layer, kinds, directions, κ, source, reduce …).
        extension: how lines extend to longer inputs (align, encoder_align, soft).
        retraining: what changes for the retraining (reinitialize, dropout, lr, anneal,
            positional, encoder_diagonal).
        seed: seeds the choice of S_gen and a re-initialization.

    Each group's fields are documented in :mod:`abc_lightning.calibration.options`; a field left
    out comes from the preset.
    """

    def __init__(self, preset: Literal["paper", "project"] = "project", phases: Phases | None = None,
                 lines: Lines | None = None, extension: Extension | None = None,
                 retraining: Retraining | None = None, seed: int = 0) -> None:
        self.options = resolve(preset, phases, lines, extension, retraining)
        self.seed = seed
        self.phase = "interpolate"
        self.streak = 0
        self.annealed = False
        self.lines: dict = {}
        self.unread: list[list[int]] = []  # operand spans no cross-attention line above κ reads
        # each phase's training and validation; "figures": the heatmaps drawn meanwhile
        # (:meth:`exclude`), which are neither phase's work
        self.seconds = {"interpolate": 0.0, "calibrate": 0.0, "retrain": 0.0, "figures": 0.0}
        self.steps = {"interpolate": 0, "retrain": 0}  # retrain: the budget, with retraining.budget a number
        self._mark = 0.0

    # ---- phases ---------------------------------------------------------------------
    def check_model(self, pl_module) -> None:
        """The layer to calibrate must be one of the model's (before any training)."""
        lines = self.options.lines
        n = len(pl_module.model.decoder)
        if not lines.per_layer and not -n <= lines.layer < n:
            raise ConfigError(f"bias.lines.layer={lines.layer}: the model has {n} decoder layer(s), so the layer is "
                              f"one of {-n}..{n - 1} (-1: the last), or calibrate each with bias.lines.per_layer=true")
        if "encoder" in lines.kinds and not len(pl_module.model.encoder):
            raise ConfigError("bias.lines.kinds has 'encoder', but the model has no encoder layer "
                              "(model.encoder_layers=0)")

    def on_fit_start(self, trainer, pl_module) -> None:
        self._mark = time.perf_counter()
        if self.lines:
            self.install(pl_module)
        if self.phase != "interpolate":
            self.start_retraining(trainer, pl_module)

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self.phase == "done":
            return
        self._tick()
        phases = self.options.phases
        value = trainer.callback_metrics.get("val/acc")
        self.streak = self.streak + 1 if value is not None and float(value) >= phases.threshold else 0
        budget = self.options.retraining.budget
        if self.phase == "retrain" and budget != "patience":  # a step budget: its end, not the threshold, stops
            if trainer.global_step - self.steps["interpolate"] < self.steps["retrain"]:
                return
            self.streak = phases.retrain_patience
        elif self.phase == "retrain" and self.streak and self.options.retraining.anneal != "off" and not self.annealed:
            self.annealed, self.streak = True, 0  # the patience is counted at the annealed rate
            self.set_lr(trainer, pl_module)
        if self.streak < (phases.patience if self.phase == "interpolate" else phases.retrain_patience):
            return
        self.streak = 0
        if self.phase == "interpolate":
            start = time.perf_counter()
            # Every rank calibrates from the same S_gen and weights; rank 0's lines are used
            # everywhere so that GPU non-determinism cannot give ranks different biases.
            dm = trainer.datamodule
            lines, self.unread = calibrate_model(pl_module.model, dm.train_set, dm.task, dm.aligned, self.options, self.seed)
            self.lines = trainer.strategy.broadcast(lines, src=0)
            self.save_interpolated(trainer, pl_module)
            self.install(pl_module)
            if self.options.retraining.reinitialize:
                pl_module.model.reinitialize(self.seed)
                for optimizer in trainer.optimizers:
                    optimizer.state.clear()
            self.steps["interpolate"] = trainer.global_step
            if budget != "patience":  # whole validation intervals, at least one
                every = int(trainer.val_check_batch) if isinstance(trainer.val_check_batch, int) else 1
                self.steps["retrain"] = max(1, int(budget * trainer.global_step) // every) * every
            self.start_retraining(trainer, pl_module)
            self.seconds["calibrate"] = round(time.perf_counter() - start, 2)
            self.phase, self._mark = "retrain", time.perf_counter()
        elif self.phase == "retrain":
            self.phase, trainer.should_stop = "done", True
        self.save_artifacts(trainer)
        if trainer.logger is not None:
            trainer.logger.log_metrics({"abc/phase": float(PHASES.index(self.phase)),
                                        **{f"abc/{k}_seconds": v for k, v in self.seconds.items()}},
                                       step=trainer.global_step)

    def start_retraining(self, trainer, pl_module) -> None:
        """The retraining's dropout, positions and learning rate (at the phase boundary, and
        again on a resume past it)."""
        retraining = self.options.retraining
        if retraining.dropout != "keep":
            pl_module.model.set_dropout(retraining.dropout)
        pl_module.model.set_positional(retraining.positional == "keep")
        self.set_lr(trainer, pl_module)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        """With a retraining budget: the rate at this step of its cosine decay."""
        if self.phase == "retrain" and self.options.retraining.budget != "patience":
            self.set_lr(trainer, pl_module)

    def set_lr(self, trainer, pl_module) -> None:
        """The retraining's learning rate (:meth:`Retraining.rate`) in every optimizer."""
        retraining = self.options.retraining
        done = 0.0 if retraining.budget == "patience" else \
            (trainer.global_step - self.steps["interpolate"]) / max(1, self.steps["retrain"])
        lr = retraining.rate(pl_module.hparams.lr, done, self.annealed)
        if lr is None:
            return
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group["lr"] = lr
        for config in trainer.lr_scheduler_configs:  # a warm-up schedule scales from its base rates
            if hasattr(config.scheduler, "base_lrs"):
                config.scheduler.base_lrs = [lr] * len(config.scheduler.base_lrs)

    def on_fit_end(self, trainer, pl_module) -> None:
        self._tick()
        self.save_artifacts(trainer)

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` just spent out of the running phase's time (figures drawn by
        :class:`~abc_lightning.callbacks.AttentionHeatmaps`), and count them as figures."""
        self._mark += seconds
        self.seconds["figures"] = round(self.seconds["figures"] + seconds, 2)

    def draw(self, datamodule, run_folder: Path) -> list[Path]:
        """The calibrated biases per head under ``<run>/abc/`` (:func:`draw_bias_figures`), once."""
        out = run_folder / "abc"
        if not self.lines or any(out.glob("*_bias*.png")):
            return []
        out.mkdir(parents=True, exist_ok=True)
        return draw_bias_figures(self.lines, datamodule, out)

    def _tick(self) -> None:
        now = time.perf_counter()
        if self.phase in ("interpolate", "retrain"):
            self.seconds[self.phase] = round(self.seconds[self.phase] + now - self._mark, 2)
        self._mark = now

    @rank_zero_only
    def save_interpolated(self, trainer, pl_module) -> None:
        """The interpolating model's weights to ``abc/interpolated.pt`` (fresh weights for the
        retraining lose them; a calibration is replayed from them), and one line when an
        operand is read by no cross-attention line above κ (:func:`unread_message`)."""
        out = run_dir(trainer) / "abc"
        out.mkdir(parents=True, exist_ok=True)
        state = {k: v.detach().cpu().clone() for k, v in pl_module.model.state_dict().items()}
        files.save({"state_dict": state, "step": trainer.global_step}, out / "interpolated.pt")
        if self.unread:
            print(unread_message(self.unread, self.options.lines.cover == "operands"), flush=True)

    def install(self, pl_module) -> None:
        pl_module.model.install_bias("abc", CalibratedBias(self.lines, soft=self.options.extension.soft))

    # ---- test / predict / validate: install what the evaluated checkpoint's state brought back
    def apply_to(self, pl_module, datamodule=None) -> None:
        if self.lines and "abc" not in pl_module.model.bias_sources:
            self.install(pl_module)
        if self.phase != "interpolate":
            pl_module.model.set_positional(self.options.retraining.positional == "keep")

    def on_validation_start(self, trainer, pl_module) -> None:
        self.apply_to(pl_module)

    on_test_start = on_predict_start = on_validation_start

    # ---- checkpoint state and artifacts ---------------------------------------------
    def state_dict(self) -> dict:
        return {"phase": self.phase, "streak": self.streak, "annealed": self.annealed, "seconds": dict(self.seconds),
                "steps": dict(self.steps), "lines": pack_lines(self.lines), "unread_operands": self.unread}

    def load_state_dict(self, state_dict: dict) -> None:
        get = state_dict.get
        self.phase, self.streak, self.annealed = get("phase", "interpolate"), get("streak", 0), get("annealed", False)
        self.seconds.update(get("seconds", {}))
        self.steps.update(get("steps", {}))
        self.lines, self.unread = unpack_lines(get("lines", {})), get("unread_operands", [])

    @rank_zero_only
    def save_artifacts(self, trainer) -> None:
        out = run_dir(trainer) / "abc"
        out.mkdir(parents=True, exist_ok=True)
        info = {"phase": self.phase, "seconds": self.seconds, "steps": self.steps,
                **({"unread_operands": self.unread} if self.unread else {})}
        files.write_text(out / "phases.json", json.dumps(info, indent=2))
        if self.lines:
            files.save(pack_lines(self.lines), out / "lines.pt")
