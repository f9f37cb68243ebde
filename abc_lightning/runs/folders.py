"""Run folders: each run claims its own ``<save_dir>/<name>/version_N`` atomically, a
resumed fit continues in its checkpoint's folder, and a run that stops before learning
anything leaves nothing behind (a run with a checkpoint is never removed).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import sys
import warnings
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from abc_lightning.runs import files
from abc_lightning.runs.checkpoints import CKPT_KEYWORDS
from abc_lightning.errors import CheckpointError

CLAIMED: list[Path] = []  # folders this process created, removed again if a user error leaves them empty
START_UP_FILES = {"config.yaml", "hparams.yaml", "run_info.json", "wandb", ".lock"}  # nothing a run has learned


def run_dir(trainer: L.Trainer) -> Path:
    """This run's folder, read locally. ``trainer.log_dir`` broadcasts from rank 0, so
    rank-zero-only code that called it would wait forever for the other ranks under DDP."""
    loggers = trainer.loggers
    if loggers:
        logger = loggers[0]
        if hasattr(logger, "root_dir"):  # CSV, TensorBoard: <save_dir>/<name>/version_N
            return Path(logger.log_dir)
        if type(logger).__name__ == "WandbLogger":  # W&B as the primary logger: its run's own folder
            return Path(logger.experiment.dir)
        if logger.save_dir is not None:
            return Path(logger.save_dir)
    return Path(trainer.default_root_dir)


def claim_folder(root: Path, version: int) -> Path:
    """Create ``root/version_N`` atomically, with N the first free number from ``version``."""
    CLAIMED.extend(reversed([d for d in [root, *root.parents] if not d.exists()]))  # parents we create
    root.mkdir(parents=True, exist_ok=True)
    while True:
        try:
            (root / f"version_{version}").mkdir()
            CLAIMED.append(root / f"version_{version}")
            return root / f"version_{version}"
        except FileExistsError:
            version += 1


def latest_last_ckpt(config) -> Path:
    """``--ckpt_path last`` for a fit: in the run folder of this config's logger
    (``<save_dir>/<name>/<version>`` when the config names a version, else the newest
    ``version_N`` that holds a checkpoint), the checkpoint of the highest step, whatever its
    file name (``last.ckpt`` among equals, then the newest); an error when there is none."""
    logger = config.get("trainer", {}).get("logger")
    args = getattr(logger, "init_args", None)
    if args is None or not str(getattr(logger, "class_path", "")).endswith(("CSVLogger", "TensorBoardLogger")):
        raise CheckpointError("--ckpt_path last finds the newest run of a CSV or TensorBoard logger; with this "
                              "logger, pass the checkpoint's path")
    root = Path(args.get("save_dir") or ".") / (args.get("name") or "lightning_logs")
    version = args.get("version")
    if version is not None:
        folders = [root / (version if isinstance(version, str) else f"version_{version}")]
    else:
        folders = sorted((d for d in root.glob("version_*") if d.name[8:].isdigit()), key=lambda d: -int(d.name[8:]))
    for folder in folders:
        found = [p for p in (folder / "checkpoints").glob("*.ckpt") if p.is_file()]
        if found:
            return max(found, key=lambda p: (_step_of(p), p.name == "last.ckpt", p.stat().st_mtime))
    where = folders[0] if version is not None else root
    raise CheckpointError(f"--ckpt_path last: no checkpoint under {where} to resume")


def _step_of(path: Path) -> int:
    """A checkpoint's ``global_step`` (-1 where it cannot be read)."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # a corrupt file is refused later, when (if) it is the one picked
        return -1
    return int(ckpt.get("global_step", -1)) if isinstance(ckpt, dict) else -1


