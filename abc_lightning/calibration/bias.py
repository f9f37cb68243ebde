"""The ABC bias source: calibrated lines, found in averaged attention and extended on demand
to whatever size attention needs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from abc_lightning.calibration.lines import (Z_DECIMALS, CalibratedLines, DirectionLines, average_lines, calibrate,
                                              extend)
from abc_lightning.calibration.options import Lines, Options
from abc_lightning.runs.checkpoints import load_plain
from abc_lightning.errors import CheckpointError
from abc_lightning.model.attention import BiasSource
from abc_lightning.plotting import bias_heatmaps
from abc_lightning.runs import files

#: Calibrated lines per attention kind: one set shared by every layer, or one per layer.
LinesByKind = dict[str, "CalibratedLines | list[CalibratedLines]"]


def lines_from_attention(averaged: dict[str, list[torch.Tensor]], options: Options,
                         segments: list[tuple[int, int]], heads: int) -> LinesByKind:
    """Averaged attention ``{kind: [(H, q, k) per layer]}`` -> the calibrated lines of each
    kind in ``options.lines.kinds`` (per layer, or of ``options.lines.layer`` alone).

    ``segments`` are the growing operand spans of the input (``Task.growing_segments``),
    used where ``options.extension.align`` is ``segments``.
    """
    ln, ext = options.lines, options.extension
    out: LinesByKind = {}
    for kind in ln.kinds:
        layer_ids = range(len(averaged[kind])) if ln.per_layer else [ln.layer]
        calibrated = []
        for li in layer_ids:
            a_bar = averaged[kind][li].cpu()
            # cells the causal mask closes are not attention: they belong to no line
            valid = torch.ones(a_bar.shape[1:], dtype=torch.bool).tril() if kind == "decoder" else None
            # segment alignment concerns input positions: cross-attention keys, and
            # (encoder_align: segments) both axes of encoder self-attention
            by_segment = ext.align == "segments" and (kind == "cross" or (kind == "encoder" and
                                                                          ext.encoder_align == "segments"))
            lines = calibrate(a_bar, ln.directions_for(kind), None if ext.soft else ln.kappa(kind),
                              ln.reduce, valid, ln.vertical, ln.lineless,
                              segments if by_segment else None, square=kind == "encoder" and by_segment)
            if kind == "decoder" and ln.self_verticals != "all":
                lines = only_first_verticals(lines, ln.self_verticals)
            if ln.empty_layer == "first":
                lines = first_key_if_empty(lines)
            calibrated.append(lines)
        if kind == "cross" and ln.cover == "operands" and segments:
            calibrated = cover_operands(calibrated, [averaged[kind][li].cpu() for li in layer_ids], ln, segments)
        out[kind] = calibrated if ln.per_layer else calibrated[0]
    if options.retraining.encoder_diagonal:
        out["encoder"] = CalibratedLines(1, 1, [DirectionLines(1, 0, torch.zeros(heads, 1))])
    return out


def calibrate_model(model, train, task, aligned: bool, options: Options, seed: int) -> tuple[LinesByKind, list[list[int]]]:
    """ABC's calibration of a model that interpolates: decode S_gen (``options.lines.samples``
    rows of the training split ``train``, drawn with ``seed``), average its attention per head
    (:func:`abc_lightning.evaluation.average_attention`) and find the lines of each kind
    (:func:`lines_from_attention`). Also returns the operand spans ``[start, width]`` that no
    cross-attention line above κ reads, where the retraining's encoder is position-wise (with
    it the decoder reads operands only through those lines), before ``lines.cover`` adds any."""
    import numpy as np

    from abc_lightning.evaluation import average_attention

    lines = options.lines
    rng = np.random.default_rng(seed)
    idx = torch.as_tensor(rng.choice(train.src.shape[0], size=min(lines.samples, train.src.shape[0]), replace=False))
    src = train.src[idx].long().to(next(model.parameters()).device)
    was_training = model.training
    model.eval()
    try:
        averaged = average_attention(model, src, train.tgt_out.shape[1], lines.source)
    finally:
        model.train(was_training)
    segments = task.growing_segments(src.shape[1], aligned)
    unread = []
    if options.retraining.encoder_diagonal and "cross" in lines.kinds:
        plain = replace(options, lines=replace(lines, kinds=["cross"], cover="off"))
        unread = [list(segments[k]) for k in
                  unread_operands(lines_from_attention(averaged, plain, segments, model.heads), segments)]
    return lines_from_attention(averaged, options, segments, model.heads), unread


def unread_message(unread: list[list[int]], covered: bool) -> str:
    """The line a run prints when no cross-attention line above κ reads an operand: with
    ``lines.cover: operands`` the best line below κ was kept; without it the retraining's
    position-wise encoder leaves no other way to that operand."""
    spans = ", ".join(f"keys {s}–{s + w - 1}" for s, w in unread)
    if covered:
        return f"abc_lightning: ABC: no cross-attention line above κ reads the operand at {spans}; " \
               f"lines.cover kept its best line below κ"
    return (f"abc_lightning: warning: ABC calibrated no cross-attention line that reads the operand at "
            f"{spans}; the retraining's position-wise encoder leaves no other way to it, so this run is "
            f"not expected to learn the task (lines.cover: operands adds one; the interpolating weights "
            f"are in abc/interpolated.pt)")


def cover_operands(calibrated: list[CalibratedLines], a_bars: list[torch.Tensor], ln: Lines,
                   segments: list[tuple[int, int]]) -> list[CalibratedLines]:
    """Cross-attention lines per layer, with a line added for every operand none reads.

    For such an operand, every line of the searched directions that starts in it (its key at
    the first answer step lies in the operand's span), in every layer and head, is scored by
    its z-score among its head's and direction's lines (as the drop-off scores them); the
    best one is kept, with its value ``d_l − d_max``. Lines already kept are left alone, so
    a calibration that reads every operand is unchanged.
    """
    calibrated = list(calibrated)
    for k in unread_operands({"cross": calibrated}, segments):
        start, width = segments[k]
        best = None  # (z, layer, Δ, head, column, value, c_min)
        for li, a_bar in enumerate(a_bars):
            for delta in ln.directions_for("cross"):
                values, present, c_min = average_lines(a_bar.double(), delta, ln.reduce)
                v = values.masked_fill(~present, float("nan"))
                mu = torch.nanmean(v, dim=1, keepdim=True)
                sigma = torch.sqrt(torch.nanmean((v - mu) ** 2, dim=1, keepdim=True)).clamp(min=1e-12)
                z = torch.round((values - mu) / sigma, decimals=Z_DECIMALS)
                columns = torch.arange(values.shape[1]) + c_min
                inside = present & (columns >= start) & (columns < start + width)
                z = z.masked_fill(~inside[None, :], float("-inf"))
                flat = int(torch.argmax(z))
                h, col = divmod(flat, z.shape[1])
                if torch.isfinite(z[h, col]) and (best is None or float(z[h, col]) > best[0]):
                    d_max = float(values[h][present].max())
                    best = (float(z[h, col]), li, delta, h, col, float(values[h, col]) - d_max, c_min)
        if best is None:
            continue
        _, li, delta, h, col, value, c_min = best
        di = next((i for i, d in enumerate(calibrated[li].directions)
                   if d.delta == delta and 0 <= col + c_min - d.c_min < d.values.shape[1]), None)
        if di is None:
            continue
        d = calibrated[li].directions[di]
        index = col + c_min - d.c_min
        new_values = d.values.clone()
        new_values[h, index] = value
        directions = list(calibrated[li].directions)
        directions[di] = DirectionLines(d.delta, d.c_min, new_values)
        calibrated[li] = replace(calibrated[li], directions=directions)
    return calibrated


def unread_operands(lines: LinesByKind, segments: list[tuple[int, int]]) -> list[int]:
    """The operands (indices into ``segments``) that no kept cross-attention line reads.

    A line of direction (1, Δ) reads key ``c`` at the first answer step (``c = j − Δ·i``
    at ``i = 0``); it reads an operand when that key lies in the operand's span. With a
    position-wise encoder (``retraining.encoder_diagonal``) the cross-attention lines are
    the decoder's only way to the input, so an operand that no line reads is invisible to
    the retrained model, and a task that needs it (addition needs both) cannot be learned.
    """
    cross = lines.get("cross")
    if cross is None or not segments:
        return []
    read = set()
    for layer in cross if isinstance(cross, list) else [cross]:
        for d in layer.directions:
            kept = torch.isfinite(d.values).any(dim=0).nonzero().flatten() + d.c_min
            for c in kept.tolist():
                read.update(k for k, (start, width) in enumerate(segments) if start <= c < start + width)
    return [k for k in range(len(segments)) if k not in read]


def only_first_verticals(lines: CalibratedLines, k: int) -> CalibratedLines:
    """The lines with the vertical ones (Δ = 0) on columns ``k`` and beyond dropped."""
    kept = []
    for d in lines.directions:
        if d.delta == 0:
            columns = torch.arange(d.values.shape[1]) + d.c_min
            d = DirectionLines(0, d.c_min, d.values.masked_fill(columns[None, :] >= k, float("-inf")))
        kept.append(d)
    return replace(lines, directions=kept)


def first_key_if_empty(lines: CalibratedLines) -> CalibratedLines:
    """The lines, or, where no head kept any, a vertical line on the first key in every head."""
    if any(torch.isfinite(d.values).any() for d in lines.directions):
        return lines
    heads = lines.directions[0].values.shape[0] if lines.directions else 1
    return replace(lines, directions=[*lines.directions, DirectionLines(0, 0, torch.zeros(heads, 1))])


def pack_lines(lines: LinesByKind) -> dict:
    """Lines -> plain tensors and data (checkpoint state, ``abc/lines.pt``)."""
    return {k: [x.state() for x in v] if isinstance(v, list) else v.state() for k, v in lines.items()}


def unpack_lines(state: dict) -> LinesByKind:
    """The inverse of :func:`pack_lines`."""
    return {k: [CalibratedLines.from_state(x) for x in v] if isinstance(v, list) else CalibratedLines.from_state(v)
            for k, v in state.items()}


class CalibratedBias(BiasSource):
    """Bias source (see :mod:`abc_lightning.model.transformer`) built from ABC's calibrated lines.

    Args:
        lines: per attention kind (``"cross"``, ``"decoder"``, ``"encoder"``), either one
            :class:`CalibratedLines` shared by every layer or a list with one per layer.
        soft: no −inf anywhere: cells off every kept line get the head's lowest kept value,
            so the bias steers the learned scores instead of cutting them off.

    A query row that would be closed everywhere (in decoder self-attention: everywhere at or
    below the diagonal, given the causal mask) is opened in full, like a transparent head;
    otherwise softmax over nothing would give NaN.
    """

    takes_keys = True

    def __init__(self, lines: dict[str, CalibratedLines | list[CalibratedLines]], soft: bool = False) -> None:
        super().__init__()
        self.lines, self.soft = lines, soft
        self.per_layer = any(isinstance(v, list) for v in lines.values())
        self._cache: dict[tuple, torch.Tensor] = {}

    def forward(self, kind: str, n_queries: int, n_keys: int, device: torch.device,
                layer: int | None = None, rows: slice | None = None,
                sizes: tuple[int, int] | None = None, keys: slice | None = None) -> torch.Tensor | None:
        entry = self.lines.get(kind)
        if entry is None:
            return None
        if isinstance(entry, list):
            entry = entry[layer if layer is not None else -1]
        key = (kind, id(entry), n_queries, n_keys, str(device))
        if key not in self._cache:  # built whole (lines are extended as one matrix), then sliced
            self._cache[key] = self.build(kind, entry, n_queries, n_keys).to(device)
        bias = self._cache[key] if rows is None else self._cache[key][:, rows]
        return bias if keys is None else bias[..., keys]

    def build(self, kind: str, lines: CalibratedLines, n_queries: int, n_keys: int) -> torch.Tensor:
        """``(H, q, k)`` bias for one kind and size."""
        bias = extend(lines, n_queries, n_keys)
        if self.soft:
            finite = torch.where(torch.isinf(bias), torch.full_like(bias, float("inf")), bias)
            floor = finite.flatten(1).amin(dim=1).clamp(max=0)[:, None, None]
            return torch.where(torch.isinf(bias), floor.expand_as(bias), bias)
        visible = bias
        if kind == "decoder":
            visible = bias.masked_fill(torch.ones(n_queries, n_keys, dtype=torch.bool).triu(1), float("-inf"))
        closed_rows = torch.isinf(visible).all(dim=-1, keepdim=True)
        return bias.masked_fill(closed_rows, 0.0)


def load_calibrated_bias(path: str | Path, soft: bool = False) -> CalibratedBias:
    """A :class:`CalibratedBias` from an ABC artifact ``abc/lines.pt`` (plain tensors only).

    The file is read with ``torch.load(weights_only=True)``: anything but tensors and plain
    data is refused with a CheckpointError, as are files that are not ABC lines.
    """
    state = load_plain(path, "ABC bias file")
    try:
        lines = unpack_lines(state)
    except (AttributeError, KeyError, TypeError) as exc:
        raise CheckpointError(f"{path} is not an ABC bias file (abc/lines.pt): {exc!r}") from None
    return CalibratedBias(lines, soft=soft)


def draw_bias_figures(lines_by_kind: dict, dm, out: Path) -> list[Path]:
    """Per-head heatmaps of calibrated biases at the training size and at 60 digits:
    ``<kind>_bias.png`` / ``<kind>_bias_60.png``, or ``<kind>_bias_layer<i>…`` per layer."""
    written = []
    for kind, entry in lines_by_kind.items():
        per_layer = isinstance(entry, list)
        for i, lines in enumerate(entry if per_layer else [entry]):
            stem = f"{kind}_bias_layer{i}" if per_layer else f"{kind}_bias"
            for tag, length in (("", None), ("_60", 60)):
                q, k = _size(dm, kind, length, lines)
                title = f"ABC {kind} bias{f', layer {i + 1}' if per_layer else ''}, {dm.task.name}, {q}×{k}"
                fig = bias_heatmaps(extend(lines, q, k), title)
                files.savefig(fig, out / f"{stem}{tag}.png", dpi=100)
                plt.close(fig)
                written.append(out / f"{stem}{tag}.png")
    return written


def _size(dm, kind: str, length: int | None, lines: CalibratedLines) -> tuple[int, int]:
    if length is None:
        return lines.m, lines.n
    ds = dm.length_set(length, 1, salt=0).data
    q, s = ds.tgt_in.shape[1], ds.src.shape[1]
    return {"cross": (q, s), "decoder": (q, q), "encoder": (s, s)}[kind]
