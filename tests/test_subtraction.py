"""Subtraction, the first task added as one file: its answers, worst cases, input forms and cells."""

from pathlib import Path

import numpy as np
import pytest

from abc_lightning import vocab
from abc_lightning.cli import ABCLightningCLI, run_cli
from abc_lightning.data import data_module_for, eval_size
from abc_lightning.errors import InputError
from abc_lightning.tasks import TASKS, get_task
from tests.helpers import as_int, worst_case_rows


ROOT = Path(__file__).resolve().parents[1]




def test_it_is_registered_with_a_data_module_and_its_cells():
    from abc_lightning import reproduce

    assert "subtraction" in TASKS and type(data_module_for("subtraction")).__name__ == "Subtraction"
    cells = {c.key: c for c in reproduce.all_cells()}
    assert {"subtraction_vanilla", "abs_subtraction", "subtraction_nope_w1", "abc_subtraction"} <= set(cells)
    assert all(cells[k].home == "beyond" for k in ("abs_subtraction", "abc_subtraction"))
    # its ABS cell is the config with nothing else: configs/abs.yaml's period: task gives it 2
    assert cells["abs_subtraction"].command == "python -m abc_lightning fit --config configs/abs.yaml --data=Subtraction"
    assert cells["abs_subtraction"].label == "+ T=2"


def test_the_worked_example_of_the_docstring():
    t = get_task("subtraction")
    ops = t.operands_from_text(["9003", "958"], 8)
    assert vocab.decode(t.source(ops)[0]) == "$00009003-00000958&"
    assert vocab.decode(t.source(ops, aligned=True)[0]) == "$-0000000090090538&"
    assert list(t.target(ops)[0]) == [5, 4, 0, 8, 0, 0, 0, 0] and t.format_answer(list(t.target(ops)[0])) == "8045"


@pytest.mark.parametrize("length", [1, 2, 6, 7, 60, 600])
def test_random_samples_are_ordered_and_answered_as_python_integers(length):
    t = get_task("subtraction")
    a, b = t.sample(np.random.default_rng(length), eval_size(length, 300), length)
    target = t.target([a, b])
    for i in range(a.shape[0]):
        x, y = as_int(a[i]), as_int(b[i])
        assert x >= y and len(str(x)) == len(str(y)) == length
        assert as_int(target[i][::-1]) == x - y


def test_the_training_pool_is_ordered_too():
    train = data_module_for("subtraction").train_set
    t = get_task("subtraction")
    width = t.train_width
    a, b = train.src[:500, 1 : 1 + width].numpy(), train.src[:500, 2 + width : 2 + 2 * width].numpy()
    assert all(as_int(x) >= as_int(y) for x, y in zip(a, b))
    assert all(as_int(x) - as_int(y) == as_int(out[:-1][::-1]) for x, y, out in zip(a, b, train.tgt_out[:500].numpy()))


@pytest.mark.parametrize("length", [1, 2, 7, 60, 600])
def test_worst_cases_are_right_and_hold_the_borrow_chains_they_claim(length):
    _, rows = worst_case_rows("subtraction", length)
    texts = [text for text, _ in rows]
    assert texts
    for text, target in rows:
        x, y = (int(p) for p in text.split("-"))
        assert x >= y and as_int(target[::-1]) == x - y
    if length >= 7:
        # 10…0 − 1: the borrow starts in the last column and crosses every other one
        row = texts.index("1" + "0" * (length - 1) + "-1")
        x = 10 ** (length - 1)
        borrows = [(x % 10**i) < (1 % 10**i) for i in range(1, length)]
        assert all(borrows)


@pytest.mark.parametrize("text", ["12-", "5-9", "12+3", "-5", "1-2-3"])
def test_malformed_or_negative_inputs_are_refused(text):
    with pytest.raises(InputError):
        get_task("subtraction").parse(text)


def test_the_abs_cell_builds_with_the_task_s_own_window():
    cli = ABCLightningCLI(args=["--config", str(ROOT / "configs" / "abs.yaml"), "--data=Subtraction", "--trainer.logger=false"], run=False)
    window = next(cb for cb in cli.trainer.callbacks if type(cb).__name__ == "AttentionWindow")
    assert cli.datamodule.aligned and window.cross_width_for(cli.datamodule) == 0


def test_a_tiny_model_trains_and_predicts_it(capsys):
    """fit, then predict ``9003-958`` from the checkpoint alone (a few steps; no accuracy asserted)."""
    assert run_cli(["fit", "--config", str(ROOT / "configs" / "debug.yaml"), "--data=Subtraction",
                    "--data.aligned=true", "--bias.cross_width=0", "--trainer.max_epochs=1",
                    "--trainer.limit_train_batches=5", "--trainer.limit_val_batches=1",
                    "--trainer.enable_progress_bar=false"]) == 0
    capsys.readouterr()
    ckpt = next(Path("runs").rglob("last.ckpt"))
    assert run_cli(["predict", "--ckpt_path", str(ckpt), '--data.predict_inputs=["9003-958"]']) == 0
    assert "9003-958" in capsys.readouterr().out
