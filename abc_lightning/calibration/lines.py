"""Attention Bias Calibration (ABC) as pure tensor functions (paper appendix D, Algorithm 1).

Given the per-head average attention ``Ā (H, m, n)`` of a model that interpolates, for
each direction (1, Δ) (Δ = 1 diagonal, Δ = −1 anti-diagonal, Δ = 0 vertical):

1. **line averaging**: every line of direction (1, Δ) through Ā gets one value d_l, the
   mean (or, as in the authors' code, the sum) of Ā along it;
2. **drop-off**: lines with d_l ≤ μ + κσ (mean and population standard deviation of that
   direction's d_l, per head) are closed; kept lines carry d_l − d_max;
3. **extension**: a cell (i, j) of any target size M × N gets the value of the line of Ā
   it lies on, or −inf if that line does not cross Ā. For negative Δ, Ā is first moved
   right so that the top-right corners of Ā and the M × N target align (the paper says
   "translate N − n + 1 elements"; with 0-based columns a shift of N − n is what makes
   the corners meet, which is the stated intent, and a test locks it in);
4. **merge**: element-wise max over directions, per head;
5. **transparent heads**: a head left all −inf becomes all 0 (the paper's rule,
   ``lineless="open"``). ``lineless="union"`` (ours, beyond the paper) gives such a head
   the union (element-wise max) of the lines the other heads of the same matrix kept, so
   no head attends freely; a matrix where no head kept a line stays transparent.

**Segment alignment** (ours, beyond the paper; ``segments`` given): the corner rule moves
every anti-diagonal by N − n, which is right for lines that read the last operand, but a
line that reads the first of two growing operands (addition's ``a`` in ``a+b``) must move
by that operand's growth only. With ``segments``, the (start, width) of each operand in
Ā's key layout (each grows on its left, by an equal share of N − n), every line of every
direction is moved by the growth of the operands that start at or before the key column
where it crosses row 0. For one growing operand this is the corner rule (vertical lines
on SOS stay put, the others follow the right end).

Lines are identified by the invariant ``c = j − Δ·i``, so each direction is stored as a
short vector of line values and any M × N is produced by one gather: no per-element
Python loops. :class:`CalibratedLines` keeps those vectors; :func:`extend` builds the
bias for a requested size.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Literal

import torch

NEG_INF = float("-inf")
DEFAULT_DIRECTIONS = (1, -1, 0)  # diagonal, anti-diagonal, vertical


@dataclass
class DirectionLines:
    """One direction's calibrated lines for every head.

    ``values (H, C)``: d_l − d_max for kept lines, −inf for dropped or absent ones, indexed
    by ``c − c_min`` with ``c = j − Δ·i`` computed in target coordinates (after the shift).
    """

    delta: int
    c_min: int
    values: torch.Tensor


@dataclass
class CalibratedLines:
    """Everything needed to extend a calibrated bias to any size: ``(m, n)`` and the lines.

    ``vertical``: how vertical lines (Δ = 0) are placed in a wider target. ``"left"`` is the
    paper's rule (no shift: column j stays column j). ``"nearest"`` anchors each vertical
    line to the nearer edge of Ā, so a line on the last tokens (the N×1 multiplier, EOS)
    follows the right end of a longer input while SOS-side lines stay on the left. With
    ``segments``, ``"nearest"`` works per operand: a vertical line in an operand's left half
    follows that operand's start (a leading zero stays a leading zero), one in its right half
    keeps its place value, as every line does under segment alignment.

    ``lineless``: what a head that kept no line gets: ``"open"`` (the paper: transparent,
    all 0) or ``"union"`` (the lines of the other heads; see the module docstring).

    ``segments``: ``[(start, width), …]`` of the growing operands in Ā's key layout, for
    segment alignment (module docstring); None keeps the paper's rule. ``square``: the
    queries are the same sequence as the keys (encoder self-attention), so rows are
    aligned by segment too: a line tying operand b to operand a at the training distance
    ties them at the distance of the longer input.
    """

    m: int
    n: int
    directions: list[DirectionLines]
    vertical: str = "left"
    lineless: str = "open"
    segments: list[tuple[int, int]] | None = None
    square: bool = False

    def state(self) -> dict:
        """Plain tensors and numbers (loadable with ``torch.load(weights_only=True)``)."""
        return {"m": self.m, "n": self.n, "vertical": self.vertical, "lineless": self.lineless,
                "segments": None if self.segments is None else [list(s) for s in self.segments], "square": self.square,
                "directions": [{"delta": d.delta, "c_min": d.c_min, "values": d.values} for d in self.directions]}

    @classmethod
    def from_state(cls, state: dict) -> CalibratedLines:
        segments = state.get("segments")
        return cls(state["m"], state["n"], [DirectionLines(d["delta"], d["c_min"], d["values"]) for d in state["directions"]],
                   state.get("vertical", "left"), state.get("lineless", "open"),
                   None if segments is None else [tuple(int(x) for x in seg) for seg in segments],
                   bool(state.get("square", False)))

    def growth(self, N: int) -> int:
        """Columns each operand gains in a target of N keys (segment alignment)."""
        growth, rest = divmod(N - self.n, len(self.segments))
        if rest or growth < 0:
            raise ValueError(f"calibrated on {self.n} keys with {len(self.segments)} growing operand(s); "
                             f"{N} keys cannot be split into operands that each grew equally")
        return growth

    def column_shift(self, N: int, nearest: bool = False) -> torch.Tensor:
        """``(n,)``: where each key column of Ā moves in a target of N keys (segment alignment).

        A column moves by the growth of the operands that start at or before it (it keeps its
        place value). ``nearest``: a column in the left half of an operand follows that
        operand's start instead (its most significant end), as a vertical line on a leading
        zero must to stay on a leading zero."""
        j = torch.arange(self.n)[:, None]
        starts = torch.tensor([start for start, _ in self.segments])[None, :]
        moved = j >= starts
        if nearest:
            widths = torch.tensor([width for _, width in self.segments])[None, :]
            moved &= ~(2 * (j - starts) < widths)
        return self.growth(N) * moved.sum(dim=1)

    def target_shift(self, N: int) -> torch.Tensor:
        """``(N,)``: how far each column of an N-key target sits right of the Ā column it
        corresponds to (columns of an operand's new leading digits correspond to columns
        left of that operand in Ā)."""
        growth = self.growth(N)
        starts = torch.tensor([start + k * growth for k, (start, _) in enumerate(self.segments)])
        return growth * (torch.arange(N)[:, None] >= starts[None, :]).sum(dim=1)


def _shift(delta: int, n: int, N: int) -> int:
    """Column offset of Ā inside the target: 0, or N − n for negative Δ (top-right corners meet)."""
    return N - n if delta < 0 else 0


def line_ids(rows: int, cols: int, delta: int, shift: int = 0) -> torch.Tensor:
    """``(rows, cols)`` line invariant ``c = (j + shift) − Δ·i`` of every cell."""
    i = torch.arange(rows)[:, None]
    j = torch.arange(cols)[None, :] + shift
    return j - delta * i


def average_lines(a_bar: torch.Tensor, delta: int, reduce: Literal["mean", "sum"] = "mean",
                  valid: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
    """d_l for every line of direction (1, Δ) through ``a_bar (H, m, n)``.

    Returns ``(values (H, C), present (C,), c_min)``, lines indexed by ``c − c_min`` with
    Ā at columns [0, n). ``valid (m, n)`` leaves cells out of every line (decoder
    self-attention: the cells the causal mask closes are not attention).
    """
    H, m, n = a_bar.shape
    c = line_ids(m, n, delta)
    c_min = int(c.min())
    size = int(c.max()) - c_min + 1
    keep = torch.ones(m, n, dtype=torch.bool) if valid is None else valid
    idx = (c - c_min)[keep]
    sums = torch.zeros(H, size, dtype=a_bar.dtype).index_add_(1, idx, a_bar[:, keep])
    counts = torch.bincount(idx, minlength=size)
    present = counts > 0
    values = sums if reduce == "sum" else sums / counts.clamp(min=1)
    return values, present, c_min


#: z-scores are compared with κ after rounding to this many decimals: a line whose z-score
#: is within float noise of κ is decided the same way whatever the summation order.
Z_DECIMALS = 4


def drop_off(values: torch.Tensor, present: torch.Tensor, kappa: float | None) -> torch.Tensor:
    """``(H, C)`` line values -> d_l − d_max where d_l > μ + κσ, else −inf (``kappa=None``: keep all).

    Computed in float64, and the test is on the line's z-score rounded to
    :data:`Z_DECIMALS` decimals, so that the thread count (which changes the order of the
    float sums behind the averaged attention) cannot flip a line that sits at κ."""
    values = values.double()
    v = values.masked_fill(~present, float("nan"))
    mu = torch.nanmean(v, dim=1, keepdim=True)
    sigma = torch.sqrt(torch.nanmean((v - mu) ** 2, dim=1, keepdim=True))
    d_max = torch.amax(values.masked_fill(~present, NEG_INF), dim=1, keepdim=True)
    keep = present[None, :].expand_as(values).clone()
    if kappa is not None:
        z = torch.round((values - mu) / sigma, decimals=Z_DECIMALS)
        keep &= z > kappa
    return torch.where(keep, values - d_max, torch.full_like(values, NEG_INF)).float()


def max_z(n_lines: int) -> float:
    """The largest z-score any one of ``n_lines`` values can have: √(C − 1).

    A drop-off factor κ at or above it closes every line, whatever the attention.
    """
    return math.sqrt(max(n_lines - 1, 0))


def calibrate(a_bar: torch.Tensor, directions=DEFAULT_DIRECTIONS, kappa: float | None = 4.5,
              reduce: Literal["mean", "sum"] = "mean", valid: torch.Tensor | None = None,
              vertical: Literal["left", "nearest"] = "left",
              lineless: Literal["open", "union"] = "open",
              segments: list[tuple[int, int]] | None = None, square: bool = False) -> CalibratedLines:
    """Per-head average attention ``(H, m, n)`` -> the calibrated lines of every direction."""
    if a_bar.dim() != 3:
        raise ValueError(f"expected averaged attention of shape (heads, m, n), got {tuple(a_bar.shape)}")
    _, m, n = a_bar.shape
    lines = []
    for delta in directions:
        values, present, c_min = average_lines(a_bar.double(), delta, reduce, valid)
        if kappa is not None and kappa >= max_z(int(present.sum())):
            warnings.warn(f"ABC drop-off κ = {kappa} cannot be passed by any of the {int(present.sum())} lines of "
                          f"direction Δ = {delta} in a {m}×{n} matrix (the largest possible z-score is "
                          f"{max_z(int(present.sum())):.2f}); every line is closed", stacklevel=2)
        lines.append(DirectionLines(int(delta), c_min, drop_off(values, present, kappa)))
    if vertical not in ("left", "nearest"):
        raise ValueError(f"vertical must be 'left' or 'nearest', got {vertical!r}")
    if lineless not in ("open", "union"):
        raise ValueError(f"lineless must be 'open' or 'union', got {lineless!r}")
    if segments is not None and (not segments or any(s < 0 or w < 1 or s + w > n for s, w in segments)):
        raise ValueError(f"segments must be (start, width) spans inside the {n} keys, got {segments}")
    if square and m != n:
        raise ValueError(f"square (self-attention) lines need m == n, got {m}×{n}")
    return CalibratedLines(m, n, lines, vertical, lineless, None if segments is None else list(segments), square)


def extend(lines: CalibratedLines, M: int, N: int, transparent: bool = True) -> torch.Tensor:
    """The bias ``(H, M, N)``: max over directions of the extended lines; a head left all
    −inf gets the other heads' union (``lines.lineless == "union"``) or, failing that, 0."""
    out = None
    for d in lines.directions:
        if lines.segments is not None:
            ext = _extend_by_segments(lines, d, M, N)
        elif d.delta == 0 and lines.vertical == "nearest":
            ext = _vertical_nearest(d, lines.n, M, N)
        else:
            # Lines were indexed with Ā at columns [0, n); for negative Δ it now sits at [N − n, N).
            c = line_ids(M, N, d.delta, shift=-_shift(d.delta, lines.n, N)) - d.c_min
            valid = (c >= 0) & (c < d.values.shape[1])
            gathered = d.values[:, c.clamp(0, d.values.shape[1] - 1)]
            ext = gathered.masked_fill(~valid[None], NEG_INF)
        out = ext if out is None else torch.maximum(out, ext)
    if transparent:
        closed_head = torch.isinf(out).flatten(1).all(dim=1)
        if lines.lineless == "union" and not closed_head.all():
            out[closed_head] = out[~closed_head].amax(dim=0)
        else:
            out[closed_head] = 0.0
    return out


