"""Addition of k operands, k varying, as rows of running sums (abc_lightning/tasks/addition_k.py)."""

import numpy as np
import pytest
import torch

from abc_lightning.data import GroupedDataset, data_module_for, eval_size
from abc_lightning.errors import ConfigError
from abc_lightning.tasks import TASKS, get_task
from tests.helpers import as_int, assert_cached_decoding_matches_recomputation


def total(operands, i):
    return sum(as_int(x[i]) for x in operands)


def test_the_worked_example_of_the_docstring():
    t = get_task("addition_k").with_operands(3)
    ops = [x[:, -2:] for x in t.operands_from_text(["12", "34", "56"], 2)]  # frame 2, as drawn
    assert t.target(ops)[0].tolist() == [2, 0, 1, 0, 0, 0, 0, 0, 6, 0, 4, 0, 0, 0, 0, 0, 2, 1, 0, 1, 1, 0, 0, 0]
    assert t.format_answer(t.target(ops)[0].tolist()) == "102"
    assert t.operands_from_text(["12"], 4)[0].shape[1] == 5  # frames round up to W ≡ 2 (mod 3)


@pytest.mark.parametrize("k", [2, 3, 7, 40])
@pytest.mark.parametrize("length", [1, 6, 61])
def test_every_row_is_a_running_sum_beside_its_carries_and_the_last_is_the_answer(k, length):
    t = get_task("addition_k").with_operands(k)
    n = eval_size(length, 40)
    ops = t.sample(np.random.default_rng(k * length), n, length)
    target = t.target(ops)
    width = ops[0].shape[1]
    assert width % 3 == 2 and target.shape[1] == k * 2 * (width + 2)
    rows = target.reshape(n, k, width + 2, 2)  # (sample, row, column, digit/carry)
    for i in range(n):
        for r in range(k):
            assert as_int(rows[i, r, ::-1, 0]) == sum(as_int(x[i]) for x in ops[: r + 1])
            above = rows[i, r - 1, :, 0] if r else np.zeros(width + 2, dtype=int)
            x = np.pad(ops[r][i, ::-1], (0, 2))
            carries = (above + x + np.concatenate([[0], rows[i, r, :-1, 1]])) // 10
            assert (rows[i, r, :, 1] == carries).all()
        assert t.format_answer(target[i].tolist()) == str(total(ops, i))


@pytest.mark.parametrize("k,length", [(2, 6), (4, 6), (10, 20), (40, 60)])
def test_each_token_reads_its_digit_the_row_above_and_the_carry_at_its_own_phases(k, length):
    """The windows come from the task's recurrence at every k and W: one cross key (its
    operand's digit of its column, an operator above the operand's top, EOS after the last
    row), and besides its own input the row above's digit of its column (and, for a carry,
    the carry before it), at phases t − 1 (and t − 2) of its own, mod 6."""
    t = get_task("addition_k").with_operands(k)
    ops = t.sample(np.random.default_rng(0), 1, length)
    src, tgt = t.source(ops), t.target(ops)
    n_q, n_k = tgt.shape[1] + 1, src.shape[1]
    assert t.frame(n_q, n_k, False) == (ops[0].shape[1],) * k and t.for_shape(n_k, n_q).arity == k
    own, cross = t.dependency_windows(n_q, n_k)
    assert (cross.sum(1) == 1).all()
    width = ops[0].shape[1]
    row = 2 * (width + 2)
    for q in range(row, n_q - 1, 5):  # rows 1 and later: every key is a real one
        r, u = divmod(q, row)
        c, is_carry = divmod(u, 2)
        keys = torch.nonzero(own[q]).flatten().tolist()
        want = sorted({q, q - row + 1 - is_carry} | ({q - 1} if is_carry else set()))
        assert keys == want
        assert sorted((q - key) % 6 for key in keys) == ([0, 1, 2] if is_carry else [0, 1])
        key = int(torch.nonzero(cross[q]))
        if c < width:
            assert src[0, key] == ops[r][0, -1 - c]
        else:
            assert src[0, key] == 13  # the operator before the operand
    assert int(torch.nonzero(cross[n_q - 1])) == n_k - 1  # after the last row: EOS
    assert own[1, 0] and own[row - 1, 0]  # the first row reads SOS as the row above


def test_sizes_that_no_operand_count_gives_are_refused():
    t = get_task("addition_k")
    with pytest.raises(ValueError, match="decode exactly"):
        t.frame(30, 23, False)


@pytest.mark.slow
def test_the_data_module_trains_on_every_count_in_one_shape_per_batch():
    dm = data_module_for("addition_k")
    assert [task.arity for task in dm.train_tasks] == [2, 3, 4] and dm.task.arity == 4
    dm.setup("fit")
    assert isinstance(dm._train, GroupedDataset)
    shapes = set()
    for batch in dm.train_dataloader():
        assert len({tuple(batch["src"].shape[1:])}) == 1
        shapes.add(batch["src"].shape[1])
        if len(shapes) == 3:
            break
    assert shapes == {1 + k * 9 for k in (2, 3, 4)}  # 1 + k(W + 1), W = 8
    assert data_module_for("addition_k", operands=20).test_set(6, 5).data.src.shape[1] == 1 + 20 * 9


def test_operand_counts_are_checked_and_belong_to_this_task():
    with pytest.raises(ConfigError, match="2 to 100 operands"):
        data_module_for("addition_k", operands=1)
    with pytest.raises(ConfigError, match="at least one"):
        data_module_for("addition_k", train_operands=[])
    with pytest.raises(ConfigError, match="fixed number of operands"):
        data_module_for("addition", operands=3)


def test_predict_reads_any_number_of_operands():
    dm = data_module_for("addition_k")
    batch = dm.parse("12+345+6789+10")
    t = dm.task.for_shape(batch["src"].shape[1], batch["tgt_out"].shape[1])
    assert t.arity == 4 and t.format_answer(batch["tgt_out"][0, :-1].tolist()) == str(12 + 345 + 6789 + 10)
    five = dm.parse("1+2+3+4+99999999999")
    assert dm.task.for_shape(five["src"].shape[1], five["tgt_out"].shape[1]).arity == 5


@pytest.mark.parametrize("k", [2, 4, 20])
def test_the_worst_cases_are_right(k):
    t = get_task("addition_k").with_operands(k)
    for length in (1, 6, 60):
        _, _, operands, texts = t.worst_case_set(length)
        assert texts, f"no worst cases at {length} digits"
        target = t.target(operands)
        for i, text in enumerate(texts):
            assert t.format_answer(target[i].tolist()) == str(sum(int(p) for p in text.split("+")))
            assert text.count("+") == k - 1


def test_it_is_registered_beyond_the_paper():
    assert "addition_k" in TASKS and type(data_module_for("addition_k")).__name__ == "AdditionK"
    from abc_lightning.reproduce.cells import table_entry

    assert table_entry("addition_k").table == "beyond" and not table_entry("addition_k").abc


def test_cached_decoding_under_its_windows_matches_full_recomputation(monkeypatch):
    """The decoder's windows follow the operands' sizes (the row above is W + 2 steps back):
    cached decoding, whole and a block of rows at a time, gives the tokens of recomputing
    the whole prefix at every step, with the input's length passed to every decoder bias."""
    task = get_task("addition_k").with_operands(5)
    ops = task.sample(np.random.default_rng(1), 6, 9)
    src, steps = torch.as_tensor(task.source(ops)), task.target(ops).shape[1] + 1
    assert_cached_decoding_matches_recomputation(task, src, steps, 3, monkeypatch)
