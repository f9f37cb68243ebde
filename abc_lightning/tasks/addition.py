"""Addition: y = x1 + x2."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning.tasks.base import Task, add_columns, cycle, spread


class AdditionTask(Task):
    """Binary addition (``--data=Addition``).

    Example (training width 8), ``123 + 958``::

        natural  $ 0 0 0 0 0 1 2 3 + 0 0 0 0 0 9 5 8 &
        aligned  $ + 0 0 0 0 0 0 0 0 0 0 1 9 2 5 3 8 &    (a_n b_n ... a_1 b_1)
        target   1 8 0 1 0 0 0 0 0                         (1081 reversed)
    """

    name = "addition"
    arity = 2
    operator = "+"
    pattern = re.compile(r"\d+\+\d+")
    cross_width = 0  # aligned input: a column's two digits sit side by side

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        a, b = operands
        return add_columns(a, b)

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        nines, filler = "9" * length, cycle("12345678", length)
        complement = "".join(str(9 - int(c)) for c in filler)
        return {
            # a carry made in the last column travels the whole width: 99…9 + 1, either way round
            "nines_plus_one": [(nines, "1"), ("1", nines)],
            # every column sums to 9 and passes the first column's carry on: dd…d + (9-d)…(9-d)(10-d) = 10^L
            "complements": [(d * length, str(9 - int(d)) * (length - 1) + str(10 - int(d))) for d in "12345678"],
            # every column makes a carry of its own: the largest sums
            "largest_sums": [(nines, nines), (nines, "8" * length), ("5" * length, "5" * length)],
            # every column sums to exactly 9 and no carry exists: 1234… + 8765… = 99…9
            "nines_without_carry": [(filler, complement), ("4" * length, "5" * length)],
            # a whole-width carry with operands of different lengths
            "mixed_lengths": [pair for k in spread(length) for pair in ((nines, "9" * k), ("9" * k, nines))],
            # carry chains of every size k: …55…5 + 44…45 under a carry-free prefix
            "carry_chains": [(filler[: length - k] + "5" * k, "4" * (k - 1) + "5") for k in spread(length)],
        }

    def example_input(self) -> str:
        return "123456789+987654321"
