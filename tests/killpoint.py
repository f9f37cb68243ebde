"""Fault injection for tests/test_resume.py: SIGKILL the training process at a chosen point."""

import os
import signal

import lightning as L


class KillAt(L.Callback):
    """Kill this process with SIGKILL (no cleanup, like a pre-emption or the OOM killer).

    ``step``: after that many optimizer steps; ``after_calibration``: right after the ABC
    callback has calibrated, before that epoch's checkpoint is written.
    """

    def __init__(self, step: int | None = None, after_calibration: bool = False) -> None:
        self.step, self.after_calibration = step, after_calibration

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.step is not None and trainer.global_step >= self.step:
            os.kill(os.getpid(), signal.SIGKILL)

    def setup(self, trainer, pl_module, stage: str) -> None:
        # The ABC strategy runs after the trainer.callbacks list: kill from inside it, once its
        # calibration is saved (its artifacts), before the checkpoint callback runs.
        abc = next((cb for cb in trainer.callbacks if type(cb).__name__ == "AttentionBiasCalibration"), None)
        if not self.after_calibration or abc is None:
            return
        save = abc.save_artifacts

        def save_then_die(trainer):
            save(trainer)
            if abc.phase == "retrain" and abc.lines:
                os.kill(os.getpid(), signal.SIGKILL)

        abc.save_artifacts = save_then_die
