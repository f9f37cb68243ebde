"""Checkpoints: safe loading, the shape check, and the config a checkpoint carries.

Every ``fit`` stores its resolved config (YAML text, under :data:`CONFIG_KEY`) in each
checkpoint it writes, so a checkpoint alone rebuilds its run: model sizes, positional
scheme and index, task and input form, and the bias strategy (ABS window or ABC, whose
calibrated lines and phase are in the callback's own checkpoint state). ``test`` and
``predict --ckpt_path X`` without ``--config`` use it; a config that contradicts it is
refused with the keys that differ.

This module sits below the CLI and the LightningModule; both import from it.
"""

from __future__ import annotations

from pathlib import Path

import torch
import yaml
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO

from abc_lightning.runs import files
from abc_lightning.errors import CheckpointError

#: Where a checkpoint keeps the resolved config of the fit that wrote it.
CONFIG_KEY = "abc_lightning_config"
#: ``--ckpt_path`` values that name a checkpoint inside one fit rather than a file.
CKPT_KEYWORDS = ("last", "best", "hpc", "registry")
#: Settings that only change how a model is trained, not what it computes.
TRAINING_ONLY = ("model.init_from", "model.lr", "model.betas", "model.eps", "model.warmup_steps",
                 "model.lr_schedule", "model.min_lr_ratio")


def load_plain(path: str | Path, what: str = "checkpoint") -> object:
    """``torch.load(weights_only=True)`` of a file that must exist: tensors and plain data
    only. A missing, corrupt or unsafe file (one that would run code when loaded) gets a
    CheckpointError that names ``what`` it should have been."""
    path = Path(path)
    if path.is_dir():
        inside = sorted(str(p) for p in path.rglob("*.ckpt"))[:3]
        raise CheckpointError(f"{what} {path} is a folder; name a file" + (f", e.g. {inside}" if inside else
                                                                             " (it holds no .ckpt)"))
    if not path.is_file():
        raise CheckpointError(f"{what} not found: {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for corrupt or unsafe files
        raise CheckpointError(f"cannot load {what} {path}: it is corrupt, truncated, or holds objects "
                              f"other than tensors and plain data, which are refused ({type(exc).__name__})") from None


def load_checkpoint(path: str | Path) -> dict:
    """Load a Lightning checkpoint with ``weights_only=True``; anything else gets a CheckpointError."""
    ckpt = load_plain(path, "checkpoint")
    if not isinstance(ckpt, dict) or "state_dict" not in ckpt:
        raise CheckpointError(f"{path} is not a Lightning checkpoint (no 'state_dict')")
    check_finite(ckpt["state_dict"], path)
    return ckpt


def check_finite(state: dict, path: str | Path) -> None:
    """A checkpoint whose weights hold NaN or infinity (a run that diverged) is refused: its
    answers would be noise, given without a word."""
    for key, value in state.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            raise CheckpointError(f"{path}: weight {key} holds {bad} NaN or infinite value(s) (the run diverged); "
                                  "use an earlier checkpoint of the run")


def check_compatible(saved: dict, expected: dict) -> None:
    """Raise CheckpointError listing missing, unexpected and mis-shaped weights."""
    missing = sorted(set(expected) - set(saved))
    unexpected = sorted(set(saved) - set(expected))
    shapes = [f"{k}: checkpoint {tuple(saved[k].shape)} vs model {tuple(v.shape)}"
              for k, v in expected.items() if k in saved and tuple(saved[k].shape) != tuple(v.shape)]
    if missing or unexpected or shapes:
        parts = []
        if shapes:
            parts.append("shape mismatch " + "; ".join(shapes[:3]))
        if missing:
            parts.append(f"{len(missing)} weights missing (e.g. {missing[0]})")
        if unexpected:
            parts.append(f"{len(unexpected)} unexpected weights (e.g. {unexpected[0]})")
        raise CheckpointError("checkpoint does not fit the configured model: " + ", ".join(parts)
                              + ". Use the config the checkpoint was trained with.")


#: Keys of the stored config that belong to the ``fit`` call, not to the run.
FIT_CALL_KEYS = ("ckpt_path", "weights_only", "config")


#: class paths a checkpoint's config may name, under the module that holds them now
RENAMED = {"abc_lightning.model.positions.": "abc_lightning.model.position_index."}


def stored_config(ckpt: dict) -> str | None:
    """The YAML config a checkpoint carries (without the keys of the ``fit`` call that wrote
    it), or None for a checkpoint written before checkpoints carried one."""
    text = ckpt.get(CONFIG_KEY)
    if not isinstance(text, str):
        return None
    for old, new in RENAMED.items():  # a module renamed since the checkpoint was written
        text = text.replace(old, new)
    config = yaml.safe_load(text) or {}
    if "task" in (config.get("data") or {}):
        raise CheckpointError("this checkpoint was written by abc_lightning 0.1, whose vocabulary had 15 tokens "
                              "and whose configs named the task as data.task; 0.2 cannot read it: train it again "
                              "(the same config, with data: {class_path: <Task>} and the strategy under bias:)")
    for key in FIT_CALL_KEYS:
        config.pop(key, None)
    return yaml.safe_dump(config, sort_keys=False)


def flatten(tree: dict, prefix: str = "") -> dict:
    """Nested config -> ``{"model.d_model": 64, …}`` (lists of classes keep their index)."""
    flat = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for i, v in enumerate(value):
                flat.update(flatten(v, f"{name}.{i}."))
        else:
            flat[name] = value
    return flat


def identity(config: dict, stage: str) -> dict:
    """The settings that make a run what it is, flattened: the model (but for training-only
    settings when evaluating), the task and input form, and the bias strategies."""
    flat = {k: v for k, v in flatten({"model": config.get("model") or {}}).items()
            if stage == "fit" or not k.startswith(TRAINING_ONLY)}
    flat.pop("model.init_from", None)  # read once, before the first step
    data = config.get("data") or {}
    args = data.get("init_args") or {}
    flat["data.aligned"] = args.get("aligned")
    if stage == "fit":
        flat.update({f"data.{k}": args.get(k) for k in ("seed", "batch_size")})
    flat["data.class"] = str(data.get("class_path", "")).rsplit(".", 1)[-1]
    bias = config.get("bias") or {}
    if bias:  # the bias strategy, by class, and its settings
        name = str(bias.get("class_path", "")).rsplit(".", 1)[-1]
        flat[f"bias.{name}"] = "on"
        flat.update(flatten(bias.get("init_args") or {}, f"bias.{name}."))
    return flat


def conflicts(stored: dict, given: dict, stage: str) -> list[str]:
    """``key (checkpoint X, given Y)`` for each identity setting on which the two differ."""
    a, b = identity(stored, stage), identity(given, stage)
    return [f"{k} (checkpoint {a.get(k, 'unset')}, given {b.get(k, 'unset')})"
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


class AtomicCheckpointIO(TorchCheckpointIO):
    """Lightning's checkpoint writer, with each checkpoint written beside its target and
    renamed (:mod:`abc_lightning.runs.files`): an interrupted save leaves the previous
    ``last.ckpt`` whole and loadable. The CLI gives it to every Trainer."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        files.save(checkpoint, path)
