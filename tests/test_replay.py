"""ErrorReplay: rows a step got wrong come back in later batches, a fixed number of times."""

import json
from pathlib import Path

import pytest
import torch

from abc_lightning.callbacks import ErrorReplay
from abc_lightning.cli import run_cli
from abc_lightning.errors import ConfigError

DEBUG = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")


class Trainer:
    global_step = 0


def batch_of(n: int, start: int = 0) -> dict:
    ids = torch.arange(start, start + n)[:, None]
    return {"src": ids.repeat(1, 5), "tgt_in": ids.repeat(1, 3), "tgt_out": ids.repeat(1, 3), "tag": "train"}


def step(replay: ErrorReplay, batch: dict, wrong_ids: set[int], trainer=Trainer()) -> list[int]:
    """One training step: the hooks around it, with the rows whose first token is in
    ``wrong_ids`` wrong; returns the ids of the rows appended to the batch."""
    n = len(batch["src"])
    replay.on_train_batch_start(trainer, None, batch, 0)
    appended = batch["src"][n:, 0].tolist()
    wrong = torch.tensor([int(i) in wrong_ids for i in batch["src"][:, 0]])
    replay.on_train_batch_end(trainer, None, {"loss": torch.tensor(0.0), "wrong": wrong}, batch, 0)
    trainer.global_step += 1
    return appended


def test_a_wrong_row_is_replayed_exactly_repeats_times_then_forgotten():
    replay = ErrorReplay(rows=2, capacity=8, repeats=3)
    assert step(replay, batch_of(4), {1}) == []  # nothing remembered before the first step
    seen = [step(replay, batch_of(4, start=100 + 10 * k), set()) for k in range(5)]
    assert seen[:3] == [[1], [1], [1]] and seen[3:] == [[], []]
    assert not replay.memory or len(replay.memory["left"]) == 0


def test_replays_ride_beside_the_batch_and_new_errors_push_out_the_oldest():
    replay = ErrorReplay(rows=2, capacity=3, repeats=5)
    step(replay, batch_of(4), {0, 1, 2, 3})  # four wrong rows, room for three: row 0 goes
    assert replay.memory["src"][:, 0].tolist() == [1, 2, 3]
    batch = batch_of(4, start=10)
    appended = step(replay, batch, set())
    assert len(batch["src"]) == 6 and len(appended) == 2 and set(appended) <= {1, 2, 3}
    assert batch["tgt_out"].shape == (6, 3)  # every key grows together

    # a replayed row that is wrong again is not remembered a second time
    every = ErrorReplay(rows=2, capacity=2, repeats=5)
    step(every, batch_of(2), {0, 1})
    assert step(every, batch_of(2, start=10), {0, 1}) in ([0, 1], [1, 0])
    assert sorted(every.memory["src"][:, 0].tolist()) == [0, 1] and every.memory["left"].tolist() == [4, 4]


def test_the_memory_survives_a_checkpoint_and_bad_settings_are_refused():
    replay = ErrorReplay(rows=1, capacity=4, repeats=2)
    step(replay, batch_of(3), {0, 2})
    again = ErrorReplay(rows=1, capacity=4, repeats=2)
    again.load_state_dict(replay.state_dict())
    assert torch.equal(again.memory["src"], replay.memory["src"])
    replay.seed = 2**64 - 1  # an unseeded run's initial seed: the per-step draw still seeds
    assert replay._generator(7).initial_seed() < 2**63
    for bad in (dict(rows=-1), dict(capacity=0), dict(repeats=1.5), dict(rows=True)):
        with pytest.raises(ConfigError, match="ErrorReplay's"):
            ErrorReplay(**bad)


def test_rows_0_turns_replay_off_and_the_fit_trains_what_it_trains_without_it():
    off = ErrorReplay(rows=0)
    batch = batch_of(4)
    assert step(off, batch, {0, 1, 2, 3}) == [] and not off.memory and len(batch["src"]) == 4
    args = ["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=20",
            "--trainer.enable_progress_bar=false"]
    assert run_cli(args) == 0
    assert run_cli([*args, "--trainer.callbacks+=abc_lightning.callbacks.ErrorReplay",
                    "--trainer.callbacks.init_args.rows=0"]) == 0
    ckpts = [torch.load(f"runs/debug/version_{v}/checkpoints/last.ckpt", weights_only=False) for v in (0, 1)]
    assert ckpts[1]["callbacks"]["ErrorReplay"]["memory"] == {}
    assert all(torch.equal(w, ckpts[1]["state_dict"][k]) for k, w in ckpts[0]["state_dict"].items())


