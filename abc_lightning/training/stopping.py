"""How a fit stops when a scheduler stops it, and the checkpoint of its last step.

The CLI gives every Trainer a :class:`GracefulStop`:

- **A stop signal during training** (SIGTERM; SIGUSR1 outside SLURM) is acted on at the
  next step boundary, before the next step starts: the run saves ``last.ckpt`` there and ends with
  :class:`~abc_lightning.errors.Terminated`, which the CLI reports with the command that
  resumes it and exit status 128 + the signal (143 for SIGTERM). The training loader's place
  in the epoch travels in the checkpoint, so the resumed run trains exactly the batches the
  uninterrupted one would have. A step or a validation still running
  :data:`GRACE_SECONDS` after the signal, or a second signal, stops the run at once; the
  newest checkpoint already written is then the one to resume. (A second signal within
  :data:`SAME_SIGNAL_SECONDS` is the same stop delivered twice, and changes nothing.)
- **The final step always has a checkpoint**: a fit that ends writes ``last.ckpt`` at its
  last step when the checkpoint callback did not save that step (``every_n_train_steps``,
  a ``val_check_interval`` shorter than the epoch).

Outside training (start-up, ``test``, ``predict``) the CLI's own handler stops the process
at once with :class:`~abc_lightning.errors.Terminated`: there is nothing to save.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import lightning as L

from abc_lightning.errors import Terminated, stop_signals
from abc_lightning.runs.folders import run_dir

#: Seconds between a stop signal and stopping at once when no step boundary came meanwhile.
GRACE_SECONDS = 10.0
#: A second signal this soon after the first is the same stop, delivered twice.
SAME_SIGNAL_SECONDS = 1.0


def last_checkpoint_path(trainer: L.Trainer) -> Path:
    """Where this fit's ``last.ckpt`` goes: its checkpoint callback's folder, else the run's."""
    callback = trainer.checkpoint_callback
    folder = getattr(callback, "dirpath", None)
    return Path(folder) / "last.ckpt" if folder else run_dir(trainer) / "checkpoints" / "last.ckpt"


class GracefulStop(L.Callback):
    """Save at the step boundary after a stop signal, then stop; save the final step (module docs)."""

    def __init__(self, grace_seconds: float = GRACE_SECONDS) -> None:
        self.grace_seconds = grace_seconds
        self.pending: int | None = None
        self.since, self.overdue = 0.0, False
        self.timer: threading.Timer | None = None
        self.previous: dict[int, object] = {}

    # ---- signals ------------------------------------------------------------------
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set from the main thread
        self.pending = None
        for signum in stop_signals():
            self.previous[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame) -> None:
        if self.pending is not None:
            if not self.overdue and time.monotonic() - self.since < SAME_SIGNAL_SECONDS:
                return  # the same stop, delivered twice (to the process group, and passed on by reproduce)
            raise Terminated(signum)  # a second signal, or the grace period is over: stop now
        self.pending, self.since = signum, time.monotonic()
        self.overdue = False
        self.timer = threading.Timer(self.grace_seconds, self._overdue, (signum,))
        self.timer.daemon = True
        self.timer.start()

    def _overdue(self, signum: int) -> None:
        """The grace period is over (the timer's thread): signal the main thread again."""
        self.overdue = True
        os.kill(os.getpid(), signum)

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch, batch_idx: int) -> None:
        # Before the next step, not after the last: that step is then whole (its metrics logged,
        # an epoch's validation run), and this callback runs first, before any other has
        # touched the batch (error replay draws its rows here).
        if self.pending is None or (batch_idx == 0 and trainer.num_training_batches > 1):
            return  # an epoch's first batch: Lightning's restart would not count its steps alike; stop after it
        self._stand_down()  # the save below is not cut short by the grace timer
        path = last_checkpoint_path(trainer)
        # Lightning has counted this batch as fetched ("ready") but not started; saved as it is,
        # a resume would take the checkpoint for one written mid-step and shift the logged steps
        # by one. Saved as the previous batch's end (what a checkpoint at a validation's end
        # holds), the resume starts this batch afresh.
        progress = trainer.fit_loop.epoch_loop.batch_progress
        progress.total.ready, progress.current.ready = progress.total.started, progress.current.started
        trainer.save_checkpoint(path)
        raise Terminated(self.pending, str(path), trainer.global_step)

    def _stand_down(self) -> None:
        """Cancel the grace timer and give the signals back to the handlers before ours."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self._stand_down()

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self._stand_down()

    # ---- the final step -------------------------------------------------------------
    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._stand_down()
        callback = trainer.checkpoint_callback
        if callback is None or trainer.global_step == 0:
            return
        if getattr(callback, "_last_global_step_saved", None) == trainer.global_step:
            return  # the checkpoint callback saved this step already
        trainer.save_checkpoint(last_checkpoint_path(trainer))
