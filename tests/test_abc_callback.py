"""The ABC callback's phases, artifacts and checkpoint round trip on a tiny model."""

import json
from pathlib import Path

import lightning as L
import pytest
import torch

from abc_lightning.calibration.bias import CalibratedBias, load_calibrated_bias
from abc_lightning.calibration.lines import CalibratedLines
from abc_lightning.calibration.options import Extension, Lines, Phases, Retraining
from abc_lightning.errors import CheckpointError
from abc_lightning.callbacks import AttentionBiasCalibration
from abc_lightning.training.callbacks import stop_reason
from abc_lightning.cli import ABCLightningCLI, run_cli

DEBUG = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")
CALLBACKS = ('--trainer.callbacks=[{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint", '
             '"init_args": {"save_last": true}}, {"class_path": "abc_lightning.callbacks.AttentionHeatmaps", '
             '"init_args": {"every_n_epochs": 0, "lengths": [6]}}]')
PAPER_FAST = '"preset": "paper", "phases": {"threshold": 0.0, "patience": 1}, "lines": {"samples": 16, "kappa_cross": 1.0}'


def abc(options: str = PAPER_FAST) -> list[str]:
    """The ABC strategy in the ``bias`` slot (paper preset, calibrating after one epoch), with
    a checkpoint and the heatmaps callback that draws the calibrated biases."""
    return [CALLBACKS, '--bias={"class_path": "AttentionBiasCalibration", "init_args": {' + options + '}}']


ABC = abc()
FAST = ["--trainer.limit_train_batches=3", "--trainer.limit_val_batches=1", "--trainer.enable_progress_bar=false",
        "--model.positional=Sinusoidal", "--data.val_lengths=[6]"]


@pytest.mark.slow
def test_phases_run_in_one_fit_and_artifacts_are_written():
    assert run_cli(["fit", "--config", DEBUG, *ABC, "--trainer.max_epochs=4", *FAST]) == 0
    run = Path("runs/debug/version_0")
    phases = json.loads((run / "abc" / "phases.json").read_text())
    assert phases["phase"] == "done"  # epoch 0 calibrates, epoch 1 ends the retraining
    assert json.loads((run / "val_accuracy.json").read_text())["stopped"] == "interpolated"  # not a cap or budget
    assert set(phases["seconds"]) == {"interpolate", "calibrate", "retrain", "figures"}
    assert phases["seconds"]["figures"] > 0  # the calibrated biases were drawn, outside both phases
    lines = torch.load(run / "abc" / "lines.pt", weights_only=True)
    assert set(lines) == {"cross", "decoder"}
    cross = CalibratedLines.from_state(lines["cross"])
    assert (cross.m, cross.n) == (10, 10)  # 9 output digits + EOS, and $ + 8 digits + &
    for png in ("cross_bias.png", "decoder_bias.png", "cross_bias_60.png"):
        assert (run / "abc" / png).stat().st_size > 1000
    reloaded = load_calibrated_bias(run / "abc" / "lines.pt")  # the artifact alone rebuilds the bias
    assert torch.equal(reloaded("cross", 12, 30, torch.device("cpu")),
                       CalibratedBias({"cross": cross})("cross", 12, 30, torch.device("cpu")))

    # test reads the calibrated bias back from the checkpoint it evaluates
    ckpt = run / "checkpoints" / "last.ckpt"
    state = torch.load(ckpt, weights_only=True)["callbacks"]["AttentionBiasCalibration"]
    assert state["phase"] == "done" and state["lines"]["cross"]["m"] == 10
    cli = ABCLightningCLI(args=["--config", DEBUG, *ABC, *FAST], run=False)
    cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=str(ckpt))
    assert "abc" in cli.model.model.bias_sources


def test_resume_restores_phase_and_bias():
    callback = AttentionBiasCalibration(lines=Lines(samples=8))
    callback.load_state_dict({"phase": "retrain", "streak": 1, "seconds": {"interpolate": 3.0},
                              "lines": {"cross": CalibratedLines(2, 3, []).state()}})
    assert callback.phase == "retrain" and callback.seconds["interpolate"] == 3.0
    assert isinstance(callback.lines["cross"], CalibratedLines)
    assert callback.state_dict()["lines"]["cross"]["n"] == 3


