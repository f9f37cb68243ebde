"""User-facing errors. The CLI turns these into one-line messages instead of tracebacks."""

import argparse
import contextlib
import signal
import threading


class ConfigError(ValueError):
    """A configuration value that cannot work (unknown task, w < 0, T < 1, bad lengths ...)."""


class InputError(ValueError):
    """A predict input that is not a well-formed expression for the task."""


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable, or does not fit the configured model."""


class OneLineParser(argparse.ArgumentParser):
    """argparse for ``reproduce`` and ``sweep``: a mistake is the CLI's one line, not a usage block."""

    def error(self, message: str):
        self.exit(2, f"abc_lightning: error: {message} (see {self.prog} --help)\n")


class Terminated(BaseException):
    """A stop signal from a scheduler or an operator (SIGTERM; SIGUSR1 where nothing else
    handles it). A ``BaseException``, as ``KeyboardInterrupt`` is, so that no ``except
    Exception`` swallows it. ``checkpoint``: what a fit saved at the step it stopped on."""

    def __init__(self, signum: int, checkpoint: str | None = None, step: int | None = None) -> None:
        super().__init__(signum)
        self.signum, self.checkpoint, self.step = signum, checkpoint, step

    @property
    def status(self) -> int:
        """The exit status of a process this signal ends: 128 + the signal's number (143 for SIGTERM)."""
        return 128 + self.signum


def stop_signals() -> list[int]:
    """The signals that stop a run cleanly: SIGTERM, and SIGUSR1 outside SLURM (whose
    ``--signal=USR1`` Lightning's own requeue handler takes; elsewhere SIGUSR1 would end
    the process unhandled)."""
    import os

    found = [signal.SIGTERM]
    if hasattr(signal, "SIGUSR1") and "SLURM_JOB_ID" not in os.environ:
        found.append(signal.SIGUSR1)
    return found


@contextlib.contextmanager
def on_stop_signals(handler):
    """``handler`` answers the stop signals (:func:`stop_signals`) while this lasts, and the
    handlers before it after; nothing changes outside the main thread, where Python cannot
    set a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, handler) for signum in stop_signals()}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


def raise_terminated(signum: int, frame) -> None:
    """A signal handler: stop here, with :class:`Terminated`."""
    raise Terminated(signum)
