"""The reproduction driver writes tables in the agreed shape and resumes from records."""

import json
from pathlib import Path

import pytest

from abc_lightning import markdown, reproduce
from abc_lightning.reproduce import Cell, write_table


def test_table_has_the_agreed_columns_and_marks_missing_cells(tmp_path):
    cells = [Cell("successor", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Successor",), "abs_successor"),
             Cell("addition", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Addition",), "abs_addition")]
    rows = [{"length": n, "accuracy": 100.0} for n in (6, 10, 15, 20)]
    short = [{"length": n, "accuracy": 100.0 if n != 2 else 97.5} for n in (1, 2, 3, 4, 5)]
    rows.append({"length": 60, "accuracy": 100.0, "worst": 96.15, "worst_families": {"all_nines": 0.0, "carry": 100.0},
                 "worst_failures": [{"length": 60, "family": "all_nines", "input": "9" * 60, "output": "0",
                                     "expected": "1" + "0" * 60}]})
    records = {"abs_successor": {"rows": short + rows, "train_seconds": 42.0, "steps": 1000, "command": cells[0].command}}
    text = write_table("table1", cells, records, tmp_path)
    header = ("| task | config | seeds | ≥ 99 at 60 | 1-5 | 6 | 10 | 15 | 20 | 60 | 599 | 600 | 601 | 10000 | worst 60 | worst 599 "
              "| worst 600 | worst 601 | worst 10000 | paper 60 | train time | command |")
    assert header in text
    assert ("| successor | + T=3 | 1 | 1/1 | 97.5 | 100 | 100 | 100 | 100 | 100 | – | – | – | – | 96.15 | – | – | – | – | 100 "
            "| 42 s (1000 steps) |") in text
    assert "| addition | + T=3 | not run | | | | | | | | | | | | | | | | | 100 |" in text  # 22 columns, as the header
    assert "Its 1 runs took 42 s of run time in all (train and every test; training alone 42 s)" in text
    failing = "- successor / + T=3, 60 digits: all_nines 0% (`99999999…99999999 (60 chars)` gave `0`)"
    assert failing in text and "carry" not in text.split("below 100%")[1]
    # a failure at a length without a column (20 digits) is listed when the columns' lengths are clean
    records["abs_successor"]["rows"] = rows  # no short lengths: the 1-5 column is blank
    assert "| successor | + T=3 | 1 | 1/1 | – | 100 |" in write_table("table1", cells, records, tmp_path)
    rows[3].update(worst=50.0, worst_families={"carry": 50.0})
    assert "20 digits" not in write_table("table1", cells, records, tmp_path)  # 60 fails: that line says it
    rows[4].update(worst=100.0, worst_families={"all_nines": 100.0, "carry": 100.0}, worst_failures=[])
    assert "- successor / + T=3, 20 digits: carry 50%" in write_table("table1", cells, records, tmp_path)
    saved = json.loads((tmp_path / "table1.json").read_text())
    assert [(c["key"], c["steps"], c["accuracy"]["60"]) for c in saved["cells"]] == [("abs_successor", [1000], [100.0])]


def test_table_only_rebuilds_from_records_without_training(tmp_path, monkeypatch):
    monkeypatch.setattr(reproduce, "run_cell", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    cell_dir = tmp_path / "table1"
    cell_dir.mkdir()
    (cell_dir / "abs_parity.json").write_text(json.dumps(
        {"rows": [{"length": 60, "accuracy": 100.0}], "train_seconds": 1.0, "steps": 5, "command": "x"}))
    assert reproduce.main(["table1", "--table-only", "--results", str(tmp_path)]) == 0
    assert "| parity | + T=3 | 1 | 1/1 | – | – | – | – | – | 100 |" in Path(tmp_path / "table1.md").read_text()
    # the records travel in the bundle beside the table: a folder holding only the bundle
    # (a fresh checkout's results/) unpacks them and skips the finished cell
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "table1.records.json.gz").write_bytes((tmp_path / "table1.records.json.gz").read_bytes())
    assert reproduce.main(["table1", "--only", "abs_parity", "--results", str(fresh)]) == 0
    assert json.loads((fresh / "table1" / "abs_parity.json").read_text())["steps"] == 5
    assert (fresh / "table1.records.json.gz").read_bytes() == (tmp_path / "table1.records.json.gz").read_bytes()


def test_overrides_after_double_dash_reach_every_cell(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(reproduce, "run_cell", lambda cell, out, extra: seen.append(extra) or
                        {"rows": [], "train_seconds": 0.0, "steps": 0, "command": cell.command})
    reproduce.main(["geometry", "--only", "successor_trailing_cross1", "--results", str(tmp_path),
                    "--", "--data.test_samples=20"])
    assert seen == [["--data.test_samples=20"]]


def test_every_abc_cell_is_the_documented_command_alone():
    commands = {c.key: c.command for c in reproduce.table3_cells()}
    for task, flag in (("successor", "Successor"), ("addition", "Addition"), ("nx1", "Nx1"), ("parity", "Parity")):
        # one preset, unchanged: the config alone and the task
        assert commands[f"abc_{task}"] == f"python -m abc_lightning fit --config configs/abc.yaml --data={flag}"
        assert commands[f"abc_paper_{task}"] == (f"python -m abc_lightning fit --config configs/abc.yaml "
                                                 f"--data={flag} --bias.preset=paper")
    assert all("init_from" not in command for command in commands.values())
    beyond = {c.key: c for c in reproduce.beyond_cells()}
    assert beyond["abc_subtraction"].home == "beyond" and not any(
        c.task == "subtraction" for c in reproduce.table1_cells() + reproduce.table3_cells())


def test_a_task_that_needs_more_steps_gives_them_to_its_abs_cells_alone():
    """N×2 and N×3 (Task.abs_overrides): every configs/abs.yaml cell trains 2,000 steps; their
    vanilla, FIRE and ABC cells keep their own budgets, and no other task's ABS cell changes."""
    beyond = {c.key: c for c in reproduce.beyond_cells()}
    longer = "--trainer.max_epochs=10"
    for task in ("nx2", "nx3"):
        for key, cell in beyond.items():
            if cell.task == task:
                assert (longer in cell.overrides) == (cell.config == "configs/abs.yaml"), key
    assert beyond["abs_nx2"].command.endswith("--data=Nx2 --trainer.max_epochs=10")
    assert not any(longer in c.overrides for c in reproduce.table1_cells())
    assert not any(longer in c.overrides for c in beyond.values() if c.task in ("subtraction", "addition3"))


def test_a_task_that_asks_for_learned_phases_gets_a_second_encoder_window_row():
    """N×3 alone (TableEntry.learned_phases): its encoder-window cell again, with learned
    phase vectors, tested as far as the sinusoidal one; no other task gains the row."""
    beyond = {c.key: c for c in reproduce.beyond_cells()}
    plain, learned = beyond["nx3_T4_encoder_w1"], beyond["nx3_T4_encoder_w1_learned"]
    assert learned.overrides == (*plain.overrides, "--model.positional=Learned")
    assert (learned.long, learned.huge) == (True, True)
    assert learned.label == "+ T=4, encoder window w=1, learned phases (ours)"
    assert [k for k in beyond if k.endswith("_learned")] == ["nx3_T4_encoder_w1_learned"]
    assert not any(c.key.endswith("_learned") for c in reproduce.table1_cells())


def test_long_only_adds_the_599_to_601_and_10000_digit_rows_to_finished_cells(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(reproduce, "run_cell", lambda *a: (_ for _ in ()).throw(AssertionError("trained")))
    monkeypatch.setattr(reproduce, "test_cell", lambda cell, out, extra, version, lengths, samples: calls.append(
        (cell.key, version, lengths, samples)) or ([{"length": n, "accuracy": 99.5, "samples": samples} for n in lengths], 1.0))
    cell_dir = tmp_path / "table1"
    cell_dir.mkdir()
    for key in ("abs_parity", "parity_vanilla", "parity_T3_encoder_w1"):
        (cell_dir / f"{key}.json").write_text(json.dumps(
            {"rows": [{"length": 60, "accuracy": 100.0}], "train_seconds": 1.0, "steps": 5, "command": "x"}))
    assert reproduce.main(["table1", "--long-only", "--results", str(tmp_path)]) == 0
    # the vanilla cell is not tested beyond the configs' lengths; only the encoder window at 10,000
    assert calls == [("abs_parity", "long", [599, 600, 601], 1000), ("parity_T3_encoder_w1", "long", [599, 600, 601], 1000),
                     ("parity_T3_encoder_w1", "huge", [10000], 100)]
    text = Path(tmp_path / "table1.md").read_text()
    assert "| parity | + T=3 | 1 | 1/1 | – | – | – | – | – | 100 | 99.5 | 99.5 | 99.5 | – |" in text
    assert "| parity | + T=3, encoder window w=1 (ours) | 1 | 1/1 | – | – | – | – | – | 100 | 99.5 | 99.5 | 99.5 | 99.5 |" in text
    reproduce.main(["table1", "--long-only", "--results", str(tmp_path)])
    assert len(calls) == 3  # already there: not tested again


def test_long_only_tests_only_the_long_lengths_a_record_lacks(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(reproduce, "test_cell", lambda cell, out, extra, version, lengths, samples: calls.append(
        (cell.key, version, lengths)) or ([{"length": n, "accuracy": 100.0, "samples": samples} for n in lengths], 1.0))
    (tmp_path / "table1").mkdir()
    (tmp_path / "table1" / "abs_parity.json").write_text(json.dumps(  # an older record, tested at 600 only
        {"rows": [{"length": 60, "accuracy": 100.0}, {"length": 600, "accuracy": 100.0}],
         "train_seconds": 1.0, "steps": 5, "command": "x"}))
    assert reproduce.main(["table1", "--long-only", "--only", "abs_parity", "--results", str(tmp_path)]) == 0
    assert calls == [("abs_parity", "long", [599, 601])]
    rows = json.loads((tmp_path / "table1" / "abs_parity.json").read_text())["rows"]
    assert [r["length"] for r in rows] == [60, 600, 599, 601]


def test_an_old_record_keeps_its_tables_commit_once_the_table_has_several(tmp_path):
    cell_dir = tmp_path / "table1"
    cell_dir.mkdir()
    old = {"rows": [{"length": 60, "accuracy": 100.0}], "train_seconds": 1.0, "steps": 5, "command": "x"}
    (cell_dir / "abs_parity.json").write_text(json.dumps(old))  # made before records kept their commit
    (tmp_path / "table1.json").write_text(json.dumps({"commit": "aaaaaaa", "date": "2020-01-01", "cells": []}))
    (cell_dir / "abs_nx1.json").write_text(json.dumps({**old, "commit": "bbbbbbb", "date": "2021-01-01"}))
    assert reproduce.main(["table1", "--table-only", "--results", str(tmp_path)]) == 0
    assert json.loads((cell_dir / "abs_parity.json").read_text())["commit"] == "aaaaaaa"
    assert reproduce.main(["table1", "--table-only", "--results", str(tmp_path)]) == 0  # now "several"
    assert "`aaaaaaa` (1 runs), `bbbbbbb` (1 runs)" in (tmp_path / "table1.md").read_text()


def test_a_capped_cell_is_marked_in_the_table(tmp_path):
    cell = Cell("successor", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Successor",), "abs_successor")
    record = {"rows": [{"length": 60, "accuracy": 97.0}], "train_seconds": 540.0, "steps": 1364,
              "stopped": "time cap", "command": cell.command}
    text = write_table("table1", [cell], {"abs_successor": record}, tmp_path)
    assert "| successor | + T=3 **(capped)** |" in text and "**capped** in 1 of 1 seeds: max_time ran out" in text
    record["stopped"] = "interpolated"
    assert "capped" not in write_table("table1", [cell], {"abs_successor": record}, tmp_path)


def test_a_cell_never_tested_at_60_digits_shows_a_dash_not_a_count(tmp_path):
    cell = Cell("successor", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Successor",), "abs_successor")
    record = {"rows": [{"length": 6, "accuracy": 0.0}, {"length": 20, "accuracy": 0.0}], "train_seconds": 5.0,
              "steps": 10, "stopped": "step budget", "command": cell.command}
    assert "| successor | + T=3 | 1 | – |" in write_table("table1", [cell], {"abs_successor": record}, tmp_path)
    record["rows"].append({"length": 60, "accuracy": 99.5})
    assert "| successor | + T=3 | 1 | 1/1 |" in write_table("table1", [cell], {"abs_successor": record}, tmp_path)


def test_long_lengths_that_fail_alike_share_one_line_under_the_table(tmp_path):
    cell = Cell("successor", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Successor",), "abs_successor")
    fail = {"length": 599, "input": "9" * 599, "output": "0", "expected": "1" + "0" * 599, "family": "all_nines"}
    rows = [{"length": n, "accuracy": 99.0, "worst": 50.0, "worst_families": {"all_nines": 0.0, "carry": 100.0},
             "worst_failures": [{**fail, "length": n}]} for n in (599, 600, 601)]
    rows[2]["worst_families"] = {"all_nines": 0.0, "carry": 50.0}  # 601 fails otherwise: a line of its own
    record = {"rows": [{"length": 60, "accuracy": 100.0}, *rows], "train_seconds": 1.0, "steps": 5, "command": "x"}
    text = write_table("table1", [cell], {"abs_successor": record}, tmp_path)
    failures = [line for line in text.split("below 100%")[1].splitlines() if line.startswith("- ")]
    assert [line.split(":")[0] for line in failures] == ["- successor / + T=3, 599, 600 digits",
                                                         "- successor / + T=3, 601 digits"]
    assert "all_nines 0% (`99999999…99999999 (599 chars)` gave `0`)" in failures[0]
    assert "carry 50%" in failures[1]


def test_hand_written_notes_are_numbered_once_under_the_table(tmp_path):
    cells = [Cell("successor", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Successor",), "abs_successor"),
             Cell("parity", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Parity",), "abs_parity")]
    shared, stopped = "ran beside another job", "its 600-digit test stopped early"
    rec = {"rows": [{"length": 60, "accuracy": 100.0}], "train_seconds": 10.0, "steps": 50, "command": "x"}
    records = {"abs_successor": [{**rec, "seed": s, "note": shared} for s in range(3)],
               "abs_parity": [{**rec, "seed": 0, "note": shared}, {**rec, "seed": 1, "note": stopped}, {**rec, "seed": 2}]}
    text = write_table("table1", cells, records, tmp_path)
    rows = [line for line in text.splitlines() if line.startswith(("| successor", "| parity"))]
    assert "median 10 s (50–50 steps); note 1 |" in rows[0]  # every seed carries it: no seeds named
    assert "median 10 s (50–50 steps); note 1 (seed 0), note 2 (seed 1) |" in rows[1]
    assert text.count(shared) == 1 and text.count(stopped) == 1
    assert text.endswith(f"1. {shared}\n2. {stopped}\n")
    del records["abs_parity"]
    assert "note 2" not in write_table("table1", cells, records, tmp_path)


def test_a_fit_records_why_it_stopped(tmp_path):
    from abc_lightning.cli import run_cli

    config = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")
    common = ["fit", "--config", config, "--trainer.enable_progress_bar=false", "--trainer.limit_val_batches=1",
              "--data.val_lengths=[6]", "--wandb.mode=disabled"]
    assert run_cli([*common, "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
                    "--trainer.logger.init_args.version=budget"]) == 0
    assert run_cli([*common, "--trainer.max_epochs=1000", "--trainer.max_time=00:00:00:02",
                    "--trainer.logger.init_args.version=capped"]) == 0
    stopped = {v: json.loads(Path(f"runs/debug/{v}/val_accuracy.json").read_text())["stopped"]
               for v in ("budget", "capped")}
    assert stopped == {"budget": "step budget", "capped": "time cap"}


def test_seeds_run_once_each_are_skipped_when_done_and_summarised_as_median_and_min(tmp_path, monkeypatch):
    seen = []
    accuracy = {0: 100.0, 1: 97.0, 2: 99.5}

    def fake_run(cell, out, extra):
        seen.append((cell.key, cell.seed, cell.command))
        return {"rows": [{"length": 60, "accuracy": accuracy[cell.seed]}], "train_seconds": 10.0 + cell.seed,
                "steps": 100 * (cell.seed + 1), "command": cell.command, "seed": cell.seed}

    monkeypatch.setattr(reproduce, "run_cell", fake_run)
    reproduce.main(["table1", "--only", "abs_parity", "--seeds", "0", "1", "--results", str(tmp_path)])
    assert [(k, s) for k, s, _ in seen] == [("abs_parity", 0), ("abs_parity.seed1", 1)]
    assert seen[0][2].endswith("--data=Parity")  # seed 0 is the documented command
    assert seen[1][2].endswith("--data=Parity --seed_everything=1 --data.seed=1")
    seen.clear()
    reproduce.main(["table1", "--only", "abs_parity", "--seeds", "0", "1", "2", "--results", str(tmp_path)])
    assert [(k, s) for k, s, _ in seen] == [("abs_parity.seed2", 2)]  # finished seeds are skipped
    text = (tmp_path / "table1.md").read_text()
    # median 99.5 and min 97 at 60 digits; 2 of 3 seeds at >= 99%
    assert "| parity | + T=3 | 3 | 2/3 | – | – | – | – | – | 99.5 / 97 |" in text
    assert "median 11 s (100–300 steps)" in text and "Seeds: 0, 1, 2" in text
    abc = next(c for c in reproduce.table3_cells() if c.key == "abc_parity").for_seed(3)
    assert abc.key == "abc_parity.seed3" and abc.command.endswith("--seed_everything=3 --data.seed=3")
    assert abc.for_seed(0).command == next(c for c in reproduce.table3_cells() if c.key == "abc_parity").command


def test_a_record_shows_the_overrides_given_after_double_dash():
    cell = next(c for c in reproduce.geometry_cells() if c.key == "successor_trailing_cross1")
    assert reproduce.recorded_command(cell, []) == cell.command
    assert reproduce.recorded_command(cell, ["--trainer.min_steps=2000"]) == cell.command + " --trainer.min_steps=2000"


def test_regenerate_command_names_the_seeds_and_threads_each_cell_has():
    cells = [Cell("successor", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Successor",), "abs_successor"),
             Cell("addition", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Addition",), "abs_addition"),
             Cell("parity", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Parity",), "abs_parity")]
    same = {"abs_successor": [{"seed": 0, "threads": "1"}, {"seed": 1, "threads": "1"}],
            "abs_addition": [{"seed": 0, "threads": "1"}, {"seed": 1, "threads": "1"}]}
    assert reproduce.regenerate_commands("table1", cells, same) == (
        "`OMP_NUM_THREADS=1 python -m abc_lightning reproduce table1 --seeds 0 1`")
    mixed = {**same, "abs_parity": [{"seed": 0, "threads": "all"}]}
    assert reproduce.regenerate_commands("table1", cells, mixed) == (
        "`OMP_NUM_THREADS=1 python -m abc_lightning reproduce table1 --seeds 0 1 --only abs_successor abs_addition` "
        "(2 cells); `python -m abc_lightning reproduce table1 --seeds 0 --only abs_parity` (1 cell)")


def test_a_table_of_one_commit_says_to_regenerate_it_from_that_commit(tmp_path):
    cell = Cell("parity", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Parity",), "abs_parity")
    record = {"rows": [{"length": 60, "accuracy": 100.0}], "train_seconds": 1.0, "steps": 5, "command": "x",
              "commit": "9f4639f", "seed": 0, "threads": "1"}
    text = write_table("table1", [cell], {"abs_parity": record}, tmp_path)
    assert ("Regenerate from a checkout of that commit (`git checkout 9f4639f`) into a folder of its own "
            "(add `--results <empty folder>`: finished cells are skipped, and a checkout's "
            "`results/<table>.records.json.gz` holds the records it was committed with): "
            "`OMP_NUM_THREADS=1 python -m abc_lightning reproduce table1 --seeds 0`") in text
    other = {**record, "commit": "3bd25e6", "seed": 1}
    several = write_table("table1", [cell], {"abs_parity": [record, other]}, tmp_path)
    assert "Regenerate each record from a checkout of its own commit (its `commit` field; " in several
    assert "git checkout 9f4639f" not in several and "git checkout 3bd25e6" not in several


def test_a_failed_run_is_one_line_the_others_finish_and_the_exit_status_says_so(tmp_path, monkeypatch, capsys):
    def fake_run(cell, out, extra):
        if cell.seed == 1:
            raise RuntimeError("command failed (1), see x.fit.log: python -m abc_lightning fit")
        return {"rows": [{"length": 60, "accuracy": 100.0}], "train_seconds": 1.0, "steps": 10,
                "command": cell.command, "seed": cell.seed}

    monkeypatch.setattr(reproduce, "run_cell", fake_run)
    status = reproduce.main(["table1", "--only", "abs_parity", "--seeds", "0", "1", "2", "--jobs", "2",
                             "--results", str(tmp_path)])
    out, err = capsys.readouterr()
    assert status == 1
    assert "[reproduce] table1: 3 run(s) to do, 2 at a time" in out
    assert "[reproduce] failed abs_parity.seed1: command failed (1)" in out
    assert "Traceback" not in out + err
    assert err.strip().splitlines() == [err.strip()] and "1 of 3 run(s) failed (abs_parity.seed1)" in err
    # the seeds that finished are kept and tabled; the failed one is what a rerun does
    assert sorted(p.name for p in (tmp_path / "table1").glob("*.json")) == ["abs_parity.json", "abs_parity.seed2.json"]
    assert "| parity | + T=3 | 2 | 2/2 |" in (tmp_path / "table1.md").read_text()
    # every line is whole: two runs at once never splice their lines
    assert all(line.count("[reproduce]") <= 1 for line in out.splitlines())


def test_progress_counts_runs_and_estimates_the_time_left():
    progress = reproduce.Progress(4)
    progress.start -= 600  # ten minutes in
    line = progress.done({"rows": [{"length": 6, "accuracy": 100.0}, {"length": 60, "accuracy": 99.5}]})
    assert line == "(1 of 4; 60 digits 99.5%; about 30 min left)"
    progress.finished = 3
    assert progress.done({"rows": []}) == "(4 of 4)"
    assert [markdown.duration(s) for s in (45, 720, 9000)] == ["45 s", "12 min", "2.5 h"]


def test_a_table_names_the_cpus_its_records_ran_on(tmp_path):
    cell = Cell("parity", "+ T=3", "configs/abs.yaml", 100.0, ("--data=Parity",), "abs_parity")
    record = {"rows": [{"length": 60, "accuracy": 100.0}], "train_seconds": 1.0, "steps": 5, "command": "x",
              "seed": 0}
    assert "CPU `" not in write_table("table1", [cell], {"abs_parity": record}, tmp_path)  # older records
    records = [{**record, "cpu": "Xeon, AVX512"}, {**record, "seed": 1, "cpu": "EPYC, AVX2"}]
    assert "CPU `EPYC, AVX2` and `Xeon, AVX512` (torch's kernels for it)" in write_table(
        "table1", [cell], {"abs_parity": records}, tmp_path)
    assert "trained and tested on" not in write_table("table1", [cell], {"abs_parity": records}, tmp_path)
    gpu = [records[0], {**records[1], "device": "cuda:0 (NVIDIA H100 80GB HBM3)"}]
    assert "; 1 run(s) trained and tested on `cuda:0 (NVIDIA H100 80GB HBM3)`" in write_table(
        "table1", [cell], {"abs_parity": gpu}, tmp_path)


@pytest.mark.parametrize("device", ["cpu", "cuda:0 (NVIDIA H100 80GB HBM3)"])
def test_a_record_names_the_gpu_its_fit_ran_on(tmp_path, monkeypatch, device):
    """The fit's run_info.json says where it trained; a record keeps a GPU, and says nothing for the CPU."""
    cell = next(c for c in reproduce.table1_cells() if c.key == "abs_parity")

    def fit(cmd, log):
        folder = tmp_path / "runs" / cell.key / "fit"
        folder.mkdir(parents=True)
        (folder / "val_accuracy.json").write_text(json.dumps({"global_step": 5, "stopped": "step budget"}))
        (folder / "run_info.json").write_text(json.dumps({"device": device}))
        return 1.0

    monkeypatch.setattr(reproduce, "run", fit)
    monkeypatch.setattr(reproduce, "test_cell", lambda *args, **kwargs: ([], 0.0))
    monkeypatch.setattr(reproduce, "long_rows", lambda *args: [])
    record = reproduce.run_cell(cell, tmp_path, [])
    assert record.get("device") == (None if device == "cpu" else device) and record["steps"] == 5


def test_the_runs_of_a_reproduce_call_record_the_cpu(tmp_path, monkeypatch):
    import torch

    monkeypatch.setitem(reproduce.RUN_INFO, "cpu", None)
    monkeypatch.setattr(reproduce, "run_cell", lambda cell, out, extra: {
        "rows": [], "train_seconds": 0.0, "steps": 0, "command": cell.command, **reproduce.RUN_INFO})
    assert reproduce.main(["table1", "--only", "abs_parity", "--results", str(tmp_path)]) == 0
    record = json.loads((tmp_path / "table1" / "abs_parity.json").read_text())
    assert record["cpu"].endswith(", " + torch.backends.cpu.get_cpu_capability())


def test_the_one_markdown_table_writer():
    from abc_lightning import markdown

    assert markdown.table(["a", "b"], [[1, ""], ["x", 2.5]], "rl") == ["| a | b |", "|---:|---|", "| 1 | |",
                                                                       "| x | 2.5 |"]
    assert markdown.line(["", "", "c"]) == "| | | c |"
    with pytest.raises(ValueError, match="align names 1 columns, the head 2"):
        markdown.table(["a", "b"], [], "r")


@pytest.mark.parametrize("override,says", [
    ("--data=Parity", "--data=Parity: an override cannot change a cell's task; choose cells with --only"),
    ("--model.d_model=-3", "d_model must be >= 1, got -3"),
    ("--trainer.max_epochz=3", "unrecognized arguments: --trainer.max_epochz=3"),
])
def test_overrides_that_cannot_work_are_refused_before_the_first_cell(tmp_path, monkeypatch, capsys, override, says):
    ran = []
    monkeypatch.setattr(reproduce, "run_cell", lambda *args: ran.append(args))
    with pytest.raises(SystemExit) as exited:
        reproduce.main(["table1", "--only", "abs_addition", "--results", str(tmp_path), "--", override])
    assert exited.value.code == 2 and not ran
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"abc_lightning: error: the overrides after -- do not work ({says}")
    assert err.endswith("nothing was run")