def _extend_by_segments(lines: CalibratedLines, d: DirectionLines, M: int, N: int) -> torch.Tensor:
    """One direction extended with segment alignment: line ``c`` (its key column at row 0)
    moves by the shift of column ``clamp(c, 0, n − 1)``; the map is strictly increasing, so
    lines stay distinct."""
    H, C = d.values.shape
    if lines.square:
        # Map every target cell back into Ā's coordinates, rows and columns alike. An
        # operand's new leading digits map to columns left of where it starts in Ā, which
        # other tokens hold there; so a cell also needs the pair (row region, column region)
        # to be one that the line crossed in Ā (regions: each operand, each fixed token).
        if M != N:
            raise ValueError(f"square (self-attention) lines extend to square targets, got {M}×{N}")
        back = torch.arange(N) - lines.target_shift(N)
        ids = back[None, :] - d.delta * back[:, None] - d.c_min
        valid = (ids >= 0) & (ids < C)
        region, target_region = _regions(lines, lines.n), _regions(lines, N)
        R = int(max(region.max(), target_region.max())) + 1
        crossed = torch.zeros(C, R, R, dtype=torch.bool)
        own = line_ids(lines.n, lines.n, d.delta) - d.c_min
        crossed[own, region[:, None].expand_as(own), region[None, :].expand_as(own)] = True
        valid &= crossed[ids.clamp(0, C - 1), target_region[:, None], target_region[None, :]]
        return d.values[:, ids.clamp(0, C - 1)].masked_fill(~valid[None], NEG_INF)
    c = torch.arange(C) + d.c_min
    shift = lines.column_shift(N, nearest=d.delta == 0 and lines.vertical == "nearest")
    target = c + shift[c.clamp(0, lines.n - 1)]
    t_min = int(target.min())
    values = torch.full((H, int(target.max()) - t_min + 1), NEG_INF)
    values[:, target - t_min] = d.values
    ids = line_ids(M, N, d.delta) - t_min
    valid = (ids >= 0) & (ids < values.shape[1])
    return values[:, ids.clamp(0, values.shape[1] - 1)].masked_fill(~valid[None], NEG_INF)


