"""ABC's options in four groups, the named presets they start from, and their validation.

A config names a preset and gives only what differs from it::

    bias:
      class_path: AttentionBiasCalibration
      init_args:
        preset: project
        retraining: {dropout: 0.1}

Every field left out (``None``) comes from the preset; validation runs once, on the result.
Where ``None`` would be a real setting it is spelled out: κ ``off`` keeps every line, a
retraining ``dropout``/``lr`` of ``keep`` keeps the model's, ``anneal: off`` keeps one rate.

- ``paper``: the settings of the paper (Duan, Shi and Xu, appendix D and Algorithm 1):
  pre-softmax scores averaged along lines, κ 4.5 / 0.87, one layer's bias in every layer,
  the interpolating model fine-tuned under the bias.
- ``project``: the one option set that Table 3 runs, unchanged, on successor, addition,
  N×1 and parity (and on every other task): post-softmax weights summed along lines as in
  the authors' code, κ_cross 3.0 and κ_self 0.3, a bias per layer, cross-attention lines
  along anti-diagonals and verticals only (every task writes its answer least significant
  digit first, so a diagonal reads the input backwards), lines that follow the operand they
  read (a vertical keeps to its operand's nearer end), decoder lines along diagonals with
  verticals on the start token only, a layer without lines closed to its first key (not
  opened), a growing operand that no line above κ reads given its best line below κ
  (``cover``), calibration once the interpolation has held 99% for 5 validations, and
  retraining from fresh weights without dropout at 2e-3 along a cosine to 0 for 0.9 of the
  interpolation's steps, with a position-wise encoder and no positional signal but the
  bias (its ``retrain_patience`` 30 and ``anneal`` 0.1 apply only under ``budget:
  patience``). ``configs/abc.yaml`` adds what is not the bias's: interpolation at 2e-3 after
  100 warmup steps, and a tenth of the training rows carry-rich.
  Each option's docstring below says what it does and which departure from the paper it is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import Literal

from abc_lightning.errors import ConfigError
from abc_lightning.model.attention import KINDS


@dataclass
class Phases:
    """When the phases change.

    Args:
        threshold: in-distribution accuracy (``val/acc``) that counts as interpolating.
        patience: consecutive validations at ``threshold`` before calibrating.
        retrain_patience: consecutive validations at ``threshold`` that end the retraining.
    """

    threshold: float | None = None
    patience: int | None = None
    retrain_patience: int | None = None


@dataclass
class Lines:
    """How lines are found in the averaged attention (line detection).

    Args:
        samples: size of S_gen, the random subset of training inputs that is decoded.
        layer: decoder layer whose attention is calibrated (−1: the last).
        per_layer: calibrate every layer from its own attention instead of using ``layer``'s
            bias in all layers.
        kinds: attention kinds to calibrate (``cross``, ``decoder``, ``encoder``).
        directions: Δ of the directions (1, Δ) searched in cross-attention: 1 diagonal,
            −1 anti-diagonal, 0 vertical.
        self_directions: the same for decoder self-attention. An anti-diagonal there ties
            step i to step c − i, which no recurrence uses.
        self_verticals: in decoder self-attention, keep vertical lines only on the first
            this many steps (``all``: on any step). Step 0 is the start token, the same in
            every answer; a later step is a fixed early output, which at training lengths
            is always a few steps behind the query and at test lengths far behind it.
        encoder_directions: the same for encoder self-attention; ``[1]`` keeps relative
            offsets only (a vertical line is a fixed input column, which a longer input
            fills with another token).
        source: ``scores`` (pre-softmax q·kᵀ/√d, the paper's definition) or ``weights``
            (post-softmax, the authors' code).
        reduce: ``mean`` along lines (the paper) or ``sum`` (the authors' code).
        kappa_cross, kappa_self: drop-off factors κ; ``off`` keeps every line.
        lineless: a head in which no line passed is ``open`` (transparent, the paper) or
            gets the ``union`` of the lines its layer's other heads kept.
        vertical: ``left`` (the paper: vertical lines keep their column) or ``nearest``
            (each follows the nearer edge of the input, or of its operand).
        empty_layer: a layer in which no head kept a line is ``open`` (transparent, as the
            paper's lineless heads) or ``first``: every head attends to the first key alone
            (the input's start token, or the decoder's), so the layer reads nothing whose
            make-up changes with the length. An open cross-attention layer averages over the
            whole input: over 600 digits of 9s that average looks like an all-9s input, and
            a successor model wrote an extra carry digit on top of 299…9 + 1.
        cover: ``off``, or ``operands``: a growing operand that no kept cross-attention line
            reads (at the first answer step) gets the one line, among those that start in
            it, with the highest z-score over every layer, head and direction, even below
            κ. With a position-wise encoder (``retraining.encoder_diagonal``) those lines
            are the decoder's only way to the input; an addition seed whose interpolating
            model read its first operand through the encoder calibrated lines to the
            second alone and could not learn the task again.
    """

    samples: int | None = None
    layer: int | None = None
    per_layer: bool | None = None
    kinds: list[str] | None = None
    directions: list[int] | None = None
    self_directions: list[int] | None = None
    self_verticals: int | Literal["all"] | None = None
    encoder_directions: list[int] | None = None
    source: Literal["scores", "weights"] | None = None
    reduce: Literal["mean", "sum"] | None = None
    kappa_cross: float | Literal["off"] | None = None
    kappa_self: float | Literal["off"] | None = None
    lineless: Literal["open", "union"] | None = None
    vertical: Literal["left", "nearest"] | None = None
    empty_layer: Literal["open", "first"] | None = None
    cover: Literal["off", "operands"] | None = None

    def directions_for(self, kind: str) -> list[int]:
        return {"cross": self.directions, "decoder": self.self_directions, "encoder": self.encoder_directions}[kind]

    def kappa(self, kind: str) -> float | None:
        """κ for an attention kind; None keeps every line."""
        value = self.kappa_cross if kind == "cross" else self.kappa_self
        return None if value == "off" else value


@dataclass
class Extension:
    """How calibrated lines are extended to longer inputs.

    Args:
        align: ``corner`` (the paper: every anti-diagonal moves by N − n, top-right corners
            aligned) or ``segments`` (each line moves by the growth of the operands at or
            before it, so a line that reads addition's first operand follows that operand).
        encoder_align: with ``segments`` and ``encoder`` among the kinds: encoder lines keep
            their relative offsets (``relative``) or are aligned by operand (``segments``).
        soft: no −inf cut-offs: the bias only steers the learned scores.
    """

    align: Literal["corner", "segments"] | None = None
    encoder_align: Literal["relative", "segments"] | None = None
    soft: bool | None = None


@dataclass
class Retraining:
    """What changes when retraining under the calibrated bias begins.

    Args:
        reinitialize: retrain from fresh weights (and a cleared optimizer state) instead of
            fine-tuning the interpolating model.
        dropout: dropout probability while retraining, or ``keep`` the model's.
        lr: learning rate while retraining, or ``keep`` the model's.
        anneal: multiply the retraining rate by this once the retraining first reaches the
            threshold, and count ``retrain_patience`` at the lower rate; ``off`` keeps one rate.
        positional: ``keep`` the model's positional scheme (the paper), or ``none``: the
            calibrated bias is the only positional signal from then on.
        encoder_diagonal: each encoder token attends only to itself, so the decoder reads
            operands only through the calibrated cross-attention lines (replaces calibrating
            the encoder).
        budget: how long retraining lasts. ``patience``: until the threshold has held
            ``phases.retrain_patience`` validations (after ``anneal``). A number x: x times
            the steps the interpolation took (whole validation intervals, at least one),
            the rate decaying from the retraining's to zero along a cosine (``anneal`` is
            then unused); the fit stops at the validation that ends it.
    """

    reinitialize: bool | None = None
    dropout: float | Literal["keep"] | None = None
    lr: float | Literal["keep"] | None = None
    anneal: float | Literal["off"] | None = None
    positional: Literal["keep", "none"] | None = None
    encoder_diagonal: bool | None = None
    budget: float | Literal["patience"] | None = None

    def rate(self, base: float, done: float, annealed: bool) -> float | None:
        """The retraining's learning rate, from the model's own ``base``: along a cosine to 0
        over a step budget (``done``: the share of it trained), or annealed once the threshold
        is first held; None where it keeps the model's own schedule."""
        if self.lr == "keep" and self.anneal == "off" and self.budget == "patience":
            return None
        lr = base if self.lr == "keep" else self.lr
        if self.budget != "patience":
            return lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, max(0.0, done))))
        return lr * (self.anneal if annealed else 1.0)


@dataclass
class Options:
    """A whole ABC option set: the four groups, every field filled in."""

    phases: Phases = field(default_factory=Phases)
    lines: Lines = field(default_factory=Lines)
    extension: Extension = field(default_factory=Extension)
    retraining: Retraining = field(default_factory=Retraining)


PAPER = Options(
    Phases(threshold=1.0, patience=2, retrain_patience=3),
    Lines(samples=512, layer=-1, per_layer=False, kinds=["cross", "decoder"], directions=[1, -1, 0],
          self_directions=[1, -1, 0], self_verticals="all", encoder_directions=[1, -1, 0], source="scores",
          reduce="mean", kappa_cross=4.5, kappa_self=0.87, lineless="open", vertical="left", empty_layer="open",
          cover="off"),
    Extension(align="corner", encoder_align="relative", soft=False),
    Retraining(reinitialize=False, dropout="keep", lr="keep", anneal="off", positional="keep", encoder_diagonal=False,
              budget="patience"),
)

PROJECT = Options(
    Phases(threshold=0.99, patience=5, retrain_patience=30),
    Lines(samples=512, layer=-1, per_layer=True, kinds=["cross", "decoder"], directions=[-1, 0],
          self_directions=[1, 0], self_verticals=1, encoder_directions=[1], source="weights", reduce="sum",
          kappa_cross=3.0, kappa_self=0.3, lineless="union", vertical="nearest", empty_layer="first",
          cover="operands"),
    Extension(align="segments", encoder_align="relative", soft=False),
    Retraining(reinitialize=True, dropout="keep", lr=0.002, anneal=0.1, positional="none", encoder_diagonal=True,
               budget=0.9),
)

PRESETS: dict[str, Options] = {"paper": PAPER, "project": PROJECT}


def _fill(given, default):
    if given is None:
        return default
    return replace(default, **{f.name: getattr(given, f.name) for f in fields(given) if getattr(given, f.name) is not None})


def resolve(preset: str, phases: Phases | None = None, lines: Lines | None = None,
            extension: Extension | None = None, retraining: Retraining | None = None) -> Options:
    """The preset with the given groups' set fields on top, validated."""
    if preset not in PRESETS:
        raise ConfigError(f"ABC preset must be one of {list(PRESETS)}, got {preset!r}")
    base = PRESETS[preset]
    options = Options(_fill(phases, base.phases), _fill(lines, base.lines), _fill(extension, base.extension),
                    _fill(retraining, base.retraining))
    validate(options)
    return options


def validate(r: Options) -> None:
    """ConfigError for the first setting that cannot work."""
    p, ln, e, t = r.phases, r.lines, r.extension, r.retraining
    checks = [
        (0.0 <= p.threshold <= 1.0, f"phases.threshold must be in [0, 1], got {p.threshold}"),
        (p.patience >= 1 and p.retrain_patience >= 1,
         f"phases.patience and retrain_patience must be >= 1, got {p.patience}, {p.retrain_patience}"),
        (ln.samples >= 1, f"lines.samples must be >= 1, got {ln.samples}"),
        (not [k for k in ln.kinds if k not in KINDS], f"lines.kinds must be among {KINDS}, got {ln.kinds}"),
        (all(d in (1, -1, 0) for k in KINDS for d in ln.directions_for(k)),
         "lines.directions, self_directions and encoder_directions hold Δ in {1, -1, 0}"),
        (ln.empty_layer in ("open", "first"), f"lines.empty_layer must be open or first, got {ln.empty_layer!r}"),
        (ln.cover in ("off", "operands"), f"lines.cover must be off or operands, got {ln.cover!r}"),
        (ln.self_verticals == "all" or (isinstance(ln.self_verticals, int) and ln.self_verticals >= 0),
         f"lines.self_verticals must be an integer >= 0 or all, got {ln.self_verticals!r}"),
        (all(ln.kappa(k) is None or ln.kappa(k) >= 0 for k in ("cross", "decoder")),
         f"lines.kappa_cross and kappa_self must be >= 0 or off, got {ln.kappa_cross}, {ln.kappa_self}"),
        (t.dropout == "keep" or 0.0 <= t.dropout < 1.0, f"retraining.dropout must be in [0, 1) or keep, got {t.dropout}"),
        (t.lr == "keep" or t.lr > 0, f"retraining.lr must be > 0 or keep, got {t.lr}"),
        (t.anneal == "off" or 0.0 < t.anneal <= 1.0, f"retraining.anneal must be in (0, 1] or off, got {t.anneal}"),
        (t.budget == "patience" or (isinstance(t.budget, (int, float)) and t.budget > 0),
         f"retraining.budget must be patience or a number > 0, got {t.budget!r}"),
        (not (t.encoder_diagonal and "encoder" in ln.kinds),
         "retraining.encoder_diagonal replaces the encoder's calibration; drop 'encoder' from lines.kinds"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(f"ABC {message}")
