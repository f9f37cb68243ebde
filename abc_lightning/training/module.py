"""The LightningModule: loss, per-length metrics, optimizer. It knows nothing of how biases are built."""

from __future__ import annotations

import math
from functools import partial

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from abc_lightning import vocab
from abc_lightning.runs.checkpoints import check_compatible, load_checkpoint
from abc_lightning.errors import CheckpointError, ConfigError
from abc_lightning.evaluation import ExactMatch, FamilyExactMatch, decode_batch, wrong_answer_texts
from abc_lightning.model.positional import PositionalScheme
from abc_lightning.model.position_index import PositionIndex
from abc_lightning.model.transformer import Seq2SeqTransformer


class ArithmeticTransformer(L.LightningModule):
    """Encoder-decoder trained with teacher forcing, evaluated by greedy exact match per length.

    Model sizes default to the papers'; the CPU configs use smaller ones.
    ``positional`` and ``position_index`` are chosen by class name on the CLI, e.g.
    ``--model.positional=NoPE --model.position_index=CyclicIndex --model.position_index.period=3``.

    ``init_from`` warm-starts a new fit from the weights of another checkpoint (loaded with
    ``weights_only=True``; optimizer, step counter and callback state are not taken). ABC uses
    it to calibrate from a model that already interpolates. A resumed fit (``--ckpt_path``)
    ignores it.

    The learning rate: Adam at ``lr``, after a linear warmup over ``warmup_steps``;
    ``lr_schedule`` ``constant`` keeps it there, ``cosine`` and ``linear`` decay it to
    ``min_lr_ratio × lr`` at the end of the fit's step budget (``trainer.max_steps``, or
    ``max_epochs × limit_train_batches``), one update per optimizer step.

    ``encoder_attention_drop``: in training, the probability that an input's encoder
    self-attention output is left out of the encoder's residual stream (0, the default,
    leaves the model as it was).
    """

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
        lr: float = 1e-4,
        betas: tuple[float, float] = (0.9, 0.98),
        eps: float = 1e-9,
        warmup_steps: int = 0,
        lr_schedule: str = "constant",
        min_lr_ratio: float = 0.0,
        init_from: str | None = None,
        encoder_attention_drop: float = 0.0,
    ) -> None:
        super().__init__()
        check_optimizer(lr, betas, eps, warmup_steps, lr_schedule, min_lr_ratio)
        self.save_hyperparameters(ignore=["positional", "position_index"])
        self.model = Seq2SeqTransformer(d_model, heads, encoder_layers, decoder_layers, feedforward, dropout,
                                        positional, position_index, encoder_attention_drop=encoder_attention_drop)
        self.val_metrics = nn.ModuleDict()
        self.test_metrics = nn.ModuleDict()
        self.worst_failures: dict[tuple[int, str], dict] = {}  # the first wrong answer per (length, family)
        self._init_weights: tuple[str, dict] | None = None

    def setup(self, stage: str) -> None:
        dm = self.trainer.datamodule if self._trainer is not None else None
        if dm is None:
            return
        self.model.check_length(dm.max_tokens(stage))
        if stage == "fit" and self.hparams.get("init_from") and self.trainer.ckpt_path is None:
            self.warm_start()
        self.val_metrics = nn.ModuleDict({str(n): ExactMatch() for n in ["val", *dm.val_lengths]})
        self.test_metrics = nn.ModuleDict({str(n): ExactMatch() for n in dm.test_lengths})
        for ds in dm._test if stage == "test" else []:
            if hasattr(ds, "families"):
                self.test_metrics[ds.tag] = FamilyExactMatch(ds.families)
        self.worst_failures = {}

    # ---- training -------------------------------------------------------------------
    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        return self.model(src, tgt_in).logits

    def loss(self, batch: dict) -> torch.Tensor:
        return self._loss_and_logits(batch)[0]

    def _loss_and_logits(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self(batch["src"], batch["tgt_in"])
        return F.cross_entropy(logits.flatten(0, 1), batch["tgt_out"].flatten(), ignore_index=vocab.PAD), logits

    def training_step(self, batch: dict, batch_idx: int) -> dict:
        """The loss, and which rows had a wrong token under teacher forcing (``wrong``, read by
        :class:`~abc_lightning.callbacks.ErrorReplay`)."""
        loss, logits = self._loss_and_logits(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["src"].shape[0])
        target = batch["tgt_out"]
        wrong = ((logits.detach().argmax(-1) != target) & (target != vocab.PAD)).any(dim=1)
        return {"loss": loss, "wrong": wrong}

    # ---- evaluation -----------------------------------------------------------------
    def _evaluate(self, batch: dict, stage: str, metrics: nn.ModuleDict) -> None:
        tag, n = batch["tag"], batch["src"].shape[0]
        # A worst-case set is decoded whole, to show its wrong answers; the random sets stop
        # once every row is wrong (the same exact match, fewer steps for a model that fails).
        worst = "family" in batch
        predicted = self.model.generate(batch["src"], steps=batch["tgt_out"].shape[1],
                                        target=None if worst else batch["tgt_out"])
        metric = metrics[str(tag)]
        if worst:  # logged per family at the epoch's end
            metric.update(predicted, batch["tgt_out"], batch["family"])
            self._note_failures(batch, predicted, metric.families)
            return
        metric.update(predicted, batch["tgt_out"])
        name = f"{stage}/acc" if tag == "val" else f"{stage}/acc@{tag}"
        self.log(name, metric, batch_size=n, add_dataloader_idx=False, prog_bar=tag == "val")
        if tag == "val":
            self.log("val/loss", self.loss(batch), batch_size=n, add_dataloader_idx=False)

    def validation_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._evaluate(batch, "val", self.val_metrics)

    def test_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> None:
        self._evaluate(batch, "test", self.test_metrics)

    def on_test_epoch_end(self) -> None:
        """``test/worst@L`` over the whole worst-case set and ``test/worst@L/<family>``."""
        for tag, metric in self.test_metrics.items():
            if isinstance(metric, FamilyExactMatch):
                for family, value in metric.compute().items():
                    self.log(f"test/{tag}" + ("" if family == "all" else f"/{family}"), value)
                metric.reset()

    def _note_failures(self, batch: dict, predicted: torch.Tensor, families: list[str]) -> None:
        """Keep the first wrong answer of each worst-case family, to show in the results."""
        length = int(batch["tag"].split("@")[1])
        task = self.trainer.datamodule.task
        wrong = (predicted != batch["tgt_out"]).any(dim=1).nonzero().flatten().tolist()
        for i in wrong:
            family = families[int(batch["family"][i])]
            if (length, family) not in self.worst_failures:
                output, expected = wrong_answer_texts(task, predicted[i].tolist(), batch["tgt_out"][i].tolist())
                self.worst_failures[(length, family)] = {
                    "length": length, "family": family, "input": batch["text"][i],
                    "output": output, "expected": expected}

    def predict_step(self, batch: dict, batch_idx: int, dataloader_idx: int = 0) -> list[dict]:
        return decode_batch(self.model, self.trainer.datamodule.task, batch)  # PredictionWriter writes them

    # ---- optimization ---------------------------------------------------------------
    def configure_optimizers(self):
        hp = self.hparams
        opt = torch.optim.Adam(self.parameters(), lr=hp.lr, betas=tuple(hp.betas), eps=hp.eps)
        schedule = hp.get("lr_schedule", "constant")
        if not hp.warmup_steps and schedule == "constant":
            return opt
        total = None
        if schedule != "constant":
            total = self.trainer.estimated_stepping_batches
            if not math.isfinite(total) or total <= hp.warmup_steps:
                raise ConfigError(f"model.lr_schedule={schedule} decays over the fit's step budget, which must be "
                                  f"finite and longer than model.warmup_steps={hp.warmup_steps}, got {total}: "
                                  "set trainer.max_epochs or trainer.max_steps")
        factor = partial(lr_factor, schedule=schedule, warmup=hp.warmup_steps, total=total,
                         floor=hp.get("min_lr_ratio", 0.0))
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def check_schedule(self, trainer: L.Trainer) -> None:
        """A decaying ``lr_schedule`` needs a finite step budget longer than its warmup
        (checked before a run starts)."""
        schedule = self.hparams.get("lr_schedule", "constant")
        if schedule == "constant":
            return
        loop = trainer.fit_loop
        if loop.max_steps in (None, -1) and loop.max_epochs in (None, -1):
            raise ConfigError(f"model.lr_schedule={schedule} decays over the fit's step budget: set "
                              "trainer.max_epochs or trainer.max_steps")
        if loop.max_steps not in (None, -1) and loop.max_steps <= self.hparams.warmup_steps:
            raise ConfigError(f"model.lr_schedule={schedule}: trainer.max_steps={loop.max_steps} must exceed "
                              f"model.warmup_steps={self.hparams.warmup_steps}")

    # ---- checkpoints ----------------------------------------------------------------
    def init_weights(self, path: str) -> dict:
        """The weights of checkpoint ``path``, checked against this model (loaded once: the CLI
        calls this for ``init_from`` before a run folder exists, so a bad file fails first)."""
        if self._init_weights is None or self._init_weights[0] != path:
            saved = {k: v for k, v in load_checkpoint(path)["state_dict"].items()
                     if not k.startswith("model.bias_sources.")}
            expected = {k: v for k, v in self.state_dict().items() if not k.startswith("model.bias_sources.")}
            try:
                check_compatible(saved, expected)
            except CheckpointError as exc:
                raise CheckpointError(f"init_from {path}: {exc}") from None
            self._init_weights = (path, saved)
        return self._init_weights[1]

    def warm_start(self, path: str | None = None) -> None:
        """Copy the model weights of checkpoint ``path`` (default: ``init_from``) into this model."""
        path = path or self.hparams.init_from
        self.load_state_dict(self.init_weights(path), strict=False)
        self._init_weights = None  # the weights now live in the model; drop the copy
        print(f"abc_lightning: model weights initialized from {path}", flush=True)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # The random stream (dropout) goes with the weights, so a resumed fit draws what an
        # uninterrupted one would. A plain uint8 tensor: loadable with weights_only=True.
        checkpoint["torch_rng_state"] = torch.get_rng_state()

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Refuse a checkpoint whose weights do not fit this model, naming the mismatch."""
        state = checkpoint.get("state_dict")
        if not isinstance(state, dict):
            raise CheckpointError("checkpoint has no 'state_dict': not a Lightning checkpoint of this project")
        check_compatible(state, self.state_dict())
        rng = checkpoint.get("torch_rng_state")
        if isinstance(rng, torch.Tensor) and self._trainer is not None and self.trainer.state.fn == "fit":
            torch.set_rng_state(rng)


LR_SCHEDULES = ("constant", "cosine", "linear")


def lr_factor(step: int, schedule: str, warmup: int, total: int | None, floor: float = 0.0) -> float:
    """The multiple of the peak learning rate at optimizer step ``step`` (0-based): a linear
    warmup to 1 over ``warmup`` steps, then constant, or a cosine or linear decay that reaches
    ``floor`` at step ``total`` (the step budget) and stays there."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or total is None:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    shape = 0.5 * (1.0 + math.cos(math.pi * progress)) if schedule == "cosine" else 1.0 - progress
    return floor + (1.0 - floor) * shape


def check_optimizer(lr: float, betas, eps: float, warmup_steps: int, lr_schedule: str = "constant",
                    min_lr_ratio: float = 0.0) -> None:
    """Raise ConfigError for Adam settings that cannot train (checked before any run starts)."""
    if not isinstance(lr, (int, float)) or not lr > 0:
        raise ConfigError(f"model.lr must be > 0, got {lr!r}")
    if len(betas) != 2 or not all(0.0 <= b < 1.0 for b in betas):
        raise ConfigError(f"model.betas must be two numbers in [0, 1), got {list(betas)}")
    if not eps > 0:
        raise ConfigError(f"model.eps must be > 0, got {eps!r}")
    if not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ConfigError(f"model.warmup_steps must be an integer >= 0, got {warmup_steps!r}")
    if lr_schedule not in LR_SCHEDULES:
        raise ConfigError(f"model.lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {lr_schedule!r}")
    if not isinstance(min_lr_ratio, (int, float)) or not 0.0 <= min_lr_ratio <= 1.0:
        raise ConfigError(f"model.min_lr_ratio must be in [0, 1], got {min_lr_ratio!r}")