def _regions(lines: CalibratedLines, N: int) -> torch.Tensor:
    """``(N,)`` region of each of N keys: 2k + 1 inside operand k, 2k between operands
    (the fixed tokens before operand k, numbered in order), for a layout grown from Ā's."""
    growth = lines.growth(N)
    region = torch.zeros(N, dtype=torch.long)
    for k, (start, width) in enumerate(lines.segments):
        first = start + k * growth
        region[first:] = 2 * k + 1
        region[first + width + growth :] = 2 * k + 2
    return region


def _vertical_nearest(d: DirectionLines, n: int, M: int, N: int) -> torch.Tensor:
    """Vertical lines anchored to the nearer edge of Ā: column c < n/2 stays c, others move to c + N − n."""
    H, C = d.values.shape
    cols = torch.arange(C) + d.c_min
    target = torch.where(cols < n / 2, cols, cols + N - n)
    keep = (target >= 0) & (target < N)
    out = torch.full((H, N), NEG_INF)
    out[:, target[keep]] = d.values[:, keep]
    return out[:, None, :].expand(H, M, N).clone()


def extend_loop(a_bar: torch.Tensor, M: int, N: int, directions=DEFAULT_DIRECTIONS, kappa: float | None = 4.5,
                reduce: str = "mean") -> torch.Tensor:
    """Algorithm 1 written as the paper's per-element loops (the benchmark's reference).

    Slow by design; it exists to check :func:`calibrate` + :func:`extend` and to time them.
    """
    H, m, n = a_bar.shape
    out = torch.full((H, M, N), NEG_INF)
    for h in range(H):
        for delta in directions:
            shift = N - n if delta < 0 else 0
            lines: dict[int, list[float]] = {}
            for i in range(m):
                for j in range(n):
                    lines.setdefault(j + shift - delta * i, []).append(float(a_bar[h, i, j]))
            d = {c: (sum(v) if reduce == "sum" else sum(v) / len(v)) for c, v in lines.items()}
            vals = list(d.values())
            mu = sum(vals) / len(vals)
            sigma = (sum((x - mu) ** 2 for x in vals) / len(vals)) ** 0.5
            d_max = max(vals)
            for i in range(M):
                for j in range(N):
                    c = j - delta * i
                    if c in d and (kappa is None or d[c] > mu + kappa * sigma):
                        out[h, i, j] = max(float(out[h, i, j]), d[c] - d_max)
        if torch.isinf(out[h]).all():
            out[h] = 0.0
    return out
