"""Greedy decoding: the KV-cached decoder that skips the keys a bias closes, and the chunked encoder.

Evaluation is exact match of greedy decoding over the whole output, so this is the hot
path of ``test``, ``predict`` and ABC's calibration. Three things keep it linear in the
length under an ABS window or an ABC bias:

- **KV cache.** Each step runs only the newest position against cached keys and values,
  with row ``t`` of biases built once: the tokens of full recomputation (``use_cache=False``).
- **Read and kept keys** (``skip_closed``). Step ``t`` reads only the keys its bias rows
  leave open: the memory keys of its cross-attention row (kept source-major, so that they
  are one block), and the cached self-attention keys its row opens (a window's w + 1; a
  task's dependency window reads the same few keys however far back the row above sits).
  A key stays in the cache only while some later row opens it; the cache is a buffer of
  slots sized for the most keys ever kept at once. A long answer's biases are built a block
  of rows at a time, and under windows each block only over the keys its rows may open
  (``BiasSource.open_keys``), with its cross-attention keys and values made for the source
  tokens it may read. Under an open bias (ALiBi, T5, none) every key is read.
- **Banded encoder.** An encoder whose bias is a narrow band (ABS ``encoder_width``) reads
  only that band (:func:`band_of`, :func:`~.attention.attend_banded`), and long inputs are
  encoded in chunks of about :data:`ENCODE_TOKENS` tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from abc_lightning import vocab
from abc_lightning.model.attention import Band

# ``model`` below is a transformer.Seq2SeqTransformer, which imports this module (annotations only).

ENCODE_TOKENS = 16384  # source tokens per encoder pass
DENSE_CELLS = 1 << 24  # a bias with more cells than this is built a block of rows at a time
BLOCK_ROWS = 256  # query rows per block
SOURCE_MAJOR = True  # cross-attention keys kept (s, b, h, d); the same values as (b, h, s, d), read faster


class StepKeys(NamedTuple):
    """What one cached decoding step of one layer writes and reads.

    ``write``: the cache slot of this step's own key and value. ``read``: the slots this
    step attends, a slice or an index tensor (the bias row comes cut to the same keys, in
    the same order). ``slots``: the cache's size. ``cross``: the memory keys this step
    reads, a slice or an index tensor."""

    write: int
    read: slice | torch.Tensor
    slots: int
    cross: slice | torch.Tensor


#: A self-attention row with at most this many open keys reads just those (a gather);
#: a row with more reads every key in the cache (closed ones get zero weight either way).
READ_OPEN_MAX = 64


class KeyPlan:
    """Which keys each decoding step needs, from the summed biases of the layers that share it.

    Self-attention key ``j`` is needed up to the last row that opens it (``last_use``),
    which :meth:`add_self_rows` learns from every row of the self-attention bias (a block of
    rows at a time); a row that opens nothing keeps every key (it attends in full). Keys
    live in cache slots: :meth:`start_slots` sizes the cache for the most keys alive at
    once, and :meth:`self_step` gives each step its slot and the slots it reads, from the
    open keys of its row (``open_rows``, from the same pass). Cross-attention row ``t`` reads the keys
    it opens, as a slice where they are contiguous; :meth:`set_cross_rows` gives the rows
    of the current block."""

    def __init__(self, steps: int, n_memory: int, skip_closed: bool = True) -> None:
        self.steps, self.n_memory, self.skip_closed = steps, n_memory, skip_closed
        self.last_use: torch.Tensor | None = None
        self.cross_open = None
        # per step, its row's open keys where it has at most READ_OPEN_MAX (None: it reads every key in the cache)
        self.open_rows: list[torch.Tensor | None] = []

    @staticmethod
    def opens_some(cross_bias: torch.Tensor | None) -> bool:
        """Whether every row of a bias block leaves at least one key open."""
        return cross_bias is not None and bool(torch.isfinite(cross_bias).any(dim=0).any(dim=1).all())

    @staticmethod
    def reads_few(self_bias: torch.Tensor | None) -> bool:
        """Whether every row of a bias block opens at least one and at most
        :data:`READ_OPEN_MAX` keys: what a block built from its first open key needs, since
        each of its steps then reads just those keys (a row that reads every key would need
        the cells before the block's first key too)."""
        if self_bias is None:
            return False
        counts = torch.isfinite(self_bias).any(dim=0).sum(dim=1)
        return bool(((counts > 0) & (counts <= READ_OPEN_MAX)).all())

    def add_self_rows(self, self_bias: torch.Tensor | None, rows: slice, first: int = 0) -> None:
        """Learn the open keys of a block of rows from its self-attention bias, whose columns
        are the keys from ``first`` on (every earlier key closed in these rows)."""
        if not self.skip_closed or self_bias is None:
            return
        is_open = torch.isfinite(self_bias).any(dim=0).cpu()[:, : self.steps - first]  # (rows, k - first)
        counts = is_open.sum(dim=1)
        few = (counts > 0) & (counts <= READ_OPEN_MAX)
        split = iter(is_open[few].nonzero()[:, 1].add(first).split(counts[few].tolist()))
        self.open_rows += [next(split) if f else None for f in few.tolist()]
        is_open[counts == 0] = True  # a row with nothing open attends to every key
        # the last row of this block that opens each key (one int8 pass from the bottom; -1 where none does)
        from_bottom = is_open.flip(0).to(torch.int8).argmax(dim=0)
        last = torch.full((self.steps,), -1, dtype=torch.long)
        last[first : first + is_open.shape[1]] = torch.where(is_open.any(dim=0), rows.stop - 1 - from_bottom, -1)
        self.last_use = last if self.last_use is None else torch.maximum(self.last_use, last)

    def start_slots(self) -> int:
        """Assign no slot yet; return the cache's size: the most keys alive at one step
        (key ``j`` lives from step ``j`` to the last row that opens it), or every step's
        key when nothing is dropped."""
        self.next_slot, self.free = 0, []
        if self.last_use is None:
            self.end = None
            return self.steps
        self.end = torch.maximum(self.last_use, torch.arange(self.steps))
        self.slot_of = torch.zeros(self.steps, dtype=torch.long)
        self.expiring: dict[int, list[int]] = {}
        for j, e in enumerate(self.end.tolist()):
            self.expiring.setdefault(e, []).append(j)
        alive = torch.zeros(self.steps + 1, dtype=torch.long)
        alive.index_add_(0, torch.arange(self.steps), torch.ones(self.steps, dtype=torch.long))
        alive.index_add_(0, self.end + 1, -torch.ones(self.steps, dtype=torch.long))
        return int(alive.cumsum(0).max())

    def self_step(self, t: int) -> tuple[int, slice | torch.Tensor, slice | torch.Tensor]:
        """Step ``t``'s own slot, the slots it reads, and the keys (absolute steps, in the
        same order) whose bias cells go with them; then free the slots of keys no later
        row opens."""
        if self.end is None:  # nothing dropped: key j sits in slot j
            return t, slice(0, t + 1), slice(0, t + 1)
        write = self.free.pop() if self.free else self.next_slot
        self.next_slot = max(self.next_slot, write + 1)
        self.slot_of[t] = write
        keys = self.open_rows[t]
        if keys is None:  # every key alive at this step
            keys = torch.nonzero(self.end[: t + 1] >= t).flatten()
        read = self.slot_of[keys]
        for j in self.expiring.get(t, ()):
            self.free.append(int(self.slot_of[j]))
        return write, read, keys

    def set_cross_rows(self, cross_bias: torch.Tensor | None, rows: slice, first: int = 0) -> None:
        """Learn the open memory keys of a block of rows from its cross-attention bias, whose
        columns are the keys from ``first`` on (built over a span whose rows each open one)."""
        self.row0, self.cross_open, self.cross_first = rows.start, None, first
        if self.skip_closed and cross_bias is not None:
            self.cross_open = torch.isfinite(cross_bias).any(dim=0).cpu()  # (rows, span)
            start, stop = open_span(cross_bias, cross_bias.shape[-1])
            self.first, self.last = (start + first).tolist(), (stop + first).tolist()
            self.count = self.cross_open.sum(dim=1).tolist()

    def cross(self, t: int) -> slice | torch.Tensor:
        if self.cross_open is None:
            return slice(0, self.n_memory)
        r = t - self.row0
        first, last = self.first[r], self.last[r]
        if self.count[r] in (0, last - first):  # contiguous (or nothing open: every key)
            return slice(first, last)
        return torch.nonzero(self.cross_open[r]).flatten() + self.cross_first


def row_blocks(n_rows: int, n_keys: int) -> list[slice]:
    """The query rows a bias is built for at once: all of them while the bias has at most
    :data:`DENSE_CELLS` cells, else blocks of :data:`BLOCK_ROWS` (memory linear in the length)."""
    size = n_rows if n_rows * n_keys <= DENSE_CELLS else BLOCK_ROWS
    return [slice(start, min(start + size, n_rows)) for start in range(0, n_rows, size)]


def open_span(bias: torch.Tensor | None, n_keys: int, causal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per query row of a bias ``(h|1, q, k)``: the key span ``[from, to)`` it leaves open.

    A key is open when any head gives it a finite bias. For ``causal`` (decoder
    self-attention, where the cache is trimmed for good) ``from`` is the smallest start of
    this and every later row, so that a key dropped at step t is never needed again. A row
    with no open key keeps every key, so skipping never changes the result.
    """
    q = bias.shape[-2] if bias is not None else n_keys
    full_from, full_to = torch.zeros(q, dtype=torch.long), torch.full((q,), n_keys, dtype=torch.long)
    if bias is None:
        return full_from, full_to
    is_open = torch.isfinite(bias).any(dim=0).cpu()  # (q, k)
    any_open = is_open.any(dim=1)
    first = torch.where(any_open, is_open.int().argmax(dim=1), full_from)
    last = torch.where(any_open, n_keys - is_open.flip(1).int().argmax(dim=1), full_to)
    if causal:
        first = first.flip(0).cummin(0).values.flip(0)
    return first, last


def band_of(bias: torch.Tensor | None, n_keys: int, max_width: int = 16) -> Band | None:
    """The :class:`~.attention.Band` of a square self-attention bias, or None.

    Every query row ``i`` of the bias leaves open only keys ``i + first_offset … i +
    first_offset + width − 1``; the band's bias holds those cells (−inf where they fall
    outside the sequence). None when there is no bias or the band is wider than
    ``max_width`` (then one dense call is as fast).
    """
    if bias is None or bias.shape[-2] != n_keys:
        return None
    return band_in_blocks(lambda rows: bias[..., rows, :], n_keys, max_width)


def band_in_blocks(rows_of: Callable[[slice], torch.Tensor | None], n_keys: int, max_width: int = 16) -> Band | None:
    """:func:`band_of` for a square bias that ``rows_of(rows)`` gives a block of rows at a
    time (:func:`row_blocks`), so that a long input's whole bias is never built."""
    blocks, lo, hi = row_blocks(n_keys, n_keys), n_keys, -n_keys
    for rows in blocks:
        bias = rows_of(rows)
        if bias is None:
            return None
        first, last = open_span(bias, n_keys)
        index = torch.arange(rows.start, rows.stop)
        lo, hi = min(lo, int((first - index).min())), max(hi, int((last - 1 - index).max()))
    width = hi - lo + 1
    if width > max_width or 2 * width > n_keys:
        return None
    cells = []
    for rows in blocks:
        bias = rows_of(rows) if len(blocks) > 1 else bias
        index = torch.arange(rows.start, rows.stop)
        cols = index[:, None] + lo + torch.arange(width)[None, :]  # (rows, width)
        inside = ((cols >= 0) & (cols < n_keys)).to(bias.device)
        local = torch.arange(len(index))[:, None].to(bias.device)
        cells.append(bias[..., local, cols.clamp(0, n_keys - 1).to(bias.device)].masked_fill(~inside, float("-inf")))
    return Band(torch.cat(cells, dim=-2), lo)


@torch.no_grad()
def encode_in_chunks(model: Seq2SeqTransformer, src: torch.Tensor) -> torch.Tensor:
    """The encoder's memory for ``src (b, s)``, in chunks of about :data:`ENCODE_TOKENS`
    source tokens: on CPU, one pass over a whole batch of long inputs spilled out of cache
    and cost 5x more per sample."""
    chunk = max(1, ENCODE_TOKENS // max(src.shape[1], 1))
    return torch.cat([model.encode(src[i : i + chunk])[0] for i in range(0, src.shape[0], chunk)])


def greedy_decode(model: Seq2SeqTransformer, src: torch.Tensor, steps: int, use_cache: bool = True, skip_closed:
                  bool = True, target: torch.Tensor | None = None, progress: Callable | None = None) -> torch.Tensor:
    """Greedy decoding of ``steps`` tokens after SOS: ``src (b, s)`` -> ``(b, steps)``.

    ``use_cache=False`` recomputes the whole prefix at every step (the reference the cached
    decoder is tested against); ``skip_closed`` reads only the keys each bias row opens.
    With ``target (b, steps)``, decoding stops once every row has a token that differs from
    its target, and the steps left are filled with :data:`~abc_lightning.vocab.PAD`: exact match
    is then as with every step decoded (:class:`EarlyExit`). ``progress(n)`` hears of n more steps.
    """
    memory = encode_in_chunks(model, src)
    out = torch.full((src.shape[0], 1), vocab.SOS, dtype=torch.long, device=src.device)
    t_pos = model.position_index(steps, src.device)
    exit_ = EarlyExit(None if target is None else target.to(src.device), steps)
    if not use_cache:
        for t in range(steps):
            logits, _, _ = model.decode(out, memory, t_pos=t_pos[: t + 1], steps=steps)
            out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)
            if exit_.all_wrong(out[:, -1], t):
                break
        return exit_.fill(out[:, 1:])
    s_pos = model.position_index.source(memory.shape[1], src.device)
    n = len(model.decoder)
    rotary, cross_rotary = model.rotary_for("decoder"), model.rotary_for("cross")
    caches: list[dict] = [{} for _ in model.decoder]
    # One plan per group of layers that share their biases (all layers, unless a source is
    # per-layer); without skip_closed every step reads every key, which the layers treat
    # exactly like no plan at all.
    plans = [KeyPlan(steps, memory.shape[1], skip_closed) for _ in range(n if model.per_layer_biases else 1)]
    sizes = (memory.shape[1], steps)
    blocks = row_blocks(steps, max(steps, memory.shape[1]))
    # Under windows that close the distant past (some source promises the keys a block of
    # rows may open), a block's self-attention biases are built over the keys from its first
    # open one up to its last row, and its cross-attention biases over the source tokens it
    # may read, not over every key: a dependency window reads the row above and a few
    # digits, not the whole answer and input, so the bias work per step stays flat. Other
    # biases are built over every key, as they are.
    long = skip_closed and len(blocks) > 1
    windowed = long and model.open_keys("decoder", steps, steps, blocks[-1], sizes).start > 0
    spans: list[slice | None] = []  # per block, the key columns of its self-attention biases
    for rows in blocks:  # every row first: which keys each row opens, and when each is last used
        keys = slice(model.open_keys("decoder", steps, steps, rows, sizes).start, rows.stop) if windowed else None
        self_biases = model.layer_biases("decoder", t_pos, t_pos, n, rows, sizes=sizes, keys=keys)
        if keys is not None and keys.start > 0 and not all(KeyPlan.reads_few(b) for b in _distinct(self_biases)):
            keys = slice(0, rows.stop)  # a row that reads every key needs the cells before the span too
            self_biases = model.layer_biases("decoder", t_pos, t_pos, n, rows, sizes=sizes, keys=keys)
        spans.append(keys)
        for plan, bias in zip(plans, self_biases):
            plan.add_self_rows(bias, rows, keys.start if keys else 0)
    slots = [plan.start_slots() for plan in plans]
    tokens, cross_span = [], None
    for rows, span in zip(blocks, spans):
        first = span.start if span else 0
        if len(blocks) > 1:  # one block is the whole bias, already built above
            self_biases = model.layer_biases("decoder", t_pos, t_pos, n, rows, sizes=sizes, keys=span)
        source = model.open_keys("cross", steps, memory.shape[1], rows, sizes) if long else None
        source = source if source is not None and source != slice(0, memory.shape[1]) else None
        cross_biases = model.layer_biases("cross", t_pos, s_pos, n, rows, sizes=sizes, keys=source)
        if source is not None and not all(KeyPlan.opens_some(b) for b in _distinct(cross_biases)):
            source = None  # a row that opens nothing reads every source token
            cross_biases = model.layer_biases("cross", t_pos, s_pos, n, rows, sizes=sizes)
        cross_first = source.start if source else 0  # the cross biases' first column
        for plan, bias in zip(plans, cross_biases):
            plan.set_cross_rows(bias, rows, cross_first)
        if source != cross_span or "ck" not in caches[0]:
            # the memory's cross-attention keys and values, for the source tokens this block may
            # read (a window's few, not a whole long input's) or for all of them; steps read
            # them by their place from the first
            cross_span, memory_span = source, memory if source is None else memory[:, source]
            # source-major (s, b, h, d) unless a rotation needs (b, h, s, d): a step reads its keys as one block
            by_source = memory_span.transpose(0, 1).contiguous() if SOURCE_MAJOR and cross_rotary is None else None
            for layer, cache in zip(model.decoder, caches):
                cache["source_major"] = by_source is not None
                cache["ck"], cache["cv"] = (layer.cross_attn.source_major_keys_values(by_source) if by_source is not None
                                            else layer.cross_attn.keys_values(
                                                memory_span, s_pos if source is None else s_pos[source], cross_rotary))
        for t in range(rows.start, rows.stop):
            x = model.embed(out[:, -1:], t_pos[t : t + 1])
            this_step = []  # per plan, once: the slots written and read, and the keys they hold
            for plan, size in zip(plans, slots):
                write, read, keys = plan.self_step(t)
                this_step.append((keys, StepKeys(write, read, size, _shifted(plan.cross(t), cross_first))))
            r = t - rows.start
            for layer, cache, self_bias, cross_bias, (keys, step) in zip(
                    model.decoder, caches, self_biases, cross_biases, this_step * n if len(plans) == 1 else this_step):
                row_self = None if self_bias is None else _columns(self_bias[..., r : r + 1, :], keys, first)
                row_cross = None if cross_bias is None else _columns(cross_bias[..., r : r + 1, :], step.cross)
                x, _, _ = layer(x, memory, row_self, row_cross, t_pos[t : t + 1], s_pos, rotary, cross_rotary,
                                False, cache, step)
            out = model.head(model.decoder_norm(x))[:, -1].argmax(-1, keepdim=True)
            tokens.append(out)
            if progress is not None:
                progress(1)
            if exit_.all_wrong(out[:, 0], t):
                return exit_.fill(torch.cat(tokens, dim=1))
    return torch.cat(tokens, dim=1)


class EarlyExit:
    """Tracks which rows of a decoding batch already differ from their target.

    Greedy decoding is deterministic, so a row with one wrong token fails exact match
    whatever it decodes next; once every row has one, the rest of the steps change no
    accuracy and are skipped (a model that fails at a length stops after a few steps instead
    of decoding the whole answer). Without a target nothing is tracked and nothing stops."""

    def __init__(self, target: torch.Tensor | None, steps: int) -> None:
        if target is not None and (target.dim() != 2 or target.shape[1] != steps):
            raise ValueError(f"target must be (batch, {steps}), not {tuple(target.shape)}")
        self.target, self.steps = target, steps
        self.wrong = None if target is None else torch.zeros(target.shape[0], dtype=torch.bool, device=target.device)

    def all_wrong(self, token: torch.Tensor, t: int) -> bool:
        """Note step ``t``'s tokens ``(b,)``; True once every row has a wrong one (read
        every step on CPU, every 16th on an accelerator, where each read waits for it)."""
        if self.target is None:
            return False
        self.wrong |= token != self.target[:, t]
        if token.device.type != "cpu" and t % 16:
            return False
        return t + 1 < self.steps and bool(self.wrong.all())

    def fill(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens (b, t)`` padded with PAD to ``(b, steps)``."""
        missing = self.steps - tokens.shape[1]
        return tokens if missing <= 0 else torch.cat([tokens, tokens.new_full((len(tokens), missing), vocab.PAD)], 1)


def _distinct(biases: list[torch.Tensor | None]) -> list[torch.Tensor | None]:
    """The layers' biases, each tensor once (layers that share a bias share the tensor)."""
    return list({id(b): b for b in biases}.values())


def _shifted(keys: slice | torch.Tensor, first: int) -> slice | torch.Tensor:
    """Keys counted from ``first`` instead of from 0."""
    if not first:
        return keys
    return slice(keys.start - first, keys.stop - first) if isinstance(keys, slice) else keys - first


def _columns(row: torch.Tensor, keys: slice | torch.Tensor, first: int = 0) -> torch.Tensor:
    """A bias row's cells at the given keys: a view for a slice, a gather for indices. The
    row's columns are the keys from ``first`` on."""
    keys = _shifted(keys, first)
    if isinstance(keys, slice):
        return row[..., keys]
    if keys.numel() and int(keys[-1]) - int(keys[0]) + 1 == keys.numel():  # sorted and contiguous
        return row[..., int(keys[0]) : int(keys[-1]) + 1]
    return row.index_select(-1, keys.to(row.device))


@torch.no_grad()
def attention_on_own_output(model: Seq2SeqTransformer, src: torch.Tensor, steps: int) -> dict:
    """Greedy-decode ``steps`` tokens, then re-run teacher-forced on that output and return
    its attention maps by kind and layer (what ABC calibrates and heatmaps draw)."""
    decoded = greedy_decode(model, src, steps)
    dec_in = torch.cat([torch.full_like(decoded[:, :1], vocab.SOS), decoded[:, :-1]], dim=1)
    return model(src, dec_in, return_attention=True).attention
