"""The contract of a bias strategy: the callback that decides which biases a run's attention gets.

A run has at most one, in the config's ``bias`` slot, chosen by class name like every other
variant (``--bias=AttentionWindow``, ``--bias.self_width=2``; YAML ``bias: {class_path:
AttentionWindow, init_args: {…}}``). Sweeps and overrides reach it by that name; a
checkpoint records it as part of what the run is.
"""

from __future__ import annotations

from pathlib import Path

import lightning as L


class BiasStrategy(L.Callback):
    """A callback that installs attention biases in the model (ABS windows, ABC's calibrated lines)."""

    def check_data(self, datamodule) -> None:
        """Raise ConfigError, before any run folder exists, if this data cannot take the strategy."""

    def apply_to(self, pl_module: L.LightningModule, datamodule) -> None:
        """Install what this strategy holds (as built or as restored from a checkpoint) in
        ``pl_module``'s model, for evaluation outside a Trainer (``abc_lightning.load``)."""
        raise NotImplementedError

    #: the strategy's phase, where it has phases (ABC's); a change redraws the attention heatmaps
    phase: str | None = None

    def exclude(self, seconds: float) -> None:
        """Leave ``seconds`` of other callbacks' work (drawing) out of this strategy's phase times."""

    def draw(self, datamodule, run_folder: Path) -> list[Path]:
        """Draw what this strategy built during the run (ABC's calibrated biases) under
        ``run_folder``, once it exists and once per folder; the paths written."""
        return []
