"""Error replay: training rows the model got wrong come back in later batches.

A short schedule sees each rare local pattern of the training numbers only a few times (a
column summing to 9 over two columns of 0 + 0 is one place in 10^5 of uniform operands),
and a model that has not learned one errs on it about once per 10^6 columns, which is
invisible at 60 digits and common at 600. Replaying the rows a teacher-forced step got
wrong gives each such pattern several more steps, at the cost of a few rows per batch.
Everything it replays is a training row: no length beyond the training lengths is seen.
"""

from __future__ import annotations

import lightning as L
import torch

from abc_lightning.errors import ConfigError

KEYS = ("src", "tgt_in", "tgt_out")


class ErrorReplay(L.Callback):
    """Append up to ``rows`` remembered wrong rows to each training batch.

    After each step, every row of the batch with a wrong token under teacher forcing (the
    step's own logits; no extra forward pass) is remembered, up to ``capacity`` rows (the
    oldest go first: early in a fit, when most rows are wrong, the memory turns over every
    step; late, when errors are rare, each stays until it has been replayed). Before each
    step, up to ``rows`` remembered rows of the batch's shape, drawn at random, are appended
    to it; a row is replayed ``repeats`` times (right or wrong by then: one right answer under
    teacher forcing is a thin margin). The draws are seeded by the run's seed, and the memory
    is saved in checkpoints, so a resumed fit replays what the uninterrupted one would.
    ``rows=0`` turns replay off: the fit trains what it would without the callback.

    Where batches come in several shapes (several operand counts, ``data.train_frames``),
    the memory holds one shape at a time and a wrong row of another shape empties it; with
    ``keep_shapes`` each shape keeps a memory of its own, of ``capacity`` rows.
    """

    def __init__(self, rows: int = 16, capacity: int = 64, repeats: int = 8, keep_shapes: bool = False) -> None:
        for name, value, least in (("rows", rows, 0), ("capacity", capacity, 1), ("repeats", repeats, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"ErrorReplay's {name} must be a whole number of at least {least}, got {value!r}")
        if not isinstance(keep_shapes, bool):
            raise ConfigError(f"ErrorReplay's keep_shapes must be true or false, got {keep_shapes!r}")
        self.rows, self.capacity, self.repeats, self.keep_shapes = rows, capacity, repeats, keep_shapes
        self.memory: dict[str, torch.Tensor] = {}  # KEYS and "left" (replays left), one row each
        self.kept: dict[tuple, dict[str, torch.Tensor]] = {}  # with keep_shapes: the other shapes' memories
        self.replayed = 0  # rows appended to the batch now being trained
        self.seed = 0

    @property
    def state_key(self) -> str:
        return "ErrorReplay"

    def setup(self, trainer, pl_module, stage: str) -> None:
        self.seed = int(torch.initial_seed())

    def _generator(self, step: int) -> torch.Generator:
        # one seeded draw per step, so that a resumed fit draws what the whole one drew; an
        # unseeded run's initial seed is a 64-bit number, so the sum is kept below 2^63
        return torch.Generator().manual_seed((self.seed * 1_000_003 + step) % 2**63)

    @staticmethod
    def _shape(rows: dict) -> tuple:
        return tuple(rows[key].shape[1] for key in KEYS)

    def _switch(self, shape: tuple) -> None:
        """With keep_shapes: make ``shape``'s memory the current one, keeping the other."""
        if not self.keep_shapes or (self.memory and self._shape(self.memory) == shape):
            return
        if self.memory:
            self.kept[self._shape(self.memory)] = self.memory
        self.memory = self.kept.pop(shape, {})

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self.replayed = 0
        if isinstance(batch, dict) and all(key in batch for key in KEYS):
            self._switch(self._shape(batch))
        if not self.memory or not isinstance(batch, dict):
            return
        if self._shape(self.memory) != self._shape(batch):  # only rows of this batch's shape
            return
        pick = torch.randperm(len(self.memory["left"]), generator=self._generator(trainer.global_step))[:self.rows]
        device = batch["src"].device
        for key in KEYS:
            batch[key] = torch.cat([batch[key], self.memory[key][pick].to(device)])
        self.memory["left"][pick] -= 1
        self.replayed = len(pick)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not self.rows:  # off
            return
        self._remember(outputs, batch)
        if pl_module is not None:  # rows replayed a step: many early, few once the model is right
            pl_module.log("train/replayed", float(self.replayed), batch_size=1)

    def _remember(self, outputs, batch) -> None:
        wrong = outputs.get("wrong") if isinstance(outputs, dict) else None
        if wrong is None:
            return
        wrong = wrong.detach().cpu()
        n_new = len(wrong) - self.replayed
        if self.replayed:  # a row with no replays left is forgotten
            keep = self.memory["left"] > 0
            self.memory = {k: v[keep] for k, v in self.memory.items()}
        fresh = wrong[:n_new].nonzero().flatten()
        if len(fresh) == 0:
            return
        rows = {key: batch[key][:n_new][fresh].detach().cpu() for key in KEYS}
        rows["left"] = torch.full((len(fresh),), self.repeats, dtype=torch.long)
        if self.memory and self._shape(self.memory) != self._shape(rows):
            self.memory = {}  # another shape: keep one shape at a time
        self.memory = {k: torch.cat([self.memory[k], v]) if self.memory else v for k, v in rows.items()}
        self.memory = {k: v[-self.capacity:] for k, v in self.memory.items()}

    def state_dict(self) -> dict:
        state = {"memory": dict(self.memory)}
        if self.kept:
            state["kept"] = [dict(memory) for memory in self.kept.values()]
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self.memory = dict(state_dict.get("memory", {}))
        self.kept = {self._shape(memory): dict(memory) for memory in state_dict.get("kept", [])}
