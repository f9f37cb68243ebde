"""Attention Bias Calibration as a phase-boundary callback.

One ``fit`` runs the phases: **interpolate** (a plain model trains until its in-distribution
validation accuracy reaches ``threshold`` on ``patience`` consecutive checks) → **calibrate**
(decode ``samples`` training inputs, average the chosen layer's attention per head, and turn
it into biases with :mod:`abc_lightning.biases.calibration`) → **retrain** (the bias is
installed in every layer and training goes on until the in-distribution accuracy is back at
``threshold`` for ``patience`` checks, then fit stops).

The calibrated lines, the phase and its timings are part of the callback's checkpoint state,
so ``fit --ckpt_path`` resumes in any phase. They are also written next to the run:
``abc/lines.pt`` (plain tensors), ``abc/phases.json`` and per-head heatmaps
``abc/<kind>_bias.png`` at the training size and at 60 digits. For ``test``/``predict`` the
callback installs the calibrated lines that Lightning restores from the evaluated checkpoint.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Literal

import lightning as L
import numpy as np
import torch
from lightning.pytorch.utilities import rank_zero_only

from abc_lightning.biases.abc import CalibratedBias
from abc_lightning.biases.calibration import DEFAULT_DIRECTIONS, CalibratedLines, DirectionLines, calibrate, extend
from abc_lightning.callbacks.training import run_dir
from abc_lightning.errors import ConfigError

KINDS = ("cross", "decoder", "encoder")


def average_attention(model, src: torch.Tensor, steps: int, source: str,
                      batch_size: int = 256) -> dict[str, list[torch.Tensor]]:
    """Greedy-decode ``steps`` tokens for ``src`` once, and average the attention of every
    kind and layer over the samples, through the model's attention-map API:
    ``{kind: [(H, q, k) per layer]}``."""
    total: dict[str, list[torch.Tensor]] = {}
    count = 0
    for start in range(0, src.shape[0], batch_size):
        chunk = src[start : start + batch_size]
        for kind, maps in model.attention_on_own_output(chunk, steps).items():
            sums = [(m.scores if source == "scores" else m.weights).sum(0) for m in maps]
            total[kind] = sums if kind not in total else [t + a for t, a in zip(total[kind], sums)]
        count += chunk.shape[0]
    return {kind: [t / count for t in layers] for kind, layers in total.items()}


def reinitialize(pl_module, trainer, seed: int) -> None:
    """Fresh weights for every module that can reset itself, and empty optimizer state."""
    torch.manual_seed(seed)
    for module in pl_module.model.modules():
        if module is not pl_module.model and hasattr(module, "reset_parameters"):
            module.reset_parameters()
    for optimizer in trainer.optimizers:
        optimizer.state.clear()


class AttentionBiasCalibration(L.Callback):
    """ABC (Duan, Shi and Xu, appendix D and Algorithm 1).

    Args:
        threshold: in-distribution accuracy (``val/acc``) that counts as interpolating.
        patience: consecutive validations at ``threshold`` before calibrating, and again
            before stopping the retraining.
        samples: size of S_gen, the random subset of training inputs that is decoded.
        layer: decoder layer whose attention is calibrated (−1: the last).
        kinds: attention kinds to calibrate (``cross``, ``decoder``; ``encoder`` possible).
        directions: Δ of the directions (1, Δ) searched: 1 diagonal, −1 anti-diagonal, 0 vertical.
        self_directions: directions for decoder/encoder self-attention (None: ``directions``).
            An anti-diagonal in self-attention ties step i to step c − i, which no recurrence
            uses; with the lenient κ_self such lines pass on short matrices and, extended,
            open cells far from the diagonal.
        encoder_directions: directions for encoder self-attention when ``kinds`` includes
            ``encoder`` (None: ``self_directions``). ``[1]`` keeps only diagonals, i.e.
            relative offsets: a vertical line there is a fixed input column, which a longer
            input fills with a different token.
        retrain_patience: consecutive validations at ``threshold`` that end the retraining.
        vertical: ``left`` (the paper: vertical lines keep their column) or ``nearest``
            (each vertical line follows the nearer edge of the input, or with ``align:
            segments`` the nearer edge of its operand; see CalibratedLines).
        kappa_cross, kappa_self: drop-off factors κ (paper: 4.5 and 0.87); None keeps every line.
        align: how cross-attention lines move to a longer input: ``corner`` (the paper: every
            anti-diagonal by N − n, top-right corners aligned) or ``segments`` (beyond the
            paper: each line by the growth of the operands at or before it, so a line that
            reads addition's first operand follows that operand; see
            :mod:`abc_lightning.biases.calibration`).
        encoder_align: with ``align: segments`` and ``encoder`` in ``kinds``: encoder lines
            keep their relative offsets at any length (``relative``), or are aligned by
            operand in rows and columns (``segments``; see CalibratedLines.square).
        lineless: a head in which no line passed the drop-off is ``open`` (transparent, the
            paper) or gets the ``union`` of the lines the other heads of that layer and kind
            kept (beyond the paper: a transparent head attends freely and can learn
            position-bound attention that does not extrapolate).
        source: ``scores`` (pre-softmax q·kᵀ/√d, the paper's definition) or ``weights``
            (post-softmax, the authors' code).
        reduce: ``mean`` along lines (the paper) or ``sum`` (the authors' code).
        per_layer: calibrate every decoder layer from its own attention instead of using
            one layer's bias in all layers.
        soft: no −inf cut-offs: the bias only steers the learned scores.
        reinitialize: retrain from freshly initialized weights (and a cleared optimizer
            state) under the calibrated bias, instead of fine-tuning the interpolating model.
        retrain_dropout: dropout probability for the retraining phase (None keeps the
            model's). Lets a dropout-free interpolating model (or one warm-started with
            ``--model.init_from``) hand over to a retraining with the paper's dropout.
        retrain_lr: learning rate for the retraining phase (None keeps the model's ``lr``).
        anneal: multiply the retraining learning rate by this factor once the retraining
            first reaches ``threshold``; the ``retrain_patience`` validations are then
            counted at the lower rate (None: one rate throughout). Beyond the paper.
        encoder_diagonal: while retraining, each encoder token attends only to itself (a
            calibrated-lines bias with the main diagonal alone), so the encoder is
            position-wise and the decoder reads operands only through the calibrated
            cross-attention lines. Beyond the paper: an open encoder mixes the whole input,
            and lines calibrated from it tie operands at the training distance.
        retrain_positional: ``keep`` the model's positional scheme while retraining (the
            paper), or ``none``: after calibration the model ignores it (no absolute
            positions, no positional bias), so the calibrated bias is the only positional
            signal. Beyond the paper; in the training data every operand digit sits at the
            same absolute position, which a model with absolute positions can rely on.
        seed: seeds the choice of S_gen.
    """

    def __init__(
        self,
        threshold: float = 1.0,
        patience: int = 2,
        samples: int = 512,
        layer: int = -1,
        kinds: list[str] = ["cross", "decoder"],  # noqa: B006
        directions: list[int] = list(DEFAULT_DIRECTIONS),  # noqa: B006
        self_directions: list[int] | None = None,
        encoder_directions: list[int] | None = None,
        retrain_patience: int = 3,
        vertical: Literal["left", "nearest"] = "left",
        kappa_cross: float | None = 4.5,
        kappa_self: float | None = 0.87,
        align: Literal["corner", "segments"] = "corner",
        encoder_align: Literal["relative", "segments"] = "relative",
        lineless: Literal["open", "union"] = "open",
        source: Literal["scores", "weights"] = "scores",
        reduce: Literal["mean", "sum"] = "mean",
        per_layer: bool = False,
        soft: bool = False,
        reinitialize: bool = False,
        retrain_dropout: float | None = None,
        retrain_positional: Literal["keep", "none"] = "keep",
        retrain_lr: float | None = None,
        anneal: float | None = None,
        encoder_diagonal: bool = False,
        seed: int = 0,
    ) -> None:
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            raise ConfigError(f"ABC kinds must be among {KINDS}, got {bad}")
        if samples < 1 or patience < 1:
            raise ConfigError(f"ABC needs samples >= 1 and patience >= 1, got {samples}, {patience}")
        if source not in ("scores", "weights") or reduce not in ("mean", "sum"):
            raise ConfigError(f"ABC source must be scores|weights and reduce mean|sum, got {source}, {reduce}")
        self.threshold, self.patience, self.samples, self.layer = threshold, patience, samples, layer
        self.kinds, self.directions = list(kinds), [int(d) for d in directions]
        self.self_directions = self.directions if self_directions is None else [int(d) for d in self_directions]
        self.encoder_directions = (self.self_directions if encoder_directions is None
                                   else [int(d) for d in encoder_directions])
        if lineless not in ("open", "union"):
            raise ConfigError(f"ABC lineless must be open|union, got {lineless!r}")
        if align not in ("corner", "segments"):
            raise ConfigError(f"ABC align must be corner|segments, got {align!r}")
        if encoder_align not in ("relative", "segments"):
            raise ConfigError(f"ABC encoder_align must be relative|segments, got {encoder_align!r}")
        self.retrain_patience, self.vertical, self.lineless, self.align = retrain_patience, vertical, lineless, align
        self.encoder_align = encoder_align
        self.kappa = {"cross": kappa_cross, "decoder": kappa_self, "encoder": kappa_self}
        self.source, self.reduce, self.per_layer, self.soft, self.seed = source, reduce, per_layer, soft, seed
        if retrain_dropout is not None and not 0.0 <= retrain_dropout < 1.0:
            raise ConfigError(f"ABC retrain_dropout must be in [0, 1), got {retrain_dropout}")
        if retrain_positional not in ("keep", "none"):
            raise ConfigError(f"ABC retrain_positional must be keep|none, got {retrain_positional!r}")
        self.reinitialize, self.retrain_dropout, self.retrain_positional = reinitialize, retrain_dropout, retrain_positional
        if retrain_lr is not None and not retrain_lr > 0:
            raise ConfigError(f"ABC retrain_lr must be > 0, got {retrain_lr}")
        if anneal is not None and not 0.0 < anneal <= 1.0:
            raise ConfigError(f"ABC anneal must be in (0, 1], got {anneal}")
        self.retrain_lr, self.anneal, self.annealed = retrain_lr, anneal, False
        if encoder_diagonal and "encoder" in kinds:
            raise ConfigError("ABC encoder_diagonal replaces the encoder's calibration; drop 'encoder' from kinds")
        self.encoder_diagonal = encoder_diagonal
        self.phase = "interpolate"
        self.streak = 0
        self.lines: dict[str, CalibratedLines | list[CalibratedLines]] = {}
        self.seconds = {"interpolate": 0.0, "calibrate": 0.0, "retrain": 0.0}
        self._mark = 0.0

    # ---- phases ---------------------------------------------------------------------
    def on_fit_start(self, trainer, pl_module) -> None:
        self._mark = time.perf_counter()
        if self.lines:
            self.install(pl_module)
        if self.phase != "interpolate":
            self.set_retraining(trainer, pl_module)

    def set_retraining(self, trainer, pl_module) -> None:
        """The retraining phase's dropout, positions and learning rate (at the phase
        boundary, and again on a resume past it)."""
        self.set_dropout(pl_module)
        self.set_positional(pl_module)
        self.set_lr(trainer, pl_module)

    def set_lr(self, trainer, pl_module) -> None:
        """Apply ``retrain_lr`` and ``anneal`` (the retraining phase) to every optimizer."""
        if self.retrain_lr is None and self.anneal is None:
            return
        lr = (pl_module.hparams.lr if self.retrain_lr is None else self.retrain_lr) * (self.anneal if self.annealed else 1.0)
        for optimizer in trainer.optimizers:
            for group in optimizer.param_groups:
                group["lr"] = lr
        for config in trainer.lr_scheduler_configs:  # a warm-up schedule scales from its base rates
            if hasattr(config.scheduler, "base_lrs"):
                config.scheduler.base_lrs = [lr] * len(config.scheduler.base_lrs)

    def set_positional(self, pl_module) -> None:
        """Apply ``retrain_positional`` (the retraining phase and after)."""
        if self.retrain_positional == "none":
            pl_module.model.use_positional = False

    def set_dropout(self, pl_module) -> None:
        """Apply ``retrain_dropout`` to every dropout module (the retraining phase)."""
        if self.retrain_dropout is None:
            return
        for module in pl_module.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = self.retrain_dropout

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking or self.phase == "done":
            return
        self._tick()
        value = trainer.callback_metrics.get("val/acc")
        self.streak = self.streak + 1 if value is not None and float(value) >= self.threshold else 0
        if self.phase == "retrain" and self.streak and self.anneal is not None and not self.annealed:
            self.annealed, self.streak = True, 0  # the patience is counted at the annealed rate
            self.set_lr(trainer, pl_module)
        if self.streak < (self.patience if self.phase == "interpolate" else self.retrain_patience):
            return
        self.streak = 0
        if self.phase == "interpolate":
            start = time.perf_counter()
            # Every rank calibrates from the same S_gen and weights; rank 0's lines are used
            # everywhere so that GPU non-determinism cannot give ranks different biases.
            self.lines = trainer.strategy.broadcast(self.calibrate(trainer, pl_module), src=0)
            self.install(pl_module)
            if self.reinitialize:
                reinitialize(pl_module, trainer, self.seed)
            self.set_retraining(trainer, pl_module)
            self.seconds["calibrate"] = round(time.perf_counter() - start, 2)
            self.phase = "retrain"
            self._mark = time.perf_counter()
            self.save_artifacts(trainer)
        elif self.phase == "retrain":
            self.phase = "done"
            trainer.should_stop = True
            self.save_artifacts(trainer)
        if trainer.logger is not None:
            trainer.logger.log_metrics({"abc/phase": float(("interpolate", "retrain", "done").index(self.phase)),
                                        **{f"abc/{k}_seconds": v for k, v in self.seconds.items()}},
                                       step=trainer.global_step)

    def on_fit_end(self, trainer, pl_module) -> None:
        self._tick()
        self.save_artifacts(trainer)

    def _tick(self) -> None:
        now = time.perf_counter()
        if self.phase in ("interpolate", "retrain"):
            self.seconds[self.phase] = round(self.seconds[self.phase] + now - self._mark, 2)
        self._mark = now

    # ---- calibration ----------------------------------------------------------------
    def calibrate(self, trainer, pl_module) -> dict:
        """Decode S_gen, average attention per head, and calibrate each kind (and layer)."""
        dm = trainer.datamodule
        train = dm._train.data
        rng = np.random.default_rng(self.seed)
        idx = torch.as_tensor(rng.choice(train.src.shape[0], size=min(self.samples, train.src.shape[0]), replace=False))
        src = train.src[idx].long().to(pl_module.device)
        steps = train.tgt_out.shape[1]
        model = pl_module.model
        was_training = model.training
        model.eval()
        try:
            averaged = average_attention(model, src, steps, self.source)
            lines = {}
            for kind in self.kinds:
                n_layers = len(model.encoder) if kind == "encoder" else len(model.decoder)
                layer_ids = range(n_layers) if self.per_layer else [self.layer]
                calibrated = []
                for li in layer_ids:
                    a_bar = averaged[kind][li].cpu()
                    # cells the causal mask closes are not attention: they belong to no line
                    valid = torch.ones(a_bar.shape[1:], dtype=torch.bool).tril() if kind == "decoder" else None
                    directions = {"cross": self.directions, "decoder": self.self_directions,
                                  "encoder": self.encoder_directions}[kind]
                    # segment alignment concerns input positions: cross-attention keys, and
                    # (encoder_align: segments) both axes of encoder self-attention
                    aligned = kind == "cross" or (kind == "encoder" and self.encoder_align == "segments")
                    segments = (dm.task.growing_segments(src.shape[1], dm.aligned)
                                if aligned and self.align == "segments" else None)
                    calibrated.append(calibrate(a_bar, directions, None if self.soft else self.kappa[kind],
                                                self.reduce, valid, self.vertical, self.lineless, segments,
                                                square=kind == "encoder" and segments is not None))
                lines[kind] = calibrated if self.per_layer else calibrated[0]
            if self.encoder_diagonal:
                heads = model.heads
                lines["encoder"] = CalibratedLines(1, 1, [DirectionLines(1, 0, torch.zeros(heads, 1))])
        finally:
            model.train(was_training)
        return lines

    def install(self, pl_module) -> None:
        pl_module.model.install_bias("abc", CalibratedBias(self.lines, soft=self.soft))

    # ---- test / predict / validate: Lightning restores this callback's state from the
    # checkpoint being evaluated (after setup), so install whatever it brought back.
    def apply_to(self, pl_module, datamodule=None) -> None:
        """Install the calibrated bias (and the retraining's positions) that this callback's
        state holds, as restored from a checkpoint."""
        if self.lines and "abc" not in pl_module.model.bias_sources:
            self.install(pl_module)
        if self.phase != "interpolate":
            self.set_positional(pl_module)

    def _reinstall(self, trainer, pl_module) -> None:
        self.apply_to(pl_module)

    on_test_start = on_predict_start = on_validation_start = _reinstall

    # ---- checkpoint state -----------------------------------------------------------
    def state_dict(self) -> dict:
        def pack(v):
            return [x.state() for x in v] if isinstance(v, list) else v.state()

        return {"phase": self.phase, "streak": self.streak, "annealed": self.annealed, "seconds": dict(self.seconds),
                "lines": {k: pack(v) for k, v in self.lines.items()}}

    def load_state_dict(self, state_dict: dict) -> None:
        def unpack(v):
            return [CalibratedLines.from_state(x) for x in v] if isinstance(v, list) else CalibratedLines.from_state(v)

        self.phase = state_dict.get("phase", "interpolate")
        self.streak = state_dict.get("streak", 0)
        self.annealed = state_dict.get("annealed", False)
        self.seconds.update(state_dict.get("seconds", {}))
        self.lines = {k: unpack(v) for k, v in state_dict.get("lines", {}).items()}

    # ---- artifacts ------------------------------------------------------------------
    @rank_zero_only
    def save_artifacts(self, trainer) -> None:
        out = run_dir(trainer) / "abc"
        out.mkdir(parents=True, exist_ok=True)
        (out / "phases.json").write_text(json.dumps({"phase": self.phase, "seconds": self.seconds}, indent=2))
        if not self.lines:
            return
        tmp = out / "lines.pt.tmp"
        torch.save(self.state_dict()["lines"], tmp)
        tmp.replace(out / "lines.pt")
        if not (out / "cross_bias.png").exists() and not (out / "cross_bias_layer0.png").exists():
            draw_bias_figures(self.lines, trainer.datamodule, out)


def draw_bias_figures(lines_by_kind: dict, dm, out: Path) -> list[Path]:
    """Per-head heatmaps of calibrated biases at the training size and at 60 digits:
    ``<kind>_bias.png`` / ``<kind>_bias_60.png``, or ``<kind>_bias_layer<i>…`` per layer."""
    import matplotlib.pyplot as plt

    from abc_lightning.plotting import bias_heatmaps

    written = []
    for kind, entry in lines_by_kind.items():
        per_layer = isinstance(entry, list)
        for i, lines in enumerate(entry if per_layer else [entry]):
            stem = f"{kind}_bias_layer{i}" if per_layer else f"{kind}_bias"
            for tag, length in (("", None), ("_60", 60)):
                q, k = _size(dm, kind, length, lines)
                title = f"ABC {kind} bias{f', layer {i + 1}' if per_layer else ''}, {dm.task.name}, {q}×{k}"
                fig = bias_heatmaps(extend(lines, q, k), title)
                fig.savefig(out / f"{stem}{tag}.png", dpi=100)
                plt.close(fig)
                written.append(out / f"{stem}{tag}.png")
    return written


def _size(dm, kind: str, length: int | None, lines: CalibratedLines) -> tuple[int, int]:
    if length is None:
        return lines.m, lines.n
    ds = dm.length_set(length, 1, salt=0).data
    q, s = ds.tgt_in.shape[1], ds.src.shape[1]
    return {"cross": (q, s), "decoder": (q, q), "encoder": (s, s)}[kind]
