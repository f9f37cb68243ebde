"""studies/in_distribution.py: a tiny trained model checked at the training lengths, and
the summary that sets its wrong answers beside each record's long-length verdict."""
import json
from pathlib import Path

import pytest

from abc_lightning.cli import run_cli
from abc_lightning.tasks import get_task
from tests.helpers import load_script

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "studies" / "in_distribution.py"
DEBUG = str(ROOT / "configs" / "debug.yaml")


@pytest.fixture(scope="module")
def bench():
    return load_script(SCRIPT)


def record(accuracy_600: float, worst_600: float = 100.0) -> dict:
    return {"task": "successor", "label": "+ T=3", "seed": 0, "commit": "abc1234",
            "rows": [{"length": 60, "accuracy": 100.0, "worst": 100.0},
                     {"length": 600, "accuracy": accuracy_600, "worst": worst_600}]}


def test_exact_needs_every_length_and_worst_case(bench):
    assert bench.exact(record(100.0))
    assert not bench.exact(record(99.9))
    assert not bench.exact(record(100.0, worst_600=90.0))


def test_summary_counts_flagged_and_lists_runs_that_are_not_exact(bench, tmp_path):
    folder = tmp_path / "table1"
    folder.mkdir()
    (folder / "abs_successor.json").write_text(json.dumps(record(100.0)))
    (folder / "abs_successor.seed1.json").write_text(json.dumps({**record(98.5), "seed": 1}))
    lines = [{"key": "abs_successor", "samples": 10, "worst_wrong": 0, "worst_inputs": 5,
              "random_wrong_5": 0, "random_wrong_6": 0},
             {"key": "abs_successor.seed1", "samples": 10, "worst_wrong": 0, "worst_inputs": 5,
              "random_wrong_5": 2, "random_wrong_6": 0}]
    (folder / "in_distribution.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    bench.summary(folder, tmp_path / "out")
    text = (tmp_path / "out.md").read_text()
    assert "| successor | + T=3 | 2 | 1/2 | 1/2 | 1/1 |" in text
    assert "| successor | + T=3 | 1 | 100 | 98.5 | 100 | 0/5 | 2 | 0 |" in text
    runs = json.loads((tmp_path / "out.json").read_text())["runs"]
    assert [(r["exact"], r["flagged"]) for r in runs] == [(True, False), (False, True)]


def test_check_run_counts_wrong_answers_of_a_checkpoint(bench):
    assert run_cli(["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=5",
                    "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false", "--data.val_lengths=[6]"]) == 0
    out = bench.check_run(Path("runs/debug/version_0/checkpoints/last.ckpt"), samples=20)
    task = get_task("successor")
    assert out["worst_inputs"] == sum(len(task.worst_case_set(n)[3]) for n in range(1, 7))
    assert 0 <= out["worst_wrong"] <= out["worst_inputs"]
    assert 0 <= out["random_wrong_5"] <= 20 and 0 <= out["random_wrong_6"] <= 20
