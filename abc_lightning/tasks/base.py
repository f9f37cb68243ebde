"""The contract every arithmetic task follows, and the digit arithmetic they share.

Operands travel as digit arrays of shape ``(n, width)``, most significant digit first,
zero-padded on the left; this keeps 60- and 1000-digit numbers exact without big ints.
Targets are returned in generation order (least significant digit first): the papers
reverse every output.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
import torch

from abc_lightning import vocab
from abc_lightning.tasks.needs import Needs, dependency_spans, dependency_windows
from abc_lightning.errors import ConfigError, InputError

#: The training pool is the integers in [0, 2^20], as in the papers.
POOL_MAX = 2**20
#: Leading zeros beyond the number's digits in a test input's frame (``Task.operand_width``).
SPARE_CELLS = 2


def cycle(pattern: str, n: int) -> str:
    """``pattern`` repeated to exactly ``n`` characters (e.g. a carry-free filler)."""
    return (pattern * (n // len(pattern) + 1))[:n]


def spread(length: int) -> list[int]:
    """Sizes 1, 2, L/4, L/2, L-1 (the distinct ones in [1, L-1]): chains of every scale."""
    return sorted({k for k in (1, 2, length // 4, length // 2, length - 1) if 1 <= k <= length - 1})


def to_digits(values: np.ndarray, width: int, base: int = 10) -> np.ndarray:
    """Integers (int64, < base**width) -> digit array ``(n, width)``, most significant first."""
    powers = base ** np.arange(width - 1, -1, -1, dtype=np.int64)
    return (np.asarray(values, dtype=np.int64)[:, None] // powers) % base


def sample_decimal(rng: np.random.Generator, n: int, length: int, exhaustive: bool = True) -> np.ndarray:
    """``n`` numbers of exactly ``length`` decimal digits as a digit array ``(n, length)``.

    When ``exhaustive`` and ``n`` covers the whole population (9·10^(L-1) numbers) every
    number is returned once, in order; otherwise numbers are drawn uniformly with replacement.
    """
    if length < 1:
        raise ConfigError(f"length must be >= 1 digit, got {length}")
    population = 9 * 10 ** (length - 1)
    if exhaustive and n >= population:
        return to_digits(np.arange(10 ** (length - 1), 10**length), length)
    first = rng.integers(1, 10, size=(n, 1))
    rest = rng.integers(0, 10, size=(n, length - 1))
    return np.concatenate([first, rest], axis=1)


def pad_left(digits: np.ndarray, width: int) -> np.ndarray:
    """Zero-pad a digit array on the left to ``width`` columns."""
    missing = width - digits.shape[1]
    if missing < 0:
        raise ConfigError(f"cannot pad {digits.shape[1]} digits into width {width}")
    return np.pad(digits, ((0, 0), (missing, 0)))


def digits_text(row: np.ndarray) -> str:
    """One operand's digit row, most significant first and padded with zeros, as written
    (``[0, 0, 4, 2]`` -> ``"42"``)."""
    return "".join(str(int(d)) for d in row).lstrip("0") or "0"


def add_columns(a: np.ndarray, b: np.ndarray | int, scale: np.ndarray | int = 1) -> np.ndarray:
    """Exact ``a * scale + b`` on MSB-first digit arrays; returns LSB-first, one digit wider.

    ``b`` may be a digit array of a's shape or a scalar; ``scale`` a per-row digit ``(n, 1)``.
    The loop runs over columns only and is vectorized over samples.
    """
    a_lsb = a[:, ::-1]
    b_lsb = b[:, ::-1] if isinstance(b, np.ndarray) else None
    n, width = a.shape
    out = np.zeros((n, width + 1), dtype=np.int64)
    carry = np.zeros(n, dtype=np.int64) if b_lsb is not None else np.full(n, b, dtype=np.int64)
    scale = np.asarray(scale).reshape(-1) if np.ndim(scale) else scale
    for col in range(width):
        total = a_lsb[:, col] * scale + carry + (b_lsb[:, col] if b_lsb is not None else 0)
        out[:, col] = total % 10
        carry = total // 10
    out[:, width] = carry
    return out


class Task(ABC):
    """An arithmetic task: how operands are sampled, written and answered.

    A task is one file in ``abc_lightning/tasks/``: a subclass that sets ``name`` is found
    and registered by the package (see :mod:`abc_lightning.tasks`), and gets a data module
    of its own (``--data=Addition``) and its cells in ``reproduce``. It sets:

    - ``name``, ``arity``, ``operator`` (the symbol between operands, or None), ``base``
      and ``pattern`` (a predict input, e.g. ``\\d+\\+\\d+``);
    - ``cross_width``: the cross-attention window ABS gives it (``AttentionWindow`` takes it
      unless told otherwise): 1 for unary tasks, 0 for aligned binary ones, where the two
      digits of a column sit side by side;
    - ``form``: the input form a task's own windows are drawn on (``natural`` or
      ``aligned``), which then overrides ``data.aligned``; None takes the configured one;
    - ``self_width``: ABS's decoder self-attention window (the paper's 1); a task whose
      tokens need an older step (a scratchpad) declares more. ABS builds both windows from
      :meth:`needs`, which by default reads these widths; a task whose tokens follow another
      recurrence (a scratchpad) states which input digits and answer tokens each one reads
      there, as a function of the operands' sizes, and gets its windows at every size;
    - ``cpi_period``: the period T of cyclic position indexing under ABS (the paper's 3). A
      task whose operands play different roles in a column (subtraction) needs T equal to
      its aligned stride, so that a column's tokens sit at the same phases at every length;
      ``period: task`` (what ``configs/abs.yaml`` sets) takes it. ``failing_periods``: the
      other periods measured to fail on this task, each with what was measured, which a fit
      under one of them prints as a warning;
    - ``answer_tokens``: the tokens an answer may hold (digits; a task with a sign token
      adds it), which :meth:`format_answer` turns into text;
    - ``carry_rich``: the share of training rows drawn carry-rich (``data.carry_rich``; 0,
      the papers' protocol, for every task whose hard cases random numbers already reach);
      :meth:`rich_rows` may reshape those rows into the task's own hard cases.
    """

    name: str
    arity: int
    operator: str | None = None
    base: int = 10
    pattern: re.Pattern
    cross_width: int = 1
    self_width: int = 1
    form: str | None = None
    cpi_period: int = 3
    failing_periods: dict[int, str] = {}
    answer_tokens: frozenset[int] = frozenset(range(10))  # the tokens format_answer reads
    carry_rich: float = 0.0
    max_length: int = 10_000  # the longest operand evaluated (digits); a task whose answer outgrows its operands sets less
    max_length_reason: str = ""
    long_lengths: tuple[int, ...] | None = None  # reproduce's lengths past the configs' (None: 599-601)
    long_samples: int | None = None  # reproduce's random inputs at each of those (None: 1,000)
    shape_samples: int | None = None  # and at each of its other shapes (shape_tests; None: 1,000)
    curve_lengths: tuple[int, ...] | None = None  # reproduce's accuracy-by-length curve (None: 1-60)
    cell_overrides: tuple[str, ...] = ()  # flags every reproduce cell of this task adds after --data=<Task>
    abs_overrides: tuple[str, ...] = ()  # and those its ABS cells (configs/abs.yaml) add: a longer step budget

    # ---- widths -------------------------------------------------------------------
    def operand_width(self, length: int) -> int:
        """Symbols per operand for numbers of ``length`` decimal digits: :data:`SPARE_CELLS`
        leading zeros more than the number needs.

        The first gives the carry-out (the answer has one more digit than the operand) an
        input cell of its own; without it the carry-out row sees only 0 or 1 beside SOS in
        training and copies the top digit at test. The second matches the training frame:
        most pool numbers have 6 digits in an 8-cell frame, so in training the two answer
        digits before EOS are almost always 0. With one spare cell, a test answer whose top
        digit is a carry-out put a non-zero digit where training never had one, and ABC
        models wrote a digit too many or stopped one early.
        """
        return self.symbols(length) + SPARE_CELLS

    def symbols(self, length: int) -> int:
        """Symbols needed to write the largest ``length``-digit decimal number in this base."""
        return length

    @property
    def train_width(self) -> int:
        """Operand width for the training pool [0, 2^20]: 7 decimal digits (21 bits) + 1."""
        return len(np.base_repr(POOL_MAX, self.base)) + 1

    def eval_width(self, length: int) -> int:
        """Evaluation pads to the training width at least, so length 6 is interpolation."""
        return max(self.operand_width(length), self.train_width)

    # ---- sampling -----------------------------------------------------------------
    def from_pool(self, values: list[np.ndarray]) -> list[np.ndarray]:
        """Pool integers (one int64 array per operand) -> operand digit arrays."""
        return [to_digits(v, self.train_width, self.base) for v in values]

    def sample(self, rng: np.random.Generator, n: int, length: int) -> list[np.ndarray]:
        """``n`` operand tuples of exactly ``length`` digits, padded to ``eval_width``."""
        width = self.eval_width(length)
        # Only the first operand may enumerate its population: pairs (k, k) would not be random.
        return [pad_left(sample_decimal(rng, n, length, exhaustive=i == 0), width) for i in range(self.arity)]

    def rich_rows(self, rng: np.random.Generator, operands: list[np.ndarray]) -> list[np.ndarray]:
        """The carry-rich training rows (pool integers, one array per operand, each drawn
        mostly 9s from Π's training part; ``data.carry_rich``) -> the rows to train on.
        As drawn by default; a task whose hard cases are another shape builds them here."""
        return operands

    # ---- writing ------------------------------------------------------------------
    @abstractmethod
    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        """Answer digits in generation order (least significant first), ``(n, m)``."""

    def source(self, operands: list[np.ndarray], aligned: bool = False) -> np.ndarray:
        """Encoder tokens ``(n, S)``: SOS, the expression, EOS."""
        n = operands[0].shape[0]
        sos = np.full((n, 1), vocab.SOS)
        eos = np.full((n, 1), vocab.EOS)
        if self.arity == 1:
            body = operands[0]
        else:
            op = np.full((n, 1), vocab.TOKEN[self.operator])
            if aligned:  # op, then each column's digits side by side: a_n b_n … a_1 b_1
                width = operands[0].shape[1]
                columns = [np.broadcast_to(x, (n, width)) if x.shape[1] == 1 else x for x in operands]
                body = np.concatenate([op, np.stack(columns, axis=2).reshape(n, -1)], axis=1)
            else:  # a op b (op c …)
                body = np.concatenate([part for x in operands for part in (op, x)][1:], axis=1)
        return np.concatenate([sos, body, eos], axis=1)

    def growing_segments(self, src_width: int, aligned: bool = False) -> list[tuple[int, int]]:
        """``(start, width)`` of each source span that grows (on its left) with the length.

        ABC's segment alignment moves calibrated lines by these spans' growth. Natural form:
        ``$ a + b &`` has two (``$ a + b + c &`` three); a unary task or N×1 (whose
        multiplier is one digit) has one.
        """
        if self.arity == 1:
            return [(1, src_width - 2)]
        if aligned:
            return [(2, src_width - 3)]  # $ op, then the interleaved columns
        width = (src_width - 2 - (self.arity - 1)) // self.arity
        return [(1 + i * (width + 1), width) for i in range(self.arity)]

    # ---- windows ------------------------------------------------------------------
    def frame(self, n_queries: int, n_keys: int, aligned: bool) -> tuple[int, ...]:
        """The operands' widths (symbols each, leading zeros included) in a source of
        ``n_keys`` tokens: ``$ a &``, ``$ a + b &`` or, aligned, ``$ + a_n b_n … a_1 b_1 &``."""
        if self.arity == 1:
            return (n_keys - 2,)
        if aligned:
            return ((n_keys - 3) // self.arity,) * self.arity
        return ((n_keys - 2 - (self.arity - 1)) // self.arity,) * self.arity

    def needs(self, steps: torch.Tensor, widths: tuple[int, ...], aligned: bool) -> Needs:
        """What answer tokens ``steps`` depend on (:class:`~abc_lightning.tasks.needs.Needs`),
        from which ABS builds this task's windows at any size.

        By default, the task's widths: token t reads digits t − ``cross_width`` … t of every
        operand and the ``self_width`` + 1 answer tokens before it, which is the paper's
        trailing window (w = 1: digits t and t − 1, answers t − 1 and t − 2). A task whose
        tokens follow another recurrence (a scratchpad) states it here.
        """
        t = steps[:, None]
        offsets = torch.arange(-self.cross_width, 1)[None, :]
        digits = torch.stack(torch.broadcast_tensors(
            torch.arange(self.arity).repeat_interleave(offsets.shape[1])[None, :],
            (t + offsets).repeat(1, self.arity)), dim=-1)
        return Needs(digits, t - 1 - torch.arange(self.self_width + 1)[None, :])

    def source_positions(self, digits: torch.Tensor, widths: tuple[int, ...], aligned: bool,
                         n_keys: int) -> torch.Tensor:
        """The source token of each ``(operand, digit)`` pair of :class:`Needs` (−1: unused).

        Aligned, digit d's column is the ``arity`` tokens ending ``arity · d + 1`` before EOS
        (a digit past the top falls on the operator, then SOS); otherwise each operand is its
        own run of tokens, and a digit below it is the token after it, one past its top the
        token before it."""
        o, d = digits[..., 0], digits[..., 1]
        eos = n_keys - 1
        if aligned and self.arity > 1:
            pos = torch.where(d < 0, eos, (eos - self.arity * (d + 1) + o.clamp(min=0)).clamp(min=0))
        else:
            width = torch.tensor(widths)
            start = torch.cumsum(torch.cat([torch.ones(1, dtype=torch.long), width[:-1] + 1]), 0)
            k = o.clamp(0, len(widths) - 1)
            w, first = width[k], start[k]
            pos = torch.where(d < 0, first + w, torch.where(d >= w, first - 1, first + w - 1 - d))
        pos = torch.where(o >= len(widths), eos, pos)  # an operand past the last: EOS
        return torch.where(o < 0, -1, pos)

    def dependency_windows(self, n_queries: int, n_keys: int, rows: slice | None = None, aligned: bool = False,
                           keys: slice | None = None, cross_keys: slice | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """ABS's windows from :meth:`needs`: booleans ``(self (r, q), cross (r, k))`` for the
        query ``rows`` (all when None) of an answer of ``n_queries`` steps read from a source
        of ``n_keys`` tokens; ``keys``, ``cross_keys``: only those columns of each."""
        steps, needs, positions = self._needs_of(n_queries, n_keys, rows, aligned)
        return dependency_windows(needs, positions, steps, n_queries, n_keys, keys, cross_keys)

    def dependency_spans(self, n_queries: int, n_keys: int, rows: slice, aligned: bool = False) -> tuple[int, slice]:
        """The lowest decoder key (answer step) and the slice of source tokens that the query
        ``rows`` read, from :meth:`needs`: a long cached decode builds their windows there."""
        steps, needs, positions = self._needs_of(n_queries, n_keys, rows, aligned)
        return dependency_spans(needs, positions, steps, n_keys)

    def _needs_of(self, n_queries: int, n_keys: int, rows: slice | None,
                  aligned: bool) -> tuple[torch.Tensor, Needs, torch.Tensor]:
        """The answer steps of ``rows`` (all when None), what they need, and the source
        tokens of the digits they read (−1 where unused)."""
        steps = torch.arange(*(rows or slice(0, n_queries)).indices(n_queries))
        widths = self.frame(n_queries, n_keys, aligned)
        needs = self.needs(steps, widths, aligned)
        return steps, needs, self.source_positions(needs.digits, widths, aligned, n_keys)

    def digit_stride(self, aligned: bool) -> int | None:
        """Source tokens per output digit position (one per operand in the aligned form), or
        None where the input is not aligned."""
        if self.arity == 1:
            return 1
        return self.arity if aligned else None

    # ---- worst cases --------------------------------------------------------------
    @abstractmethod
    def worst_cases(self, length: int) -> dict[str, list[tuple[str, ...]]]:
        """Hand-picked hard inputs at ``length``: ``{family: [operand strings, ...]}``.

        Exact and deterministic, no sampling: each family targets a way the algorithm can
        fail that uniformly random inputs almost never reach (a carry that travels the whole
        width, a chain stopped one digit early, an alternating parity). Empty families are
        dropped, repeated rows kept once.
        """

    def worst_case_set(self, length: int) -> tuple[list[str], np.ndarray, list[np.ndarray], list[str]]:
        """The worst-case set at ``length``: family names, the family index of each row,
        the operand digit arrays (padded as the random set at ``length``) and each row's
        expression as a person writes it."""
        families = {name: list(dict.fromkeys(rows)) for name, rows in self.worst_cases(length).items() if rows}
        names = list(families)
        rows = [(i, parts) for i, name in enumerate(names) for parts in families[name]]
        width = self.eval_width(length)
        columns = list(zip(*(self.operands_from_text(list(parts), width) for _, parts in rows)))
        operands = [np.concatenate(col) for col in columns]
        return names, np.array([i for i, _ in rows]), operands, [self.expression(parts) for _, parts in rows]

    def expression(self, parts: tuple[str, ...]) -> str:
        """Operand strings -> the input as typed, e.g. ``("123", "456")`` -> ``"123+456"``."""
        return self.operator.join(parts) if self.operator is not None else parts[0]

    def expressions(self, operands: list[np.ndarray]) -> list[str]:
        """Operand digit arrays (one per operand, a row per input, as :meth:`sample` draws
        them) -> each input as typed."""
        return [self.expression(tuple(digits_text(op[i]) for op in operands)) for i in range(len(operands[0]))]

    def operands_from_text(self, parts: list[str], width: int) -> list[np.ndarray]:
        """Operand strings -> one-row digit arrays, each padded to ``width``."""
        return [pad_left(np.array([[int(c) for c in part]]), width) for part in parts]

    # ---- predict ------------------------------------------------------------------
    def parse(self, text: str) -> list[np.ndarray]:
        """A user expression such as ``"123+456"`` -> operand digit arrays, padded."""
        if text != text.strip():
            raise InputError(f"{text!r} is not a {self.name} input: it starts or ends with a space; expected e.g. "
                             f"{self.example_input()!r}")
        if re.search(r"\d\s+\d", text):
            raise InputError(f"{text!r} is not a {self.name} input: it has a space inside a number; write each "
                             f"number's digits together, e.g. {self.example_input()!r}")
        cleaned = text.replace(" ", "")  # spaces around an operator: "123 + 456"
        if not cleaned.isascii() or not self.pattern.fullmatch(cleaned):
            raise InputError(
                f"{text!r} is not a {self.name} input; expected {self.example_input()!r}"
            )
        parts = cleaned.split(self.operator) if self.operator is not None else [cleaned]
        return self.operands_from_text(parts, max(self.train_width, *(len(p) + SPARE_CELLS for p in parts)))

    @abstractmethod
    def example_input(self) -> str:
        """A well-formed predict input, shown in error messages."""

    def shape_tests(self) -> list[tuple[dict, list[int], list[str]]]:
        """The tests ``reproduce`` adds at other shapes: ``(tag, lengths, flags)`` each, e.g.
        ``({"operands": 10}, [6, 60], ["--data.operands=10"])``. None by default."""
        return []

    def shape_label(self, row: dict) -> str:
        """A column title for a row of :meth:`shape_tests` (it holds the tag and ``length``)."""
        return ", ".join(f"{k} {v}" for k, v in row.items() if k not in ("task", "length")) + f" at {row['length']}"

    def for_shape(self, n_source: int, n_answer: int) -> Task:
        """This task as it reads an input of ``n_source`` tokens with an answer of ``n_answer``
        (a task whose operand count varies finds it from them)."""
        return self

    def format_answer(self, digits: list[int]) -> str:
        """Generation-order answer digits -> the answer as a person writes it."""
        return digits_text(digits[::-1])
