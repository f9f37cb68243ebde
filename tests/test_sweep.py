"""Sweep YAMLs expand to commands the real CLI parses; the local runner runs and resumes them."""

import json
import sys
from pathlib import Path

import pytest
import yaml

from abc_lightning.reproduce import sweep
from abc_lightning.cli.check import ParseOnly
from abc_lightning.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
SWEEPS = sorted((ROOT / "sweeps").glob("*.yaml"))


def cli_args(cmd: list[str]) -> list[str]:
    """The arguments after ``python -m abc_lightning``, config paths made absolute."""
    args = cmd[cmd.index("abc_lightning") + 1 :]
    return [str(ROOT / a) if a.startswith("configs/") else a for a in args]


def test_there_is_a_grid_for_w_t_scheme_and_kappa_and_a_random_example():
    names = {p.stem for p in SWEEPS}
    assert {"abs_grid", "abc_kappa"} <= names
    assert sweep.load(SWEEPS[0].parent / "abc_kappa.yaml")["parameters"]["data"]["values"] == [
        "Successor", "Addition", "Nx1", "Parity"]  # Table 3's tasks, one preset
    assert any(sweep.load(p).get("method") == "random" for p in SWEEPS)


def test_sweeps_reach_the_bias_strategy_by_its_slot_not_its_place_in_a_list():
    for path in SWEEPS:
        keys = sweep.load(path)["parameters"]
        assert not any(k.startswith("trainer.callbacks") for k in keys), path.name
    assert "bias.self_width" in sweep.load(ROOT / "sweeps" / "abs_grid.yaml")["parameters"]


@pytest.mark.slow
@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.stem)
def test_every_combination_parses_with_the_real_cli(path):
    spec = sweep.load(path)
    assert "${args}" in spec["command"] and spec["command"].index("${args}") > spec["command"].index("--config")
    combos = sweep.expand(spec, count=4)
    assert combos
    for params in combos:
        assert all(v is not None for v in params.values()), "W&B renders None as --k=None"
        args = cli_args(sweep.command(spec, params))
        cli = ParseOnly(args=args)
        cfg = cli.config[cli.config.subcommand]
        for key, value in params.items():  # the override reached the parsed config
            node = cfg
            for part in key.split("."):
                node = node[-1] if isinstance(node, list) else node
                node = node["init_args"][part] if part not in node and "init_args" in node else node[part]
            assert str(value) in (str(node), getattr(node, "class_path", "").rsplit(".", 1)[-1]), (key, node)


def test_none_would_be_rendered_as_wandb_does_and_is_rejected(capsys):
    spec = {"parameters": {"trainer.callbacks.init_args.cross_width": {"values": [None]}},
            "command": ["python", "-m", "abc_lightning", "fit", "--config", "configs/abs.yaml", "${args}"]}
    cmd = sweep.command(spec, {"trainer.callbacks.init_args.cross_width": None})
    assert cmd[-1] == "--trainer.callbacks.init_args.cross_width=None"  # what W&B's agent would pass
    with pytest.raises(ConfigError, match="null value"):
        sweep.expand(spec)


def test_flow_style_needs_quoted_macros():
    assert yaml.safe_load('command: [python, "${args}"]')["command"] == ["python", "${args}"]
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load("command: [python, ${args}]")


def test_random_search_draws_count_combinations_reproducibly():
    spec = sweep.load(ROOT / "sweeps" / "abs_parity_random.yaml")
    a, b = sweep.expand(spec, count=5), sweep.expand(spec, count=5)
    assert a == b and len(a) == 5 and len(sweep.expand(spec)) == spec["run_cap"]
    assert all(2 <= p["model.position_index.period"] <= 6 and 3e-4 <= p["model.lr"] <= 3e-3 for p in a)


def test_local_runner_runs_in_parallel_and_resumes_without_rerunning(tmp_path):
    log = tmp_path / "calls.txt"
    script = (f"import sys; open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n'); "
              "sys.exit(1 if '--b=fail' in sys.argv else 0)")
    spec = {"name": "toy", "method": "grid", "parameters": {"a": {"values": [1, 2]}, "b": {"values": ["x", "fail"]}},
            "command": ["python", "-c", script, "${args}"]}
    (tmp_path / "toy.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "records"
    assert sweep.main([str(tmp_path / "toy.yaml"), "--parallel", "2", "--out", str(out)]) == 1  # two fail
    assert len(log.read_text().splitlines()) == 4
    records = sorted(p for p in (out / "toy").iterdir() if p.is_dir())
    assert len(records) == 4 and all((r / "exit_code").exists() for r in records)
    assert json.loads((records[0] / "command.json").read_text())[0] == sys.executable
    sweep.main([str(tmp_path / "toy.yaml"), "--out", str(out)])  # resume: only the failed ones again
    calls = log.read_text().splitlines()
    assert len(calls) == 6 and all("--b=fail" in c for c in calls[4:])


def test_bad_sweep_files_get_one_line(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("method: bayes\nparameters: {a: {values: [1]}}\n")
    assert sweep.main([str(tmp_path / "bad.yaml")]) == 2
    assert "use grid or random" in capsys.readouterr().err
    assert sweep.main([str(tmp_path / "missing.yaml")]) == 2


@pytest.mark.parametrize("parameter,message", [
    ("{values: []}", "a sweep over an empty list runs nothing"),
    ("{values: 3}", "give a list of at least one value"),
    ("{min: 5, max: 1}", "min 5 above max 1"),
    ("{min: 1}", "has min but no max"),
])
def test_a_grid_that_would_run_nothing_or_a_range_upside_down_is_refused(tmp_path, capsys, parameter, message):
    (tmp_path / "empty.yaml").write_text(f"method: random\nrun_cap: 2\nparameters: {{model.lr: {parameter}}}\n")
    assert sweep.main([str(tmp_path / "empty.yaml"), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_a_misspelt_parameter_name_fails_the_parse_check():
    spec = sweep.load(ROOT / "sweeps" / "abs_grid.yaml")
    spec["parameters"] = {"bias.self_widht": {"values": [1]}}  # sic
    with pytest.raises(SystemExit):
        ParseOnly(args=cli_args(sweep.command(spec, sweep.expand(spec)[0])))


def test_gpus_the_machine_does_not_have_are_refused(capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert sweep.main([str(ROOT / "sweeps" / "abs_grid.yaml"), "--gpus", "0", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "abc_lightning: error: --gpus 0: torch sees no CUDA GPU here, not GPU 0; leave --gpus out to run on the CPU")
