"""Position indices, kept apart from encodings so that any scheme can take any indexing.

``CyclicIndex(period=T)`` is Cyclic Position Indexing (CPI) from ABS: position i becomes
i mod T before it reaches the positional scheme. ``RandomizedIndex`` gives the randomized
positions of Ruoss et al. (2023).
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


class RandomizedIndex(PositionIndex):
    """Randomized positions (Ruoss et al. 2023): a sorted random subset of [0, max_position).

    A sequence of length n gets n distinct increasing positions drawn from a range much
    longer than any training sequence, so every position up to ``max_position`` is seen in
    training. In evaluation the draw is seeded by the length, so results are repeatable
    and cached decoding sees the same positions as full recomputation.
    """

    def __init__(self, max_position: int = 2048) -> None:
        super().__init__()
        if max_position < 1:
            raise ConfigError(f"RandomizedIndex.max_position must be >= 1, got {max_position}")
        self.max_position = max_position

    def forward(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        if length > self.max_position:
            raise ConfigError(f"a sequence of {length} tokens needs RandomizedIndex.max_position >= {length}")
        gen = None if self.training else torch.Generator().manual_seed(length)
        draw = torch.randperm(self.max_position, generator=gen)[:length]
        return draw.sort().values.to(device)

    def extra_repr(self) -> str:
        return f"max_position={self.max_position}"
