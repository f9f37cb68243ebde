"""Signed subtraction: y = x1 − x2 for any x1, x2, with a sign token."""

from __future__ import annotations

import re

import numpy as np
import torch

from abc_lightning import vocab
from abc_lightning.tasks.needs import Needs
from abc_lightning.tasks.base import Task, cycle, digits_text, spread
from abc_lightning.tasks.subtraction import subtract_columns

PLUS, MINUS = vocab.TOKEN["+"], vocab.TOKEN["-"]


class SignedSubtractionTask(Task):
    """a − b for any a and b: both differences column by column, then the sign (``--data=SignedSubtraction``).

    The sign depends on the most significant column where a and b differ, and the
    magnitude's digits (written least significant first) depend on the sign, so no single
    left-to-right pass knows what to write. The target writes, for every column c, a block
    of two tokens, ``r_c`` and ``d_c``: the digit c of a − b and of b − a, each computed
    modulo 10^W with its own borrow chain. After the last block comes the sign: the operands
    have a leading zero column, so the top digit of a − b mod 10^W is 0 when a ≥ b and 9
    when a < b. The answer is ``+`` with the r digits or ``-`` with the d digits. Each
    token needs a fixed window whatever the width:

    - ``r_c`` and ``d_c``: the digits a_c and b_c, and the token of the same stream in the
      previous block (two steps back), whose computation saw column c − 1 and its borrow;
    - the sign: ``r`` of the last block (two steps back), with EOS as an anchor.

    So decoder self-attention opens the last two steps and cross-attention opens the pair
    a_c b_c (EOS for the sign). The input is always aligned (a_c b_c side by side, stride 2),
    so with cyclic position indexing of period 2 a_c sits at phase 0 and b_c at phase 1 at
    every column and width, and each output token's phase is its stream. (On the natural
    form, ``$ a - b &``, a_c and b_c sit W + 1 apart: their phases swap from one column to
    the next and, at odd widths, coincide; a +T=2 model trained there confused a − b with
    b − a.) Example (operand width 5 for brevity), ``958 − 9003 = −8045``::

        source  $ - 0 0 0 9 9 0 5 0 8 3 &        (a_4 b_4 … a_0 b_0)
        target  5 5 | 5 4 | 9 0 | 1 8 | 9 0 | -      (columns 0 … 4, then the sign)
                r d                                (d: 5 4 0 8 0 = 08045 reversed)

    The cross window, drawn for width 3 (rows: output steps; columns: source tokens)::

                 $ - a2 b2 a1 b1 a0 b0 &
        r0       . .  .  .  .  .  x  x .
        d0       . .  .  .  .  .  x  x .
        r1       . .  .  .  x  x  .  . .
        d1       . .  .  .  x  x  .  . .
        r2       . .  x  x  .  .  .  . .
        d2       . .  x  x  .  .  .  . .
        sign     . .  .  .  .  .  .  . x
        EOS      . .  .  .  .  .  .  . x
    """

    name = "signed_subtraction"
    arity = 2
    operator = "-"
    pattern = re.compile(r"\d+-\d+")
    cross_width = 0
    self_width = 2  # back to the same stream of the previous column
    cpi_period = 2  # the block: r, d
    form = "aligned"  # its windows are drawn on the aligned form
    answer_tokens = frozenset(range(10)) | {PLUS, MINUS}
    # Random pairs are never equal (about one pair in 10^6), and for a ≠ b exactly one of the
    # top r and top d digits is 9, so "minus iff the top d is 0" fits every pool row as well
    # as the true rule "minus iff the top r is 9"; a +T=2 model trained on the pool alone
    # learned the first and wrote `-` for a − a. A tenth of the training rows is therefore
    # carry-rich (data.carry_rich), and half of those are equal pairs (see rich_rows).
    carry_rich = 0.1

    def rich_rows(self, rng: np.random.Generator, operands: list[np.ndarray]) -> list[np.ndarray]:
        """Half of the carry-rich pairs become a − a (the only pairs whose r and d both start
        with 0, and whose sign is `+`); the rest stay mostly-9 pairs, whose long runs of equal
        columns leave the sign to a low column."""
        a, b = operands
        return [a, np.where(rng.random(len(a)) < 0.5, a, b)]

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        a, b = operands
        forward, backward = self.modular(a, b), self.modular(b, a)
        n, width = a.shape
        out = np.empty((n, 2 * width + 1), dtype=np.int64)
        out[:, 0 : 2 * width : 2], out[:, 1 : 2 * width : 2] = forward, backward
        out[:, -1] = np.where(forward[:, -1] == 9, MINUS, PLUS)
        return out

    @staticmethod
    def modular(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``a − b mod 10^W``, least significant digit first (the borrow out of the top is dropped)."""
        return subtract_columns(np.concatenate([np.ones((a.shape[0], 1), dtype=a.dtype), a], axis=1),
                                np.concatenate([np.zeros((b.shape[0], 1), dtype=b.dtype), b], axis=1))[:, :-1]

    def format_answer(self, digits: list[int]) -> str:
        sign, body = (digits[-1], digits[:-1]) if digits and digits[-1] in (PLUS, MINUS) else (PLUS, digits)
        magnitude = body[1::2] if sign == MINUS else body[0::2]
        if any(d >= 10 for d in magnitude):
            return vocab.decode(digits)
        text = digits_text(magnitude[::-1])
        return "-" + text if sign == MINUS and text != "0" else text

    def needs(self, steps: torch.Tensor, widths: tuple[int, ...], aligned: bool) -> Needs:
        """``r_c`` and ``d_c`` read the pair a_c b_c and the three steps before them; the sign
        (and EOS) read no digit, so EOS, the anchor."""
        t = steps[:, None]
        column = t // 2
        operand = torch.where(column < widths[0], torch.tensor([[0, 1]]), -1)
        digits = torch.stack(torch.broadcast_tensors(operand, column), dim=-1)
        return Needs(digits, t - 1 - torch.arange(self.self_width + 1)[None, :])

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        filler = cycle("12345678", length)
        one_then_zeros = "1" + "0" * (length - 1)
        nines = "9" * length
        return {
            # the answer crosses zero by one: 10…0 − 10…01 = −1, and the other way round
            "off_by_one": [(one_then_zeros, one_then_zeros[:-1] + "1"), (one_then_zeros[:-1] + "1", one_then_zeros)]
            if length > 1 else [("1", "2"), ("2", "1")],
            # a borrow through the whole width in the answer's stream: 1 − 10…0 = −99…9, 10…0 − 1
            "long_borrows": [("1", one_then_zeros), (one_then_zeros, "1")] * (length > 1),
            # equal operands: 0 with a + sign, whatever the digits
            "equal": [(filler, filler), (nines, nines), ("0", "0")],
            # the operands differ only in their last digit, so the sign is decided at the bottom
            "last_digit_decides": [(filler[:-1] + "3", filler[:-1] + "4"), (filler[:-1] + "4", filler[:-1] + "3")],
            # the operands differ only in their first digit, so the sign is decided at the top
            "first_digit_decides": [("1" + filler[1:], "2" + filler[1:]), ("2" + filler[1:], "1" + filler[1:])]
            if length > 1 else [],
            # zero and the largest number on either side
            "extremes": [("0", nines), (nines, "0")],
            # borrow chains of every size k in either direction
            "borrow_chains": [(filler[: length - k] + "0" * k, "1") for k in spread(length)]
            + [("1", filler[: length - k] + "0" * k) for k in spread(length)],
        }

    def example_input(self) -> str:
        return "958-9003"
