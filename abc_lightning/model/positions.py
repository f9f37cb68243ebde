"""Position indices, kept apart from encodings so that any scheme can take any indexing.

``CyclicIndex(period=T)`` is Cyclic Position Indexing (CPI) from ABS: position i becomes
i mod T before it reaches the positional scheme.
"""

from __future__ import annotations

import torch
from torch import nn

from abc_lightning.errors import ConfigError


class PositionIndex(nn.Module):
    """Contract: ``forward(length, device) -> LongTensor (length,)`` of position indices."""

    def forward(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        raise NotImplementedError


class LinearIndex(PositionIndex):
    """Positions 0, 1, 2, … (the usual indexing)."""

    def forward(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.arange(length, device=device)


class CyclicIndex(PositionIndex):
    """Cyclic Position Indexing: 0, 1, …, T-1, 0, 1, … (ABS, period T ≥ 1)."""

    def __init__(self, period: int = 3) -> None:
        super().__init__()
        if not isinstance(period, int) or period < 1:
            raise ConfigError(f"CPI period T must be an integer >= 1, got {period!r}")
        self.period = period

    def forward(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.arange(length, device=device) % self.period

    def extra_repr(self) -> str:
        return f"period={self.period}"
