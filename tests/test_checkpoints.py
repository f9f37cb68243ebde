"""Checkpoints carry their config; predict and test need only the checkpoint; the Python API."""

import json
from pathlib import Path

import pytest
import torch

from abc_lightning import load
from abc_lightning.runs.checkpoints import CONFIG_KEY, load_checkpoint
from abc_lightning.cli import run_cli

ROOT = Path(__file__).resolve().parents[1]
DEBUG = str(ROOT / "configs" / "debug.yaml")
FAST = ["--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false", "--data.val_lengths=[6]"]
ABC = ['--trainer.callbacks=[{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint", "init_args": {"save_last": true}}]',
       '--bias={"class_path": "AttentionBiasCalibration", "init_args": {"preset": "paper", '
       '"phases": {"threshold": 0.0, "patience": 1}, "lines": {"samples": 16, "kappa_cross": 1.0}}}']
INPUTS = ["1299", "99999999", "5", "123456789012", "7"]


@pytest.fixture
def abs_checkpoint() -> str:
    assert run_cli(["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=20", *FAST]) == 0
    return "runs/debug/version_0/checkpoints/last.ckpt"


@pytest.fixture
def abc_checkpoint() -> str:
    assert run_cli(["fit", "--config", DEBUG, *ABC, "--trainer.max_epochs=3",
                    "--trainer.limit_train_batches=3", "--model.positional=Sinusoidal", *FAST]) == 0
    return "runs/debug/version_0/checkpoints/last.ckpt"


