"""End to end: a tiny model really learns successor with ABS and holds at 5× the training length."""

import json
from pathlib import Path

import pytest

from abc_lightning.cli import run_cli

DEBUG = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")


@pytest.mark.slow
def test_fit_test_predict_generalizes(capsys):
    # 500 steps under the recipe's warmup and cosine decay: the debug config's 300 at a
    # constant rate learn 30 digits at two torch threads but not at one (95.6%)
    recipe = ["--trainer.max_epochs=5", "--model.warmup_steps=50", "--model.lr_schedule=cosine"]
    assert run_cli(["fit", "--config", DEBUG, *recipe, "--trainer.enable_progress_bar=false"]) == 0
    run = Path("runs/debug/version_0")
    val = json.loads((run / "val_accuracy.json").read_text())
    assert [r["length"] for r in val["rows"]] == [6, 20]
    assert (run / "val_accuracy.md").read_text().startswith("### successor")

    best = run / "checkpoints" / "best.ckpt"
    assert best.is_file()
    assert run_cli(["test", "--config", DEBUG, "--ckpt_path", str(best), "--trainer.enable_progress_bar=false"]) == 0
    test = json.loads(Path("runs/debug/version_0/test/version_0/test_accuracy.json").read_text())  # beside its run
    assert [p.name for p in Path("runs/debug").iterdir()] == ["version_0"]  # no new run among the training runs
    acc = {r["length"]: r["accuracy"] for r in test["rows"]}
    samples = {r["length"]: r["samples"] for r in test["rows"]}
    assert samples == {6: 500, 30: 500}
    # trained on numbers of at most 7 digits; 30 digits is out of distribution
    assert acc[6] >= 99.0 and acc[30] >= 99.0, acc

    capsys.readouterr()
    # The longest carry chain at the test length. Not 999: numbers of 1-3 digits are under 0.1%
    # of the training pool, and on some CPUs this 300-step model gets 99 or 999 + 1 wrong.
    nines = "9" * 30
    inputs = f'["{nines}", "123456789012345678901234567890123456789"]'
    assert run_cli(["predict", "--config", DEBUG, "--ckpt_path", str(best), f"--data.predict_inputs={inputs}"]) == 0
    out = capsys.readouterr().out
    assert f"{nines} = 1{'0' * 30}   ok" in out
    assert "123456789012345678901234567890123456789 = 123456789012345678901234567890123456790   ok" in out
