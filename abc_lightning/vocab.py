"""The vocabulary: digits, three special tokens, and room for operators and separators.

Ids 0-9 are the digits, 10-12 SOS ``$``, EOS ``&`` and PAD ``@``, and ids 13-31 the operators
and separators a task may write between operands (``+ * - = , : ; / ^ < > ( ) [ ] | ! ? ~``).
The size is fixed at 32, so a task with a new operator uses a reserved id and never changes
the shapes of the embedding or the output layer, nor the checkpoints of other tasks. (The
papers' 15-token vocabulary, ``0-9 + * $ & @``, had no such room; abc_lightning 0.2 moved to
this one, which made the checkpoints of 0.1 unreadable once.)
"""

from __future__ import annotations

from collections.abc import Iterable

DIGITS = "0123456789"
SPECIALS = "$&@"  # SOS, EOS, PAD
OPERATORS = "+*-=,:;/^<>()[]|!?~"
SYMBOLS = DIGITS + SPECIALS + OPERATORS
SOS, EOS, PAD = 10, 11, 12
VOCAB_SIZE = 32
TOKEN = {s: i for i, s in enumerate(SYMBOLS)}
assert len(SYMBOLS) == VOCAB_SIZE and SYMBOLS[SOS] == "$" and SYMBOLS[EOS] == "&"


def encode(text: str) -> list[int]:
    """Map a string over ``SYMBOLS`` to token ids."""
    return [TOKEN[c] for c in text]


def decode(tokens: Iterable[int]) -> str:
    """Map token ids back to their symbols."""
    return "".join(SYMBOLS[int(t)] for t in tokens)
