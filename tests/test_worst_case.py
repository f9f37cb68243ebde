"""Worst-case sets: exact arithmetic (checked with Python integers, not the task code), the
carry chains each family claims, and their evaluation next to the random sets."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from abc_lightning import vocab
from abc_lightning.cli import run_cli
from abc_lightning.data import data_module_for
from abc_lightning.evaluation import evaluate_by_length
from abc_lightning.tasks import TASKS, get_task
from abc_lightning.tasks.base import spread
from tests.helpers import as_int

DEBUG = str(Path(__file__).resolve().parents[1] / "configs" / "debug.yaml")
LENGTHS = [1, 2, 6, 7, 60, 600]


def carries(a: int, b: int) -> list[int]:
    """The carry into each column of a + b (column 1 = the tens), from Python integers alone."""
    width = max(len(str(a)), len(str(b))) + 1
    return [(a % 10**i + b % 10**i) // 10**i for i in range(1, width + 1)]


def longest_run(flags: list[int]) -> int:
    best = run = 0
    for f in flags:
        run = run + 1 if f else 0
        best = max(best, run)
    return best


def family_rows(task: str, length: int) -> dict[str, list[tuple[str, ...]]]:
    names, family, _, texts = get_task(task).worst_case_set(length)
    rows: dict[str, list[tuple[str, ...]]] = {name: [] for name in names}
    for i, text in zip(family, texts):
        rows[names[i]].append(tuple(text.replace("*", "+").split("+")))
    return rows




#: The answers from Python integers alone, for the tasks of this file (a new task's own test
#: file checks its answers the same way).
ORACLES = {"successor": lambda a, b: a + 1, "addition": lambda a, b: a + b, "nx1": lambda a, b: a * b}


@pytest.mark.parametrize("task", [*ORACLES, "parity", "parity_classification"])
@pytest.mark.parametrize("length", LENGTHS)
def test_the_targets_are_the_python_integer_answers(task, length):
    t = get_task(task)
    names, family, operands, texts = t.worst_case_set(length)
    target = t.target(operands)
    assert len(texts) == len(family) == target.shape[0] > 0 and sorted(set(family)) == list(range(len(names)))
    for row, text in enumerate(texts):
        parts = text.replace("*", "+").split("+")
        # what the model reads is the text the row claims to be
        assert [as_int(op[row], t.base) for op in operands] == [int(p, t.base) for p in parts]
        if task.startswith("parity"):
            bits = [int(c) for c in parts[0]][::-1]  # least significant first
            prefix = [sum(bits[: i + 1]) % 2 for i in range(len(bits))]
            expected = prefix[-1:] if task == "parity_classification" else prefix
            got = list(target[row][: len(expected)]) if task == "parity" else list(target[row])
            assert got == expected and (task == "parity_classification" or not any(target[row][len(bits):] != prefix[-1]))
            assert len(parts[0]) <= t.symbols(length)
            continue
        a, b = int(parts[0]), (int(parts[1]) if len(parts) > 1 else None)
        answer = ORACLES[task](a, b)
        assert as_int(target[row][::-1]) == answer, text
        assert max(len(p) for p in parts) == length  # the longest operand has exactly L digits


@pytest.mark.parametrize("length", [7, 60, 600])
def test_successor_families_hold_the_carry_chains_they_claim(length):
    rows = family_rows("successor", length)
    chain = lambda n: longest_run(carries(int(n), 1))  # noqa: E731
    assert [chain(n) for (n,) in rows["all_nines"]] == [length]  # through every digit, into a new one
    assert {chain(n) for (n,) in rows["top_digit_then_nines"]} == {length - 1}
    assert sorted(chain(n) for (n,) in rows["trailing_nines"]) == spread(length)
    stops = {chain(n) for (n,) in rows["nines_one_other"]}
    assert 0 in stops and length - 2 in stops  # from no carry at all to one that stops just below the top


@pytest.mark.parametrize("length", [7, 60, 600])
def test_addition_families_hold_the_carry_chains_they_claim(length):
    rows = family_rows("addition", length)
    chain = lambda a, b: longest_run(carries(int(a), int(b)))  # noqa: E731
    for name in ("nines_plus_one", "complements", "largest_sums", "mixed_lengths"):
        assert {chain(a, b) for a, b in rows[name]} == {length}, name  # the whole width
    assert all(int(a) + int(b) == 10**length for a, b in rows["complements"])  # carried, never generated above
    assert {chain(a, b) for a, b in rows["nines_without_carry"]} == {0}
    assert all(set(str(int(a) + int(b))) == {"9"} for a, b in rows["nines_without_carry"])
    assert sorted(chain(a, b) for a, b in rows["carry_chains"]) == spread(length)
    assert {len(b) for _, b in rows["mixed_lengths"]} >= {1, length - 1}


@pytest.mark.parametrize("length", [7, 60])
def test_nx1_all_nines_holds_every_carry_size(length):
    rows = family_rows("nx1", length)
    for a, m in rows["all_nines"]:
        a, m = int(a), int(m)
        into = [(a % 10**i) * m // 10**i for i in range(1, length + 1)]  # carry into each column
        assert set(into) == {max(m - 1, 0)}
    products = [int(a) * int(m) for a, m in rows["products_of_nines"]]
    assert all(str(p).startswith("9" * (length - 1)) for p in products)  # a run of 9s as long as the input


def test_random_sets_never_hold_the_chains_the_worst_case_sets_do():
    # the reason the worst-case sets exist: 10,000 random 60-digit numbers and pairs stay far
    # from a whole-width carry. A random number ends in k 9s with probability 10^-k; a carry
    # passes a random column of a sum with probability 0.55, so pairs reach ~20 (0.55^40 ≈ 4e-11).
    dm = data_module_for("successor")
    digits = dm.task.sample(np.random.default_rng(0), 10_000, 60)[0]
    assert max(longest_run(carries(as_int(row), 1)) for row in digits) < 15
    add = get_task("addition").sample(np.random.default_rng(0), 10_000, 60)
    assert max(longest_run(carries(as_int(a), as_int(b))) for a, b in zip(*add)) < 40


def test_parity_families_flip_and_hold_the_running_parity():
    rows = family_rows("parity", 60)
    flips = lambda bits: sum(bits[i] != bits[i + 1] for i in range(len(bits) - 1))  # noqa: E731
    ones = rows["all_ones"][0][0]
    assert len(ones) == get_task("parity").symbols(60) and set(ones) == {"1"}
    assert flips(rows["alternating"][0][0]) == len(rows["alternating"][0][0]) - 1
    assert {n.count("1") for (n,) in rows["single_bits"]} == {1, 2}


class ShortCarries(torch.nn.Module):
    """A hand-built successor 'model': exact, except that a carry travels at most ``reach``
    digits (then it is dropped), as a model that learned only the training pool's chains."""

    def __init__(self, reach: int = 6) -> None:
        super().__init__()
        self.reach, self.anchor = reach, torch.nn.Parameter(torch.zeros(1))

    def generate(self, src: torch.Tensor, steps: int, **_) -> torch.Tensor:
        out = torch.full((src.shape[0], steps), vocab.EOS)
        for row, tokens in enumerate(src.tolist()):
            text = vocab.decode(t for t in tokens if t < 10)
            n = int(text)
            nines = len(text) - len(text.rstrip("9"))
            answer = n + 1 if nines <= self.reach else n + 1 - 10 ** (self.reach + 1)
            out[row, : steps - 1] = torch.tensor([int(c) for c in str(answer).zfill(steps - 1)[::-1]])
        return out


