"""Faults at run time, each turned into one line and an exit status.

The CLI's start-up checks catch mistakes before a run folder exists. What can still go wrong
once a run is going is the machine's (a full disk, a folder that cannot be written), W&B's
(no API key for an online run) or an interrupt. :func:`describe` names each in one line with
what to do, and the exit status: 1 for a fault of the machine, 2 for a setting the user can
change, 130 for an interrupt, 128 + the signal for a stop signal (143 for SIGTERM). Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno
import sys
from pathlib import Path

from lightning.fabric.utilities.exceptions import MisconfigurationException

from abc_lightning.errors import CheckpointError, ConfigError, InputError, Terminated

USER_ERRORS = (ConfigError, InputError, CheckpointError, MisconfigurationException)
MACHINE, USER, INTERRUPTED = 1, 2, 130

SAVE_DIR = "choose another folder with {flag}"
SAVE_FLAG = "--trainer.logger.init_args.save_dir=PATH"
#: errno -> (what happened, what to do, exit status)
OS_FAULTS = {
    errno.ENOSPC: ("no space left on the device", f"free some space, or {SAVE_DIR}", MACHINE),
    errno.EDQUOT: ("disk quota exceeded", f"free some space, or {SAVE_DIR}", MACHINE),
    errno.EROFS: ("the file system is read-only", SAVE_DIR, USER),
    errno.EACCES: ("permission denied", SAVE_DIR, USER),
    errno.EPERM: ("operation not permitted", SAVE_DIR, USER),
    errno.ENOTDIR: ("a part of the path is a file, not a folder", SAVE_DIR, USER),
    errno.EISDIR: ("the path is a folder, not a file", "name a file", USER),
    errno.EIO: ("input/output error", "check the disk, then run again", MACHINE),
    errno.ENOENT: ("no such folder, and it cannot be made there", SAVE_DIR, USER),
}


def chain(exc: BaseException | None):
    """``exc`` and the exceptions behind it (jsonargparse and Lightning wrap what they call)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        yield exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__


def user_error(exc: BaseException) -> BaseException | None:
    """Our own error behind ``exc``. Lightning's MisconfigurationException is a user error too
    (a trainer setting that cannot work on this machine)."""
    return next((e for e in chain(exc) if isinstance(e, USER_ERRORS)), None)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def os_fault(exc: OSError, flag: str = SAVE_FLAG) -> tuple[str, int] | None:
    if exc.errno not in OS_FAULTS:
        return None
    what, todo, status = OS_FAULTS[exc.errno]
    where = exc.filename or ""
    if where and Path(where).name.startswith(".") and Path(where).name.endswith(".tmp"):
        where = str(Path(where).with_name(Path(where).name[1:].rsplit(".", 2)[0]))  # the target, not our temporary
    return f"{f'cannot write {where}: ' if where else ''}{what}; {todo.format(flag=flag)}", status


def wandb_fault(exc: BaseException) -> tuple[str, int] | None:
    if not type(exc).__module__.startswith("wandb"):
        return None
    return (f"W&B could not start ({first_line(exc)}): run `wandb login`, or pass --wandb.mode=offline "
            "(or disabled)"), USER


def describe(exc: BaseException, run_folder: Path | None = None, flag: str = SAVE_FLAG,
             stage: str = "fit") -> tuple[str, int] | None:
    """``(one line, exit status)`` for a fault or mistake, or None for a bug (keep the traceback).
    ``flag`` is the option that chooses where output goes (``reproduce --results`` …);
    ``stage`` the subcommand that was running (only a fit has something to resume)."""
    if isinstance(exc, (KeyboardInterrupt, Terminated)) and stage != "fit":
        what = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"stopped by {signal_name(exc.signum)}"
        return f"{what} during {stage}; nothing to resume: run it again", getattr(exc, "status", INTERRUPTED)
    if isinstance(exc, KeyboardInterrupt):
        return interrupted(run_folder), INTERRUPTED
    if isinstance(exc, Terminated):
        return terminated(exc, run_folder), exc.status
    cause = user_error(exc)
    if cause is not None:
        message = first_line(cause)
        if isinstance(cause, MisconfigurationException) and not message.startswith("trainer:"):
            message = f"trainer: {message}"
        return message, USER
    for e in chain(exc):
        found = (os_fault(e, flag) if isinstance(e, OSError) else None) or wandb_fault(e) or memory_fault(e)
        if found:
            return found
    return None


def memory_fault(exc: BaseException) -> tuple[str, int] | None:
    """An allocation the device could not make (past what :mod:`~abc_lightning.cli.bounds`
    can foresee): the setting to shrink, not the allocator's traceback."""
    text = str(exc)
    if not (type(exc).__name__ == "OutOfMemoryError" or (isinstance(exc, RuntimeError) and (
            "can't allocate memory" in text or "out of memory" in text))):
        return None
    return ("out of memory (" + first_line(exc)[:120] + "): make the model (model.d_model, model.feedforward), "
            "the batch (data.batch_size, data.eval_batch_size) or the samples smaller"), MACHINE


def newest_checkpoint(run_folder: Path | None) -> Path | None:
    """The checkpoint a stopped run resumes from: ``last.ckpt``, else the newest one."""
    folder = run_folder / "checkpoints" if run_folder else None
    found = sorted(folder.glob("*.ckpt"), key=lambda p: (p.name == "last.ckpt", p.stat().st_mtime)) if folder and \
        folder.is_dir() else []
    return found[-1] if found else None


def resume_line(run_folder: Path, checkpoint: Path | str) -> str:
    return f"resume with: python -m abc_lightning fit --config {run_folder / 'config.yaml'} --ckpt_path {checkpoint}"


def interrupted(run_folder: Path | None) -> str:
    """Name the checkpoint to resume from: ``last.ckpt``, else the newest one."""
    found = newest_checkpoint(run_folder)
    if found is not None:
        return f"interrupted; {resume_line(run_folder, found)}"
    return "interrupted before the first checkpoint; nothing to resume"


def signal_name(signum: int) -> str:
    import signal

    return signal.Signals(signum).name


def terminated(exc: Terminated, run_folder: Path | None) -> str:
    """A stop signal: the checkpoint a fit saved at its step, or the newest one it has."""
    name = signal_name(exc.signum)
    if exc.checkpoint is not None and run_folder is not None:
        return f"stopped by {name}; saved step {exc.step}; {resume_line(run_folder, exc.checkpoint)}"
    found = newest_checkpoint(run_folder)
    if found is not None:
        return f"stopped by {name} before a step boundary; {resume_line(run_folder, found)}"
    if run_folder is not None:
        return f"stopped by {name} before the first checkpoint; nothing to resume"
    return f"stopped by {name}; nothing was written"


def report(exc: BaseException, run_folder: Path | None = None, flag: str = SAVE_FLAG, stage: str = "fit") -> int | None:
    """Print :func:`describe`'s line for ``exc`` and return its exit status; None for a bug."""
    found = describe(exc, run_folder, flag, stage)
    if found is not None:
        print(f"abc_lightning: error: {found[0]}", file=sys.stderr)
    return None if found is None else found[1]
