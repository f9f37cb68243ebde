"""The contract of a bias strategy: the callback that decides which biases a run's attention gets.

A run has at most one, in the config's ``bias`` slot, chosen by class name like every other
variant (``--bias=AttentionWindow``, ``--bias.self_width=2``; YAML ``bias: {class_path:
AttentionWindow, init_args: {…}}``). Sweeps and overrides reach it by that name; a
checkpoint records it as part of what the run is.
"""

from __future__ import annotations

import lightning as L


class BiasStrategy(L.Callback):
    """A callback that installs attention biases in the model (ABS windows, ABC's calibrated lines)."""

    def check_data(self, datamodule) -> None:
        """Raise ConfigError, before any run folder exists, if this data cannot take the strategy."""

    def apply_to(self, pl_module: L.LightningModule, datamodule) -> None:
        """Install what this strategy holds (as built or as restored from a checkpoint) in
        ``pl_module``'s model, for evaluation outside a Trainer (``abc_lightning.load``)."""
        raise NotImplementedError
