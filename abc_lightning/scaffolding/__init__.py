"""Attention Bias Scaffolding (ABS): attention windows and cyclic position indexing.

- :mod:`~abc_lightning.scaffolding.windows`: the window masks as a bias source
  (:class:`WindowBias`), built from what each answer token of a task needs
  (:class:`~abc_lightning.tasks.needs.Needs`, ``Task.needs``) or from widths w along the digits;
- cyclic position indexing, :class:`~abc_lightning.model.position_index.CyclicIndex`
  (``--model.position_index=CyclicIndex``), which lives beside the other position indices;
- :mod:`~abc_lightning.scaffolding.callback`: :class:`AttentionWindow`, the bias strategy
  that installs the windows before every stage (``--bias=AttentionWindow``).
"""

from abc_lightning.model.position_index import CyclicIndex
from abc_lightning.scaffolding.callback import AttentionWindow
from abc_lightning.scaffolding.windows import WindowBias, cross_window, self_window
from abc_lightning.tasks.needs import Needs

__all__ = ["AttentionWindow", "CyclicIndex", "Needs", "WindowBias", "cross_window", "self_window"]
