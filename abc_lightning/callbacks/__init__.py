"""Callbacks do the phase-boundary work: install biases, stop, write tables.

The bias strategies (:class:`AttentionWindow`, :class:`AttentionBiasCalibration`) fill the
config's ``bias`` slot; the others go in ``trainer.callbacks``.
"""

from abc_lightning.callbacks.calibration import AttentionBiasCalibration
from abc_lightning.callbacks.window import AttentionWindow
from abc_lightning.callbacks.heatmaps import AttentionHeatmaps
from abc_lightning.callbacks.replay import ErrorReplay
from abc_lightning.callbacks.strategy import BiasStrategy
from abc_lightning.callbacks.training import AccuracyTable, RunInfo, StopOnInterpolation

__all__ = ["AttentionBiasCalibration", "AttentionHeatmaps", "AttentionWindow", "AccuracyTable", "BiasStrategy",
           "ErrorReplay", "RunInfo", "StopOnInterpolation"]
