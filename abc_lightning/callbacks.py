"""Every callback a config names, in one namespace: ``abc_lightning.callbacks.<Name>``.

The config's ``bias`` slot takes a :class:`BiasStrategy`: ABS's :class:`AttentionWindow`
or ABC's :class:`AttentionBiasCalibration`; the others go in ``trainer.callbacks``
(``--trainer.callbacks+=abc_lightning.callbacks.ErrorReplay``). Each is defined in its
room (``training/``, ``scaffolding/``, ``calibration/``); configs and checkpoints name them here.
"""

from abc_lightning.calibration import AttentionBiasCalibration
from abc_lightning.scaffolding import AttentionWindow
from abc_lightning.training import (
    AccuracyTable,
    AttentionHeatmaps,
    BiasStrategy,
    ErrorReplay,
    RunInfo,
    StopOnInterpolation,
)

__all__ = ["AccuracyTable", "AttentionBiasCalibration", "AttentionHeatmaps", "AttentionWindow", "BiasStrategy",
           "ErrorReplay", "RunInfo", "StopOnInterpolation"]
