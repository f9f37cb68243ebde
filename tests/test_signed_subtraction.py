"""Signed subtraction: both modular differences, then a sign token; one file, its own windows."""

import numpy as np
import pytest

from abc_lightning import vocab
from abc_lightning.data import data_module_for, eval_size
from abc_lightning.evaluation import answer_of
from abc_lightning.tasks import TASKS, get_task
from tests.helpers import as_int, assert_abs_cell_uses_the_task_windows, own_cross_window, worst_case_rows




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
    assert cells["abs_signed_subtraction"].command.endswith("--data=SignedSubtraction")
    a, b = get_task("signed_subtraction").parse("958-9003")  # a < b is allowed here
    assert as_int(a[0]) == 958 and as_int(b[0]) == 9003


def test_the_abs_cell_uses_the_task_s_windows():
    assert_abs_cell_uses_the_task_windows("signed_subtraction", self_width=2, n_queries=12, n_keys=13)


def test_the_task_keeps_the_form_its_windows_are_drawn_on():
    assert data_module_for("signed_subtraction", aligned=False).aligned  # its windows need the aligned pairs
    assert not data_module_for("nx3", aligned=True).aligned  # N×M's are drawn on the natural form
    assert data_module_for("addition", aligned=True).aligned and not data_module_for("addition").aligned


def test_training_holds_equal_pairs_beside_the_untouched_pool_rows():
    """Random pairs are never equal, so the task adds carry-rich rows, half of them a − a
    (sign `+`): the only rows where a top-d rule and the true top-r rule disagree."""
    t = get_task("signed_subtraction")
    pool_only, rich = data_module_for("signed_subtraction", carry_rich=0.0), data_module_for("signed_subtraction")
    assert rich.carry_rich == t.carry_rich > 0
    base, mixed = pool_only.train_set, rich.train_set
    n = len(base.src)
    assert (mixed.src[:n] == base.src).all() and (mixed.tgt_out[:n] == base.tgt_out).all()
    extra_src, extra_tgt = mixed.src[n:].numpy(), mixed.tgt_out[n:].numpy()
    assert abs(len(extra_src) / len(mixed.src) - t.carry_rich) < 1e-3
    a, b = extra_src[:, 2:-1:2], extra_src[:, 3:-1:2]  # aligned: $ - a_W b_W … a_0 b_0 &
    equal = (a == b).all(axis=1)
    assert 0.45 < equal.mean() < 0.55
    sign = extra_tgt[:, -2]  # the sign, before EOS
    assert (sign[equal] == vocab.TOKEN["+"]).all()
    assert (extra_tgt[equal][:, 0:-2:2] == 0).all() and (extra_tgt[equal][:, 1:-2:2] == 0).all()  # r and d all 0
    # the other half are right too: mostly-9 pairs with both signs
    assert {int(s) for s in sign[~equal]} == {vocab.TOKEN["+"], vocab.TOKEN["-"]}
    for i in np.flatnonzero(~equal)[:50]:
        x, y = int("".join(map(str, a[i]))), int("".join(map(str, b[i])))
        assert t.format_answer(extra_tgt[i, :-1].tolist()) == str(x - y)


def test_a_wrong_sign_on_zero_shows_its_tokens():
    """a − a written `00…0-` prints as 0, like the right answer: a failure shows the tokens."""
    from abc_lightning.evaluation import wrong_answer_texts

    t = get_task("signed_subtraction")
    want = [*t.target(t.operands_from_text(["12", "12"], 3))[0].tolist(), vocab.EOS]
    got = [*want[:-2], vocab.TOKEN["-"], vocab.EOS]
    assert answer_of(t, got) == answer_of(t, want) == "0"
    assert wrong_answer_texts(t, got, want) == (vocab.decode(got), vocab.decode(want))
    assert wrong_answer_texts(t, got, want)[0].endswith("-&")
    other = [*want[:-1]]
    other[0] = 5  # a wrong digit prints differently: printed answers stay
    assert wrong_answer_texts(t, [*other, vocab.EOS], want) == (answer_of(t, [*other, vocab.EOS]), "0")
