"""Signed subtraction: both modular differences, then a sign token; one file, its own windows."""

import numpy as np
import pytest
import torch

from abc_lightning import vocab
from abc_lightning.data import data_module_for, eval_size
from abc_lightning.evaluation import answer_of
from abc_lightning.tasks import TASKS, get_task
from tests.helpers import abs_window_of, as_int, own_cross_window, worst_case_rows




def test_the_worked_example_of_the_docstring():
    t = get_task("signed_subtraction")
    ops = t.operands_from_text(["958", "9003"], 5)
    assert vocab.decode(t.source(ops)[0]) == "$00958-09003&"
    assert vocab.decode(t.source(ops, aligned=True)[0]) == "$-0009905083&"  # the form it is trained on
    assert vocab.decode(t.target(ops)[0]) == "5554901890-"
    assert t.format_answer(t.target(ops)[0].tolist()) == "-8045"
    assert answer_of(t, [*t.target(ops)[0].tolist(), vocab.EOS]) == "-8045"  # the sign token is part of an answer


@pytest.mark.parametrize("length", [1, 2, 6, 7, 20, 60])
def test_every_token_is_what_python_integers_say(length):
    t = get_task("signed_subtraction")
    a, b = t.sample(np.random.default_rng(length), eval_size(length, 300), length)
    target = t.target([a, b])
    width = a.shape[1]
    signs = set()
    for i in range(a.shape[0]):
        x, y = as_int(a[i]), as_int(b[i])
        assert t.format_answer(target[i].tolist()) == str(x - y)
        for c in range(width):
            assert target[i, 2 * c] == ((x - y) % 10**width) // 10**c % 10  # r_c: digit c of a − b mod 10^W
            assert target[i, 2 * c + 1] == ((y - x) % 10**width) // 10**c % 10  # d_c: of b − a
        assert vocab.decode([target[i, -1]]) == ("-" if x < y else "+")
        signs.add(x < y)
    assert signs == {True, False}  # both orders are sampled


@pytest.mark.parametrize("length", [1, 2, 7, 60])
def test_worst_cases_are_right(length):
    t, rows = worst_case_rows("signed_subtraction", length)
    assert rows
    for text, target in rows:
        x, y = (int(p) for p in text.split("-"))
        assert t.format_answer(target.tolist()) == str(x - y)


def test_its_windows_have_a_fixed_size_at_every_length():
    """r_c and d_c read a_c and b_c; the sign reads EOS; the decoder looks back two steps."""
    for length in (6, 60, 600):
        t, ops, window = own_cross_window("signed_subtraction", length)
        width = ops[0].shape[1]
        for row in (0, 1, 6, 2 * width - 1):
            c = row // 2  # column c: a_c sits at 2·width − 2c, b_c right after it
            assert window[row, 2 * width - 2 * c] and window[row, 2 * width + 1 - 2 * c]
        assert window[2 * width :, -1].all()  # the sign and EOS: EOS
        src = t.source(ops, aligned=True)[0]
        for c in (0, width // 2, width - 1):  # the opened pair is a_c then b_c
            assert src[2 * width - 2 * c] == ops[0][0, width - 1 - c] and src[2 * width + 1 - 2 * c] == ops[1][0, width - 1 - c]
    assert t.self_width == 2 and t.cpi_period == 2 and t.form == "aligned"


def test_it_is_registered_and_predicts_its_own_form():
    from abc_lightning import reproduce

    assert "signed_subtraction" in TASKS and type(data_module_for("signed_subtraction")).__name__ == "SignedSubtraction"
    cells = {c.key: c for c in reproduce.beyond_cells()}
    assert cells["abs_signed_subtraction"].command.endswith(
        "--data=SignedSubtraction --model.position_index.period=2")
    a, b = get_task("signed_subtraction").parse("958-9003")  # a < b is allowed here
    assert as_int(a[0]) == 958 and as_int(b[0]) == 9003


def test_the_abs_cell_uses_the_task_s_windows():
    bias = abs_window_of("SignedSubtraction")
    assert bias.self_width == 2 and bias.cross_mask is not None
    cross = bias("cross", 12, 13, torch.device("cpu"))[0]
    assert torch.equal(torch.isfinite(cross), get_task("signed_subtraction").cross_window(12, 13))


def test_the_task_keeps_the_form_its_windows_are_drawn_on():
    assert data_module_for("signed_subtraction", aligned=False).aligned  # its windows need the aligned pairs
    assert not data_module_for("nx3", aligned=True).aligned  # N×M's are drawn on the natural form
    assert data_module_for("addition", aligned=True).aligned and not data_module_for("addition").aligned
