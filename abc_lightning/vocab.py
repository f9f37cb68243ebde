"""The 15-token vocabulary of the papers: digits 0-9, ``+``, ``*``, SOS ``$``, EOS ``&``, PAD ``@``."""

from __future__ import annotations

from collections.abc import Iterable

SYMBOLS = "0123456789+*$&@"
PLUS, TIMES, SOS, EOS, PAD = 10, 11, 12, 13, 14
VOCAB_SIZE = len(SYMBOLS)
TOKEN = {s: i for i, s in enumerate(SYMBOLS)}


def encode(text: str) -> list[int]:
    """Map a string over ``SYMBOLS`` to token ids."""
    return [TOKEN[c] for c in text]


def decode(tokens: Iterable[int]) -> str:
    """Map token ids back to their symbols."""
    return "".join(SYMBOLS[int(t)] for t in tokens)
