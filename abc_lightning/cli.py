"""The command line: LightningCLI over the module and data module, plus friendly failures.

Every subcommand of LightningCLI works (``fit``, ``validate``, ``test``, ``predict``);
``python -m abc_lightning reproduce …`` regenerates the results tables (see reproduce.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import torch
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from abc_lightning.callbacks import AccuracyTable, RunInfo
from abc_lightning.callbacks.training import RunConfig, run_dir
from abc_lightning.data import ArithmeticDataModule
from abc_lightning.errors import CheckpointError, ConfigError, InputError
from abc_lightning.module import ArithmeticTransformer, check_compatible
from abc_lightning.wandb_logging import make_logger

# Imported so that short class names resolve on the command line (--model.positional=NoPE).
from abc_lightning import callbacks as _callbacks  # noqa: F401
from abc_lightning.model import positional as _positional, positions as _positions  # noqa: F401


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint with ``weights_only=True``; anything else gets a CheckpointError."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or unsafe files
        raise CheckpointError(f"cannot load checkpoint {path}: it is corrupt, truncated, or holds objects "
                              f"other than tensors and plain data, which are refused ({type(exc).__name__})") from None
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise CheckpointError(f"{path} is not a Lightning checkpoint (no 'state_dict')")
    return ckpt


def _known_classes(base: type) -> list[str]:
    found, todo = [], [base]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub.__name__)
            todo.append(sub)
    return sorted(found)


def concise(message: str) -> str:
    """jsonargparse's multi-line validation message -> one line that names key and value."""
    key = re.search(r'Parser key "([^"]+)"', message)
    path = re.search(r"Expected a dot import path string: (\S+)", message)
    if key and path:
        from abc_lightning.model.positional import PositionalScheme
        from abc_lightning.model.positions import PositionIndex

        bases = {"model.positional": PositionalScheme, "model.position_index": PositionIndex}
        known = _known_classes(bases[key.group(1)]) if key.group(1) in bases else []
        hint = f"; choose one of {known}" if known else ""
        return f"{key.group(1)}: unknown class {path.group(1)!r}{hint}"
    lines = [ln.strip(" -") for ln in message.splitlines() if ln.strip(" -")]
    if key:
        detail = next((ln for ln in lines if ln.startswith("Expected")), lines[-1])
        return f"{key.group(1)}: {detail}"
    return " ".join(lines)


class ConciseParser(LightningArgumentParser):
    """Prints one line per mistake instead of the usage block and a nested report."""

    def error(self, message: str, ex: Exception | None = None):
        if not self.exit_on_error:
            return super().error(message, ex)
        print(f"abc_lightning: error: {concise(message)} (see --help)", file=sys.stderr)
        sys.exit(2)