def predicted(capsys, args: list[str]) -> list[dict]:
    capsys.readouterr()
    assert run_cli(["predict", *args, f"--data.predict_inputs={json.dumps(INPUTS)}"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    folder = Path(out.rsplit("every answer in ", 1)[1].strip()).parent
    return [json.loads(line) for line in (folder / "predictions.jsonl").read_text().splitlines()]


def test_a_checkpoint_carries_its_resolved_config(abs_checkpoint):
    import yaml

    config = yaml.safe_load(load_checkpoint(abs_checkpoint)[CONFIG_KEY])
    assert config["model"]["d_model"] == 32 and config["data"]["class_path"].endswith(".Successor")
    assert config["model"]["positional"]["class_path"].endswith("NoPE")
    assert config["bias"]["class_path"].endswith("AttentionWindow")


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["abs", "abc"])
def test_predict_from_the_checkpoint_alone_matches_predict_with_its_config(capsys, request, strategy):
    ckpt = request.getfixturevalue(f"{strategy}_checkpoint")
    config = [*ABC, "--model.positional=Sinusoidal", *FAST] if strategy == "abc" else []
    alone = predicted(capsys, ["--ckpt_path", ckpt])
    with_config = predicted(capsys, ["--config", DEBUG, *config, "--ckpt_path", ckpt])
    assert [r["input"] for r in alone] == INPUTS  # in the order given, though decoded in length groups
    assert alone == with_config
    if strategy == "abc":  # the calibrated bias came back from the checkpoint
        model = load(ckpt).module.model
        assert "abc" in model.bias_sources


@pytest.mark.parametrize("args,named", [
    (["--config", DEBUG, "--data=Parity"], "data.class (checkpoint Successor, given Parity)"),
    (["--model.d_model=64"], "model.d_model (checkpoint 32, given 64)"),
    (["--bias.self_width=2"], "bias.AttentionWindow.self_width (checkpoint 1, given 2)"),
])
def test_a_conflicting_config_is_refused_with_the_keys_named(capsys, abs_checkpoint, args, named):
    assert run_cli(["predict", *args, "--ckpt_path", abs_checkpoint, '--data.predict_inputs=["1011"]']) == 2
    err = capsys.readouterr().err
    assert "was trained with another config" in err and named in err


def test_resuming_a_fit_under_another_config_is_refused(capsys, abs_checkpoint):
    args = ["fit", "--config", str(ROOT / "configs" / "abs.yaml"), "--ckpt_path", abs_checkpoint]
    assert run_cli(args) == 2
    assert "Resume with the config it was trained with" in capsys.readouterr().err


def test_evaluation_settings_may_change(capsys, abs_checkpoint):
    assert run_cli(["test", "--ckpt_path", abs_checkpoint, "--data.test_lengths=[6, 12]", "--data.test_samples=50",
                    "--data.eval_batch_size=7"]) == 0
    record = json.loads(next(Path("runs/debug").glob("version_0/test/version_*/test_accuracy.json")).read_text())
    assert [r["length"] for r in record["rows"]] == [6, 12] and record["rows"][0]["samples"] == 50


def test_a_wrong_answer_shows_both_raw_outputs(capsys, abs_checkpoint, monkeypatch):
    from abc_lightning.model.transformer import Seq2SeqTransformer

    real = Seq2SeqTransformer.generate
    monkeypatch.setattr(Seq2SeqTransformer, "generate", lambda self, src, steps, **kw: real(self, src, steps, **kw)
                        .index_fill(1, torch.tensor([steps - 1]), 0))  # never writes EOS: a cut-off answer
    rows = predicted(capsys, ["--ckpt_path", abs_checkpoint])
    assert not any(r["correct"] for r in rows)
    assert all(r["raw_expected"].endswith("&") and not r["raw_output"].endswith("&") for r in rows)


def test_predict_reads_a_file_and_writes_jsonl(capsys, abs_checkpoint):
    Path("inputs.txt").write_text("12\n\n345\n6789\n")
    capsys.readouterr()
    assert run_cli(["predict", "--ckpt_path", abs_checkpoint, "--data.predict_file=inputs.txt"]) == 0
    out = capsys.readouterr().out
    assert "of 3 right" in out
    rows = [json.loads(x) for x in next(Path("runs").rglob("predictions.jsonl")).read_text().splitlines()]
    assert [r["input"] for r in rows] == ["12", "345", "6789"]
    assert {"output", "expected", "correct", "raw_output", "raw_expected"} <= set(rows[0])
    assert run_cli(["predict", "--ckpt_path", abs_checkpoint, "--data.predict_file=missing.txt"]) == 2


def test_the_python_api_predicts_evaluates_and_returns_attention(abs_checkpoint, capsys):
    def files():
        return sorted(str(p) for p in Path.cwd().rglob("*"))

    before = files()
    m = load(abs_checkpoint)
    answers = m.predict(INPUTS)
    evaluated = m.evaluate(lengths=[6, 12], samples=64)
    maps = m.attention("1299")
    assert files() == before  # nothing written to disk
    assert answers == [r["output"] for r in predicted(capsys, ["--ckpt_path", abs_checkpoint])]  # the CLI's answers
    assert [(r["length"], r["samples"]) for r in evaluated] == [(6, 64), (12, 64)]
    assert run_cli(["test", "--ckpt_path", abs_checkpoint, "--data.test_lengths=[6, 12]",
                    "--data.test_samples=64"]) == 0  # the same protocol on the command line
    tested = json.loads(next(Path("runs/debug").glob("version_0/test/version_*/test_accuracy.json")).read_text())["rows"]
    assert [r["accuracy"] for r in tested] == [r["accuracy"] for r in evaluated]
    assert set(maps) == {"encoder", "decoder", "cross"} and len(maps["decoder"]) == 2
    heads, q, k = maps["cross"][0].shape
    assert heads == 2 and torch.allclose(maps["cross"][0].sum(-1), torch.ones(heads, q))
    assert (maps["decoder"][-1][:, 3, 4:] == 0).all()  # causal: step 3 sees nothing after it


def test_a_checkpoint_of_version_0_1_is_refused_with_one_line(capsys):
    """0.2 grew the vocabulary to 32 tokens and chose tasks by class: 0.1 checkpoints cannot load."""
    old_config = "model: {d_model: 32}\ndata: {task: successor, aligned: false}\n"
    torch.save({"state_dict": {"model.embedding.weight": torch.zeros(15, 32)}, CONFIG_KEY: old_config}, "old.ckpt")
    assert run_cli(["test", "--ckpt_path", "old.ckpt"]) == 2
    err = capsys.readouterr().err
    assert "written by abc_lightning 0.1" in err and "Traceback" not in err
    assert not Path("runs").exists()


def test_a_checkpoint_naming_a_renamed_module_still_loads_its_config():
    # CyclicIndex lived in abc_lightning.model.positions before it moved to position_index
    from abc_lightning.runs.checkpoints import CONFIG_KEY, stored_config

    old = {CONFIG_KEY: "model:\n  position_index:\n    class_path: abc_lightning.model.positions.CyclicIndex\n"}
    assert "abc_lightning.model.position_index.CyclicIndex" in stored_config(old)
    assert "model.positions." not in stored_config(old)


def test_a_checkpoint_with_nan_weights_is_refused_to_load_and_to_start_from(capsys, abs_checkpoint, tmp_path):
    ckpt = torch.load(abs_checkpoint, weights_only=True)
    key = next(iter(ckpt["state_dict"]))
    ckpt["state_dict"][key].view(-1)[0] = float("nan")
    diverged = tmp_path / "diverged.ckpt"
    torch.save(ckpt, diverged)
    says = f"abc_lightning: error: {diverged}: weight {key} holds 1 NaN or infinite value(s) (the run diverged)"
    for args in (["predict", "--ckpt_path", str(diverged), '--data.predict_inputs=["12"]'],
                 ["fit", "--config", DEBUG, *FAST, "--trainer.max_epochs=1", f"--model.init_from={diverged}"]):
        capsys.readouterr()
        assert run_cli(args) == 2
        assert capsys.readouterr().err.strip().splitlines()[-1].startswith(says)
    with pytest.raises(Exception, match="NaN or infinite"):
        load(str(diverged))


def test_a_long_answer_shows_its_decoding_progress(capsys, abs_checkpoint, monkeypatch):
    """Answers of PROGRESS_TOKENS tokens or more (a 200×200 product: minutes) show a bar on
    stderr with the tokens decoded; shorter ones decode without one."""
    from abc_lightning import evaluation

    monkeypatch.setattr(evaluation, "PROGRESS_TOKENS", 50)
    capsys.readouterr()
    assert run_cli(["predict", "--ckpt_path", abs_checkpoint, f'--data.predict_inputs=["{"9" * 60}", "12"]']) == 0
    err = capsys.readouterr().err
    assert "decoding 1 answer(s)" in err and "token" in err  # the 60-digit answer's bar, not the 2-digit one's
