"""N÷1: long division of an N-digit dividend by a one-digit divisor (1-9), quotient and remainder."""

from __future__ import annotations

import re

import numpy as np
import torch

from abc_lightning.tasks.base import Task, cycle, digits_text, pad_left, sample_decimal, to_digits
from abc_lightning.tasks.needs import Needs


def long_division(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The scratchpad of ``a ÷ d`` for digit arrays ``a (n, W)`` (most significant first) and
    divisors ``d (n, 1)``: ``(n, 2W)``, the quotient digit and the running remainder of each
    dividend digit in turn, from the most significant."""
    n, width = a.shape
    out = np.zeros((n, 2 * width), dtype=np.int64)
    divisor, remainder = d[:, 0].astype(np.int64), np.zeros(n, dtype=np.int64)
    for i in range(width):
        current = remainder * 10 + a[:, i]
        out[:, 2 * i], remainder = current // divisor, current % divisor
        out[:, 2 * i + 1] = remainder
    return out


class DivisionTask(Task):
    """N÷1 long division (``--data=Division``): the divisor is one digit, 1-9.

    Long division runs from the most significant digit, the other way from addition. The
    answer is a scratchpad that carries the running remainder: for each dividend digit a_i,
    the quotient digit q_i = (10 r + a_i) ÷ d and the new remainder r_i = (10 r + a_i) mod d.
    So every token reads the same few things at any length: its dividend digit, the divisor
    and the remainder before it. The quotient is the q digits, the remainder the last r.
    Example (training width 8), ``1234 ÷ 7``::

        natural  $ 0 0 0 0 1 2 3 4 / 7 &
        aligned  $ / 0 7 0 7 0 7 0 7 1 7 2 7 3 7 4 7 &     (a_n d … a_1 d)
        target   0 0 0 0 0 0 0 0 0 1 1 5 7 4 6 2           (q r per digit: 176 r 2)

    Under ABS the windows follow that recurrence (:meth:`needs`), and CPI takes the aligned
    stride as its period (2): counted from the input's end, every dividend digit sits at
    one phase and every divisor copy at the other, at every length, as the quotient and
    remainder tokens alternate in the answer.
    """

    name = "division"
    arity = 2
    operator = "/"
    pattern = re.compile(r"\d+/[1-9]")
    cross_width = 0
    cpi_period = 2

    def from_pool(self, values: list[np.ndarray]) -> list[np.ndarray]:
        # the divisor is 1-9, from the second pool value (a deterministic function of Π's permutation)
        return [to_digits(values[0], self.train_width), (values[1] % 9 + 1)[:, None]]

    def sample(self, rng: np.random.Generator, n: int, length: int) -> list[np.ndarray]:
        a = pad_left(sample_decimal(rng, n, length), self.eval_width(length))
        return [a, rng.integers(1, 10, size=(n, 1))]

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        return long_division(*operands)

    def format_answer(self, digits: list[int]) -> str:
        """The scratchpad (quotient and remainder digits, alternating) -> ``"176 r 2"``."""
        return f"{digits_text(digits[0::2])} r {digits[-1] if digits else 0}"

    def operands_from_text(self, parts: list[str], width: int) -> list[np.ndarray]:
        # the divisor stays one digit wide
        return super().operands_from_text(parts[:1], width) + [np.array([[int(parts[1])]])]

    def frame(self, n_queries: int, n_keys: int, aligned: bool) -> tuple[int, ...]:
        # natural form: $ a / d & (the divisor one digit)
        return ((n_keys - 3) // 2,) * 2 if aligned else (n_keys - 4, 1)

    def needs(self, steps: torch.Tensor, widths: tuple[int, ...], aligned: bool) -> Needs:
        """Token t is q_i (t = 2i) or r_i (t = 2i + 1): both read dividend digit a_i (digit
        W − 1 − i, counted from the least significant) and the divisor beside it (aligned;
        its one digit otherwise), and the remainder before, r_{i−1} (answer t − 1 for q_i,
        t − 2 for r_i; SOS for the first, whose remainder is 0)."""
        digit = widths[0] - 1 - torch.div(steps, 2, rounding_mode="floor")
        divisor = digit if aligned else torch.zeros_like(digit)
        digits = torch.stack([torch.stack([torch.zeros_like(digit), digit], -1),
                              torch.stack([torch.ones_like(digit), divisor], -1)], dim=1)
        before = torch.where(steps % 2 == 1, steps - 2, torch.full_like(steps, -9))  # -9: unused
        return Needs(digits, torch.stack([steps - 1, before], dim=1))

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        nines, power = "9" * length, "1" + "0" * (length - 1)
        return {
            # 99…9 ÷ m: remainders 9 mod m … at every step
            "nines": [(nines, str(m)) for m in range(1, 10)],
            # divisor 1 and 9 on the dividends that stress them most
            "divisor_1_and_9": [(x, m) for x in (power, nines, cycle("123456789", length)) for m in ("1", "9")],
            # m0…0m ÷ m = 10…01 and m0…0 ÷ m = 10…0: runs of zeros in the quotient
            "zeros_in_quotient": [(f"{m}{'0' * (length - 2)}{m}" if length > 1 else str(m), str(m))
                                  for m in range(2, 10)] + [(str(m) + "0" * (length - 1), str(m)) for m in range(2, 10)],
            # a leading digit below the divisor: the quotient starts with 0 (at one digit: dividend < divisor)
            "dividend_below_divisor": [(f"{a}{'9' * (length - 1)}", str(m)) for m in range(2, 10) for a in (0, 1)
                                       if a < m and (a or length == 1)],
            # (m−1) then the digit that keeps the remainder at m − 1: its largest, through the whole dividend
            "remainder_held": [(str(m - 1) + str(-9 * (m - 1) % m) * (length - 1), str(m)) for m in range(2, 10)],
        }

    def growing_segments(self, src_width: int, aligned: bool = False) -> list[tuple[int, int]]:
        # the divisor is one digit at every length: only the dividend grows
        return [(2, src_width - 3)] if aligned else [(1, src_width - 4)]

    def example_input(self) -> str:
        return "123456/7"
