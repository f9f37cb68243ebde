"""Subtraction: y = x1 − x2 with x1 ≥ x2."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning.errors import InputError
from abc_lightning.tasks.base import Task, cycle, pad_left, sample_decimal, spread


def subtract_columns(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Exact ``a − b`` (``a ≥ b`` row by row) on MSB-first digit arrays of one width; LSB first."""
    a_lsb, b_lsb = a[:, ::-1], b[:, ::-1]
    out = np.zeros(a.shape, dtype=np.int64)
    borrow = np.zeros(a.shape[0], dtype=np.int64)
    for col in range(a.shape[1]):
        total = a_lsb[:, col] - b_lsb[:, col] - borrow
        borrow = (total < 0).astype(np.int64)
        out[:, col] = total + 10 * borrow
    return out


def smaller(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row of two equal-width digit arrays: is ``a < b``?"""
    differs = a != b
    first = differs.argmax(axis=1)  # the most significant column where they differ (0 where equal)
    rows = np.arange(a.shape[0])
    return differs.any(axis=1) & (a[rows, first] < b[rows, first])


def larger_first(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Swap the rows of two equal-width digit arrays so that the first holds the larger number."""
    swap = smaller(a, b)[:, None]
    return np.where(swap, b, a), np.where(swap, a, b)


class SubtractionTask(Task):
    """Subtraction with a non-negative answer: the first operand is the larger (``--data=Subtraction``).

    Each output digit is its column's difference less the borrow from the column below, so
    like addition it needs one column of each operand and the step before it: in the aligned
    form that is a window of one digit pair (cross width 0) and one step back. The answer
    has as many digits as the operands' frame (leading zeros included). Example (training
    width 8), ``9003 − 958``::

        natural  $ 0 0 0 0 9 0 0 3 - 0 0 0 0 0 9 5 8 &
        aligned  $ - 0 0 0 0 0 0 0 0 9 0 0 9 0 5 3 8 &    (a_n b_n ... a_1 b_1)
        target   5 4 0 8 0 0 0 0                           (8045 reversed)
    """

    name = "subtraction"
    arity = 2
    operator = "-"
    pattern = re.compile(r"\d+-\d+")
    cross_width = 0  # aligned input: a column's two digits sit side by side
    # a − b is not b − a: the model must tell a column's two digits apart by position. With
    # T = 2, the stride, every token of the 2W + 3 keeps its phase at every width; with
    # T = 3 the start of the input moves with W mod 3, and a model trained at width 8 can be
    # right only at widths ≡ 2 (mod 3) (measured with the input counted from its start, and
    # again from its end: docs/results.md, "Subtraction's period").
    cpi_period = 2
    failing_periods = {3: "under T=3, seed 1 of configs/abs.yaml --data=Subtraction was right at widths ≡ 2 "
                          "(mod 3) only: 100% at 6 digits, 0% at 10 and 20, 99.07% at 60, 0% at 599 and 601"}

    def from_pool(self, values: list[np.ndarray]) -> list[np.ndarray]:
        return list(larger_first(*super().from_pool(values)))

    def sample(self, rng: np.random.Generator, n: int, length: int) -> list[np.ndarray]:
        width = self.eval_width(length)
        a, b = (pad_left(sample_decimal(rng, n, length, exhaustive=i == 0), width) for i in range(2))
        return list(larger_first(a, b))

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        return subtract_columns(*operands)

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        filler = cycle("12345678", length)
        one_then_zeros = "1" + "0" * (length - 1)
        return {
            # a borrow made in the last column travels the whole width: 10…0 − 1 = 99…9
            "power_minus_one": [(one_then_zeros, "1")],
            # the answer is 1 or 0: 10…0 − 99…9 = 1 (every column borrows), a − a = 0, 99…9 − 99…9
            "near_equal": [(one_then_zeros, "9" * (length - 1))] * (length > 1) + [(filler, filler),
                                                                                  ("9" * length, "9" * length)],
            # borrow chains of every size k under a borrow-free prefix: …d00…0 − 1
            "borrow_chains": [(filler[: length - k] + "0" * k, "1") for k in spread(length)],
            # no borrow anywhere, every column at its largest difference: 99…9 − 12…
            "no_borrow": [("9" * length, filler), (filler, "0")],
            # every column borrows: 10…0 − 0dd…d, and 2…2 − 1…13 (each column 2 − 3 after the first)
            "every_column_borrows": [(one_then_zeros, "9" * k) for k in spread(length)]
            + ([("2" * length, "1" * (length - 1) + "3")] if length > 1 else []),
        }

    def parse(self, text: str) -> list[np.ndarray]:
        operands = super().parse(text)
        if smaller(*operands)[0]:
            raise InputError(f"{text!r}: subtraction here needs the first operand to be the larger (a − b with a ≥ b)")
        return operands

    def example_input(self) -> str:
        return "9003-958"
