"""Addition of k operands, k varying: y = x1 + x2 + … + xk, written as rows of running sums."""

from __future__ import annotations

import re

import numpy as np
import torch

from abc_lightning.biases.windows import Needs
from abc_lightning.errors import ConfigError
from abc_lightning.tasks.base import Task, add_columns, cycle, spread


class RowAddition(Task):
    """Addition of any number of operands, as a scratchpad of running sums.

    Row r (r = 0 … k − 1) is S_r = x_1 + … + x_{r+1}, least significant digit first, in
    R = W + 2 digits (W, the operands' frame), so every sum of up to 100 operands fits and
    its top column never carries. The frame is rounded up to W ≡ 1 (mod 3), so R is a
    multiple of 3. The answer is the last row. Each row adds one operand to the row before it, so every token depends on
    the same few tokens whatever k and W are (:meth:`needs`):

    - the digit x_{r+1}[c] of its own column (cross-attention; a column past the operand's
      top reads the token before it, an operator);
    - S_{r−1}[c], the same column of the previous row (SOS for row 0, whose previous row is 0);
    - the two answer tokens before it, whose computation holds the carry: the column below
      adds S_{r−1}[c−1] + x_{r+1}[c−1] plus its own carry, and its output digit tells which.
      The carry out of a row's top column is always 0, so each row starts without one.

    With R a multiple of 3, these three keys sit at positions t, t − 1 and t − R + 1 ≡ t + 1
    (mod 3): under cyclic position indexing of period 3 each has its own phase, at every k and
    W. After the last row the query reads the operand past the last, EOS, and stops. The
    sizes give k and W back: the source has 1 + k(W + 1) tokens and the decoder k·R + 1.
    Example (frame 4 for brevity, so R = 6), ``12 + 34 + 56``::

        source  $ 0 0 1 2 + 0 0 3 4 + 0 0 5 6 &
        target  2 1 0 0 0 0 | 6 4 0 0 0 0 | 2 0 1 0 0 0     (12, 46, 102: rows reversed)

    The data module draws k from ``data.train_operands`` per training batch, and
    evaluates at ``data.operands``.
    """

    name = "addition_k"
    arity = 4  # operands of an instance; the data module sets data.operands
    operator = "+"
    pattern = re.compile(r"\d+(\+\d+)+")
    cross_width = 0  # widths for a sweep over w only; ABS reads needs()
    self_width = 1
    form = "natural"  # its windows are drawn on the natural form
    variable_arity = True
    train_operands = (2, 3, 4)
    test_operands = (2, 10, 20, 40)  # reproduce tests each at 6 and 60 digits, beside the default 4
    order = 15
    table = "beyond"
    rows = ("w1", "T3", "nope_w1")  # the vanilla row is the FIRE baseline on the same scratchpad
    abc = False  # a row's dependency sits R steps back, and R grows with W: no fixed line to calibrate

    def with_operands(self, k: int) -> RowAddition:
        """This task at ``k`` operands."""
        if not isinstance(k, int) or isinstance(k, bool) or not 2 <= k <= 100:
            raise ConfigError(f"{self.name} adds 2 to 100 operands, got {k!r}")
        task = type(self)()
        task.arity = k
        return task

    @staticmethod
    def frame_width(width: int) -> int:
        """The smallest frame of at least ``width`` cells with W ≡ 1 (mod 3)."""
        return width + (1 - width) % 3

    @staticmethod
    def row_width(width: int) -> int:
        """R = W + 2: a multiple of 3 for the task's frames."""
        return width + 2

    def operand_width(self, length: int) -> int:
        return self.frame_width(super().operand_width(length))

    @property
    def train_width(self) -> int:
        return self.frame_width(super().train_width)

    def operands_from_text(self, parts: list[str], width: int) -> list[np.ndarray]:
        return super().operands_from_text(parts, self.frame_width(width))

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        width = operands[0].shape[1]
        size = self.row_width(width)
        total = np.zeros((operands[0].shape[0], size), dtype=np.int64)  # most significant first
        rows = []
        for x in operands:
            row = add_columns(total, np.pad(x, ((0, 0), (size - width, 0))))[:, :size]  # the top never carries
            rows.append(row)
            total = row[:, ::-1]
        return np.concatenate(rows, axis=1)

    def format_answer(self, digits: list[int]) -> str:
        """The last row (this instance's k rows of equal length)."""
        last = digits[len(digits) - len(digits) // self.arity :]
        return "".join(str(d) for d in reversed(last)).lstrip("0") or "0"

    def for_shape(self, n_source: int, n_answer: int) -> RowAddition:
        return self.with_operands(len(self.frame(n_answer, n_source, False)))

    # ---- windows ------------------------------------------------------------------
    def frame(self, n_queries: int, n_keys: int, aligned: bool) -> tuple[int, ...]:
        """(W,) * k: k = (k·R + 1) − (1 + k(W + 1)), the decoder's steps less the source's tokens."""
        k = n_queries - n_keys
        width = (n_keys - 1) // k - 1 if k > 0 else -1
        if k < 1 or k * (width + 1) + 1 != n_keys or width % 3 != 1:
            raise ValueError(f"{self.name}: no (operands, width) gives {n_keys} source tokens and {n_queries} decoder "
                             "steps (decode exactly k·(W + 2) + 1 steps)")
        return (width,) * k

    def needs(self, steps: torch.Tensor, widths: tuple[int, ...], aligned: bool) -> Needs:
        size = self.row_width(widths[0])
        t = steps[:, None]
        r, c = t // size, t % size
        digits = torch.stack([r, c], dim=-1)  # (q, 1, 2): x_{r+1}[c]; past the last operand, EOS
        above = torch.where(r == 0, -1, t - size)  # S_{r−1}[c], or SOS for the first row
        return Needs(digits, torch.cat([t - 1, t - 2, above], dim=1))

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
    """``parts`` numbers of at most ``length`` digits that sum to 9…9 (``length`` nines)."""
    total = 10**length - 1
    share = total // parts
    numbers = [share] * (parts - 1) + [total - share * (parts - 1)]
    return [str(n) for n in numbers]
