"""Encoder-decoder Transformer in plain ``nn.Module`` code; it knows nothing of Lightning.

Biases reach attention from two places, summed in :func:`~.attention.sum_biases` once per
forward pass and attention kind: the positional scheme's ``score_bias`` and the modules in
``bias_sources`` (ABS windows, ABC calibrated biases), which callbacks install through
:meth:`Seq2SeqTransformer.install_bias`. Every bias source follows one contract,
:class:`~.attention.BiasSource`::

    source(kind, n_queries, n_keys, device, layer) -> Tensor (h|1, q, k) | None

with ``kind`` in ``{"encoder", "decoder", "cross"}``. Greedy decoding (cached, skipping
closed keys) lives in :mod:`~.decoding`.

Attention maps of every layer are returned on request: ``model(src, tgt,
return_attention=True)`` gives a :class:`Seq2SeqOutput` whose ``attention[kind][layer]``
is an :class:`~.attention.AttentionMap` with ``scores`` and ``weights`` of shape
``(b, h, q, k)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import torch
from torch import nn

from abc_lightning import vocab
from abc_lightning.errors import ConfigError
from abc_lightning.model import decoding
from abc_lightning.model.attention import (KINDS, AttentionMap, Band, BiasSource, Gathered, MultiHeadAttention,
                                          causal_mask, gathered_of, keys_at,
                                          source_keys_at, sum_biases)
from abc_lightning.model.decoding import StepKeys
from abc_lightning.model.positional import PositionalScheme, Sinusoidal
from abc_lightning.model.position_index import LinearIndex, PositionIndex

__all__ = ["KINDS", "Seq2SeqOutput", "Seq2SeqTransformer", "causal_mask"]


@dataclass
class Seq2SeqOutput:
    """Logits ``(b, t, vocab)`` and, when requested, attention maps per kind and layer."""

    logits: torch.Tensor
    attention: dict[str, list[AttentionMap]] = field(default_factory=dict)


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, hidden: int, dropout: float) -> None:
        super().__init__(nn.Linear(d_model, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, d_model))


class EncoderLayer(nn.Module):
    """Pre-norm self-attention and feed-forward block.

    ``attention_drop``: in training, the probability that a row's self-attention output is
    left out of its residual stream (the rows that keep it are not rescaled); 0 draws nothing.
    """

    def __init__(self, d_model: int, heads: int, hidden: int, dropout: float, qk_bias: bool = True,
                 attention_drop: float = 0.0) -> None:
        super().__init__()
        self.attn = MultiHeadAttention(d_model, heads, dropout, qk_bias)
        self.ff = FeedForward(d_model, hidden, dropout)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        self.attention_drop = attention_drop

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None, pos: torch.Tensor,
                rotary: PositionalScheme | None, need_map: bool,
                band: Band | None = None) -> tuple[torch.Tensor, AttentionMap | None]:
        """``x (b, s, d)`` -> the layer's output and, with ``need_map``, its attention map;
        a ``band`` reads only the keys of a banded bias."""
        h = self.norm1(x)
        h, amap = self.attn(h, h, bias, pos, pos, rotary, need_map, band)
        if self.training and self.attention_drop > 0:
            h = h * (torch.rand(h.shape[0], 1, 1, device=h.device) >= self.attention_drop)
        x = x + h
        return x + self.drop(self.ff(self.norm2(x))), amap


class DecoderLayer(nn.Module):
    """Pre-norm causal self-attention, cross-attention and feed-forward block.

    ``cache`` (incremental decoding) holds this layer's self-attention keys/values so far
    and the cross-attention keys/values of the memory, computed once.
    """

    def __init__(self, d_model: int, heads: int, hidden: int, dropout: float, qk_bias: bool = True) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, heads, dropout, qk_bias)
        self.cross_attn = MultiHeadAttention(d_model, heads, dropout, qk_bias)
        self.ff = FeedForward(d_model, hidden, dropout)
        self.norm1, self.norm2, self.norm3 = nn.LayerNorm(d_model), nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, self_bias: torch.Tensor | None,
        cross_bias: torch.Tensor | None, t_pos: torch.Tensor, s_pos: torch.Tensor,
        rotary: PositionalScheme | None, cross_rotary: PositionalScheme | None, need_map: bool,
        cache: dict | None = None, step: StepKeys | None = None,
        gathered: tuple[Gathered | None, Gathered | None] = (None, None),
    ) -> tuple[torch.Tensor, AttentionMap | None, AttentionMap | None]:
        """``x (b, t, d)`` over ``memory (b, s, d)`` -> output, self- and cross-attention maps.

        ``cache`` and ``step`` (cached decoding only; see :mod:`~.decoding`): this step
        writes its key and value to cache slot ``step.write`` and attends to the slots
        ``step.read``; cross-attention reads the keys ``step.cross`` of ``cache["ck"]`` and
        ``cache["cv"]``, the memory's keys and values that the decoder put there (all of
        them, or those of the source tokens a block of steps may read). Biases come pre-cut
        to those keys. ``gathered`` (a
        teacher-forced pass over a long answer): the self- and cross-attention biases in
        :class:`~.attention.Gathered` form, where they have one."""
        h = self.norm1(x)
        k, v = self.self_attn.keys_values(h, t_pos, rotary)
        if cache is None:
            ck, cv = self.cross_attn.keys_values(memory, s_pos, cross_rotary)
        else:
            if "k" not in cache:
                b, heads, _, d = k.shape
                cache["k"], cache["v"] = k.new_zeros(b, heads, step.slots, d), v.new_zeros(b, heads, step.slots, d)
            cache["k"][:, :, step.write], cache["v"][:, :, step.write] = k[:, :, 0], v[:, :, 0]
            k, v = keys_at(cache["k"], step.read), keys_at(cache["v"], step.read)
            read = source_keys_at if cache.get("source_major") else keys_at
            ck, cv = read(cache["ck"], step.cross), read(cache["cv"], step.cross)
        h, self_map = self.self_attn.attend_to(h, t_pos, k, v, self_bias, rotary, need_map, gathered[0])
        x = x + h
        h, cross_map = self.cross_attn.attend_to(self.norm2(x), t_pos, ck, cv, cross_bias, cross_rotary, need_map,
                                                 gathered[1])
        x = x + h
        return x + self.drop(self.ff(self.norm3(x))), self_map, cross_map


class Seq2SeqTransformer(nn.Module):
    """The papers' encoder-decoder. Defaults follow the papers (1 + 6 layers, 8 heads, d 128)."""

    def __init__(
        self,
        d_model: int = 128,
        heads: int = 8,
        encoder_layers: int = 1,
        decoder_layers: int = 6,
        feedforward: int = 512,
        dropout: float = 0.3,
        positional: PositionalScheme | None = None,
        position_index: PositionIndex | None = None,
        vocab_size: int = vocab.VOCAB_SIZE,
        encoder_attention_drop: float = 0.0,
    ) -> None:
        super().__init__()
        for name, value in dict(d_model=d_model, heads=heads, decoder_layers=decoder_layers,
                                feedforward=feedforward).items():
            if value < 1:
                raise ConfigError(f"{name} must be >= 1, got {value}")
        if encoder_layers < 0:
            raise ConfigError(f"encoder_layers must be >= 0, got {encoder_layers}")
        if d_model % heads:
            raise ConfigError(f"heads ({heads}) must divide d_model ({d_model})")
        if not 0.0 <= dropout < 1.0:
            raise ConfigError(f"dropout must be in [0, 1), got {dropout}")
        if not 0.0 <= encoder_attention_drop < 1.0:
            raise ConfigError(f"encoder_attention_drop must be in [0, 1), got {encoder_attention_drop}")
        self.d_model, self.heads = d_model, heads
        self.positional = positional if positional is not None else Sinusoidal()
        self.positional.setup(d_model, heads)
        self.position_index = position_index if position_index is not None else LinearIndex()
        self.embedding = nn.Embedding(vocab_size, d_model)
        qk_bias = self.positional.qk_bias
        self.encoder = nn.ModuleList(EncoderLayer(d_model, heads, feedforward, dropout, qk_bias, encoder_attention_drop)
                                     for _ in range(encoder_layers))
        self.decoder = nn.ModuleList(DecoderLayer(d_model, heads, feedforward, dropout, qk_bias)
                                     for _ in range(decoder_layers))
        self.encoder_norm, self.decoder_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size)
        self.drop = nn.Dropout(dropout)
        self.bias_sources: nn.ModuleDict = nn.ModuleDict()  # name -> BiasSource
        # False: the positional scheme is ignored everywhere (see set_positional)
        self.use_positional = True

    # ---- phase switches (ABC's retraining) --------------------------------------------
    def set_positional(self, enabled: bool) -> None:
        """Use the positional scheme, or ignore it everywhere (no absolute positions, no
        positional bias), so that installed biases are the only positional signal. A
        run-time switch, not saved weights: the strategy that decides it sets it again."""
        self.use_positional = enabled

    def set_dropout(self, p: float) -> None:
        """Set the probability of every dropout module."""
        for module in self.modules():
            if isinstance(module, nn.Dropout):
                module.p = p

    def reinitialize(self, seed: int) -> None:
        """Fresh weights, drawn from ``seed``, for every submodule that can reset itself."""
        torch.manual_seed(seed)
        for module in self.modules():
            if module is not self and hasattr(module, "reset_parameters"):
                module.reset_parameters()

    # ---- biases ---------------------------------------------------------------------
    def install_bias(self, name: str, source: BiasSource) -> None:
        """Add (or replace) a named bias source; callbacks call this at phase boundaries."""
        if not isinstance(source, BiasSource):
            raise TypeError(f"a bias source must be a BiasSource, got {type(source).__name__}")
        self.bias_sources[name] = source

    def remove_bias(self, name: str) -> None:
        if name in self.bias_sources:
            del self.bias_sources[name]

    def attention_bias(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor,
                       layer: int | None = None, rows: slice | None = None,
                       sizes: tuple[int, int] | None = None, keys: slice | None = None) -> torch.Tensor | None:
        """Every additive bias for one attention kind (and layer), summed once: ``(h|1, q, k)``
        or None; only the query rows ``rows`` and the key columns ``keys`` when given
        (decoding long sequences in blocks). ``sizes``: ``(input tokens, decoder steps)`` of
        the whole pair, which a bias that follows the operands' sizes needs
        (:class:`~.attention.BiasSource`)."""
        q, k, device = len(q_pos), len(k_pos), q_pos.device

        def from_source(source: BiasSource) -> torch.Tensor | None:
            if keys is None or source.takes_keys:
                return source(kind, q, k, device, layer, rows, sizes=sizes, **({} if keys is None else {"keys": keys}))
            bias = source(kind, q, k, device, layer, rows, sizes=sizes)
            return None if bias is None else bias[..., keys]

        return sum_biases(
            causal_mask(q, device, rows, keys) if kind == "decoder" else None,
            self.positional.score_bias(kind, q_pos if rows is None else q_pos[rows],
                                       k_pos if keys is None else k_pos[keys])
            if self.use_positional else None,
            *(from_source(source) for source in self.bias_sources.values()),
        )

    def open_keys(self, kind: str, n_queries: int, n_keys: int, rows: slice,
                  sizes: tuple[int, int] | None = None) -> slice:
        """The keys any query of ``rows`` may leave open in any layer: where the bias
        sources' :meth:`~.attention.BiasSource.open_keys` overlap (a cell is open only where
        every bias leaves it open); all ``n_keys`` where none promises less."""
        start, stop = 0, n_keys
        for source in self.bias_sources.values():
            keys = source.open_keys(kind, n_queries, n_keys, rows, sizes)
            start, stop = max(start, keys.start), min(stop, keys.stop)
        return slice(start, max(start, stop))

    @property
    def per_layer_biases(self) -> bool:
        """Whether some bias source gives each layer its own bias."""
        return any(source.per_layer for source in self.bias_sources.values())

    def layer_biases(self, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor, n_layers: int,
                     rows: slice | None = None, sizes: tuple[int, int] | None = None,
                     keys: slice | None = None) -> list[torch.Tensor | None]:
        """The bias of each layer: computed once and shared unless a source is per-layer."""
        if self.per_layer_biases:
            return [self.attention_bias(kind, q_pos, k_pos, layer=i, rows=rows, sizes=sizes, keys=keys)
                    for i in range(n_layers)]
        return [self.attention_bias(kind, q_pos, k_pos, rows=rows, sizes=sizes, keys=keys)] * n_layers

    def _remembered(self, name: str, bias: torch.Tensor | None, make) -> Band | Gathered | None:
        """``make(bias)``, remembered per bias tensor (bias sources cache theirs per size)."""
        if bias is None:
            return None
        cache = self.__dict__.setdefault(name, {})
        hit = cache.get(id(bias))
        if hit is None or hit[0] is not bias:  # holding the tensor keeps its id from being reused
            if len(cache) > 8:
                cache.clear()
            hit = cache[id(bias)] = (bias, make(bias))
        return hit[1]

    def _band(self, bias: torch.Tensor | None, n_keys: int) -> Band | None:
        """:func:`~.decoding.band_of` of a bias, remembered."""
        return self._remembered("_spans", bias, lambda b: decoding.band_of(b, n_keys))

    def _gathered(self, bias: torch.Tensor | None, n_keys: int) -> Gathered | None:
        """:func:`~.attention.gathered_of` of a bias, remembered."""
        return self._remembered("_gathers", bias, lambda b: gathered_of(b, n_keys))

    # ---- forward --------------------------------------------------------------------
    def embed(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Token embeddings plus the scheme's absolute positions (if any), with dropout."""
        x = self.embedding(tokens)
        absolute = self.positional.embed(positions) if self.use_positional else None
        return self.drop(x if absolute is None else x + absolute)

    def rotary_for(self, kind: str) -> PositionalScheme | None:
        """The scheme when it rotates queries and keys (RoPE-like) in this kind, else None."""
        if not self.use_positional:
            return None
        scheme = self.positional
        rotates = type(scheme).rotate is not PositionalScheme.rotate
        return scheme if rotates and scheme.applies(kind) else None

    def check_length(self, n_tokens: int) -> None:
        """Raise ConfigError if sequences of ``n_tokens`` exceed what the positions can encode."""
        if not self.use_positional:
            return
        limit = self.positional.max_positions()
        index = self.position_index
        largest = max(int(index(n_tokens).max()), int(index.source(n_tokens).max())) if n_tokens else 0
        if limit is not None and largest >= limit:
            raise ConfigError(f"sequences of {n_tokens} tokens need position {largest}, but "
                              f"{type(self.positional).__name__} encodes positions < {limit}; "
                              "raise its max_position or evaluate shorter lengths")

    def encode(self, src: torch.Tensor, need_map: bool = False):
        """``src (b, s)`` -> memory ``(b, s, d)`` and the encoder's attention maps."""
        n = src.shape[1]
        pos = self.position_index.source(n, src.device)
        x = self.embed(src, pos)
        rotary = self.rotary_for("encoder")
        # a banded encoder (ABS encoder_width) reads only its band: linear in length; a long
        # input's band is built a block of rows at a time, without its whole (s, s) bias
        pairs = None if need_map or self.training or n * n <= decoding.DENSE_CELLS else self._long_bands(pos)
        if pairs is None:
            biases = self.layer_biases("encoder", pos, pos, len(self.encoder))
            pairs = [(bias, None if need_map or self.training else self._band(bias, n)) for bias in biases]
        maps = []
        for layer, (bias, band) in zip(self.encoder, pairs):
            x, amap = layer(x, bias, pos, rotary, need_map, band)
            maps.append(amap)
        return self.encoder_norm(x), maps

    def _long_bands(self, pos: torch.Tensor) -> list[tuple[None, Band | None]] | None:
        """Per encoder layer, ``(None, band)`` for a long input (no band where the layer has
        no bias), remembered per length and bias sources; None if some bias is not a band."""
        key = (len(pos), tuple(id(source) for source in self.bias_sources.values()))
        cache = self.__dict__.setdefault("_long", {})
        if key not in cache:
            cache.clear()
            pairs = []
            for i in range(len(self.encoder)):
                layer = i if self.per_layer_biases else None
                rows_of = partial(self.attention_bias, "encoder", pos, pos, layer)
                if rows_of(slice(0, 1)) is None:
                    pairs.append((None, None))
                    continue
                band = decoding.band_in_blocks(lambda rows: rows_of(rows=rows), len(pos))
                if band is None:
                    pairs = None
                    break
                pairs.append((None, band))
            cache[key] = (dict(self.bias_sources), pairs)  # holding the sources keeps their ids from being reused
        return cache[key][1]

    def decode(self, tgt: torch.Tensor, memory: torch.Tensor, need_map: bool = False, t_pos: torch.Tensor | None = None,
               steps: int | None = None):
        """``tgt (b, t)`` and ``memory (b, s, d)`` -> logits ``(b, t, vocab)`` and maps.

        ``t_pos`` overrides the decoder's position indices (greedy decoding passes prefixes
        of the full-length indices, which matters for randomized positions), and ``steps``
        says how long the whole answer is, where ``tgt`` is a prefix of it.
        """
        t_pos = self.position_index(tgt.shape[1], tgt.device) if t_pos is None else t_pos
        s_pos = self.position_index.source(memory.shape[1], memory.device)
        x = self.embed(tgt, t_pos)
        n = len(self.decoder)
        sizes = (memory.shape[1], steps or tgt.shape[1])
        self_biases = self.layer_biases("decoder", t_pos, t_pos, n, sizes=sizes)
        cross_biases = self.layer_biases("cross", t_pos, s_pos, n, sizes=sizes)
        rotary, cross_rotary = self.rotary_for("decoder"), self.rotary_for("cross")
        self_maps, cross_maps = [], []
        for layer, self_bias, cross_bias in zip(self.decoder, self_biases, cross_biases):
            gathered = (None, None) if need_map else (self._gathered(self_bias, len(t_pos)),
                                                      self._gathered(cross_bias, len(s_pos)))
            x, sm, cm = layer(x, memory, self_bias, cross_bias, t_pos, s_pos, rotary, cross_rotary, need_map,
                              gathered=gathered)
            self_maps.append(sm)
            cross_maps.append(cm)
        return self.head(self.decoder_norm(x)), self_maps, cross_maps

    def forward(self, src: torch.Tensor, tgt: torch.Tensor, return_attention: bool = False) -> Seq2SeqOutput:
        """Teacher-forced pass: ``src (b, s)``, ``tgt (b, t)`` -> :class:`Seq2SeqOutput`."""
        memory, enc_maps = self.encode(src, return_attention)
        logits, self_maps, cross_maps = self.decode(tgt, memory, return_attention)
        attention = {"encoder": enc_maps, "decoder": self_maps, "cross": cross_maps} if return_attention else {}
        return Seq2SeqOutput(logits, attention)

    def attention_on_own_output(self, src: torch.Tensor, steps: int) -> dict[str, list[AttentionMap]]:
        """Attention maps on the model's own greedy answer (:func:`~.decoding.attention_on_own_output`)."""
        return decoding.attention_on_own_output(self, src, steps)

    def encode_in_chunks(self, src: torch.Tensor) -> torch.Tensor:
        """The encoder's memory in chunks (:func:`~.decoding.encode_in_chunks`)."""
        return decoding.encode_in_chunks(self, src)

    def generate(self, src: torch.Tensor, steps: int, use_cache: bool = True, skip_closed: bool = True,
                 target: torch.Tensor | None = None, progress=None) -> torch.Tensor:
        """Greedy decoding of ``steps`` tokens (:func:`~.decoding.greedy_decode`): ``(b, steps)``;
        with ``target``, it stops once every row is wrong; ``progress(n)`` hears of each n steps."""
        return decoding.greedy_decode(self, src, steps, use_cache, skip_closed, target, progress)
