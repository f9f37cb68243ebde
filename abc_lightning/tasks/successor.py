"""Successor: S(n) = n + 1."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning.tasks.base import Task, add_columns


class Successor(Task):
    """Unary successor.

    Example (training width 8), ``n = 1299``::

        source  $ 0 0 0 0 1 2 9 9 &
        target  0 0 3 1 0 0 0 0 0    (1300 reversed, one digit wider than the operand)
    """

    name = "successor"
    arity = 1
    pattern = re.compile(r"\d+")

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        return add_columns(operands[0], 1)

    def example_input(self) -> str:
        return "1299"
