"""N×2 multiplication with the column scratchpad, a task added as one file with its own windows."""

import numpy as np
import pytest

from abc_lightning import vocab
from abc_lightning.data import data_module_for, eval_size
from abc_lightning.errors import InputError
from abc_lightning.tasks import TASKS, get_task
from tests.helpers import as_int, assert_abs_cell_uses_the_task_windows, own_cross_window, worst_case_rows




def test_the_worked_example_of_the_docstring():
    t = get_task("nx2")
    ops = t.operands_from_text(["63", "47"], 4)
    assert vocab.decode(t.source(ops)[0]) == "$0063*47&"
    assert t.target(ops)[0].tolist() == [1, 0, 1, 4, 2, 6, 4, 5, 9, 0, 2, 2, 0, 0, 0, 0, 0, 0]
    assert t.format_answer(t.target(ops)[0].tolist()) == "2961"


@pytest.mark.parametrize("length", [1, 2, 6, 7, 20, 60])
def test_every_scratchpad_token_is_what_python_integers_say(length):
    t = get_task("nx2")
    a, b = t.sample(np.random.default_rng(length), eval_size(length, 200), length)
    target = t.target([a, b])
    block = t.m + 1
    for i in range(a.shape[0]):
        x, y = as_int(a[i]), as_int(b[i])
        assert len(str(x)) == length and 0 <= y < 100
        assert t.format_answer(target[i].tolist()) == str(x * y)
        partials = [x * int(d) for d in str(y).zfill(2)[::-1]]  # p_0 = a × b_0 (the units digit), p_1 = a × b_1
        for c in range(target.shape[1] // block):
            for j, p in enumerate(partials):
                expected = (p // 10 ** (c - j)) % 10 if c >= j else 0
                assert target[i, c * block + j] == expected


@pytest.mark.parametrize("length", [1, 2, 7, 60])
def test_worst_cases_are_right(length):
    t, rows = worst_case_rows("nx2", length)
    assert rows
    for text, target in rows:
        x, y = (int(p) for p in text.split("*"))
        assert t.format_answer(target.tolist()) == str(x * y)


def test_its_windows_have_a_fixed_size_at_every_length():
    """q_j reads a[c − j] and b_j, s reads EOS; the decoder looks back M + 1 steps."""
    for length in (6, 60, 600):
        t, ops, window = own_cross_window("nx2", length)
        width = ops[0].shape[1]
        for row in (0, 3, 6, 3 * (width - 1)):  # q0 of column c reads a[c] and b_0 (the units digit)
            c = row // 3
            assert window[row, width - c] and window[row, window.shape[1] - 2]
    assert t.self_width == 3 and t.cpi_period == 3
    # ABC's segment alignment: only the multiplicand grows ("$ a * b &", b of M digits)
    ops = t.sample(np.random.default_rng(0), 1, 6)
    assert t.growing_segments(t.source(ops).shape[1]) == [(1, t.eval_width(6))]


def test_it_is_registered_and_predicts_its_own_form():
    from abc_lightning import reproduce

    assert "nx2" in TASKS and type(data_module_for("nx2")).__name__ == "Nx2"
    assert {"abs_nx2", "nx2_nope_w1", "nx2_vanilla"} <= {c.key for c in reproduce.all_cells()}
    t = get_task("nx2")
    a, b = t.parse("1234*56")
    assert as_int(a[0]) == 1234 and b.tolist() == [[5, 6]]
    with pytest.raises(InputError):
        t.parse("1234*5")


def test_the_abs_cell_uses_the_task_s_windows():
    assert_abs_cell_uses_the_task_windows("nx2", self_width=3, n_queries=10, n_keys=13)


def test_n_times_three_is_the_same_scratchpad_with_blocks_of_four():
    t = get_task("nx3")
    a, b = t.sample(np.random.default_rng(3), 300, 20)
    target = t.target([a, b])
    assert target.shape[1] == 4 * (a.shape[1] + 3) and t.self_width == t.cpi_period == 4
    assert all(t.format_answer(target[i].tolist()) == str(as_int(a[i]) * as_int(b[i])) for i in range(300))
    assert t.parse("1234*567")[1].tolist() == [[5, 6, 7]]
    _, ops, window = own_cross_window("nx3", 60)
    assert window.shape[0] == 4 * (ops[0].shape[1] + 3) + 1
