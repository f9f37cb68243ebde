"""N÷1 long division with the running-remainder scratchpad, a task that runs from the most
significant digit: the answer, the worst cases, the windows and the decoding."""

import numpy as np
import pytest
import torch

from abc_lightning import vocab
from abc_lightning.data import eval_size
from abc_lightning.errors import InputError
from abc_lightning.tasks import get_task
from tests.helpers import as_int, assert_cached_decoding_matches_recomputation, worst_case_rows


def test_the_worked_example_of_the_docstring():
    t = get_task("division")
    ops = t.parse("1234/7")
    assert vocab.decode(t.source(ops)[0]) == "$00001234/7&"
    assert vocab.decode(t.source(ops, aligned=True)[0]) == "$/0707070717273747&"
    assert t.target(ops)[0].tolist() == [0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 5, 7, 4, 6, 2]
    assert t.format_answer(t.target(ops)[0].tolist()) == "176 r 2"


@pytest.mark.parametrize("length", [1, 2, 7, 60, 600])
def test_every_scratchpad_token_is_what_python_integers_say(length):
    t = get_task("division")
    a, d = t.sample(np.random.default_rng(length), eval_size(length, 200), length)
    target = t.target([a, d])
    for i in range(a.shape[0]):
        x, m = as_int(a[i]), int(d[i, 0])
        assert len(str(x)) == length and 1 <= m <= 9
        assert t.format_answer(target[i].tolist()) == f"{x // m} r {x % m}"
        digits = str(x).zfill(a.shape[1])
        for k in range(a.shape[1]):  # after dividend digit k: the quotient digit and the remainder so far
            prefix = int(digits[: k + 1])
            assert target[i, 2 * k] == (prefix // m) % 10 and target[i, 2 * k + 1] == prefix % m


@pytest.mark.parametrize("length", [1, 2, 7, 60, 600])
def test_worst_cases_are_right_and_hold_what_they_say(length):
    t, rows = worst_case_rows("division", length)
    families = {name for name in t.worst_cases(length) if t.worst_cases(length)[name]}
    assert {"nines", "divisor_1_and_9", "zeros_in_quotient", "remainder_held"} <= families
    for text, target in rows:
        x, m = (int(p) for p in text.split("/"))
        assert len(str(x)) == length and 1 <= m <= 9
        assert t.format_answer(target.tolist()) == f"{x // m} r {x % m}"
    for dividend, divisor in t.worst_cases(length)["remainder_held"]:  # every remainder is divisor − 1
        m = int(divisor)
        assert all(int(dividend[: k + 1]) % m == m - 1 for k in range(length))
    if length > 2:
        for dividend, divisor in t.worst_cases(length)["zeros_in_quotient"]:
            assert "0" * (length - 2) in str(int(dividend) // int(divisor))


def test_a_divisor_must_be_one_nonzero_digit():
    t = get_task("division")
    for text in ("123/0", "123/45", "12/", "/7", "1.5/3"):
        with pytest.raises(InputError, match="is not a division input"):
            t.parse(text)
    assert [int(x) for x in t.parse("9" * 10_000 + "/9")[1][0]] == [9]


def test_each_token_reads_its_dividend_digit_the_divisor_and_the_remainder_before():
    t = get_task("division")
    ops = t.sample(np.random.default_rng(0), 1, 60)
    src = t.source(ops, aligned=True)
    steps, n_keys = t.target(ops).shape[1], src.shape[1]
    own, cross = t.dependency_windows(steps + 1, n_keys, aligned=True)
    for row in range(steps):
        i = row // 2  # dividend digit i, most significant first: source tokens 2 + 2i (a_i) and 3 + 2i (the divisor)
        assert cross[row].nonzero().flatten().tolist() == [2 + 2 * i, 3 + 2 * i]
        opened = own[row].nonzero().flatten().tolist()  # decoder keys: its own input, and r_{i−1} for a remainder
        assert opened == ([row - 1, row] if row % 2 else [row])  # r_0 reads SOS: a remainder of 0
    assert t.cpi_period == 2 and t.cross_width == 0
    # natural form: the divisor is the one token before EOS
    own, cross = t.dependency_windows(steps + 1, t.source(ops).shape[1], aligned=False)
    assert all(cross[row, t.source(ops).shape[1] - 2] for row in range(steps))


def test_cached_decoding_gives_the_tokens_of_recomputation(monkeypatch):
    t = get_task("division")
    ops = t.sample(np.random.default_rng(1), 3, 30)
    src = torch.as_tensor(t.source(ops))
    assert_cached_decoding_matches_recomputation(t, src, t.target(ops).shape[1], t.cpi_period, monkeypatch)
