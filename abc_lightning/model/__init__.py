"""Plain nn.Module model code: transformer, attention, positional schemes, position indices."""

from abc_lightning.model.positional import (
    FIRE, ALiBi, Learned, NoPE, PositionalScheme, Rotary, Sandwich, Sinusoidal, T5Relative,
)
from abc_lightning.model.position_index import CyclicIndex, LinearIndex, PositionIndex, RandomizedIndex
from abc_lightning.model.transformer import Seq2SeqOutput, Seq2SeqTransformer

SCHEMES = [Sinusoidal, Learned, NoPE, Rotary, ALiBi, T5Relative, Sandwich, FIRE]

__all__ = ["FIRE", "ALiBi", "Learned", "NoPE", "PositionalScheme", "Rotary", "Sandwich", "Sinusoidal",
           "T5Relative", "CyclicIndex", "LinearIndex", "PositionIndex", "RandomizedIndex", "SCHEMES",
           "Seq2SeqOutput", "Seq2SeqTransformer"]
