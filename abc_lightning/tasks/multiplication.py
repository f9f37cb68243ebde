"""N×M multiplication, both operands of any length: y = a × b, written as rows of running sums."""

from __future__ import annotations

import re

import numpy as np
import torch

from abc_lightning.tasks.needs import Needs
from abc_lightning.errors import ConfigError
from abc_lightning.tasks.base import SPARE_CELLS, Task, digits_text, pad_left, sample_decimal, spread


class MultiplicationTask(Task):
    """Multiplication of two numbers of any lengths, as a scratchpad of running sums: one
    row per digit of the multiplier, each column written as its multiplier digit, its digit
    and its carry (``--data=Multiplication``).

    Row j (j = 0 … W_b − 1, the multiplier's digits from the least significant) is
    S_j = a × (b mod 10^(j+1)) = S_{j−1} + a · b_j · 10^j, least significant column first, in
    R columns (R = W_a + W_b rounded up to an odd number, so the product always fits and the
    top column never carries). Column c of row j is three tokens:

    - m = b_j, the row's multiplier digit;
    - d = S_j[c] = (S_{j−1}[c] + a[c − j] · b_j + e_{c−1}) mod 10;
    - e, the carry it sends up: the same sum's tens (at most 9 + 81 + 9 = 99, so one digit).

    The answer is the last row's digits. Every token reads the same few raw tokens whatever
    the operands' lengths (:meth:`needs`):

    - m reads b_j (cross-attention; past the last row, the operator before b: stop);
    - d and e read a[c − j] (cross-attention; outside a, the token beside it: 0), the row's
      m, the carry coming in e_{c−1}, and S_{j−1}[c] of the row above (SOS for row 0).

    A row is 3R ≡ 3 (mod 6) tokens, so under cyclic position indexing of period 6 the keys a
    token reads sit at distinct phases of its own: for d, t − 1 (m), t − 2 (e_{c−1}) and
    t − 3R ≡ t − 3 (the row above); for e, t − 1 (d), t − 2 (m), t − 3 (e_{c−1}) and
    t − 1 − 3R ≡ t − 4. The sizes give the widths back: the source has W_a + W_b + 3 tokens
    and the decoder 3R · W_b + 1 steps. Example (frames of 2 for brevity, so R = 5),
    ``12 × 34 = 408``::

        source  $ 1 2 * 3 4 &
        target  4 8 0 4 4 0 4 0 0 4 0 0 4 0 0 | 3 8 0 3 0 1 3 4 0 3 0 0 3 0 0
                (m d e per column; the last row's digits 8 0 4 0 0: 408 reversed)

    Training draws both operands from the pool (up to 7 digits). ``data.second_length``
    sets the multiplier's digits in evaluation apart from the multiplicand's (60×6, 6×60).
    """

    name = "multiplication"
    arity = 2
    operator = "*"
    pattern = re.compile(r"\d+\*\d+")
    cross_width = 0  # widths for a sweep over w only; ABS reads needs()
    self_width = 1
    cpi_period = 6  # a row is 3R ≡ 3 (mod 6) tokens: its keys at distinct phases (above)
    form = "natural"  # its windows are drawn on the natural form
    unequal_lengths = True
    max_length = 200
    max_length_reason = "200×200 digits is an answer of 245,000 tokens"
    long_lengths = (60,)  # 60×60, the moonshot: 23,250 answer tokens
    test_shapes = ((60, 6), (6, 60), (20, 60))  # (N, M) reproduce tests apart (shape_tests)
    # 200 random products at each: 1,000 at 60×60 would be about two hours of decoding on one
    # thread for each cell and seed (23,250 tokens at 6.4 ms a token for a batch of 20)
    long_samples = shape_samples = 200
    # the curve of the cells that have one (the FIRE baseline): N×N answers grow as about 6.5 N²
    # tokens, and under a global attention a curve to 60×60 would be days of decoding on one thread
    curve_lengths = tuple(range(1, 11))
    # Its reproduce cells (configs/abs_multiplication.yaml): 2,000 steps (every one of 408
    # tokens has to be right: 1,000 left seed 0 at 92.8% in distribution), batches of 32 (a
    # step of 128 took 6 s on one thread), validation at 6 and 10 digits, its own test lengths.
    cell_overrides = ("--trainer.max_epochs=10", "--data.batch_size=32", "--data.val_lengths=[6,10]",
                      "--data.test_lengths=[1,2,3,4,5,6,10,20]", "--data.test_samples=1000")
    second: int | None = None  # the multiplier's digits in evaluation (None: the multiplicand's)

    def with_second_length(self, digits: int | None) -> MultiplicationTask:
        """This task with multipliers of ``digits`` digits in evaluation."""
        if digits is not None and (not isinstance(digits, int) or isinstance(digits, bool) or digits < 1):
            raise ConfigError(f"data.second_length must be a digit count >= 1, got {digits!r}")
        task = type(self)()
        task.second = digits
        return task

    def shape_tests(self) -> list[tuple[dict, list[int], list[str]]]:
        return [({"second": m}, [n], [f"--data.second_length={m}"]) for n, m in self.test_shapes]

    def shape_label(self, row: dict) -> str:
        return f"{row['length']}×{row['second']}"

    @staticmethod
    def row_width(width_a: int, width_b: int) -> int:
        """R: W_a + W_b columns (the product's digits), rounded up to an odd number."""
        return (width_a + width_b) | 1

    # ---- sampling -----------------------------------------------------------------
    def sample(self, rng: np.random.Generator, n: int, length: int) -> list[np.ndarray]:
        second = self.second or length
        a = pad_left(sample_decimal(rng, n, length), self.eval_width(length))
        return [a, pad_left(sample_decimal(rng, n, second, exhaustive=False), self.eval_width(second))]

    def operands_from_text(self, parts: list[str], width: int) -> list[np.ndarray]:
        """The multiplicand padded to ``width``, the multiplier to its own evaluation width."""
        width_b = width if self.second is None else self.eval_width(self.second)
        return [pad_left(np.array([[int(c) for c in part]]), w) for part, w in zip(parts, (width, width_b))]

    def parse(self, text: str) -> list[np.ndarray]:
        """A predict input, each operand in a frame of its own length."""
        super().parse(text)  # checks the text
        parts = text.replace(" ", "").split(self.operator)
        return [pad_left(np.array([[int(c) for c in p]]), max(self.train_width, len(p) + SPARE_CELLS)) for p in parts]

    # ---- writing ------------------------------------------------------------------
    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        a, b = operands
        n, width_a = a.shape
        width_b = b.shape[1]
        size = self.row_width(width_a, width_b)
        # column-major and int16 (the sums stay below 100): a training split is 917,504 rows
        digits = np.zeros((size, n), dtype=np.int16)
        digits[:width_a] = a[:, ::-1].T  # a, least significant first, zeros above its top
        above = np.zeros((size, n), dtype=np.int16)  # S_{j−1}, least significant first
        out = np.empty((width_b, size, 3, n), dtype=np.int16)
        for j in range(width_b):
            m = b[:, width_b - 1 - j].astype(np.int16)
            out[j, :, 0] = m
            carry = np.zeros(n, dtype=np.int16)
            for c in range(size):
                total = above[c] + carry + (digits[c - j] * m if c >= j else 0)
                carry = total // 10
                above[c] = total - 10 * carry
                out[j, c, 1], out[j, c, 2] = above[c], carry
        return np.ascontiguousarray(out.transpose(3, 0, 1, 2)).reshape(n, -1)

    def format_answer(self, digits: list[int]) -> str:
        """The last row's digits (every third token from the second, of the last row)."""
        size = self.row_width(*self.widths) if self.widths else None
        last = digits[len(digits) - 3 * size :] if size and len(digits) >= 3 * size else digits
        return digits_text(last[1::3][::-1])

    widths: tuple[int, int] | None = None  # the frame an answer was decoded in (for_shape)

    def for_shape(self, n_source: int, n_answer: int) -> MultiplicationTask:
        task = self.with_second_length(self.second)
        task.widths = self.frame(n_answer, n_source, False)
        return task

    # ---- windows ------------------------------------------------------------------
    def frame(self, n_queries: int, n_keys: int, aligned: bool) -> tuple[int, ...]:
        """(W_a, W_b): the source has W_a + W_b + 3 tokens, the decoder 3R · W_b + 1 steps."""
        size = self.row_width(n_keys - 3, 0)
        width_b, rest = divmod(n_queries - 1, 3 * size) if size > 0 else (0, 1)
        width_a = n_keys - 3 - width_b
        if rest or width_b < 1 or width_a < 1:
            raise ValueError(f"{self.name}: no (W_a, W_b) gives {n_keys} source tokens and {n_queries} decoder "
                             "steps (decode exactly 3R·W_b + 1 steps)")
        return width_a, width_b

    def needs(self, steps: torch.Tensor, widths: tuple[int, ...], aligned: bool) -> Needs:
        row = 3 * self.row_width(*widths)
        t = steps[:, None]
        j, c, kind = t // row, t % row // 3, t % 3  # row, column, and m (0), d (1) or e (2)
        multiplier = torch.stack([torch.ones_like(t), j], dim=-1)  # b_j (past the last row: the operator)
        digit = torch.stack([torch.zeros_like(t), (c - j).clamp(min=-1)], dim=-1)  # a[c − j] (outside: beside a)
        digits = torch.where((kind == 0)[..., None], multiplier, digit)
        above = torch.where(j == 0, -1, t - row - (kind == 2).long())  # S_{j−1}[c] (SOS for the first row)
        incoming = t - 1 - kind  # e_{c−1}: two steps before d, three before e
        m = torch.where(kind == 2, t - 2, -9)  # e reads its m (d's is its own input)
        none = kind == 0
        answers = torch.cat([torch.where(none, -9, incoming), torch.where(none, -9, above), m], dim=1)
        return Needs(digits, answers)

    def growing_segments(self, src_width: int, aligned: bool = False) -> list[tuple[int, int]]:
        raise NotImplementedError("multiplication has no ABC cell (its row above is 3R steps back)")

    # ---- worst cases --------------------------------------------------------------
    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        n, m = length, self.second or length
        nines_a, nines_b = "9" * n, "9" * m
        power_a, power_b = "1" + "0" * (n - 1), "1" + "0" * (m - 1)
        return {
            # the largest digit products and carries everywhere: 9…9 × 9…9
            "all_nines": [(nines_a, nines_b)],
            # powers of ten, alone and against 9…9: long runs of zeros and of copies
            "powers_of_ten": [(power_a, power_b), (nines_a, power_b), (power_a, nines_b)],
            # each column sums many 9s: 9…9 × 1…1, and 9…9 × 10…01 (a carry chain in the last row)
            "column_carries": [(nines_a, "1" * m)] + ([(nines_a, "1" + "0" * (m - 2) + "1")] if m >= 2 else []),
            # one digit product repeated everywhere
            "repeated_digits": [(d * n, e * m) for d in "2468" for e in "3579"],
            # operands shorter than the frame: 9…9 × 9…9 of fewer digits on either side
            "mixed_lengths": [(nines_a, "9" * k) for k in spread(m)] + [("9" * k, nines_b) for k in spread(n)],
        }

    def example_input(self) -> str:
        return "1234*567"