def test_replay_added_to_a_config_that_has_it_is_one_line_and_no_run_folder(capsys, tmp_path):
    abs_yaml = str(Path(__file__).resolve().parents[1] / "configs" / "abs.yaml")
    code = run_cli(["fit", "--config", abs_yaml, "--trainer.callbacks+=abc_lightning.callbacks.ErrorReplay",
                    f"--trainer.logger.init_args.save_dir={tmp_path}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "ErrorReplay is given twice" in err[-1]
    assert not any(tmp_path.iterdir())


def test_a_fit_with_replay_trains_and_two_runs_give_the_same_model():
    """On the CLI (``--trainer.callbacks+=...ErrorReplay``) with a tiny model: seeded, so a rerun
    trains the same weights."""
    args = ["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=30",
            "--trainer.callbacks+=abc_lightning.callbacks.ErrorReplay", "--trainer.enable_progress_bar=false",
            "--trainer.log_every_n_steps=5"]
    assert run_cli(args) == 0 and run_cli(args) == 0
    losses = []
    for version in (0, 1):
        rows = Path(f"runs/debug/version_{version}/metrics.csv").read_text().splitlines()
        losses.append(rows)
        assert (Path(f"runs/debug/version_{version}/val_accuracy.json")).is_file()
    assert losses[0] == losses[1]
    ckpts = [torch.load(f"runs/debug/version_{v}/checkpoints/last.ckpt", weights_only=False) for v in (0, 1)]
    assert all(torch.equal(w, ckpts[1]["state_dict"][k]) for k, w in ckpts[0]["state_dict"].items())
    state = ckpts[0]["callbacks"]
    assert "ErrorReplay" in state and set(state["ErrorReplay"]["memory"]) <= {"src", "tgt_in", "tgt_out", "left"}
    assert json.loads(Path("runs/debug/version_0/val_accuracy.json").read_text())["rows"]


def test_wrong_answers_names_the_first_wrong_column_from_the_units_and_reads_a_checkpoint(capsys):
    """scripts/wrong_answers.py, the tool behind the diagnosis of rare column errors."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("wrong_answers", Path(__file__).resolve().parents[1] / "scripts"
                                                  / "wrong_answers.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    assert script.first_wrong_column("1430006", "1429006") == 4
    assert script.first_wrong_column("100", "1000") == 3 and script.first_wrong_column("19", "18") == 1

    assert run_cli(["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=5",
                    "--trainer.enable_progress_bar=false"]) == 0
    capsys.readouterr()
    old = sys.argv
    try:
        sys.argv = ["wrong_answers.py", "runs/debug/version_0/checkpoints/last.ckpt", "--length", "12",
                    "--samples", "50"]
        assert script.main() == 0
        out = capsys.readouterr().out.strip().splitlines()
        wrong = int(out[-1].split()[0])
        assert out[-1].endswith("right)") and len(out) == wrong + 1  # a line per wrong answer, then the count
        assert all(line.startswith("column ") for line in out[:-1])
        sys.argv = ["wrong_answers.py", "no/such.ckpt"]
        assert script.main() == 2
    finally:
        sys.argv = old


def wide_batch_of(n: int, start: int = 0) -> dict:
    """A batch one cell wider than ``batch_of``'s (another training frame)."""
    ids = torch.arange(start, start + n)[:, None]
    return {"src": ids.repeat(1, 6), "tgt_in": ids.repeat(1, 3), "tgt_out": ids.repeat(1, 3), "tag": "train"}


def test_keep_shapes_gives_each_batch_shape_a_memory_of_its_own():
    # one shape at a time (the default): a wrong row of another shape empties the memory
    one = ErrorReplay(rows=2, capacity=8, repeats=3)
    step(one, batch_of(2), {0})
    step(one, wide_batch_of(2, start=50), {50})
    assert step(one, batch_of(2, start=10), set()) == []
    assert step(one, wide_batch_of(2, start=60), set()) == [50]

    kept = ErrorReplay(rows=2, capacity=8, repeats=3, keep_shapes=True)
    step(kept, batch_of(2), {0})
    step(kept, wide_batch_of(2, start=50), {50})
    assert step(kept, batch_of(2, start=10), set()) == [0]  # each row rides only beside its own shape
    assert step(kept, wide_batch_of(2, start=60), set()) == [50]
    restored = ErrorReplay(rows=2, capacity=8, repeats=3, keep_shapes=True)
    restored.load_state_dict(kept.state_dict())
    assert step(restored, batch_of(2, start=20), set()) == [0] and step(restored, wide_batch_of(2, start=70), set()) == [50]
    with pytest.raises(ConfigError, match="keep_shapes"):
        ErrorReplay(keep_shapes="yes")
