"""Attention Bias Calibration (ABC): the attention of a model that interpolates, turned
into a bias that extrapolates.

- :mod:`~abc_lightning.calibration.lines`: lines in averaged attention, drop-off and
  extension to any size (pure tensor functions);
- :mod:`~abc_lightning.calibration.bias`: :func:`calibrate_model` (a model's attention on
  S_gen to lines) and :class:`CalibratedBias`, the lines as a bias source;
- :mod:`~abc_lightning.calibration.options`: ABC's option groups, the ``paper`` and
  ``project`` presets and their validation;
- :mod:`~abc_lightning.calibration.callback`: :class:`AttentionBiasCalibration`, the bias
  strategy whose phases are interpolate → calibrate → retrain (``--bias=AttentionBiasCalibration``).
"""

from abc_lightning.calibration.bias import CalibratedBias, calibrate_model, load_calibrated_bias
from abc_lightning.calibration.callback import AttentionBiasCalibration
from abc_lightning.calibration.options import PRESETS, Options

__all__ = ["PRESETS", "AttentionBiasCalibration", "CalibratedBias", "Options", "calibrate_model",
           "load_calibrated_bias"]
