"""Callbacks do the phase-boundary work: stop, replay, draw, write tables.

The config's ``bias`` slot takes a :class:`BiasStrategy`: ABS's
:class:`~abc_lightning.scaffolding.AttentionWindow` or ABC's
:class:`~abc_lightning.calibration.AttentionBiasCalibration`; the others go in
``trainer.callbacks``.
"""

from abc_lightning.callbacks.heatmaps import AttentionHeatmaps
from abc_lightning.callbacks.replay import ErrorReplay
from abc_lightning.callbacks.strategy import BiasStrategy
from abc_lightning.callbacks.training import AccuracyTable, RunInfo, StopOnInterpolation

__all__ = ["AccuracyTable", "AttentionHeatmaps", "BiasStrategy", "ErrorReplay", "RunInfo", "StopOnInterpolation"]


def __getattr__(name: str):
    # configs and checkpoints written before the strategies had packages of their own name
    # them here (abc_lightning.callbacks.AttentionWindow); looked up on use, so that the
    # strategies' packages, which build on this one, are not imported by it
    if name == "AttentionWindow":
        from abc_lightning.scaffolding import AttentionWindow
        return AttentionWindow
    if name == "AttentionBiasCalibration":
        from abc_lightning.calibration import AttentionBiasCalibration
        return AttentionBiasCalibration
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
