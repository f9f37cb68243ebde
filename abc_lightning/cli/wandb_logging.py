"""W&B next to the run's CSV/TensorBoard folder: online when usable, offline otherwise.

The config's own logger (CSV by default) stays the primary one: it owns the run folder
``<save_dir>/<name>/version_N`` with checkpoints, tables and ``config.yaml``. The CLI adds a
``WandbLogger`` whose files go into that same folder (``…/version_N/wandb/``), so runs that
share a save_dir never share or overwrite W&B files. ``--wandb.mode`` picks:

* ``auto`` (default): online when an API key is configured (``WANDB_API_KEY`` or
  ``~/.netrc``) and the W&B host answers; otherwise offline, said once on stderr with the
  ``wandb sync`` command that uploads the run later. ``WANDB_MODE=offline``/``disabled`` in
  the environment is respected.
* ``online``, ``offline``: as asked.
* ``disabled``: no W&B logger at all (CSV or TensorBoard only).
"""

from __future__ import annotations

import netrc
import os
import socket
import sys
from pathlib import Path
from urllib.parse import urlparse

MODES = ("auto", "online", "offline", "disabled")
_ANNOUNCED: set[str] = set()


def has_api_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
        return netrc.netrc().authenticators(host) is not None
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False


def reachable(timeout: float = 2.0) -> bool:
    url = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai"))
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout):
            return True
    except OSError:
        return False


def resolve_mode(mode: str) -> tuple[str, str]:
    """``(online|offline|disabled, why)`` for a requested mode."""
    if mode not in MODES:
        from abc_lightning.errors import ConfigError

        raise ConfigError(f"wandb.mode must be one of {MODES}, got {mode!r}")
    if mode != "auto":
        return mode, f"--wandb.mode={mode}"
    try:
        import wandb  # noqa: F401
    except ImportError:
        return "disabled", "the wandb package is not installed"
    env = os.environ.get("WANDB_MODE", "").lower()
    if env in ("disabled", "offline", "dryrun"):
        return ("disabled" if env == "disabled" else "offline"), f"WANDB_MODE={env}"
    if not has_api_key():
        return "offline", "no API key (WANDB_API_KEY or ~/.netrc)"
    if not reachable():
        return "offline", "the W&B server cannot be reached"
    return "online", "API key and network found"


def make_logger(mode: str, project: str, primary, group: str | None = None):
    """A WandbLogger writing into the primary logger's run folder, or None when disabled."""
    resolved, why = resolve_mode(mode)
    if resolved == "disabled":
        return None
    from lightning.pytorch.loggers import WandbLogger

    run_dir = Path(primary.log_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    if resolved == "offline" and why not in _ANNOUNCED:
        _ANNOUNCED.add(why)
        print(f"abc_lightning: W&B logs offline ({why}); upload later with: wandb sync {run_dir / 'wandb'}/offline-run-*",
              file=sys.stderr)
    name = f"{primary.name}/{run_dir.name}"
    logger = WandbLogger(name=name, save_dir=str(run_dir), offline=resolved == "offline", project=project,
                         group=group or os.environ.get("WANDB_RUN_GROUP"), log_model=False)
    logger._wandb_init.pop("anonymous", None)  # W&B warns that the setting is deprecated whenever it is passed
    return logger


def add_beside(trainer, mode: str, project: str):
    """Add W&B beside a run's CSV/TensorBoard logger (:func:`make_logger` decides online,
    offline or disabled) and return it, or None where no W&B run starts. Only global rank 0
    logs to W&B; its run is the run."""
    from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

    from abc_lightning.runs.folders import launched_as_rank_zero

    loggers = trainer.loggers
    if not loggers or not isinstance(loggers[0], (CSVLogger, TensorBoardLogger)) or not launched_as_rank_zero():
        return None
    wandb_logger = make_logger(mode, project, loggers[0])
    if wandb_logger is not None:
        trainer.loggers = [*loggers, wandb_logger]
    return wandb_logger
