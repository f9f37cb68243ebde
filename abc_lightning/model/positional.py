"""Positional schemes. Each is a small module with one contract and three hooks.

- ``embed(positions) -> (n, d) | None``: an absolute encoding added to token embeddings;
- ``score_bias(kind, q_pos, k_pos) -> (h|1, q, k) | None``: an additive attention bias;
- ``rotate(x, positions) -> x``: a transform of queries and keys ``(b, h, n, d)``.

``kind`` is ``"encoder"``, ``"decoder"`` or ``"cross"``. Positions come from a
:class:`~abc_lightning.model.position_index.PositionIndex`, so CPI (``CyclicIndex``) and
randomized positions (``RandomizedIndex``) compose with every scheme.

Relative schemes measure the distance ``t − i`` between query position t and key
position i. In decoder self-attention it is never negative (causal). In encoder
self-attention it takes both signs. In cross-attention the decoder's and encoder's
indices are put on one axis, exactly as in self-attention: the query at output step t
and the key at input position i are ``t − i`` apart. Nothing in that axis follows the
anti-diagonal that reversed outputs need. ``cross_attention=False`` switches a scheme
off there.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from abc_lightning.errors import ConfigError


class PositionalScheme(nn.Module):
    """Base class: contributes nothing. Subclasses override the hooks they need.

    Args:
        cross_attention: apply the scheme's bias/rotation in cross-attention too.
    """

    #: q/k projections carry bias terms (Su 2023: this matters for RoPE's extrapolation).
    qk_bias: bool = True

    def __init__(self, cross_attention: bool = True) -> None:
        super().__init__()
        self.cross_attention = cross_attention
        self.d_model, self.heads = 0, 0

    def setup(self, d_model: int, heads: int) -> None:
        """Called once by the model with its sizes, before the first forward pass."""
        self.d_model, self.heads = d_model, heads

    def max_positions(self) -> int | None:
        """The largest position index + 1 the scheme can encode, or None for no limit."""
        return None

    def embed(self, positions: torch.Tensor) -> torch.Tensor | None:
        return None

    def score_bias(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        return None

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x

    def applies(self, kind: str) -> bool:
        return kind != "cross" or self.cross_attention


def distances(q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
    """``(q, k)`` matrix of ``t − i`` for query positions t and key positions i."""
    return q_pos[:, None].long() - k_pos[None, :].long()


class NoPE(PositionalScheme):
    """No positional information at all."""


def sinusoid(positions: torch.Tensor, dim: int, base: float = 10000.0) -> torch.Tensor:
    """``(n, dim)``: [sin(ω_1 j), cos(ω_1 j), sin(ω_2 j), …] with ω_i = 1/base^(2i/dim)."""
    half = torch.arange(0, dim, 2, device=positions.device, dtype=torch.float32)
    omega = torch.exp(-math.log(base) * half / dim)
    angles = positions.float()[:, None] * omega[None, :]
    out = torch.zeros(len(positions), dim, device=positions.device)
    out[:, 0::2] = torch.sin(angles)
    out[:, 1::2] = torch.cos(angles[:, : dim // 2])
    return out


class Sinusoidal(PositionalScheme):
    """Absolute sinusoidal encoding: p_j = [sin(ω_1 j), cos(ω_1 j), …], ω_i = 1/10000^(2i/d)."""

    def __init__(self, base: float = 10000.0) -> None:
        super().__init__()
        self.base = base

    def embed(self, positions: torch.Tensor) -> torch.Tensor:
        return sinusoid(positions, self.d_model, self.base)


class Learned(PositionalScheme):
    """Learned absolute encoding: p_j is a trained vector, for j < ``max_position``."""

    def __init__(self, max_position: int = 1024) -> None:
        super().__init__()
        if max_position < 1:
            raise ConfigError(f"Learned.max_position must be >= 1, got {max_position}")
        self.max_position = max_position
        self.table: nn.Embedding | None = None

    def setup(self, d_model: int, heads: int) -> None:
        super().setup(d_model, heads)
        self.table = nn.Embedding(self.max_position, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def max_positions(self) -> int:
        return self.max_position

    def embed(self, positions: torch.Tensor) -> torch.Tensor:
        return self.table(positions)


class Rotary(PositionalScheme):
    """RoPE: rotate each consecutive pair of q/k dimensions by position × θ_k, θ_k = base^(−2k/d).

    The score then depends on the relative distance only. ``qk_bias`` keeps bias terms in
    the q and k projections, which Su (2023) finds makes RoPE extrapolate better.
    """

    def __init__(self, base: float = 10000.0, qk_bias: bool = True, cross_attention: bool = True) -> None:
        super().__init__(cross_attention)
        self.base, self.qk_bias = base, qk_bias

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1]
        theta = self.base ** (-torch.arange(0, d, 2, device=x.device, dtype=torch.float32) / d)
        angle = positions.float()[:, None] * theta[None, :]  # (n, d/2)
        cos, sin = torch.cos(angle).to(x.dtype), torch.sin(angle).to(x.dtype)
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.empty_like(x)
        out[..., 0::2] = even * cos - odd * sin
        out[..., 1::2] = even * sin + odd * cos
        return out


def alibi_slopes(heads: int) -> torch.Tensor:
    """Press et al.'s head slopes: 1/2, …, 1/2^8 for 8 heads; for a head count that is not
    a power of two, the slopes of the power of two below it, then every other slope of
    the power of two above it."""

    def power_of_two(n: int) -> list[float]:
        start = 2 ** (-8 / n)
        return [start ** (i + 1) for i in range(n)]

    if heads & (heads - 1) == 0:
        return torch.tensor(power_of_two(heads))
    lower = 2 ** int(math.floor(math.log2(heads)))
    return torch.tensor(power_of_two(lower) + power_of_two(2 * lower)[0::2][: heads - lower])


class ALiBi(PositionalScheme):
    """ALiBi: subtract m_h · |t − i| from head h's scores (t − i ≥ 0 when causal)."""

    def score_bias(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        if not self.applies(kind):
            return None
        slopes = alibi_slopes(self.heads).to(q_pos.device)
        return -slopes[:, None, None] * distances(q_pos, k_pos).abs().float()[None]


def t5_bucket(n: torch.Tensor, buckets: int, max_distance: int) -> torch.Tensor:
    """T5's bucket of a non-negative distance n (Kazemnejad et al. 2023, appendix B, eq. 12): half the buckets are
    exact, the rest logarithmic up to ``max_distance``, beyond which all share the last."""
    half = buckets // 2
    n = n.clamp(min=0)
    safe = n.clamp(min=1).float()
    log_part = half + (torch.log(safe / half) / math.log(max_distance / half) * half).floor().long()
    out = torch.where(n < half, n, log_part)
    return torch.where(n >= max_distance, torch.full_like(n, buckets - 1), out.clamp(max=buckets - 1))


class T5Relative(PositionalScheme):
    """T5 relative bias: a learned scalar per head and bucket of the distance t − i.

    Negative distances (encoder and cross-attention look both ways) have their own
    ``buckets`` buckets. Each attention kind learns its own table.
    """

    def __init__(self, buckets: int = 32, max_distance: int = 128, cross_attention: bool = True) -> None:
        super().__init__(cross_attention)
        if buckets < 2 or max_distance <= buckets // 2:
            raise ConfigError(f"T5Relative needs buckets >= 2 and max_distance > buckets/2, got {buckets}, {max_distance}")
        self.buckets, self.max_distance = buckets, max_distance
        self.tables = nn.ModuleDict()

    def setup(self, d_model: int, heads: int) -> None:
        super().setup(d_model, heads)
        self.tables = nn.ModuleDict({k: nn.Embedding(2 * self.buckets, heads) for k in ("encoder", "decoder", "cross")})
        for table in self.tables.values():
            nn.init.zeros_(table.weight)

    def bucket(self, dist: torch.Tensor) -> torch.Tensor:
        """Bucket ids: ``[0, B)`` for t − i ≥ 0, ``[B, 2B)`` for t − i < 0."""
        forward = t5_bucket(dist, self.buckets, self.max_distance)
        backward = self.buckets + t5_bucket(-dist, self.buckets, self.max_distance)
        return torch.where(dist >= 0, forward, backward)

    def score_bias(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        if not self.applies(kind):
            return None
        return self.tables[kind](self.bucket(distances(q_pos, k_pos))).permute(2, 0, 1)


class Sandwich(PositionalScheme):
    """Sandwich: bias λ · Σ_k cos((t − i) θ_k), θ_k = 10000^(−2k/d'), the inner product of two
    sinusoidal encodings (Su 2023: ``aᵀ R_tᵀ R_i b`` with a = b = [√λ, 0, √λ, 0, …]). It
    decays with |t − i| and so localizes attention. One bias shared by all heads."""

    def __init__(self, dim: int = 128, scale: float = 1.0, cross_attention: bool = True) -> None:
        super().__init__(cross_attention)
        self.dim, self.scale = dim, scale

    def score_bias(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        if not self.applies(kind):
            return None
        theta = 10000 ** (-torch.arange(0, self.dim, 2, device=q_pos.device, dtype=torch.float32) / self.dim)
        dist = distances(q_pos, k_pos).float()
        bias = torch.cos(dist[..., None] * theta).sum(-1) - self.dim / 2  # 0 at distance 0, then < 0
        return self.scale * bias[None]


class FIRE(PositionalScheme):
    """FIRE (Li et al. 2024): bias_h(t, i) = f_θ(ψ(|t − i|) / ψ(max(L, t))), ψ(x) = log(c·x + 1),
    with f_θ a small MLP (one output per head) and c, L learned."""

    def __init__(self, hidden: int = 32, init_threshold: float = 16.0, cross_attention: bool = True) -> None:
        super().__init__(cross_attention)
        self.hidden, self.init_threshold = hidden, init_threshold
        self.mlp: nn.Module | None = None
        self.log_c = nn.Parameter(torch.zeros(()))
        self.threshold = nn.Parameter(torch.tensor(float(init_threshold)))

    def setup(self, d_model: int, heads: int) -> None:
        super().setup(d_model, heads)
        self.mlp = nn.Sequential(nn.Linear(1, self.hidden), nn.ReLU(), nn.Linear(self.hidden, heads))

    def score_bias(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        if not self.applies(kind):
            return None
        c = self.log_c.exp()
        psi = lambda x: torch.log(c * x + 1)  # noqa: E731
        dist = distances(q_pos, k_pos).abs().float()
        norm = psi(torch.maximum(q_pos.float(), self.threshold.abs()))[:, None]
        return self.mlp((psi(dist) / norm)[..., None]).permute(2, 0, 1)
