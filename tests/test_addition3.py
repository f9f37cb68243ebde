"""Three-operand addition, a task added as one file: answers, carries above 1, worst cases, cells."""

from pathlib import Path

import numpy as np
import pytest

from abc_lightning import vocab
from abc_lightning.cli import ABCLightningCLI
from abc_lightning.data import data_module_for, eval_size
from abc_lightning.errors import InputError
from abc_lightning.tasks import TASKS, get_task
from tests.helpers import as_int

ROOT = Path(__file__).resolve().parents[1]




def carries(parts: list[int]) -> list[int]:
    """The carry out of each column of a sum, from Python integers alone."""
    width = max(len(str(p)) for p in parts) + 1
    return [sum(p % 10**i for p in parts) // 10**i for i in range(1, width + 1)]


def test_it_is_registered_with_a_data_module_and_its_cells():
    from abc_lightning import reproduce

    assert "addition3" in TASKS and type(data_module_for("addition3")).__name__ == "Addition3"
    keys = {c.key for c in reproduce.all_cells()}
    assert {"abs_addition3", "addition3_nope_w1", "addition3_vanilla", "abc_addition3"} <= keys


def test_the_worked_example_of_the_docstring():
    t = get_task("addition3")
    ops = t.operands_from_text(["123", "958", "76"], 8)
    assert vocab.decode(t.source(ops)[0]) == "$00000123+00000958+00000076&"
    assert vocab.decode(t.source(ops, aligned=True)[0]) == "$+" + "000" * 5 + "190257386&"
    assert t.format_answer(list(t.target(ops)[0])) == "1157"
    assert t.growing_segments(t.source(ops).shape[1]) == [(1, 8), (10, 8), (19, 8)]
    assert t.digit_stride(aligned=True) == 3


@pytest.mark.parametrize("length", [1, 2, 6, 7, 60, 600])
def test_random_samples_are_answered_as_python_integers(length):
    t = get_task("addition3")
    ops = t.sample(np.random.default_rng(length), eval_size(length, 200), length)
    target = t.target(ops)
    for i in range(ops[0].shape[0]):
        parts = [as_int(x[i]) for x in ops]
        assert all(len(str(p)) == length for p in parts)
        assert as_int(target[i][::-1]) == sum(parts)


@pytest.mark.parametrize("length", [1, 2, 3, 7, 60, 600])
def test_worst_cases_are_right_and_hold_the_carries_they_claim(length):
    t = get_task("addition3")
    names, family, operands, texts = t.worst_case_set(length)
    target = t.target(operands)
    rows = {name: [] for name in names}
    for row, text in enumerate(texts):
        parts = [int(p) for p in text.split("+")]
        assert len(parts) == 3 and as_int(target[row][::-1]) == sum(parts)
        assert max(len(p) for p in text.split("+")) == length
        rows[names[family[row]]].append(parts)
    assert max(carries(rows["all_nines"][0])) == 2  # a carry of 2 in every column
    if length >= 3:
        # the big carry becomes a 1 that crosses every column above it
        assert carries(rows["big_carry_into_nines"][0])[: length] == [2] + [1] * (length - 1)
    if length >= 7:
        chain = carries(rows["carry_chains"][-1])
        assert chain[: length - 1] == [1] * (length - 1)


@pytest.mark.parametrize("text", ["12+34", "12+34+", "1+2+3+4", "12*3*4"])
def test_malformed_inputs_are_refused(text):
    with pytest.raises(InputError):
        get_task("addition3").parse(text)


def test_the_abs_cell_reads_one_column_of_three_digits():
    cli = ABCLightningCLI(args=["--config", str(ROOT / "configs" / "abs.yaml"), "--data=Addition3",
                                "--trainer.logger=false"], run=False)
    window = next(cb for cb in cli.trainer.callbacks if type(cb).__name__ == "AttentionWindow")
    assert cli.datamodule.digit_stride == 3 and window.cross_width_for(cli.datamodule) == 0


def test_carry_rich_rows_come_beside_the_pool_rows_and_hold_carries_of_two():
    """The pool's rows stay exactly as the papers' protocol draws them; the task's quarter of
    carry-rich rows are sums of Π's training numbers whose columns reach 9 + 9 + 9 + 2."""
    from abc_lightning.data import carry_rich_values
    from abc_lightning.tasks.base import POOL_MAX

    pool_only = data_module_for("addition3", carry_rich=0.0)
    rich = data_module_for("addition3")  # the task's own share
    assert rich.carry_rich == 0.25 and data_module_for("addition").carry_rich == 0.0
    base, mixed = pool_only.train_set, rich.train_set
    n = len(base.src)
    assert (mixed.src[:n] == base.src).all() and (mixed.tgt_out[:n] == base.tgt_out).all()
    assert abs((len(mixed.src) - n) / len(mixed.src) - 0.25) < 1e-3

    train, _ = pool_only.pool_split()
    allowed = np.zeros(POOL_MAX + 1, dtype=bool)
    allowed[train] = True
    values = carry_rich_values(np.random.default_rng(0), 5000, allowed)
    assert len(values) == 5000 and allowed[values].all()
    nines = np.char.count(values.astype(str), "9").sum() / sum(len(str(v)) for v in values)
    assert nines > 0.45  # against 0.1 for uniform digits

    # the extra rows are right, and some add a carry of 2 into a column of three 9s
    task = rich.task
    ops = [task.from_pool([carry_rich_values(np.random.default_rng(s), 2000, allowed)])[0] for s in (1, 2, 3)]
    cols = np.stack(ops).transpose(1, 2, 0)[:, ::-1]  # (n, column from the bottom, operand)
    carry, deep = np.zeros(len(cols), dtype=int), np.zeros(len(cols), dtype=bool)
    for c in range(cols.shape[1]):
        deep |= (cols[:, c] == 9).all(axis=1) & (carry == 2)
        carry = (cols[:, c].sum(axis=1) + carry) // 10
    assert deep.sum() > 20
    target = task.target(ops)
    for i in range(50):
        assert as_int(target[i][::-1]) == sum(int("".join(map(str, op[i]))) for op in ops)


@pytest.mark.parametrize("bad", [-0.1, 1.0, "lots"])
def test_a_carry_rich_share_outside_zero_to_one_is_refused(bad):
    from abc_lightning.errors import ConfigError

    with pytest.raises(ConfigError, match="data.carry_rich must be a share in"):
        data_module_for("addition3", carry_rich=bad)


def test_nx1_carry_rich_rows_pair_mostly_nines_with_every_multiplier():
    """N×1's carry-rich rows: multiplicands of mostly 9s times a uniform digit, so that carry
    chains of every size b − 1 appear (a mostly-9s multiplier would make most of them × 9)."""
    from abc_lightning.data import carry_rich_values
    from abc_lightning.tasks.base import POOL_MAX

    allowed = np.ones(POOL_MAX + 1, dtype=bool)
    rng = np.random.default_rng(0)
    task = get_task("nx1")
    drawn = [carry_rich_values(rng, 5000, allowed) for _ in range(2)]
    a, b = task.from_pool(task.rich_rows(rng, drawn))
    counts = np.bincount(b[:, 0], minlength=10)
    assert counts.min() > 0.07 * 5000 and counts.max() < 0.13 * 5000  # uniform, not mostly 9
    assert (a == 9).sum() / (a > 0).sum() > 0.45  # the multiplicand keeps its 9s (1/9 of uniform non-zero digits)
    assert len(data_module_for("nx1", carry_rich=0.2).train_set.src) > len(data_module_for("nx1").train_set.src)


def test_extremes_rows_put_a_nine_sum_over_two_zero_columns_hundreds_of_times_more_often():
    """``data.rich_digits=extremes``: a third of the digits 9s and a third 0s, so the aligned
    pattern behind rare column errors at long lengths (a column summing to 9 over two columns
    of 0 + 0) is common; the default (``nines``) draws exactly what it drew before."""
    from abc_lightning.data import carry_rich_values
    from abc_lightning.errors import ConfigError
    from abc_lightning.tasks.base import POOL_MAX

    allowed = np.ones(POOL_MAX + 1, dtype=bool)
    assert (carry_rich_values(np.random.default_rng(3), 500, allowed)
            == carry_rich_values(np.random.default_rng(3), 500, allowed, "nines")).all()
    rng = np.random.default_rng(0)
    task = get_task("addition")
    a, b = task.from_pool([carry_rich_values(rng, 20_000, allowed, "extremes") for _ in range(2)])
    sums, zeros = a + b, (a == 0) & (b == 0)
    pattern = (sums[:, :-2] == 9) & zeros[:, 1:-1] & zeros[:, 2:]  # most significant first
    inside = (a[:, :-2] > 0) | (b[:, :-2] > 0)
    assert pattern[inside].mean() > 100 * 1e-5  # uniform digits: 0.1 × 0.01 × 0.01
    with pytest.raises(ConfigError, match="data.rich_digits must be one of"):
        data_module_for("addition", rich_digits="zeros")
