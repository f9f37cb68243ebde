"""Successor: S(n) = n + 1."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning.tasks.base import Task, add_columns, cycle, spread


class SuccessorTask(Task):
    """Unary successor (``--data=Successor``).

    Example (training width 8), ``n = 1299``::

        source  $ 0 0 0 0 1 2 9 9 &
        target  0 0 3 1 0 0 0 0 0    (1300 reversed, one digit wider than the operand)
    """

    name = "successor"
    arity = 1
    pattern = re.compile(r"\d+")

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        return add_columns(operands[0], 1)

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        nines = "9" * length
        stops = sorted({p for p in (1, length // 2, length - 2, length - 1) if 1 <= p <= length - 1})
        return {
            # the carry travels every digit and opens a new one: 99…9 + 1 = 100…0
            "all_nines": [(nines,)],
            # the carry stops at the top digit: d99…9 + 1 = (d+1)00…0
            "top_digit_then_nines": [(d + nines[1:],) for d in "12345678"] if length > 1 else [],
            # one digit that is not a 9 stops the carry there; in the last place, no carry at all
            "nines_one_other": [(nines[:p] + d + nines[p + 1 :],) for p in stops for d in "048"],
            # carry chains of every size under a carry-free prefix: 1234…k 99…9
            "trailing_nines": [(cycle("12345678", length - k) + "9" * k,) for k in spread(length)],
        }

    def example_input(self) -> str:
        return "1299"
