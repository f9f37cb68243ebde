"""N×M multiplication as rows of running sums (abc_lightning/tasks/multiplication.py)."""

import numpy as np
import pytest
import torch

from abc_lightning.data import data_module_for, eval_size
from abc_lightning.errors import ConfigError
from abc_lightning.tasks import TASKS, get_task
from tests.helpers import as_int, assert_cached_decoding_matches_recomputation


def test_the_worked_example_of_the_docstring():
    t = get_task("multiplication")
    ops = [np.array([[1, 2]]), np.array([[3, 4]])]  # frames of 2, as drawn
    target = t.target(ops)[0].tolist()
    assert target == [4, 8, 0, 4, 4, 0, 4, 0, 0, 4, 0, 0, 4, 0, 0, 3, 8, 0, 3, 0, 1, 3, 4, 0, 3, 0, 0, 3, 0, 0]
    assert t.for_shape(7, len(target) + 1).format_answer(target) == "408"


@pytest.mark.parametrize("length,second", [(1, None), (6, None), (20, None), (20, 3), (3, 20)])
def test_every_row_is_a_running_product_beside_its_multiplier_digit_and_carries(length, second):
    t = get_task("multiplication").with_second_length(second)
    n = eval_size(length, 30)
    a, b = t.sample(np.random.default_rng(length), n, length)
    target = t.target([a, b])
    wa, wb = a.shape[1], b.shape[1]
    size = (wa + wb) | 1
    assert size % 2 == 1 and size >= wa + wb and target.shape[1] == 3 * size * wb
    rows = target.reshape(n, wb, size, 3)  # (sample, row, column, m/d/e)
    t = t.for_shape(wa + wb + 3, target.shape[1] + 1)
    for i in range(n):
        x, y = as_int(a[i]), as_int(b[i])
        for j in range(wb):
            assert (rows[i, j, :, 0] == b[i, wb - 1 - j]).all()
            assert as_int(rows[i, j, ::-1, 1]) == x * (y % 10 ** (j + 1))
            above = rows[i, j - 1, :, 1] if j else np.zeros(size, dtype=int)
            digit = np.zeros(size, dtype=int)
            digit[j : j + wa] = a[i, ::-1]
            incoming = np.concatenate([[0], rows[i, j, :-1, 2]])
            assert (rows[i, j, :, 2] == (above + digit * b[i, wb - 1 - j] + incoming) // 10).all()
        assert t.format_answer(target[i].tolist()) == str(x * y)


@pytest.mark.parametrize("length,second", [(6, None), (20, None), (20, 60), (60, 6)])
def test_each_token_reads_a_fixed_set_of_keys_at_distinct_phases(length, second):
    """m reads b_j; d and e read a[c − j] (beside a: the operator or SOS), their row's m,
    the carry before them and the row above, each at its own phase mod 6 whatever the sizes."""
    t = get_task("multiplication").with_second_length(second)
    ops = t.sample(np.random.default_rng(0), 1, length)
    src, tgt = t.source(ops), t.target(ops)
    n_q, n_k = tgt.shape[1] + 1, src.shape[1]
    wa, wb = ops[0].shape[1], ops[1].shape[1]
    assert t.frame(n_q, n_k, False) == (wa, wb)
    own, cross = t.dependency_windows(n_q, n_k)
    assert (cross.sum(1) == 1).all()
    row = 3 * ((wa + wb) | 1)
    for q in range(row, n_q - 1, 7):  # rows 1 and later: every key is a real one
        j, u = divmod(q, row)
        c, kind = divmod(u, 3)
        keys = torch.nonzero(own[q]).flatten().tolist()  # decoder inputs: answer u at u + 1
        want = {0: {q}, 1: {q, q - 1, q - row + 1}, 2: {q, q - 1, q - 2, q - row}}[kind]
        assert keys == sorted(want)
        assert sorted((q - key) % 6 for key in keys) == [0, 1, 2, 3][: kind + 1 + (kind > 0)]
        key = int(torch.nonzero(cross[q]))
        if kind == 0:
            assert src[0, key] == ops[1][0, -1 - j]
        elif 0 <= c - j < wa:
            assert src[0, key] == ops[0][0, -1 - (c - j)]
        else:
            assert key in (0, wa + 1)  # SOS above a's top, the operator below its bottom
    assert int(torch.nonzero(cross[n_q - 1])) == wa + 1  # after the last row: the operator, stop


def test_sizes_that_no_shape_gives_are_refused():
    with pytest.raises(ValueError, match="decode exactly"):
        get_task("multiplication").frame(30, 19, False)


@pytest.mark.parametrize("length,second", [(1, None), (6, None), (60, None), (60, 6), (6, 60)])
def test_the_worst_cases_are_right(length, second):
    t = get_task("multiplication").with_second_length(second)
    names, _, operands, texts = t.worst_case_set(length)
    assert {"all_nines", "powers_of_ten", "column_carries", "repeated_digits"} <= set(names)
    assert operands[1].shape[1] == t.eval_width(second or length)
    target = t.target(operands)
    t = t.for_shape(sum(x.shape[1] for x in operands) + 3, target.shape[1] + 1)
    for i, text in enumerate(texts):
        x, y = text.split("*")
        assert t.format_answer(target[i].tolist()) == str(int(x) * int(y))


def test_the_data_module_sets_the_second_length_and_only_for_this_task():
    dm = data_module_for("multiplication", second_length=6)
    data = dm.test_set(20, 4).data
    assert data.src.shape[1] == 22 + 8 + 3 and data.tgt_out.shape[1] == 3 * 31 * 8 + 1
    assert data_module_for("multiplication").test_set(20, 4).data.src.shape[1] == 22 + 22 + 3
    with pytest.raises(ConfigError, match="second_length is for multiplication"):
        data_module_for("addition", second_length=6)
    with pytest.raises(ConfigError, match="digit count"):
        data_module_for("multiplication", second_length=0)
    pool = dm.task.from_pool([np.array([5, 2**20]), np.array([7, 3])])
    assert [x.shape[1] for x in pool] == [8, 8]  # training: both from the pool, 7 digits + 1


def test_predict_frames_each_operand_on_its_own():
    dm = data_module_for("multiplication")
    batch = dm.parse("123456789012*34")
    assert batch["src"].shape[1] == 14 + 8 + 3
    t = dm.task.for_shape(batch["src"].shape[1], batch["tgt_out"].shape[1])
    assert t.format_answer(batch["tgt_out"][0, :-1].tolist()) == str(123456789012 * 34)


def test_it_is_registered_beyond_the_paper():
    assert "multiplication" in TASKS and type(data_module_for("multiplication")).__name__ == "Multiplication"
    from abc_lightning.reproduce.cells import table_entry

    assert table_entry("multiplication").table == "beyond" and not table_entry("multiplication").abc


def test_cached_decoding_under_its_windows_matches_full_recomputation(monkeypatch):
    task = get_task("multiplication")
    rng = np.random.default_rng(1)
    ops = [rng.integers(0, 10, (5, 3)), rng.integers(0, 10, (5, 2))]  # frames of 3 and 2: 31 steps
    src, steps = torch.as_tensor(task.source(ops)), task.target(ops).shape[1] + 1
    assert_cached_decoding_matches_recomputation(task, src, steps, 6, monkeypatch)


def test_reproduce_gives_its_cells_their_own_protocol(monkeypatch, tmp_path):
    """Its cells train in batches of 32 and test to 20 digits, then 60×60 (not 599-601 or
    10,000, past its max_length) and the unequal shapes, on 200 random products each (not
    1,000), each row tagged with its multiplier."""
    from abc_lightning import reproduce

    cells = {c.key: c for c in reproduce.beyond_cells() if c.task == "multiplication"}
    assert {"abs_multiplication", "multiplication_w1", "multiplication_nope_w1", "multiplication_T6_encoder_w1",
            "multiplication_fire"} <= set(cells)
    assert all("--data.batch_size=32" in c.overrides for c in cells.values())
    calls = []
    monkeypatch.setattr(reproduce, "test_cell", lambda cell, out, extra, version, lengths, samples, more=():
                        calls.append((version, lengths, samples, list(more))) or ([{"length": n} for n in lengths], 0.0))
    encoder = cells["multiplication_T6_encoder_w1"]
    assert reproduce.long_rows(encoder, tmp_path, [], [{"length": 20}]) == [{"length": 60}]
    rows = reproduce.shape_rows(encoder, tmp_path, [])
    assert [(r["length"], r["second"]) for r in rows] == [(60, 6), (6, 60), (20, 60)]
    assert calls == [("long", [60], 200, []),
                     ("second6_60", [60], 200, ["--data.second_length=6"]),
                     ("second60_6", [6], 200, ["--data.second_length=60"]),
                     ("second60_20", [20], 200, ["--data.second_length=60"])]
    assert get_task("multiplication").shape_label(rows[0]) == "60×6"
    # the FIRE baseline attends globally: no shapes (as no long lengths), and a curve to 10×10, not 60×60
    calls.clear()
    assert reproduce.shape_rows(cells["multiplication_fire"], tmp_path, []) == [] and calls == []
    assert get_task("multiplication").curve_lengths == tuple(range(1, 11))


def test_a_long_answer_trains_on_the_gathered_keys_with_the_dense_result(monkeypatch):
    """A teacher-forced pass over a long answer reads only the keys its windows open
    (attention.Gathered): the loss and every gradient match dense attention under the mask."""
    from functools import partial

    from abc_lightning.scaffolding import WindowBias
    from abc_lightning.model import CyclicIndex, Seq2SeqTransformer, Sinusoidal, attention

    torch.manual_seed(0)
    m = Seq2SeqTransformer(d_model=32, heads=4, encoder_layers=1, decoder_layers=2, feedforward=64, dropout=0.0,
                           positional=Sinusoidal(), position_index=CyclicIndex(6, source_from="end"))
    task = get_task("multiplication")
    m.install_bias("abs_window", WindowBias(dependencies=partial(task.dependency_windows, aligned=False)))
    ops = task.from_pool([np.array([1234567, 99]), np.array([7654321, 1048576])])
    src, target = torch.as_tensor(task.source(ops)), torch.as_tensor(task.target(ops))
    tgt_in, tgt_out = torch.cat([torch.full((2, 1), 10), target], 1), torch.cat([target, torch.full((2, 1), 11)], 1)

    def loss_and_grads():
        m.zero_grad()
        logits = m(src, tgt_in).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1))
        loss.backward()
        return loss.item(), [p.grad.clone() for p in m.parameters() if p.grad is not None]

    calls = []
    real = attention.attend_gathered
    monkeypatch.setattr(attention, "attend_gathered", lambda *a: calls.append(1) or real(*a))
    gathered = loss_and_grads()
    assert len(calls) == 2  # both layers' self-attention (over 19 input tokens, cross-attention stays dense)
    monkeypatch.setattr(attention, "GATHER_MIN_KEYS", 10**9)
    m.__dict__.pop("_gathers", None)
    dense = loss_and_grads()
    assert len(calls) == 2
    assert gathered[0] == pytest.approx(dense[0], abs=1e-6)
    assert all(torch.allclose(g, d, atol=1e-5) for g, d in zip(gathered[1], dense[1]))


def test_a_table_says_where_a_task_tests_on_fewer_inputs():
    from abc_lightning import reproduce
    from abc_lightning.reproduce import tables

    cells = [c for c in reproduce.beyond_cells() if c.task in ("multiplication", "nx2")]
    assert tables.fewer_samples(cells, "long_samples") == " (multiplication: 200 at 60)"
    assert tables.fewer_samples(cells, "shape_samples") == " (multiplication: 200)"
    assert tables.fewer_samples([c for c in cells if c.task == "nx2"], "long_samples") == ""
