"""Addition of k operands, k varying: y = x1 + x2 + … + xk, written as rows of running sums."""

from __future__ import annotations

import re

import numpy as np
import torch

from abc_lightning.tasks.needs import Needs
from abc_lightning.errors import ConfigError
from abc_lightning.tasks.base import Task, cycle, digits_text, spread


class AdditionKTask(Task):
    """Addition of any number of operands, as a scratchpad of running sums, each digit
    written beside its carry (``--data=AdditionK``).

    Row r (r = 0 … k − 1) is S_r = x_1 + … + x_{r+1}, least significant column first, in
    R = W + 2 columns (W, the operands' frame), so every sum of up to 100 operands fits and
    its top column never carries. Each column is two tokens: the digit d = S_r[c] and the
    carry it sends up, e = (S_{r−1}[c] + x_{r+1}[c] + e_{c−1}) ≥ 10. The answer is the last
    row's digits. Each row adds one operand to the row before it, so every token reads the
    same few raw tokens whatever k and W are (:meth:`needs`):

    - its own column's digit of its operand, x_{r+1}[c] (cross-attention; a column past
      the operand's top reads the token before it, an operator);
    - S_{r−1}[c], the digit of the same column one row up (SOS for row 0, whose row above is 0);
    - the carry coming in, e_{c−1} (the digit's own input; the carry reads it two steps
      back). A row's first column reads the carry out of the row above's top column,
      which is always 0.

    The frame is rounded up to W ≡ 2 (mod 3), so a row is 2R ≡ 2 (mod 6) tokens: under
    cyclic position indexing of period 6 the keys a token reads sit at phases t, t − 1
    and t − 2 of its own (the row above at t − 2R + 1 ≡ t − 1 for a digit, t − 2R ≡ t − 2
    for a carry), and a token's phase tells digit from carry, at every k and W. After the
    last row the query reads the operand past the last, EOS, and stops. The sizes give k
    and W back: the source has 1 + k(W + 1) tokens and the decoder 2k·R + 1. Example
    (frame 2 for brevity, so R = 4), ``12 + 34 + 56``::

        source  $ 1 2 + 3 4 + 5 6 &
        target  2 0 1 0 0 0 0 0 | 6 0 4 0 0 0 0 0 | 2 1 0 1 1 0 0 0    (d e per column)
                                                     (digits 2 0 1 0: 102 reversed)

    The data module draws k from ``data.train_operands`` per training batch, and
    evaluates at ``data.operands``.
    """

    name = "addition_k"
    arity = 4  # operands of an instance; the data module sets data.operands
    operator = "+"
    pattern = re.compile(r"\d+(\+\d+)+")
    cross_width = 0  # widths for a sweep over w only; ABS reads needs()
    self_width = 1
    cpi_period = 6  # a row is 2R ≡ 2 (mod 6) tokens: its keys at phases t, t − 1, t − 2
    form = "natural"  # its windows are drawn on the natural form
    variable_arity = True
    train_operands = (2, 3, 4)
    test_operands = (2, 10, 20, 40)  # reproduce tests each at 6 and 60 digits (shape_tests), beside the default 4

    def with_operands(self, k: int) -> AdditionKTask:
        """This task at ``k`` operands."""
        if not isinstance(k, int) or isinstance(k, bool) or not 2 <= k <= 100:
            raise ConfigError(f"{self.name} adds 2 to 100 operands, got {k!r}")
        task = type(self)()
        task.arity = k
        return task

    def shape_tests(self) -> list[tuple[dict, list[int], list[str]]]:
        return [({"operands": k}, [6, 60], [f"--data.operands={k}"]) for k in self.test_operands]

    def shape_label(self, row: dict) -> str:
        return f"k={row['operands']} at {row['length']}"

    @staticmethod
    def frame_width(width: int) -> int:
        """The smallest frame of at least ``width`` cells with W ≡ 2 (mod 3)."""
        return width + (2 - width) % 3

    @staticmethod
    def row_width(width: int) -> int:
        """R = W + 2 columns, two tokens each."""
        return width + 2

    def operand_width(self, length: int) -> int:
        return self.frame_width(super().operand_width(length))

    @property
    def train_width(self) -> int:
        return self.frame_width(super().train_width)

    def operands_from_text(self, parts: list[str], width: int) -> list[np.ndarray]:
        return super().operands_from_text(parts, self.frame_width(width))

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        n, width = operands[0].shape
        size = self.row_width(width)
        above = np.zeros((n, size), dtype=np.int64)  # S_{r−1}, least significant first
        rows = []
        for x in operands:
            x = np.pad(x[:, ::-1], ((0, 0), (0, size - width)))  # least significant first
            row = np.zeros((n, 2 * size), dtype=np.int64)
            carry = np.zeros(n, dtype=np.int64)
            for c in range(size):
                total = above[:, c] + x[:, c] + carry
                carry = total // 10
                row[:, 2 * c], row[:, 2 * c + 1] = total % 10, carry
                above[:, c] = total % 10
            rows.append(row)
        return np.concatenate(rows, axis=1)

    def format_answer(self, digits: list[int]) -> str:
        """The last row's digits (this instance's k rows of equal length)."""
        last = digits[len(digits) - len(digits) // self.arity :][::2]
        return digits_text(last[::-1])

    def for_shape(self, n_source: int, n_answer: int) -> AdditionKTask:
        return self.with_operands(len(self.frame(n_answer, n_source, False)))

    # ---- windows ------------------------------------------------------------------
    def frame(self, n_queries: int, n_keys: int, aligned: bool) -> tuple[int, ...]:
        """(W,) * k: the source has 1 + k(W + 1) tokens and the decoder 2k(W + 2) + 1."""
        twice_k = (n_queries - 1) - 2 * (n_keys - 1)
        k = twice_k // 2
        width = (n_keys - 1) // k - 1 if k > 0 else -1
        if twice_k % 2 or k < 1 or k * (width + 1) + 1 != n_keys or width % 3 != 2:
            raise ValueError(f"{self.name}: no (operands, width) gives {n_keys} source tokens and {n_queries} decoder "
                             "steps (decode exactly 2k·(W + 2) + 1 steps)")
        return (width,) * k

    def needs(self, steps: torch.Tensor, widths: tuple[int, ...], aligned: bool) -> Needs:
        row = 2 * self.row_width(widths[0])
        t = steps[:, None]
        r, c, carry = t // row, t % row // 2, t % 2  # row, column, and digit (0) or carry (1)
        digits = torch.stack([r, c], dim=-1)  # x_{r+1}[c]; past the last operand, EOS
        above = torch.where(r == 0, -1, t - row - carry)  # S_{r−1}[c] (SOS for the first row)
        incoming = torch.where(carry == 1, t - 2, -9)  # a carry reads the carry before it
        return Needs(digits, torch.cat([t - 1, incoming, above], dim=1))

    # ---- sampling, predict --------------------------------------------------------
    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        k, nines, filler = self.arity, "9" * length, cycle("12345678", length)
        return {
            # every row carries through every column: 9…9 + 9…9 + …
            "all_nines": [(nines,) * k],
            # a carry made in the last column crosses the whole width in the first row: 9…9 + 1 + 0 …
            "nines_plus_one": [(nines, "1") + ("0",) * (k - 2), ("1",) + ("0",) * (k - 2) + (nines,)],
            # the running sum is 9…9 before the last operand adds 1
            "sum_of_nines_then_one": [tuple(_nines_in_parts(length, k - 1)) + ("1",)],
            # carry chains of every size j in the last row
            "carry_chains": [(filler[: length - j] + "0" * j,) + ("0",) * (k - 3) + ("5" * j, "4" * (j - 1) + "5")
                             for j in spread(length)] if k >= 3 else [],
            # the longest operand among short ones
            "mixed_lengths": [(nines,) + ("9" * j,) * (k - 1) for j in spread(length)],
            # every operand the same repeated digit: one column sum everywhere
            "repeated_digits": [(d * length,) * k for d in "1357"],
        }

    def example_input(self) -> str:
        return "12+345+6789+10"


def _nines_in_parts(length: int, parts: int) -> list[str]:
    """``parts`` numbers of ``length`` digits (or 0) whose every column sums to 9, so that
    they add up to 9…9 without a carry (strings: no int of 10,000 digits is built)."""
    shares = [9 // parts + (1 if i < 9 % parts else 0) for i in range(parts)]
    return [str(share) * length if share else "0" for share in shares]
