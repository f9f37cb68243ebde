"""Position indices, kept apart from encodings so that any scheme can take any indexing.

``CyclicIndex(period=T)`` is Cyclic Position Indexing (CPI) from ABS: position i becomes
i mod T before it reaches the positional scheme. ``RandomizedIndex`` gives the randomized
positions of Ruoss et al. (2023).

Every index numbers the decoder's tokens from the first; :meth:`PositionIndex.source`
numbers the encoder's input, from its first token too unless an index says otherwise
(``CyclicIndex(source_from="end")``).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from abc_lightning.errors import ConfigError


class PositionIndex(nn.Module):
    """Contract: ``forward(length, device) -> LongTensor (length,)`` of position indices."""

    def forward(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        raise NotImplementedError

    def source(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        """The encoder input's indices; as :meth:`forward` unless an index counts them otherwise."""
        return self(length, device)


class LinearIndex(PositionIndex):
    """Positions 0, 1, 2, … (the usual indexing)."""

    def forward(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.arange(length, device=device)


class CyclicIndex(PositionIndex):
    """Cyclic Position Indexing: 0, 1, …, T-1, 0, 1, … (ABS, period T ≥ 1).

    ``source_from`` says where the encoder input's count starts: ``"start"`` (the paper's
    i mod T, and the default) or ``"end"``, counting back from the input's last token, so
    that the input's last token is 0, the one before it 1, and so on. Every task here
    writes its answer from the input's end (least significant digit first), so with
    ``"end"`` each answer step meets its input digits at the same phase at every length;
    counted from the start, that phase moves with the input's length mod T, and lengths
    whose frame is not the training frame's mod T meet phase pairs that training never
    showed. The decoder always counts from its first token.

    ``period="task"`` takes the task's own (``Task.cpi_period``: 3 for the papers' tasks, the
    block of a scratchpad task); the CLI resolves it from ``--data`` before the model is built.
    """

    ANCHORS = ("start", "end")

    def __init__(self, period: int | Literal["task"] = 3, source_from: str = "start") -> None:
        super().__init__()
        if period == "task":
            raise ConfigError("CyclicIndex(period='task') takes the task's period, which the CLI resolves from --data; "
                              "built in Python, give an integer (e.g. get_task('subtraction').cpi_period)")
        if not isinstance(period, int) or isinstance(period, bool) or period < 1:
            raise ConfigError(f"CPI period T must be an integer >= 1, got {period!r}")
        if source_from not in self.ANCHORS:
            raise ConfigError(f"CyclicIndex.source_from must be one of {', '.join(self.ANCHORS)}, got {source_from!r}")
        self.period = period
        self.source_from = source_from

    def forward(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        return torch.arange(length, device=device) % self.period

    def source(self, length: int, device: torch.device | None = None) -> torch.Tensor:
        if self.source_from == "start":
            return self(length, device)
        return torch.arange(length - 1, -1, -1, device=device) % self.period

    def extra_repr(self) -> str:
        return f"period={self.period}" + (f", source_from={self.source_from!r}" if self.source_from != "start" else "")


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
