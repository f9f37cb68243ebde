"""Positional schemes. Each is a small module with one contract and three hooks.

- ``embed(positions) -> (n, d) | None``: an absolute encoding added to token embeddings;
- ``score_bias(kind, q_pos, k_pos) -> (h, q, k) | None``: an additive attention bias;
- ``rotate(x, positions) -> x``: a transform of queries/keys (identity unless overridden).

``kind`` is ``"encoder"``, ``"decoder"`` or ``"cross"``. Positions come from a
:class:`~abc_lightning.model.positions.PositionIndex`, so CPI composes with every scheme.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class PositionalScheme(nn.Module):
    """Base class: contributes nothing. Subclasses override the hooks they need."""

    def setup(self, d_model: int, heads: int) -> None:
        """Called once by the model with its sizes, before the first forward pass."""

    def embed(self, positions: torch.Tensor) -> torch.Tensor | None:
        return None

    def score_bias(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor | None:
        return None

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x


class NoPE(PositionalScheme):
    """No positional information at all."""


class Sinusoidal(PositionalScheme):
    """Absolute sinusoidal encoding: p_j = [sin(ω_1 j), cos(ω_1 j), …], ω_i = 1/10000^(2i/d)."""

    def __init__(self, base: float = 10000.0) -> None:
        super().__init__()
        self.base = base
        self.d_model = 0

    def setup(self, d_model: int, heads: int) -> None:
        self.d_model = d_model

    def embed(self, positions: torch.Tensor) -> torch.Tensor:
        half = torch.arange(0, self.d_model, 2, device=positions.device, dtype=torch.float32)
        omega = torch.exp(-math.log(self.base) * half / self.d_model)
        angles = positions.float()[:, None] * omega[None, :]
        out = torch.zeros(len(positions), self.d_model, device=positions.device)
        out[:, 0::2] = torch.sin(angles)
        out[:, 1::2] = torch.cos(angles[:, : self.d_model // 2])
        return out