def test_a_model_that_drops_long_carries_is_perfect_on_random_inputs_and_caught_by_the_worst_case_set():
    dm = data_module_for("successor")
    rows = evaluate_by_length(ShortCarries(), dm, [6, 60], samples=2000)
    six, sixty = rows
    assert six["accuracy"] == sixty["accuracy"] == 100.0  # the random sets cannot tell
    assert six["worst"] == 100.0  # no chain longer than 6 fits in 6 digits
    assert sixty["worst_families"]["all_nines"] == 0.0 and sixty["worst_families"]["top_digit_then_nines"] == 0.0
    assert sixty["worst"] < 50 and sixty["worst_samples"] == len(dm.worst_set(60))


def test_test_logs_the_worst_case_set_per_family_and_shows_a_failing_example(capsys, monkeypatch):
    from abc_lightning.model.transformer import Seq2SeqTransformer

    targets = []  # per decoded batch: its rows, and whether it was decoded against its targets

    def generate(self, src, steps, **kw):
        targets.append((src.shape[0], kw.get("target") is not None))
        return ShortCarries().generate(src, steps)

    monkeypatch.setattr(Seq2SeqTransformer, "generate", generate)
    assert run_cli(["fit", "--config", DEBUG, "--trainer.max_epochs=1", "--trainer.limit_train_batches=2",
                    "--data.val_samples=5", "--data.val_split_samples=5", "--trainer.enable_progress_bar=false"]) == 0
    ckpt = "runs/debug/version_0/checkpoints/last.ckpt"
    targets.clear()
    assert run_cli(["test", "--ckpt_path", ckpt, "--data.test_lengths=[6, 60]", "--data.test_samples=100",
                    "--trainer.enable_progress_bar=false"]) == 0
    # the random sets may stop once every row is wrong; the worst-case sets decode whole
    dm = data_module_for("successor")
    assert sorted(targets) == sorted([(100, True), (100, True),
                                      (len(dm.worst_set(6)), False), (len(dm.worst_set(60)), False)])
    out = capsys.readouterr().out
    record = json.loads(Path("runs/debug/version_0/test/version_0/test_accuracy.json").read_text())
    six, sixty = record["rows"]
    assert (six["accuracy"], sixty["accuracy"], six["worst"]) == (100.0, 100.0, 100.0)
    assert sixty["worst_families"]["all_nines"] == 0.0 and sixty["worst_families"]["trailing_nines"] < 100
    assert sixty["worst_samples"] == len(data_module_for("successor").worst_set(60))
    failure = next(f for f in record["worst_failures"] if f["family"] == "all_nines")
    assert failure == {"length": 60, "family": "all_nines", "input": "9" * 60, "output": "9" * 53 + "0" * 7,
                       "expected": "1" + "0" * 60}
    assert "worst-case %" in out and "all_nines 0" in out


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_set_builds_at_the_longest_evaluated_length(task):
    # Python refuses str()/int() of decimal numbers over 4,300 digits; evaluation goes to 10,000
    from abc_lightning.data import MAX_EVAL_LENGTH

    dm = data_module_for(task)
    longest = min(MAX_EVAL_LENGTH, dm.task.max_length)
    assert len(dm.worst_set(longest)) > 0 and len(dm.test_set(longest, 2)) == 2


def test_long_conversions_are_exact_beyond_pythons_digit_limit():
    import sys

    from abc_lightning.tasks.nx1 import nines_over
    from abc_lightning.tasks.parity import decimal_to_bits

    digits = np.random.default_rng(0).integers(0, 10, size=(1, 5000))
    digits[0, 0] = 7
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)
    try:
        value = int("".join(map(str, digits[0])))
        width = value.bit_length()
        assert int("".join(map(str, decimal_to_bits(digits, width)[0])), 2) == value
        assert all(int(nines_over(5000, m)) == (10**5000 - 1) // m for m in range(2, 10))
    finally:
        sys.set_int_max_str_digits(limit)
