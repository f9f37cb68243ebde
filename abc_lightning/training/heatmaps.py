"""Attention heatmaps, installed biases and the accuracy curve, as PNGs and logger images."""

from __future__ import annotations

import time
from pathlib import Path

import lightning as L
import matplotlib.pyplot as plt
import torch
from lightning.pytorch.utilities import rank_zero_only

from abc_lightning.runs import files
from abc_lightning.evaluation import rows_from_metrics
from abc_lightning.plotting import accuracy_curves, attention_heatmaps, bias_heatmaps
from abc_lightning.runs.folders import run_dir
from abc_lightning.training.strategy import BiasStrategy


class AttentionHeatmaps(L.Callback):
    """Draw what the model attends to, every ``every_n_epochs`` validations and at each
    ABS/ABC phase boundary (whenever the set of installed biases or the ABC phase changes).

    For one fixed sample at each of ``lengths`` it draws per-head decoder self-attention
    and cross-attention weights of decoder ``layer``, and the summed bias of each kind
    (ABS windows, ABC calibrated biases, positional score biases); it also draws the
    validation accuracy-versus-length curve. Once ABC has calibrated, it also draws each
    calibrated bias per head, at the training size and at 60 digits, under ``<run>/abc/``
    (:meth:`BiasStrategy.draw`). Figures come from the pure functions of
    :mod:`abc_lightning.plotting`; this callback only saves them as PNG files under
    ``<run>/heatmaps/`` and hands them to loggers that take images (W&B, TensorBoard).
    Rank zero only.
    """

    def __init__(self, every_n_epochs: int = 10, lengths: list[int] = [6, 20], layer: int = -1) -> None:  # noqa: B006
        self.every_n_epochs, self.lengths, self.layer = every_n_epochs, list(lengths), layer
        self._seen: tuple | None = None

    @staticmethod
    def _strategy(trainer) -> BiasStrategy | None:
        return next((cb for cb in trainer.callbacks if isinstance(cb, BiasStrategy)), None)

    def _state(self, trainer, pl_module) -> tuple:
        return tuple(pl_module.model.bias_sources.keys()), getattr(self._strategy(trainer), "phase", None)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        start = time.perf_counter()
        state = self._state(trainer, pl_module)
        periodic = self.every_n_epochs > 0 and (trainer.current_epoch + 1) % self.every_n_epochs == 0
        if periodic or state != self._seen:
            self.draw(trainer, pl_module, tag=f"epoch{trainer.current_epoch:03d}")
        self._seen = state
        self.draw_calibrated(trainer)
        strategy = self._strategy(trainer)
        if strategy is not None:  # drawing is not the strategy's work: its phase times leave it out
            strategy.exclude(time.perf_counter() - start)

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.draw_calibrated(trainer)

    @rank_zero_only
    def draw_calibrated(self, trainer: L.Trainer) -> list[Path]:
        """What the run's bias strategy built (ABC's calibrated biases), once it exists."""
        strategy = self._strategy(trainer)
        return [] if strategy is None else strategy.draw(trainer.datamodule, run_dir(trainer))

    @rank_zero_only
    def draw(self, trainer: L.Trainer, pl_module: L.LightningModule, tag: str) -> list[Path]:
        dm, model = trainer.datamodule, pl_module.model
        figures = {}
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for length in self.lengths:
                sample = dm.length_set(length, 1, salt=7)
                src = sample.data.src[:1].long().to(pl_module.device)
                steps = sample.data.tgt_out.shape[1]
                maps = model.attention_on_own_output(src, steps)
                for kind in ("decoder", "cross"):
                    name = f"{kind}_attention_L{length}"
                    figures[name] = attention_heatmaps(maps[kind][self.layer].weights[0],
                                                       f"{kind} attention, layer {self.layer}, {length} digits, {tag}")
                    t_pos = model.position_index(steps, src.device)
                    k_pos = t_pos if kind == "decoder" else model.position_index.source(src.shape[1], src.device)
                    bias = model.attention_bias(kind, t_pos, k_pos, layer=len(model.decoder) - 1,
                                                sizes=(src.shape[1], steps))
                    if bias is not None:
                        figures[f"{kind}_bias_L{length}"] = bias_heatmaps(bias.expand(model.heads, -1, -1),
                                                                          f"{kind} bias, {length} digits, {tag}")
        model.train(was_training)
        rows = rows_from_metrics({k: float(v) for k, v in trainer.callback_metrics.items()}, "val")
        if rows:
            figures["accuracy_by_length"] = accuracy_curves({dm.task.name: {"validation": rows}}, title=tag)
        out = run_dir(trainer) / "heatmaps"
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, fig in figures.items():
            path = out / f"{tag}_{name}.png"
            files.savefig(fig, path, dpi=90)
            paths.append(path)
            for logger in trainer.loggers:
                if hasattr(logger, "log_image"):  # W&B
                    logger.log_image(key=f"heatmaps/{name}", images=[str(path)], step=trainer.global_step)
                elif hasattr(getattr(logger, "experiment", None), "add_figure"):  # TensorBoard
                    logger.experiment.add_figure(f"heatmaps/{name}", fig, trainer.global_step)
            plt.close(fig)
        return paths
