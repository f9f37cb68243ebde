"""The command line: LightningCLI over the module and data module, plus friendly failures.

Every subcommand of LightningCLI works (``fit``, ``validate``, ``test``, ``predict``);
``python -m abc_lightning reproduce …`` regenerates the results tables (see reproduce.py).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from lightning.pytorch.cli import LightningCLI

from abc_lightning.callbacks import AccuracyTable
from abc_lightning.data import ArithmeticDataModule
from abc_lightning.errors import CheckpointError, ConfigError, InputError
from abc_lightning.module import ArithmeticTransformer, check_compatible

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
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"cannot load checkpoint {path}: corrupt, truncated or not a plain "
                              f"weights file ({first[:160]})") from None
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise CheckpointError(f"{path} is not a Lightning checkpoint (no 'state_dict')")
    return ckpt


class ABCLightningCLI(LightningCLI):
    """LightningCLI with the result table always on and checkpoints checked before use."""

    def __init__(self, args: list[str] | None = None, run: bool = True) -> None:
        super().__init__(
            ArithmeticTransformer,
            ArithmeticDataModule,
            args=args,
            run=run,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"default_env": False},
        )

    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(AccuracyTable, "accuracy_table")

    def _check_ckpt(self, subcommand: str, required: bool) -> None:
        ckpt_path = self.config[subcommand].get("ckpt_path")
        if ckpt_path is None:
            if required:
                raise CheckpointError(f"{subcommand} needs a trained model: pass --ckpt_path PATH")
            return
        if subcommand == "fit" and ckpt_path in ("last", "hpc", "registry"):
            return
        check_compatible(load_checkpoint(ckpt_path)["state_dict"], self.model.state_dict())

    def before_fit(self) -> None:
        self._check_ckpt("fit", required=False)

    def before_validate(self) -> None:
        self._check_ckpt("validate", required=False)

    def before_test(self) -> None:
        self._check_ckpt("test", required=True)

    def before_predict(self) -> None:
        self._check_ckpt("predict", required=True)
        self.datamodule.setup("predict")  # malformed inputs fail here, before any model work

    def after_predict(self) -> None:
        rows = self.model.predictions
        width = max(len(r["input"]) for r in rows)
        for r in rows:
            mark = "ok" if r["correct"] else f"WRONG (expected {r['expected']})"
            print(f"{r['input']:>{width}} = {r['output']}   {mark}")
        out = Path(self.trainer.log_dir or ".")
        out.mkdir(parents=True, exist_ok=True)
        (out / "predictions.json").write_text(json.dumps(rows, indent=2))


def run_cli(args: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line and return exit status 2."""
    try:
        ABCLightningCLI(args=args)
    except (ConfigError, InputError, CheckpointError) as exc:
        print(f"abc_lightning: error: {exc}", file=sys.stderr)
        return 2
    return 0