def test_bias_artifact_loading_refuses_pickled_code_and_foreign_files(tmp_path):
    import os

    import pytest

    torch.save({"cross": os.system}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="refused"):
        load_calibrated_bias(tmp_path / "evil.pt")
    torch.save({"cross": {"weights": torch.zeros(2)}}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not an ABC bias file"):
        load_calibrated_bias(tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not found"):
        load_calibrated_bias(tmp_path / "missing.pt")


def test_retrain_dropout_applies_at_the_boundary_and_on_resume():
    cli = ABCLightningCLI(args=["--config", DEBUG, "--model.dropout=0.0"], run=False)
    retraining = Retraining(dropout=0.25, positional="keep", anneal="off", lr="keep", budget="patience")
    callback = AttentionBiasCalibration(lines=Lines(samples=8), retraining=retraining)
    dropouts = [m for m in cli.model.modules() if isinstance(m, torch.nn.Dropout)]
    callback.on_fit_start(None, cli.model)  # interpolation phase: the model's own dropout
    assert dropouts and all(m.p == 0.0 for m in dropouts)
    callback.load_state_dict({"phase": "retrain", "lines": {}})
    callback.on_fit_start(None, cli.model)  # resumed in the retraining phase
    assert all(m.p == 0.25 for m in dropouts)


def test_per_layer_biases_are_drawn_layer_by_layer(tmp_path):
    from abc_lightning.calibration.lines import calibrate
    from abc_lightning.calibration.bias import draw_bias_figures
    from abc_lightning.data import data_module_for

    diagonal = torch.eye(10)[None].repeat(2, 1, 1)
    lines = {"cross": [calibrate(diagonal.clone(), kappa=1.0), calibrate(diagonal.clone(), kappa=1.0)]}
    written = draw_bias_figures(lines, data_module_for("successor"), tmp_path)
    assert sorted(p.name for p in written) == ["cross_bias_layer0.png", "cross_bias_layer0_60.png",
                                               "cross_bias_layer1.png", "cross_bias_layer1_60.png"]
    assert all(p.stat().st_size > 1000 for p in written)


def test_bad_options_are_refused_by_name():
    import pytest

    from abc_lightning.errors import ConfigError

    with pytest.raises(ConfigError, match="preset"):
        AttentionBiasCalibration(preset="mine")
    with pytest.raises(ConfigError, match="retraining.dropout"):
        AttentionBiasCalibration(retraining=Retraining(dropout=1.5))
    with pytest.raises(ConfigError, match="kinds"):
        AttentionBiasCalibration(lines=Lines(kinds=["crosss"]))
    with pytest.raises(ConfigError, match="threshold"):
        AttentionBiasCalibration(phases=Phases(threshold=1.5))
    with pytest.raises(ConfigError, match="self_verticals"):
        AttentionBiasCalibration(lines=Lines(self_verticals=-1))
    with pytest.raises(ConfigError, match="empty_layer"):
        AttentionBiasCalibration(lines=Lines(empty_layer="closed"))


def test_decoder_verticals_are_kept_on_the_first_steps_only():
    from abc_lightning.calibration.bias import lines_from_attention
    from abc_lightning.calibration.options import resolve

    a_bar = torch.full((2, 10, 10), 0.01).tril()
    a_bar[:, :, 0] = 0.5  # every step looks at the start token
    a_bar[:, 3:, 3] = 0.5  # and at the fourth output
    a_bar[:, torch.arange(10), torch.arange(10)] = 1.0  # and at itself
    found = {}
    for k in (1, "all"):
        options = resolve("project", lines=Lines(kinds=["decoder"], self_verticals=k, kappa_self=0.3))
        lines = lines_from_attention({"decoder": [a_bar]}, options, [], heads=2)["decoder"][0]
        vertical = next(d for d in lines.directions if d.delta == 0)
        found[k] = [vertical.c_min + int(i) for i in torch.nonzero(torch.isfinite(vertical.values[0])).flatten()]
    assert found == {1: [0], "all": [0, 3]}


def test_a_cross_layer_without_lines_reads_the_first_key_or_everything():
    """Diffuse attention keeps no line; ``first`` closes that layer to the start token at
    every size, ``open`` leaves it transparent; a layer with a line keeps its lines."""
    from abc_lightning.calibration.bias import lines_from_attention
    from abc_lightning.calibration.lines import extend
    from abc_lightning.calibration.options import resolve

    diffuse = torch.full((2, 6, 9), 1 / 9)
    lined = diffuse.clone()
    lined[:, torch.arange(6), 7 - torch.arange(6)] = 1.0  # an anti-diagonal
    segments = [(1, 3), (5, 3)]
    for empty, expect in (("first", "first"), ("open", "open")):
        options = resolve("project", lines=Lines(kinds=["cross"], empty_layer=empty))
        layers = lines_from_attention({"cross": [diffuse, lined]}, options, segments, heads=2)["cross"]
        for n_q, n_k in ((6, 9), (20, 37)):
            bias = extend(layers[0], n_q, n_k)
            if expect == "first":
                assert (bias[..., 0] == 0).all() and torch.isinf(bias[..., 1:]).all()
            else:
                assert (bias == 0).all()
        assert torch.isinf(extend(layers[1], 6, 9)).any() and not torch.isfinite(extend(layers[1], 6, 9)[..., 0]).all()


def test_retrain_positional_none_switches_positions_off_after_calibration_and_on_test():
    from abc_lightning.model import Sinusoidal

    cli = ABCLightningCLI(args=["--config", DEBUG, "--model.positional=Sinusoidal"], run=False)
    model = cli.model.model
    assert isinstance(model.positional, Sinusoidal)
    callback = AttentionBiasCalibration(lines=Lines(samples=8), retraining=Retraining(positional="none"))
    callback.on_fit_start(None, cli.model)  # interpolating: positions on
    assert model.use_positional
    src = torch.randint(0, 10, (2, 12))
    with_positions = model.encode(src)[0]
    callback.load_state_dict({"phase": "done", "lines": {}})
    callback.on_test_start(None, cli.model)  # a finished run is tested as it was retrained
    assert not model.use_positional
    assert model.rotary_for("decoder") is None and model.attention_bias("encoder", torch.arange(12), torch.arange(12)) is None
    assert not torch.allclose(model.encode(src)[0], with_positions)  # the sinusoids are no longer added


@pytest.mark.slow
def test_beyond_the_paper_options_reach_the_saved_lines_and_the_tested_model():
    options = ('"preset": "paper", "phases": {"threshold": 0.0, "patience": 1}, "lines": {"samples": 16, '
               '"kappa_cross": 1.0, "per_layer": true, "lineless": "union"}, "extension": {"align": "segments"}, '
               '"retraining": {"encoder_diagonal": true, "positional": "none"}')
    args = ["--config", DEBUG, *abc(options), *FAST, "--data=Addition"]
    assert run_cli(["fit", *args, "--trainer.max_epochs=3"]) == 0
    run = Path("runs/debug/version_0")
    lines = torch.load(run / "abc" / "lines.pt", weights_only=True)
    cross = [CalibratedLines.from_state(s) for s in lines["cross"]]
    assert all(c.segments == [(1, 8), (10, 8)] and c.lineless == "union" for c in cross)  # "$ a + b &", width 8
    encoder = CalibratedLines.from_state(lines["encoder"])
    bias = load_calibrated_bias(run / "abc" / "lines.pt")("encoder", 7, 7, torch.device("cpu"))
    assert encoder.n == 1 and torch.equal(torch.isfinite(bias[0]), torch.eye(7, dtype=torch.bool))
    cli = ABCLightningCLI(args=args, run=False)
    cli.trainer.test(cli.model, datamodule=cli.datamodule, ckpt_path=str(run / "checkpoints" / "last.ckpt"))
    assert not cli.model.model.use_positional and "abc" in cli.model.model.bias_sources


def test_encoder_diagonal_and_encoder_calibration_exclude_each_other():
    import pytest

    from abc_lightning.errors import ConfigError

    with pytest.raises(ConfigError, match="encoder_diagonal"):
        AttentionBiasCalibration(lines=Lines(kinds=["cross", "encoder"]), retraining=Retraining(encoder_diagonal=True))
    # a misspelt choice is refused by the command line's type check, by name
    with pytest.raises(SystemExit) as exit_:
        run_cli(["fit", "--config", DEBUG, "--bias=AttentionBiasCalibration", "--bias.extension.align=left"])
    assert exit_.value.code == 2 and not Path("runs").exists()


@pytest.mark.slow
def test_retrain_lr_and_anneal_set_the_optimizer_rate_and_are_checkpointed(tmp_path):
    import pytest

    from abc_lightning.errors import ConfigError

    options = PAPER_FAST.replace('"patience": 1', '"patience": 1, "retrain_patience": 1') + \
        ', "retraining": {"lr": 0.004, "anneal": 0.25}'
    cli = ABCLightningCLI(args=["--config", DEBUG, *abc(options), "--trainer.max_epochs=2", *FAST,
                                f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false", "--wandb.mode=disabled",
                                "--model.lr=0.001"], run=False)
    rates = []

    class Watch(L.Callback):
        def on_train_epoch_start(self, trainer, pl_module):
            rates.append(trainer.optimizers[0].param_groups[0]["lr"])

    cli.trainer.callbacks.append(Watch())
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    callback = next(c for c in cli.trainer.callbacks if isinstance(c, AttentionBiasCalibration))
    # epoch 0 interpolates at the model's rate; its validation calibrates (retrain_lr), and
    # the next one, at the threshold, anneals before the patience is counted
    assert rates == [pytest.approx(0.001), pytest.approx(0.004)]
    assert callback.annealed and callback.phase == "retrain"
    assert cli.trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.001)
    assert callback.state_dict()["annealed"]
    with pytest.raises(ConfigError, match="retraining.lr"):
        AttentionBiasCalibration(retraining=Retraining(lr=0.0))
    with pytest.raises(ConfigError, match="anneal"):
        AttentionBiasCalibration(retraining=Retraining(anneal=2.0))


def test_presets_fill_what_a_config_leaves_out():
    from abc_lightning.calibration.options import PRESETS

    paper = AttentionBiasCalibration(preset="paper").options
    assert paper == PRESETS["paper"] and paper.lines.kappa("cross") == 4.5 and paper.lines.source == "scores"
    mixed = AttentionBiasCalibration(preset="project", lines=Lines(kappa_self="off"),
                                     extension=Extension(align="corner")).options
    assert mixed.lines.kappa("decoder") is None and mixed.lines.kappa("cross") == 3.0  # the rest is the preset's
    assert mixed.extension.align == "corner" and mixed.retraining == PRESETS["project"].retraining


def _two_operand_attention(read_first: bool) -> list[torch.Tensor]:
    """Averaged cross-attention of 2 heads, 6 answer steps over ``$ a(3) + b(3) &`` (9 keys):
    layer 0 reads b's aligned digit (anti-diagonal c = 7) sharply, and a's (c = 3) sharply
    too or only faintly."""
    layers = []
    for strength in (1.0, 1.0 if read_first else 0.12):
        a_bar = torch.full((2, 6, 9), 0.05)
        a_bar[0, torch.arange(6), 7 - torch.arange(6)] = 1.0  # head 0: b, row i at key 7 − i
        rows = torch.arange(4)  # a's anti-diagonal leaves the input after 4 rows
        a_bar[1, rows, 3 - rows] = strength
        layers.append(a_bar)
    return layers


@pytest.mark.filterwarnings("ignore:ABC drop-off")
def test_an_operand_no_line_reads_is_found_and_cover_adds_its_best_line():
    """With κ the faint line to operand a is dropped: a is unread, and ``cover: operands``
    keeps that line (c = 3 in head 1) and nothing else; a calibration that reads both
    operands is the same with and without ``cover``."""
    from abc_lightning.calibration.bias import lines_from_attention, unread_operands
    from abc_lightning.calibration.options import resolve

    segments = [(1, 3), (5, 3)]
    faint = _two_operand_attention(read_first=False)[1:]
    plain = resolve("project", lines=Lines(kinds=["cross"], cover="off"))
    covered = resolve("project", lines=Lines(kinds=["cross"], cover="operands"))
    before = lines_from_attention({"cross": faint}, plain, segments, heads=2)
    assert unread_operands(before, segments) == [0]
    after = lines_from_attention({"cross": faint}, covered, segments, heads=2)
    assert unread_operands(after, segments) == []
    anti = lambda lines: next(d for d in lines["cross"][0].directions if d.delta == -1)  # noqa: E731
    added = torch.isfinite(anti(after).values) & ~torch.isfinite(anti(before).values)
    assert added.nonzero().tolist() == [[1, 3 - anti(after).c_min]]  # head 1, the line at c = 3

    sharp = _two_operand_attention(read_first=True)
    both = lines_from_attention({"cross": sharp}, plain, segments, heads=2)
    assert unread_operands(both, segments) == []
    same = lines_from_attention({"cross": sharp}, covered, segments, heads=2)
    for x, y in zip(both["cross"], same["cross"]):
        for d, e in zip(x.directions, y.directions):
            assert torch.equal(d.values, e.values)


@pytest.mark.parametrize("cover, said", [("operands", "lines.cover kept its best line below κ"),
                                         ("off", "calibrated no cross-attention line that reads the operand")])
@pytest.mark.slow
def test_calibration_saves_the_interpolating_weights_and_reports_unread_operands(capsys, cover, said):
    """A fit that calibrates writes ``abc/interpolated.pt`` (the weights the lines came from)
    and, where an operand is left unread under the position-wise encoder, says so in one
    line (a warning when ``lines.cover`` is off) and in ``phases.json``."""
    options = ('"preset": "project", "phases": {"threshold": 0.0, "patience": 1, "retrain_patience": 1}, '
               f'"lines": {{"samples": 16, "kappa_cross": 100.0, "cover": "{cover}"}}')  # κ: no line survives
    args = ["fit", "--config", DEBUG, *abc(options), "--data=Addition", "--trainer.max_epochs=2", *FAST]
    assert run_cli(args) == 0
    run = Path("runs/debug/version_0")
    saved = torch.load(run / "abc" / "interpolated.pt", weights_only=True)
    assert saved["step"] == 3 and any(k.startswith("decoder") or "layers" in k for k in saved["state_dict"])
    phases = json.loads((run / "abc" / "phases.json").read_text())
    assert phases["unread_operands"] and all(len(span) == 2 for span in phases["unread_operands"])
    assert said in capsys.readouterr().out


@pytest.mark.slow
def test_a_retraining_budget_lasts_the_interpolations_steps_along_a_cosine(tmp_path):
    """retraining.budget=1: interpolation took 2 epochs (6 steps), so retraining runs 6 steps,
    its rate falling from the retraining's to 0 on a cosine, and the fit stops there."""
    from abc_lightning.errors import ConfigError

    options = PAPER_FAST.replace('"patience": 1', '"patience": 2') + ', "retraining": {"lr": 0.004, "budget": 1.0}'
    cli = ABCLightningCLI(args=["--config", DEBUG, *abc(options), "--trainer.max_epochs=10", *FAST,
                                f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false",
                                "--wandb.mode=disabled", "--model.lr=0.001"], run=False)
    rates = []

    class Watch(L.Callback):
        def on_before_optimizer_step(self, trainer, pl_module, optimizer):
            rates.append(optimizer.param_groups[0]["lr"])

    cli.trainer.callbacks.append(Watch())
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    callback = next(c for c in cli.trainer.callbacks if isinstance(c, AttentionBiasCalibration))
    assert callback.phase == "done" and callback.steps == {"interpolate": 6, "retrain": 6}
    assert cli.trainer.global_step == 12
    assert stop_reason(cli.trainer) == "retraining budget"  # not "interpolated": the budget, not the threshold, ended it
    assert rates[:6] == [pytest.approx(0.001)] * 6
    assert rates[6] == pytest.approx(0.004) and rates[9] == pytest.approx(0.002)
    assert all(a > b for a, b in zip(rates[6:], rates[7:])) and rates[11] < 0.0004
    with pytest.raises(ConfigError, match="retraining.budget must be patience or a number > 0"):
        AttentionBiasCalibration(retraining=Retraining(budget=0))


def test_the_retraining_rate_follows_its_budget_or_anneal():
    cosine = Retraining(lr="keep", anneal="off", budget=0.5)
    assert [cosine.rate(0.002, done, False) for done in (0.0, 0.5, 1.0, 1.5)] == pytest.approx([0.002, 0.001, 0, 0])
    annealed = Retraining(lr=0.01, anneal=0.1, budget="patience")
    assert annealed.rate(0.002, 0.0, False) == 0.01 and annealed.rate(0.002, 0.0, True) == pytest.approx(0.001)
    assert Retraining(lr="keep", anneal="off", budget="patience").rate(0.002, 0.3, True) is None  # the model's own


def test_figures_drawn_during_a_phase_are_left_out_of_its_time(monkeypatch):
    from abc_lightning.calibration import callback as calibration

    cb = AttentionBiasCalibration()
    with monkeypatch.context() as patch:  # a clock that reads 10 s at the phase's start, 20 s at its end
        patch.setattr(calibration.time, "perf_counter", iter([10.0, 20.0]).__next__)
        cb.on_fit_start(None, None)
        cb.exclude(2.5)  # 2.5 s of heatmaps, just drawn
        cb._tick()
    assert cb.seconds["interpolate"] == 7.5 and cb.seconds["figures"] == 2.5


@pytest.mark.parametrize("lines,says", [
    ('"layer": 99', "bias.lines.layer=99: the model has 2 decoder layer(s), so the layer is one of -2..1"),
    ('"layer": -3', "bias.lines.layer=-3: the model has 2 decoder layer(s)"),
])
def test_a_layer_the_model_does_not_have_is_refused_before_training(capsys, tmp_path, monkeypatch, lines, says):
    monkeypatch.chdir(tmp_path)
    options = '"preset": "paper", "lines": {' + lines + '}'
    assert run_cli(["fit", "--config", DEBUG, *abc(options), *FAST, "--wandb.mode=disabled"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"abc_lightning: error: {says}"), err
    assert not (tmp_path / "runs").exists()
