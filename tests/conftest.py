import os

import pytest

os.environ["WANDB_MODE"] = "disabled"  # tests that need W&B turn it on themselves (offline)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """Every test runs in its own folder so run directories never collide."""
    monkeypatch.chdir(tmp_path)
    yield
