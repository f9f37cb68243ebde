"""k-operand addition: y = x1 + x2 + … + xk, with carries that can exceed 1."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning.tasks.base import Task, cycle, spread


def sum_columns(operands: list[np.ndarray]) -> np.ndarray:
    """Exact sum of MSB-first digit arrays of one width; LSB first, two digits wider (room for
    the carry out of the top column, which is at most k − 1)."""
    n, width = operands[0].shape
    out = np.zeros((n, width + 2), dtype=np.int64)
    carry = np.zeros(n, dtype=np.int64)
    for col in range(width):
        total = sum(x[:, width - 1 - col] for x in operands) + carry
        out[:, col] = total % 10
        carry = total // 10
    out[:, width] = carry % 10
    out[:, width + 1] = carry // 10
    return out


class MultiOperandAddition(Task):
    """Addition of ``arity`` operands (a subclass per k registers the task).

    Each output digit depends on its column's k digits and on the carry from the column
    below, which can be as large as k − 1 (99 + 99 + 99: carries of 2). In the aligned form a
    column's digits sit side by side (stride k), so ABS gives it the same window as
    addition: cross width 0 over one column, and one step back. The answer is two digits
    wider than the operands' frame. Example, 3 operands (training width 8), ``123+958+76``::

        natural  $ 0 0 0 0 0 1 2 3 + 0 0 0 0 0 9 5 8 + 0 0 0 0 0 0 7 6 &
        aligned  $ + 0 0 0 0 0 0 … 0 0 0 1 9 0 2 5 7 3 8 6 &   (a_n b_n c_n … a_1 b_1 c_1)
        target   7 5 1 1 0 0 0 0 0 0                         (1157 reversed)
    """

    pattern: re.Pattern
    cross_width = 0  # aligned input: a column's k digits sit side by side
    # A carry of 2 through a column of 9s (9 + 9 + 9 + 2) needs three 9s in one column and
    # a large carry into it: about 1 column in 5,000 of uniformly drawn operands, and a chain
    # of them essentially never. Trained on the pool alone, +T=3 and NoPE + w=1 got
    # 999999 + 999999 + 999999 wrong at 6 digits. A quarter of the training rows are
    # therefore carry-rich (data.carry_rich; the papers' tasks keep the pool alone).
    carry_rich = 0.25

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        return sum_columns(operands)

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        k, nines, filler = self.arity, "9" * length, cycle("12345678", length)
        ones = ("1",) + ("0",) * (k - 2)
        return {
            # every column sums to 9k plus the carry: the largest carry (k − 1) at every column
            "all_nines": [(nines,) * k],
            # a carry of 1 made in the last column travels the whole width: 99…9 + 1 + 0 …
            "nines_plus_one": [(nines, *ones), (*ones, nines)],
            # the last column makes the largest carry (k − 1), the next one turns it into a 1
            # that then crosses every other column (each sums to 9): 33…329 + 33…339 + 33…339
            "big_carry_into_nines": [tuple(_big_carry(length, k))] if length >= 3 else [],
            # every column sums to exactly 9 and no carry exists: 33…3 + 33…3 + 33…3 (k = 3)
            "columns_of_nine": [tuple(_split_nine(length, k))],
            # carry chains of every size j: …33…3 + 33…3 + 33…34 under a carry-free prefix
            "carry_chains": [tuple([filler[: length - j] + "0" * j] + ["0"] * (k - 3) + ["5" * j, "4" * (j - 1) + "5"])
                             for j in spread(length)],
            # the longest operand against short ones, with a whole-width carry
            "mixed_lengths": [(nines,) + ("9" * j,) * (k - 1) for j in spread(length)],
        }



def _shares(k: int) -> list[int]:
    """k digits that sum to 9, as even as possible."""
    return [9 // k + (1 if i < 9 % k else 0) for i in range(k)]


def _split_nine(length: int, k: int) -> list[str]:
    """k numbers of ``length`` digits whose every column sums to exactly 9."""
    return [str(s) * length for s in _shares(k)]


def _big_carry(length: int, k: int) -> list[str]:
    """k numbers: last column all 9s (carry k − 1), the next column sums to 11 − k (so it
    passes on a carry of exactly 1), every column above sums to 9."""
    shares = _shares(k)
    below = list(shares)
    for _ in range(k - 2):  # take k − 2 off the second column's digits, largest first
        below[below.index(max(below))] -= 1
    return [str(s) * (length - 2) + str(b) + "9" for s, b in zip(shares, below)]


class Addition3Task(MultiOperandAddition):
    """Addition of three operands, e.g. ``12+34+56`` (``--data=Addition3``)."""

    name = "addition3"
    arity = 3
    operator = "+"
    pattern = re.compile(r"\d+\+\d+\+\d+")

    def example_input(self) -> str:
        return "123+958+76"
