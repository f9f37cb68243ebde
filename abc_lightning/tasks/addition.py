"""Addition: y = x1 + x2."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning import vocab
from abc_lightning.tasks.base import Task, add_columns


class Addition(Task):
    """Binary addition.

    Example (training width 8), ``123 + 958``::

        natural  $ 0 0 0 0 0 1 2 3 + 0 0 0 0 0 9 5 8 &
        aligned  $ + 0 0 0 0 0 0 0 0 0 0 1 9 2 5 3 8 &    (a_n b_n ... a_1 b_1)
        target   1 8 0 1 0 0 0 0 0                         (1081 reversed)
    """

    name = "addition"
    arity = 2
    operator = vocab.PLUS
    pattern = re.compile(r"\d+\+\d+")

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        a, b = operands
        return add_columns(a, b)

    def example_input(self) -> str:
        return "123456789+987654321"