def continue_metrics(logger, step: int) -> None:
    """Keep a resumed run's ``metrics.csv``: Lightning's CSV writer deletes the file it finds,
    so its rows up to the checkpoint's global ``step`` are read first and written back (the
    rows after it are the ones the resumed fit logs again), and the writer keeps their columns."""
    if not isinstance(logger, CSVLogger):
        return
    import csv

    path = Path(logger.log_dir) / "metrics.csv"
    rows = []
    if path.is_file():
        with path.open(newline="") as fh:
            rows = list(csv.reader(fh))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "... exists and is not empty": it is ours, on purpose
        writer = logger.experiment
    if not rows or "step" not in rows[0]:
        return
    col = rows[0].index("step")
    kept = [rows[0], *(r for r in rows[1:] if not r[col].isdigit() or int(r[col]) < step)]
    writer.metrics_keys = list(rows[0])
    with files.atomic_open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(kept)


def launched_as_rank_zero() -> bool:
    """True unless a launcher (torchrun, SLURM, Lightning's DDP) says this process is another rank."""
    return all(int(os.environ.get(var, "0") or 0) == 0 for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))


def remove_unstarted_runs(status: int = 2) -> None:
    """Remove the run folders this process claimed that hold only start-up files."""
    wandb = sys.modules.get("wandb")
    if wandb is not None:
        with contextlib.suppress(Exception):  # W&B failing is one of the faults that bring us here
            if wandb.run is not None:
                wandb.finish(exit_code=status)
            # its service and settings would otherwise outlive the run (a failed online start
            # included), and later runs of this process would reuse them
            wandb.teardown()
    for folder in reversed(CLAIMED):  # deepest first: a parent we made goes once it is empty
        with contextlib.suppress(OSError):  # a read-only or vanished folder stays as it is
            if folder.is_dir() and {p.name for p in folder.iterdir()} <= START_UP_FILES:
                shutil.rmtree(folder)
    CLAIMED.clear()


def _version_folder(ckpt_path: str | None) -> Path | None:
    """``version_N`` two levels above a checkpoint file (resolved), or None."""
    if ckpt_path in (None, *CKPT_KEYWORDS):
        return None
    folder = Path(ckpt_path).resolve().parent.parent
    return folder if re.fullmatch(r"version_\d+", folder.name) else None


def _folder_logger(trainer: L.Trainer) -> CSVLogger | TensorBoardLogger | None:
    """The primary logger when it writes ``<save_dir>/<name>/version_N`` folders."""
    loggers = trainer.loggers
    return loggers[0] if loggers and isinstance(loggers[0], (CSVLogger, TensorBoardLogger)) else None


def resume_folder(trainer: L.Trainer, ckpt_path: str | None) -> Path | None:
    """The run folder a resumed fit continues in: the checkpoint's own, when it lies in
    ``<save_dir>/<name>/<version>/checkpoints/`` of this run's logger (``version_N``, or the
    version the config names)."""
    logger = _folder_logger(trainer)
    if logger is None or ckpt_path in (None, *CKPT_KEYWORDS):
        return None
    path = Path(ckpt_path).resolve()
    folder = path.parent.parent
    if path.parent.name != "checkpoints" or folder.parent != Path(logger.root_dir).resolve():
        return None
    version = getattr(logger, "_version", None)
    if version is None:
        return folder if re.fullmatch(r"version_\d+", folder.name) else None
    return folder if Path(logger.log_dir).resolve() == folder else None


def checkpoint_run(ckpt_path: str | None) -> Path | None:
    """The run folder a checkpoint belongs to: ``version_N`` of ``version_N/checkpoints/X.ckpt``."""
    folder = _version_folder(ckpt_path)
    if folder is None or Path(ckpt_path).resolve().parent.name != "checkpoints":
        return None
    return Path(ckpt_path).parent.parent  # as the user wrote it, for the paths a run prints


