"""ABS window masks (Attention Bias Scaffolding). Pure tensor functions plus one module.

Every mask is additive: 0 where attention is open, ``-inf`` where it is closed.

Decoder self-attention, width w: query i may see key j iff ``0 <= i - j <= w``.
For w = 1 and 4 decoder positions (1 = open, . = closed)::

        k0 k1 k2 k3
    q0   1  .  .  .
    q1   1  1  .  .
    q2   .  1  1  .
    q3   .  .  1  1

Cross-attention runs along the anti-diagonal because the output is reversed. The source
is ``SOS, [op,] digits…, EOS``; with ``stride`` source tokens per digit position (1 for
unary tasks, 2 for aligned binary ones, where ``a_k b_k`` sit side by side), digit k
(k = 1 the least significant) occupies the ``stride`` tokens that end ``stride·(k-1)+1``
places before EOS, and "digit 0" is EOS itself. Decoder query i predicts output digit
i + 1, so its window is centred on digit i + 1. Three geometries are offered:

- ``"trailing"`` (the default, established by experiment, see docs/model.md): digits
  i+1-w … i+1, i.e. the needed digit and w less-significant neighbours. Row 0 then opens
  EOS, which anchors the window: without positions (NoPE) the model can tell where it is.
- ``"symmetric"``: digits i+1-w … i+1+w, "w positions both ways" as the paper words it.
- ``"leading"``: digits i+1 … i+1+w plus EOS in row 0, as in the authors' code.

Cells that fall before the first digit clamp onto SOS (and the operator), so no row is
ever fully closed. Unary example, ``$ a3 a2 a1 &`` (S = 5), 5 decoder queries, trailing,
w = 1::

              $  a3 a2 a1  &
    q0 →y1    .   .  .  1  1
    q1 →y2    .   .  1  1  .
    q2 →y3    .   1  1  .  .
    q3 →y4    1   1  .  .  .
    q4 →EOS   1   .  .  .  .

Aligned binary example, ``$ + a2 b2 a1 b1 &`` (S = 7, stride 2), trailing, w = 0::

              $  +  a2 b2 a1 b1  &
    q0 →y1    .  .  .  .  1  1  .
    q1 →y2    .  .  1  1  .  .  .
    q2 →y3    1  1  .  .  .  .  .
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import torch

from abc_lightning.errors import ConfigError
from abc_lightning.model.attention import BiasSource

Geometry = Literal["trailing", "symmetric", "leading"]
GEOMETRIES = ("trailing", "symmetric", "leading")


def _closed(shape: tuple[int, int], open_: torch.Tensor) -> torch.Tensor:
    return torch.zeros(shape).masked_fill(~open_, float("-inf"))


def _rows(n: int, rows: slice | None) -> torch.Tensor:
    """The query indices of ``rows`` (all ``n`` when None), as a column."""
    start, stop, _ = (rows or slice(0, n)).indices(n)
    return torch.arange(start, stop)[:, None]


def self_window(n: int, width: int, rows: slice | None = None, keys: slice | None = None) -> torch.Tensor:
    """``(n, n)`` decoder self-attention window: open iff ``0 <= i - j <= width`` (only the
    query rows ``rows`` and the key columns ``keys``, when given)."""
    i = _rows(n, rows)
    j = torch.arange(*(keys or slice(0, n)).indices(n))[None, :]
    return _closed((len(i), j.shape[1]), (i - j >= 0) & (i - j <= width))


def band_window(n: int, width: int, rows: slice | None = None) -> torch.Tensor:
    """``(n, n)`` symmetric band, open iff ``|i - j| <= width`` (optional encoder window)."""
    i = _rows(n, rows)
    j = torch.arange(n)[None, :]
    return _closed((len(i), n), (i - j).abs() <= width)


def cross_window(
    n_queries: int, n_keys: int, width: int, stride: int = 1, geometry: Geometry = "trailing",
    rows: slice | None = None,
) -> torch.Tensor:
    """``(n_queries, n_keys)`` cross-attention window along the anti-diagonal (see module
    doc); only the query rows ``rows``, when given."""
    if geometry not in GEOMETRIES:
        raise ConfigError(f"unknown window geometry {geometry!r}; choose one of {GEOMETRIES}")
    lo, hi = {"trailing": (-width, 0), "symmetric": (-width, width), "leading": (0, width)}[geometry]
    eos = n_keys - 1
    query = _rows(n_queries, rows)
    target = query + 1  # digit predicted by each query
    key = torch.arange(n_keys)[None, :]
    open_ = torch.zeros(len(query), n_keys, dtype=torch.bool)
    for offset in range(lo, hi + 1):
        digit = target + offset
        start = (eos - stride * digit).clamp(min=0)
        end = torch.where(digit == 0, eos, (eos - stride * digit + stride - 1).clamp(min=0))
        open_ |= (digit >= 0) & (key >= start) & (key <= end)
    if geometry == "leading":
        open_[query[:, 0] == 0, eos] = True
    return _closed(tuple(open_.shape), open_)


class WindowBias(BiasSource):
    """ABS window masks as a bias source (see :mod:`abc_lightning.model.transformer`).

    Args:
        self_width: decoder self-attention width w (>= 0).
        cross_width: cross-attention width in digit positions (>= 0), or None for no window.
        stride: source tokens per digit position (1 unary, 2 aligned binary).
        geometry: cross-attention window geometry.
        encoder_width: optional symmetric band for encoder self-attention; None leaves it open.
        dependencies: a task's windows from what its tokens need, ``(n_queries, n_keys,
            rows, keys=None) -> (self (r, q), cross (r, k))`` booleans (True: open;
            :meth:`~abc_lightning.tasks.Task.dependency_windows`), used instead of both widths.
        spans: ``(n_queries, n_keys, rows) -> (int, slice)``, the lowest decoder key and the
            source keys those rows read (:meth:`~abc_lightning.tasks.Task.dependency_spans`);
            without it a long cached decode builds these windows over every key.
    """

    takes_keys = True

    def __init__(
        self,
        self_width: int | None = 1,
        cross_width: int | None = 1,
        stride: int = 1,
        geometry: Geometry = "trailing",
        encoder_width: int | None = None,
        dependencies: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None,
        spans: Callable[[int, int, slice], tuple[int, slice]] | None = None,
    ) -> None:
        super().__init__()
        self.dependencies, self.spans = dependencies, spans
        for name, value in dict(self_width=self_width, cross_width=cross_width, encoder_width=encoder_width).items():
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ConfigError(f"window width {name} must be an integer >= 0 (w >= 0), got {value!r}")
        if stride < 1:
            raise ConfigError(f"window stride must be >= 1, got {stride}")
        if geometry not in GEOMETRIES:
            raise ConfigError(f"unknown window geometry {geometry!r}; choose one of {GEOMETRIES}")
        self.self_width, self.cross_width, self.encoder_width = self_width, cross_width, encoder_width
        self.stride, self.geometry = stride, geometry
        self._cache: dict[tuple, torch.Tensor] = {}

    def forward(self, kind: str, n_queries: int, n_keys: int, device: torch.device,
                layer: int | None = None, rows: slice | None = None,
                sizes: tuple[int, int] | None = None, keys: slice | None = None) -> torch.Tensor | None:
        if rows is not None or keys is not None:  # a block of a long sequence: built for it, not kept
            bias = self._build(kind, n_queries, n_keys, rows, sizes, keys)
            return None if bias is None else bias.to(device)[None]
        key = (kind, n_queries, n_keys, sizes if self.dependencies else None, str(device))
        if key not in self._cache:
            if len(self._cache) > 16:
                self._cache.clear()
            self._cache[key] = self._build(kind, n_queries, n_keys, None, sizes)
            if self._cache[key] is not None:
                self._cache[key] = self._cache[key].to(device)[None]
        return self._cache[key]

    def _build(self, kind: str, n_queries: int, n_keys: int, rows: slice | None = None,
               sizes: tuple[int, int] | None = None, keys: slice | None = None) -> torch.Tensor | None:
        bias = self._build_all_keys(kind, n_queries, n_keys, rows, sizes, keys)
        # the decoder's and a task's cross windows are built for the slice of keys alone; the others are cut to it
        built_for_keys = kind == "decoder" or (kind == "cross" and self.dependencies is not None)
        return bias if bias is None or keys is None or built_for_keys else bias[:, keys]

    def _build_all_keys(self, kind: str, n_queries: int, n_keys: int, rows: slice | None,
                        sizes: tuple[int, int] | None, keys: slice | None) -> torch.Tensor | None:
        if self.dependencies is not None and kind in ("decoder", "cross"):
            if sizes is None and kind == "decoder":
                raise ValueError("a task's dependency windows need the input's length (sizes)")
            n_source, n_answer = sizes or (n_keys, n_queries)
            rows = rows or slice(0, n_queries)
            if kind == "decoder":  # the answer's own keys: the prefix decoded so far, or a slice of it
                keys = keys or slice(0, n_queries)
                own, _ = self.dependencies(n_answer, n_source, rows, keys=keys)
                return _closed(tuple(own.shape), own)
            # the rows of the whole answer's windows (a prefix of it, decoding without a cache)
            _, cross = self.dependencies(n_answer, n_source, rows, cross_keys=keys)
            return _closed(tuple(cross.shape), cross)
        if kind == "decoder" and self.self_width is not None:
            return self_window(n_queries, self.self_width, rows, keys)
        if kind == "cross" and self.cross_width is not None:
            return cross_window(n_queries, n_keys, self.cross_width, self.stride, self.geometry, rows)
        if kind == "encoder" and self.encoder_width is not None:
            return band_window(n_queries, self.encoder_width, rows)
        return None

    def open_keys(self, kind: str, n_queries: int, n_keys: int, rows: slice,
                  sizes: tuple[int, int] | None = None) -> slice:
        if self.dependencies is not None and kind in ("decoder", "cross"):
            if self.spans is None or sizes is None:
                return slice(0, n_keys)
            first, cross = self.spans(sizes[1], sizes[0], rows)
            return slice(first, n_keys) if kind == "decoder" else cross
        if kind == "decoder" and self.self_width is not None:
            return slice(max(0, rows.indices(n_queries)[0] - self.self_width), n_keys)
        return slice(0, n_keys)

    def extra_repr(self) -> str:
        if self.dependencies is not None:
            return f"the task's dependencies, encoder_width={self.encoder_width}"
        return (f"self_width={self.self_width}, cross_width={self.cross_width}, stride={self.stride}, "
                f"geometry={self.geometry!r}, encoder_width={self.encoder_width}")
