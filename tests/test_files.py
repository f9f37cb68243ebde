"""Files are written whole or not at all: a failure mid-write keeps the previous file."""

import errno
from pathlib import Path

import pytest
import torch

from abc_lightning.runs import files
from abc_lightning.runs.checkpoints import AtomicCheckpointIO, load_checkpoint
from abc_lightning.cli import ABCLightningCLI

DEBUG = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")


def full_disk(obj, fh, *args, **kwargs):
    """torch.save on a disk that fills half-way through the file."""
    fh.write(b"\0" * 1000)
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_checkpoint_save_cut_short_keeps_the_previous_one(tmp_path, monkeypatch):
    path = tmp_path / "checkpoints" / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"state_dict": {"w": torch.ones(3)}, "global_step": 1}, path)
    monkeypatch.setattr(torch, "save", full_disk)
    with pytest.raises(OSError, match="No space left"):
        io.save_checkpoint({"state_dict": {"w": torch.zeros(3)}, "global_step": 2}, path)
    assert torch.equal(load_checkpoint(path)["state_dict"]["w"], torch.ones(3))  # still whole, still the old one
    assert sorted(p.name for p in path.parent.iterdir()) == ["last.ckpt"]  # no temporary file left


def test_text_files_are_replaced_whole_or_not_at_all(tmp_path):
    path = tmp_path / "record.json"
    files.write_text(path, '{"a": 1}')
    with pytest.raises(RuntimeError):
        with files.atomic_open(path) as fh:
            fh.write('{"a": ')
            raise RuntimeError("killed mid-write")
    assert path.read_text() == '{"a": 1}' and [p.name for p in tmp_path.iterdir()] == ["record.json"]


def test_every_trainer_the_cli_builds_writes_checkpoints_atomically():
    cli = ABCLightningCLI(args=["--config", DEBUG, "--trainer.logger=false"], run=False)
    assert isinstance(cli.trainer.strategy.checkpoint_io, AtomicCheckpointIO)
