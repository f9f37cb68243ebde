"""Training: the LightningModule and the callbacks that do a run's phase-boundary work.

``module.py`` (ArithmeticTransformer: loss, per-length exact match, optimizer and schedule,
init_from), ``strategy.py`` (BiasStrategy, the contract of the config's ``bias`` slot),
``replay.py`` (ErrorReplay), ``heatmaps.py`` (AttentionHeatmaps) and ``callbacks.py``
(StopOnInterpolation, AccuracyTable, RunInfo, PredictionWriter, the progress line).
"""

from abc_lightning.training.callbacks import AccuracyTable, RunInfo, StopOnInterpolation
from abc_lightning.training.heatmaps import AttentionHeatmaps
from abc_lightning.training.module import ArithmeticTransformer
from abc_lightning.training.replay import ErrorReplay
from abc_lightning.training.strategy import BiasStrategy

__all__ = ["AccuracyTable", "ArithmeticTransformer", "AttentionHeatmaps", "BiasStrategy", "ErrorReplay", "RunInfo",
           "StopOnInterpolation"]
