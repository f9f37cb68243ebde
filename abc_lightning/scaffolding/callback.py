"""Attention Bias Scaffolding as a callback: it installs the window masks before any stage."""

from __future__ import annotations

from functools import partial
from typing import Literal

import lightning as L

from abc_lightning.scaffolding.windows import Geometry, WindowBias
from abc_lightning.training.strategy import BiasStrategy
from abc_lightning.errors import ConfigError


class AttentionWindow(BiasStrategy):
    """Install ABS window masks (width w) in decoder self- and cross-attention.

    By default (``self_width: task``, ``cross_width: task``, trailing geometry) each task's
    windows are built from what its answer tokens need (``Task.needs``): for the papers'
    tasks that is the paper's window (w = 1, and the digit-aligned column; 1 for unary
    tasks, 0 for aligned binary ones), for a scratchpad task its own recurrence, at every
    size. A width given here instead (a sweep over w) builds band windows along the digits,
    whose stride is read from the data (1 unary, 2 aligned binary). ``None`` leaves that
    attention open.
    """

    def __init__(
        self,
        self_width: int | Literal["task"] | None = "task",
        cross_width: int | Literal["task"] | None = "task",
        geometry: Geometry = "trailing",
        encoder_width: int | None = None,
    ) -> None:
        # Validate now, so that a bad w fails at start-up rather than after data is built.
        WindowBias(1 if self_width == "task" else self_width, 1 if cross_width == "task" else cross_width, 1,
                   geometry, encoder_width)
        self.self_width, self.cross_width = self_width, cross_width
        self.geometry, self.encoder_width = geometry, encoder_width

    def cross_width_for(self, datamodule) -> int | None:
        """The cross width in use: the task's own unless one was given."""
        return datamodule.task.cross_width if self.cross_width == "task" else self.cross_width

    def self_width_for(self, datamodule) -> int | None:
        """The decoder self-attention width in use: the task's own unless one was given."""
        return datamodule.task.self_width if self.self_width == "task" else self.self_width

    def uses_dependencies(self) -> bool:
        """Whether the task's own windows are built from what its tokens need
        (:meth:`~abc_lightning.tasks.Task.needs`): both widths the task's, trailing geometry."""
        return self.self_width == "task" and self.cross_width == "task" and self.geometry == "trailing"

    def check_data(self, datamodule) -> int:  # type: ignore[override]
        """The cross window's stride for this data; ConfigError where the input cannot take it."""
        from abc_lightning.tasks import Task

        stride = getattr(datamodule, "digit_stride", None)
        # a task that states its own needs gets its windows in its own form; the default
        # needs are the width windows, drawn along the aligned digits of a binary task
        if self.uses_dependencies() and type(datamodule.task).needs is not Task.needs:
            return 1
        if stride is None and self.cross_width_for(datamodule) is not None:
            task = datamodule.task
            if getattr(task, "form", None) == "natural":
                raise ConfigError(f"{task.name} always reads the natural input form (data.aligned does not apply), "
                                  "where a digit-aligned cross window has no stride: give it bias.cross_width=task "
                                  "(its own window) or null")
            raise ConfigError("the ABS cross-attention window of a given width needs aligned input for binary tasks: "
                              "set data.aligned=true (or bias.cross_width=task, the task's own, or null)")
        return stride or 1

    def apply_to(self, pl_module: L.LightningModule, datamodule) -> None:
        """Install the window masks in ``pl_module``'s model for ``datamodule``'s input form."""
        dependencies = spans = None
        if self.uses_dependencies():
            aligned = bool(datamodule.aligned)
            dependencies = partial(datamodule.task.dependency_windows, aligned=aligned)
            spans = partial(datamodule.task.dependency_spans, aligned=aligned)
        bias = WindowBias(self.self_width_for(datamodule), self.cross_width_for(datamodule), self.check_data(datamodule),
                          self.geometry, self.encoder_width, dependencies, spans)
        pl_module.model.install_bias("abs_window", bias)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.apply_to(pl_module, trainer.datamodule)
