"""N×1: y = x1 × x2 with x2 a single digit."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning.tasks.base import Task, add_columns, pad_left, sample_decimal, to_digits


def nines_over(length: int, m: int) -> str:
    """⌊(10^length − 1) / m⌋ in decimal, by long division (Python refuses str() of ints
    over 4,300 digits, and evaluation goes to 10,000)."""
    quotient, remainder = [], 0
    for _ in range(length):
        remainder = remainder * 10 + 9
        quotient.append(str(remainder // m))
        remainder %= m
    return "".join(quotient).lstrip("0") or "0"


class Nx1Task(Task):
    """N×1 multiplication; the second operand is one digit in 0..9 (``--data=Nx1``).

    Example (training width 8), ``1234 × 7``::

        natural  $ 0 0 0 0 1 2 3 4 * 7 &
        aligned  $ * 0 7 0 7 0 7 0 7 1 7 2 7 3 7 4 7 &     (a_n b ... a_1 b)
        target   8 3 6 8 0 0 0 0 0                         (8638 reversed)
    """

    name = "nx1"
    arity = 2
    operator = "*"
    pattern = re.compile(r"\d+\*\d")
    cross_width = 0  # aligned input: each multiplicand digit sits beside the multiplier

    def from_pool(self, values: list[np.ndarray]) -> list[np.ndarray]:
        # The multiplier is a digit; draw it from the second pool value's last digit so
        # that it stays a deterministic function of the seeded permutation.
        return [to_digits(values[0], self.train_width), (values[1] % 10)[:, None]]

    def rich_rows(self, rng: np.random.Generator, operands: list[np.ndarray]) -> list[np.ndarray]:
        # a multiplicand of mostly 9s times a uniform digit: carry chains of every size b − 1
        # (a mostly-9s multiplier would make nearly every one of them × 9)
        return [operands[0], rng.integers(0, 10, size=len(operands[0]))]

    def sample(self, rng: np.random.Generator, n: int, length: int) -> list[np.ndarray]:
        a = pad_left(sample_decimal(rng, n, length), self.eval_width(length))
        return [a, rng.integers(0, 10, size=(n, 1))]

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        a, b = operands
        return add_columns(a, 0, scale=b)

    def operands_from_text(self, parts: list[str], width: int) -> list[np.ndarray]:
        # the multiplier stays one digit wide
        return super().operands_from_text(parts[:1], width) + [np.array([[int(parts[1])]])]

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        nines = "9" * length
        return {
            # 99…9 × m: every column carries m-1, so the ten rows hold every carry size 0..8
            "all_nines": [(nines, str(m)) for m in range(10)],
            # dd…d × m: one carry repeated along the whole width
            "repeated_digits": [(d * length, str(m)) for d in "12345678" for m in range(2, 10)],
            # ⌊(10^L − 1)/m⌋ × m = 99…9r: one wrong carry anywhere breaks a run of 9s
            "products_of_nines": [(nines_over(length, m), str(m)) for m in range(2, 10)],
        }

    def growing_segments(self, src_width: int, aligned: bool = False) -> list[tuple[int, int]]:
        # the multiplier is one digit at every length: only the multiplicand grows
        return [(2, src_width - 3)] if aligned else [(1, src_width - 4)]

    def example_input(self) -> str:
        return "1234*7"