class ABCLightningCLI(LightningCLI):
    """LightningCLI with the result table always on and checkpoints checked before use."""

    def __init__(self, args: list[str] | None = None, run: bool = True) -> None:
        super().__init__(
            ArithmeticTransformer,
            ArithmeticDataModule,
            args=args,
            run=run,
            save_config_callback=RunConfig,  # config.yaml in each run's own folder, whatever the logger
            save_config_kwargs={"overwrite": True},
            # deterministic kernels where torch has them; the data module shards for DDP itself
            trainer_defaults={"deterministic": "warn", "use_distributed_sampler": False},
            parser_class=ConciseParser,
            parser_kwargs={"default_env": False},
        )

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(AccuracyTable, "accuracy_table")
        parser.add_lightning_class_args(RunInfo, "run_info")
        parser.add_argument("--wandb.mode", type=str, default="auto",
                            help="W&B beside the run's CSV/TensorBoard logs: auto (online if usable, else offline), "
                                 "online, offline or disabled")
        parser.add_argument("--wandb.project", type=str, default="abc_lightning", help="W&B project")

    def _user_ckpt(self, subcommand: str) -> dict | None:
        """The checkpoint named by --ckpt_path, loaded safely once; None for none or a keyword."""
        ckpt_path = self.config[subcommand].get("ckpt_path")
        if ckpt_path is None or ckpt_path in ("last", "best", "hpc", "registry"):
            return None
        if getattr(self, "_ckpt", None) is None:
            self._ckpt = load_checkpoint(ckpt_path)
        return self._ckpt

    def _parse_ckpt_path(self) -> None:
        # LightningCLI reads the checkpoint's hyperparameters here; fail clearly first.
        if self.config.get("subcommand"):
            self._user_ckpt(self.config.subcommand)
        super()._parse_ckpt_path()

    def _check_ckpt(self, subcommand: str, required: bool) -> None:
        if self.config[subcommand].get("ckpt_path") is None and required:
            raise CheckpointError(f"{subcommand} needs a trained model: pass --ckpt_path PATH")
        ckpt = self._user_ckpt(subcommand)
        if ckpt is not None:
            check_compatible(ckpt["state_dict"], self.model.state_dict())

    def _claim_version(self) -> None:
        """Give a CSV/TensorBoard logger without a version its own ``version_N`` folder now.

        Lightning picks "highest existing + 1" lazily, so runs started together with one
        save_dir (sweeps, ``reproduce --jobs``) could pick the same folder and overwrite
        each other's files. Creating the folder is atomic: a run that loses the race takes
        the next number. Only global rank 0 claims; other ranks receive its log_dir.
        """
        if not launched_as_rank_zero():
            return
        for logger in self.trainer.loggers:
            if isinstance(logger, (CSVLogger, TensorBoardLogger)) and getattr(logger, "_version", 0) is None:
                root = Path(logger.root_dir)
                root.mkdir(parents=True, exist_ok=True)
                version = logger._get_next_version()
                while True:
                    try:
                        (root / f"version_{version}").mkdir()
                        CLAIMED.append(root / f"version_{version}")
                        break
                    except FileExistsError:
                        version += 1
                logger._version = version

    def _add_wandb(self) -> None:
        """Add W&B (see :mod:`abc_lightning.wandb_logging`) beside a CSV/TensorBoard logger."""
        loggers = self.trainer.loggers
        if not loggers or not isinstance(loggers[0], (CSVLogger, TensorBoardLogger)) or not launched_as_rank_zero():
            return  # other ranks log nothing; rank 0's W&B run is the run
        options = self.config[self.config.subcommand].get("wandb") or {}
        wandb_logger = make_logger(options.get("mode", "auto"), options.get("project", "abc_lightning"), loggers[0])
        if wandb_logger is None:
            return
        self.trainer.loggers = [*loggers, wandb_logger]
        config = self.config[self.config.subcommand].clone()
        config.pop("wandb", None)
        wandb_logger.log_hyperparams(_flatten(config.as_dict()))  # the resolved config, inside the W&B run

    def before_fit(self) -> None:
        self._check_ckpt("fit", required=False)
        self._claim_version()
        self._add_wandb()

    def before_validate(self) -> None:
        self._check_ckpt("validate", required=False)
        self._claim_version()
        self._add_wandb()

    def before_test(self) -> None:
        self._check_ckpt("test", required=True)
        self._claim_version()
        self._add_wandb()

    def before_predict(self) -> None:
        self._check_ckpt("predict", required=True)
        self.datamodule.setup("predict")  # malformed inputs fail here, before any model work
        self._claim_version()

    def after_predict(self) -> None:
        rows = self.model.predictions
        width = max(len(r["input"]) for r in rows)
        for r in rows:
            mark = "ok" if r["correct"] else f"WRONG (expected {r['expected']})"
            print(f"{r['input']:>{width}} = {r['output']}   {mark}")
        out = run_dir(self.trainer)
        out.mkdir(parents=True, exist_ok=True)
        (out / "predictions.json").write_text(json.dumps(rows, indent=2))


def launched_as_rank_zero() -> bool:
    """True unless a launcher (torchrun, SLURM, Lightning's DDP) says this process is another rank."""
    return all(int(os.environ.get(var, "0") or 0) == 0 for var in ("RANK", "LOCAL_RANK", "NODE_RANK", "SLURM_PROCID"))


def _flatten(tree: dict, prefix: str = "") -> dict:
    """Nested config -> ``{"model.d_model": 64, …}`` (lists of classes keep their index)."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{name}."))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, v in enumerate(value):
                flat.update(_flatten(v, f"{name}.{i}."))
        else:
            flat[name] = value
    return flat


USER_ERRORS = (ConfigError, InputError, CheckpointError)
CLAIMED: list[Path] = []  # run folders this process created, removed again if a user error leaves them empty


def user_error(exc: BaseException) -> BaseException | None:
    """Our own error behind ``exc``: jsonargparse and Lightning wrap what constructors raise."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, USER_ERRORS):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def run_cli(args: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line and return exit status 2."""
    try:
        ABCLightningCLI(args=args)
    except Exception as exc:
        cause = user_error(exc)
        if cause is None:
            raise
        for folder in CLAIMED:  # only what start-up wrote: the resolved config
            if folder.is_dir() and {p.name for p in folder.iterdir()} <= {"config.yaml", "hparams.yaml"}:
                shutil.rmtree(folder)
        print(f"abc_lightning: error: {cause}", file=sys.stderr)
        return 2
    return 0