def evaluate_beside(trainer: L.Trainer, ckpt_path: str | None, stage: str) -> None:
    """``test``, ``validate`` or ``predict`` of a checkpoint of a run folder writes beside it, in
    ``<run>/<stage>/version_K``, not in a new ``version_N`` among the training runs (unless a
    logger version was given, as ``reproduce`` gives its own)."""
    run, logger = checkpoint_run(ckpt_path), _folder_logger(trainer)
    if run is None or logger is None or getattr(logger, "_version", None) is not None:
        return
    # Lightning keeps no public setter for a logger's folder; written here, and only here
    for attribute in ("_save_dir", "_root_dir"):  # CSV: _save_dir; TensorBoard: _root_dir
        if hasattr(logger, attribute):
            setattr(logger, attribute, str(run))
    logger._name = stage


def claim_run_folder(trainer: L.Trainer, ckpt_path: str | None, resumed_step, stage: str = "fit") -> None:
    """Give a CSV/TensorBoard logger without a version its own ``version_N`` folder now.

    Lightning picks "highest existing + 1" lazily, so runs started together with one
    save_dir (sweeps, ``reproduce --jobs``) could pick the same folder and overwrite
    each other's files. Creating the folder is atomic: a run that loses the race takes
    the next number. Only global rank 0 claims; other ranks receive its log_dir.
    A fit resumed from ``ckpt_path`` continues in the checkpoint's own folder, its
    metrics from the checkpoint's step (``resumed_step()``); another ``stage`` of a checkpoint
    writes beside its run (:func:`evaluate_beside`). Without any logger
    (``--trainer.logger=false``) the run still gets a folder of its own,
    ``runs/no_logger/version_N``, instead of writing into the current directory.
    Lightning keeps no public setter for either, so the logger's ``_version`` and the
    trainer's ``_default_root_dir`` are written here, and only here.
    """
    if stage != "fit":
        evaluate_beside(trainer, ckpt_path, stage)
        ckpt_path = None
    resume = resume_folder(trainer, ckpt_path)
    if resume is not None:
        # every rank continues in the checkpoint's own folder (the version given, or the checkpoint's)
        if getattr(trainer.loggers[0], "_version", None) is None:
            trainer.loggers[0]._version = int(resume.name[8:])
        warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
        if launched_as_rank_zero():
            lock_run(resume)
            continue_metrics(trainer.loggers[0], resumed_step())
        return
    if not launched_as_rank_zero():
        return
    if not trainer.loggers and Path(trainer.default_root_dir).resolve() == Path.cwd().resolve():
        trainer._default_root_dir = str(claim_folder(Path("runs") / "no_logger", 0))
    for logger in trainer.loggers:
        if isinstance(logger, (CSVLogger, TensorBoardLogger)) and getattr(logger, "_version", 0) is None:
            logger._version = int(claim_folder(Path(logger.root_dir), logger._get_next_version()).name[8:])
    if stage == "fit" and (not trainer.loggers or _folder_logger(trainer) is not None):  # a folder of ours
        lock_run(run_dir(trainer))


#: The open lock file of the run folder this process writes (a fit), held until it exits.
HELD: dict[Path, object] = {}


def lock_run(folder: Path) -> None:
    """Hold ``<folder>/.lock`` while this process runs: a second fit writing the same run
    folder (two resumes of one run at once) stops with one line naming the holder, before it
    writes anything. Temporary files there (``.*.tmp``, a save cut short by ``kill -9``) are
    then a dead writer's, and go."""
    try:
        import fcntl
    except ImportError:  # not on Windows
        return
    folder = Path(folder)
    if folder.resolve() in HELD:
        return
    CLAIMED.extend(reversed([d for d in [folder, *folder.parents] if not d.exists()]))  # removed if unstarted
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / ".lock", "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise CheckpointError(f"run folder {folder} is being written by {holder}; wait for it to end "
                              "(or stop it), then resume") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"process {os.getpid()} on {socket.gethostname()}\n")
    handle.flush()
    HELD[folder.resolve()] = handle
    for leftover in folder.rglob(".*.tmp"):
        with contextlib.suppress(OSError):
            leftover.unlink()
