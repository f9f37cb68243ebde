"""Attention: the one place where scores, positional biases and masks are summed.

Shapes: ``b`` batch, ``h`` heads, ``q`` queries, ``k`` keys, ``d`` head dimension.
A bias is an additive tensor broadcastable to ``(b, h, q, k)``; ``-inf`` closes a cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Protocol

import torch
import torch.nn.functional as F
from torch import nn

#: The attention kinds of the encoder-decoder, as bias sources and attention maps name them.
KINDS = ("encoder", "decoder", "cross")


class BiasSource(nn.Module):
    """The one contract of every attention bias a callback installs (ABS windows, ABC lines)::

        source(kind, n_queries, n_keys, device, layer, rows, sizes) -> Tensor (h|1, q, k) or None

    ``kind`` is one of :data:`KINDS`; ``layer`` is the decoder/encoder layer index, which a
    source with ``per_layer = True`` uses to give each layer its own bias (the others ignore
    it, and the model then builds one bias per kind and shares it across layers). ``-inf``
    closes a cell; None leaves that kind alone. ``rows`` (a slice of the ``n_queries``
    rows, or None for all) asks for those query rows only, exactly as they are in the whole
    bias: decoding at 10,000 digits builds its biases a block of rows at a time, so that
    memory stays linear in the length. ``sizes`` is ``(input tokens, decoder steps)`` of the
    whole pair, which a bias that follows the operands' sizes needs: the decoder's
    self-attention does not otherwise see the input, and decoding without a cache asks for
    one prefix of the steps at a time.

    Two optional parts let a long cached decode build only the keys a block of rows can
    open. :meth:`open_keys` promises that every key outside a slice is closed in the given
    rows (all keys, the default, promises nothing). A source with ``takes_keys = True``
    accepts ``keys`` (a slice of the ``n_keys`` columns) and returns just those columns,
    exactly as they are in the whole bias; the model slices the whole bias of any other.
    """

    per_layer: bool = False
    takes_keys: bool = False

    def forward(self, kind: str, n_queries: int, n_keys: int, device: torch.device,
                layer: int | None = None, rows: slice | None = None,
                sizes: tuple[int, int] | None = None) -> torch.Tensor | None:
        raise NotImplementedError

    def open_keys(self, kind: str, n_queries: int, n_keys: int, rows: slice,
                  sizes: tuple[int, int] | None = None) -> slice:
        """A slice of keys that holds every key any query of ``rows`` may leave open (every
        key outside it is closed in those rows); all ``n_keys`` promises nothing."""
        return slice(0, n_keys)


class Band(NamedTuple):
    """A self-attention bias that closes everything outside a band around the diagonal:
    query ``i`` sees keys ``i + first_offset + o`` for ``o < width``, and ``bias (h|1, q,
    width)`` holds exactly those cells (−inf past either end of the sequence)."""

    bias: torch.Tensor
    first_offset: int


class Gathered(NamedTuple):
    """A bias that leaves every query row at most K of its keys open, wherever they are:
    ``index (q, K)`` the keys each row reads (padded with closed ones), ``bias (h|1, q, K)``
    the bias at those cells (−inf at the padding)."""

    bias: torch.Tensor
    index: torch.Tensor


#: Gather a bias's open keys when every row has at most this many of at least GATHER_MIN_KEYS.
GATHER_MAX_OPEN, GATHER_MIN_KEYS = 16, 128


def gathered_of(bias: torch.Tensor | None, n_keys: int) -> Gathered | None:
    """The :class:`Gathered` form of a bias ``(h|1, q, k)`` whose rows leave few keys open
    among many (a task's dependency windows on a long answer), or None: too few keys for
    gathering to pay, a row with more than :data:`GATHER_MAX_OPEN` open keys, or no bias."""
    if bias is None or n_keys < GATHER_MIN_KEYS or bias.dim() != 3:
        return None
    open_ = torch.isfinite(bias).any(0)  # (q, k): open in some head
    width = int(open_.sum(-1).max())
    if width > GATHER_MAX_OPEN or width == 0:
        return None
    index = torch.topk(open_.to(torch.int8), width, dim=-1, sorted=False).indices  # the open keys first
    cells = bias.gather(-1, index.expand(bias.shape[0], -1, -1))
    closed = ~open_.gather(-1, index)
    return Gathered(cells.masked_fill(closed, float("-inf")), index)


def attend_gathered(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gathered: Gathered) -> torch.Tensor:
    """:func:`attend` reading only each query's :class:`Gathered` keys: ``q × K`` scores
    instead of ``q × k``, the same result up to float rounding (closed keys get zero weight
    either way)."""
    index = gathered.index
    keys, values = k[:, :, index], v[:, :, index]  # (b, h, q, K, d)
    scores = (q.unsqueeze(-2) * keys).sum(-1) / math.sqrt(q.shape[-1]) + gathered.bias
    return (torch.softmax(scores, dim=-1).unsqueeze(-1) * values).sum(-2)


@dataclass
class AttentionMap:
    """What one attention call saw, returned on request for analysis (ABC uses it).

    ``scores``: pre-softmax ``q·kᵀ/√d`` without any bias, ``(b, h, q, k)``.
    ``weights``: post-softmax attention with every bias applied, ``(b, h, q, k)``.
    """

    scores: torch.Tensor
    weights: torch.Tensor


class Rotates(Protocol):
    """A positional scheme that rotates queries and keys (RoPE-like)."""

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor: ...


@lru_cache(maxsize=64)
def _causal(n: int, device: torch.device) -> torch.Tensor:
    return torch.full((n, n), float("-inf"), device=device).triu(1)[None]


def causal_mask(n: int, device: torch.device, rows: slice | None = None, keys: slice | None = None) -> torch.Tensor:
    """``(1, n, n)`` additive mask: 0 on and below the diagonal, -inf above (only the
    query rows ``rows`` and key columns ``keys``, when given: those are built for the call,
    not kept)."""
    if rows is None and keys is None:
        return _causal(n, device)
    start, stop, _ = (rows or slice(0, n)).indices(n)
    i = torch.arange(start, stop, device=device)[:, None]
    j = torch.arange(*(keys or slice(0, n)).indices(n), device=device)[None, :]
    return torch.zeros(stop - start, j.shape[1], device=device).masked_fill(j > i, float("-inf"))[None]


def sum_biases(*biases: torch.Tensor | None) -> torch.Tensor | None:
    """Add the biases that are present; ``None`` when there are none."""
    present = [b for b in biases if b is not None]
    if not present:
        return None
    total = present[0]
    for b in present[1:]:
        total = total + b
    return total


def attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor | None, need_map: bool = False
) -> tuple[torch.Tensor, AttentionMap | None]:
    """softmax(q·kᵀ/√d + bias)·v for ``q (b h q d)``, ``k, v (b h k d)``, ``bias (b|1, h|1, q, k)``.

    Multi-query calls (training, teacher forcing) go through SDPA. Single-query calls
    (a KV-cached decoding step) use plain matmul-softmax: on CPU, SDPA with one query and
    a float mask made greedy decoding 2.3x slower end to end (docs/speed.md).
    """
    if not need_map and q.shape[-2] > 1:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias), None
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores if bias is None else scores + bias, dim=-1)
    return weights @ v, (AttentionMap(scores=scores.detach(), weights=weights.detach()) if need_map else None)


def attend_banded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, band: Band) -> torch.Tensor:
    """:func:`attend` for self-attention whose bias is a :class:`Band` (see
    ``decoding.band_of``), in linear time.

    The keys are read as ``width`` shifted slices of the padded keys, so the cost is
    ``q × width`` instead of ``q × k``. Closed keys get zero weight in :func:`attend`, so
    the result is the same up to float rounding.
    """
    band_bias, first_offset = band
    n, width = q.shape[-2], band_bias.shape[-1]
    pad = (0, 0, max(-first_offset, 0), max(first_offset + width - 1, 0))
    k_pad, v_pad = F.pad(k, pad), F.pad(v, pad)
    base = first_offset + pad[2]  # where query 0's first key sits in the padded keys
    scale = 1 / math.sqrt(q.shape[-1])
    scores = torch.stack([(q * k_pad[..., base + o : base + o + n, :]).sum(-1) for o in range(width)], dim=-1)
    weights = torch.softmax(scores * scale + band_bias, dim=-1)
    out = weights[..., 0:1] * v_pad[..., base : base + n, :]
    for o in range(1, width):
        out = out + weights[..., o : o + 1] * v_pad[..., base + o : base + o + n, :]
    return out


def keys_at(x: torch.Tensor, keys: slice | torch.Tensor) -> torch.Tensor:
    """Keys or values ``(b, h, s, d)`` at the given key positions."""
    return x[:, :, keys] if isinstance(keys, slice) else x.index_select(2, keys.to(x.device))


def source_keys_at(x: torch.Tensor, keys: slice | torch.Tensor) -> torch.Tensor:
    """Source-major keys or values ``(s, b, h, d)`` at the given key positions, as ``(b, h, n, d)``."""
    x = x[keys] if isinstance(keys, slice) else x.index_select(0, keys.to(x.device))
    return x.permute(1, 2, 0, 3)


class MultiHeadAttention(nn.Module):
    """Multi-head attention over ``x_q (b q d_model)`` and ``x_kv (b k d_model)``."""

    def __init__(self, d_model: int, heads: int, dropout: float, qk_bias: bool = True) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(d_model, d_model, bias=qk_bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=qk_bias)
        self.v_proj = nn.Linear(d_model, d_model)
        self.out_proj = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, self.heads, -1).transpose(1, 2)

    def keys_values(self, x_kv: torch.Tensor, k_pos: torch.Tensor,
                    rotary: Rotates | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Project ``x_kv (b k d_model)`` to keys and values ``(b h k d)``; keys rotated if asked."""
        k = self.split(self.k_proj(x_kv))
        if rotary is not None:
            k = rotary.rotate(k, k_pos)
        return k, self.split(self.v_proj(x_kv))

    def source_major_keys_values(self, x_kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Unrotated keys and values of a source-major ``x_kv (k b d_model)``, as ``(k b h d)``:
        the few keys a cached decoding step reads are then one contiguous block."""
        n, b, _ = x_kv.shape
        return self.k_proj(x_kv).view(n, b, self.heads, -1), self.v_proj(x_kv).view(n, b, self.heads, -1)

    def attend_to(
        self, x_q: torch.Tensor, q_pos: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
        bias: torch.Tensor | None, rotary: Rotates | None = None, need_map: bool = False,
        band: Band | Gathered | None = None,
    ) -> tuple[torch.Tensor, AttentionMap | None]:
        """Queries from ``x_q (b q d_model)`` attend to given keys and values ``(b h k d)``.

        A ``band`` takes :func:`attend_banded`, a :class:`Gathered` bias
        :func:`attend_gathered` (neither returns a map)."""
        q = self.split(self.q_proj(x_q))
        if rotary is not None:
            q = rotary.rotate(q, q_pos)
        if isinstance(band, Gathered) and not need_map:
            out, amap = attend_gathered(q, k, v, band), None
        elif band is not None and not need_map:
            out, amap = attend_banded(q, k, v, band), None
        else:
            out, amap = attend(q, k, v, bias, need_map)
        b, h, n, d = out.shape
        return self.dropout(self.out_proj(out.transpose(1, 2).reshape(b, n, h * d))), amap

    def forward(
        self, x_q: torch.Tensor, x_kv: torch.Tensor, bias: torch.Tensor | None,
        q_pos: torch.Tensor, k_pos: torch.Tensor, rotary: Rotates | None = None, need_map: bool = False,
        band: Band | Gathered | None = None,
    ) -> tuple[torch.Tensor, AttentionMap | None]:
        k, v = self.keys_values(x_kv, k_pos, rotary)
        return self.attend_to(x_q, q_pos, k, v, bias, rotary, need_map, band)
