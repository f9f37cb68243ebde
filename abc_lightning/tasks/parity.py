"""Parity of the binary representation, as a prefix-XOR scratchpad or as one bit."""

from __future__ import annotations

import re

import numpy as np

from abc_lightning.tasks.base import Task, pad_left, sample_decimal


def decimal_to_bits(digits: np.ndarray, width: int) -> np.ndarray:
    """Decimal digit arrays -> binary digit arrays ``(n, width)``, most significant first."""
    rows = []
    for row in digits:
        value = 0  # in chunks: Python refuses int() of strings over 4,300 digits
        for start in range(0, len(row), 4000):
            chunk = row[start : start + 4000]
            value = value * 10 ** len(chunk) + int("".join(map(str, chunk)))
        rows.append([int(c) for c in format(value, f"0{width}b")])
    return np.array(rows, dtype=np.int64).reshape(len(rows), width)


class ParityTask(Task):
    """Parity with the prefix-XOR scratchpad (sequence-to-sequence) (``--data=Parity``).

    The operand is written in binary, most significant bit first. With x_1 the least
    significant bit, the target is y_i = x_1 ⊕ … ⊕ x_i in generation order, so the last
    digit before EOS is the parity. Example (width 5 for brevity), ``n = 11``::

        source  $ 0 1 0 1 1 &
        target  1 0 0 1 1         (x_1..x_5 = 1 1 0 1 0)

    Lengths are decimal digits as in the papers: length L samples L-digit decimal numbers
    and writes them in binary, which keeps the 10× train-to-test ratio.
    """

    name = "parity"
    arity = 1
    base = 2
    pattern = re.compile(r"[01]+")

    def symbols(self, length: int) -> int:
        return (10**length - 1).bit_length()

    def sample(self, rng: np.random.Generator, n: int, length: int) -> list[np.ndarray]:
        bits = decimal_to_bits(sample_decimal(rng, n, length), self.symbols(length))
        return [pad_left(bits, self.eval_width(length))]

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        return np.bitwise_xor.accumulate(operands[0][:, ::-1], axis=1)

    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        bits = self.symbols(length)  # the width of the largest length-digit number
        half = bits // 2
        return {
            # the running parity flips at every bit
            "all_ones": [("1" * bits,), ("1" * (bits - 1),)],
            "alternating": [(("10" * bits)[:bits],), (("01" * bits)[1:bits],)],
            # one set bit, at either end or both: the parity is decided by a single far bit
            "single_bits": [("1" + "0" * (bits - 1),), ("1",), ("1" + "0" * (bits - 2) + "1",)] if bits > 1 else [("1",)],
            # a long constant run of parity followed by flips, and the reverse
            "half_ones": [("1" * half + "0" * (bits - half),), ("1" * half,)] if half else [],
        }

    def example_input(self) -> str:
        return "1011"

    def format_answer(self, digits: list[int]) -> str:
        return str(digits[-1]) if digits else ""
