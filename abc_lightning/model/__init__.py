"""Plain nn.Module model code: transformer, attention, positional schemes, position indices."""

from abc_lightning.model.positional import NoPE, PositionalScheme, Sinusoidal
from abc_lightning.model.positions import CyclicIndex, LinearIndex, PositionIndex
from abc_lightning.model.transformer import Seq2SeqOutput, Seq2SeqTransformer

__all__ = ["NoPE", "PositionalScheme", "Sinusoidal", "CyclicIndex", "LinearIndex", "PositionIndex",
           "Seq2SeqOutput", "Seq2SeqTransformer"]
