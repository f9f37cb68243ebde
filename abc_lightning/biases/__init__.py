"""Attention biases: ABS window masks (and, later, ABC calibration) as pure tensor code."""

from abc_lightning.biases.windows import WindowBias, cross_window, self_window

__all__ = ["WindowBias", "cross_window", "self_window"]
