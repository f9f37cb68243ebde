import numpy as np
import pytest

from abc_lightning import vocab
from abc_lightning.data import data_module_for, eval_size, widen
from abc_lightning.errors import ConfigError, InputError
from abc_lightning.tasks import TASKS, get_task


def written(task, text, aligned=False):
    t = get_task(task)
    ops = t.parse(text)
    return vocab.decode(t.source(ops, aligned)[0]), "".join(map(str, t.target(ops)[0]))


def test_successor_worked_example():
    # padded to the training width 8 (7 digits of 2^20 plus one leading zero); output reversed
    assert written("successor", "1299") == ("$00001299&", "003100000")


def test_addition_natural_and_aligned():
    src, tgt = written("addition", "123+958")
    assert src == "$00000123+00000958&"
    assert tgt == "180100000"  # 1081 reversed, 9 digits
    src, _ = written("addition", "123+958", aligned=True)
    assert src == "$+" + "00" * 5 + "192538" + "&"  # a_n b_n ... a_1 b_1


def test_nx1_aligned_repeats_the_digit():
    src, tgt = written("nx1", "1234*7", aligned=True)
    assert src == "$*" + "07" * 4 + "17273747" + "&"
    assert tgt == "836800000"  # 8638 reversed


def test_parity_prefix_xor_scratchpad():
    t = get_task("parity")
    ops = t.parse("1011")  # x_1..x_4 (LSB first) = 1 1 0 1
    src = vocab.decode(t.source(ops)[0])
    assert src == "$" + "0" * 18 + "1011" + "&"  # 22 bits: 21 of 2^20 plus one leading zero
    target = t.target(ops)[0]
    assert list(target[:4]) == [1, 0, 0, 1]  # prefix XOR, least significant bit first
    assert target[-1] == 1  # the last scratchpad bit is the parity of 1011
    assert list(get_task("parity_classification").target(ops)[0]) == [1]


def test_sampled_operands_read_back_as_the_inputs_a_person_types():
    addition = get_task("addition")
    operands = [np.array([[0, 0, 4, 2], [9, 9, 9, 9]]), np.array([[0, 0, 0, 0], [0, 1, 0, 0]])]
    assert addition.expressions(operands) == ["42+0", "9999+100"]
    assert get_task("successor").expressions([np.array([[0, 7, 0]])]) == ["70"]
    rows = addition.sample(np.random.default_rng(0), 5, 6)
    assert [text.split("+") for text in addition.expressions(rows)] == \
        [[str(int("".join(map(str, a)))), str(int("".join(map(str, b))))] for a, b in zip(*rows)]


def test_targets_are_exact_at_long_lengths():
    rng = np.random.default_rng(0)
    for name, op in [("successor", None), ("addition", "+"), ("nx1", "*")]:
        t = get_task(name)
        ops = t.sample(rng, 50, 60)
        ints = [int("".join(map(str, o_row))) for o_row in ops[0]]
        answers = [int("".join(map(str, row[::-1]))) for row in t.target(ops)]
        if name == "successor":
            expected = [a + 1 for a in ints]
        else:
            other = [int("".join(map(str, r))) for r in ops[1]]
            expected = [a + b if op == "+" else a * b for a, b in zip(ints, other)]
        assert answers == expected
        assert all(len(str(a)) == 60 for a in ints)  # exactly L digits


def test_parity_lengths_are_decimal_digits():
    t = get_task("parity")
    ops = t.sample(np.random.default_rng(0), 20, 60)
    assert ops[0].shape[1] == (10**60 - 1).bit_length() + 2  # two spare cells, as in training
    bits = ops[0][:, ::-1]
    assert (t.target(ops)[:, -1] == bits.sum(1) % 2).all()


def test_a_test_input_has_two_spare_cells_like_most_training_numbers():
    t = get_task("addition")
    assert t.train_width == 8 and t.eval_width(6) == 8  # 6 digits: the training frame, interpolation
    assert [t.eval_width(n) for n in (10, 60, 600)] == [12, 62, 602]
    a, b = t.parse("9999999999+1")  # predict pads the same way
    assert a.shape[1] == b.shape[1] == 12 and a[0, :2].tolist() == [0, 0]


def test_eval_size_follows_protocol():
    assert [eval_size(n, 10_000) for n in (1, 3, 4, 5, 60)] == [9, 900, 9000, 10_000, 10_000]


def test_small_lengths_enumerate_every_number():
    ops = get_task("successor").sample(np.random.default_rng(0), 90, 2)
    values = sorted(int("".join(map(str, r))) for r in ops[0])
    assert values == list(range(10, 100))


def test_pool_split_is_7_to_1_seeded_and_disjoint():
    dm = data_module_for("successor", seed=3)
    train, val = dm.pool_split()
    assert len(train) + len(val) == 2**20 + 1
    assert len(train) == (2**20 + 1) * 7 // 8  # 7:1
    assert not set(train[:1000]) & set(val)
    again, _ = data_module_for("successor", seed=3).pool_split()
    other, _ = data_module_for("successor", seed=4).pool_split()
    assert np.array_equal(train, again) and not np.array_equal(train, other)


def test_training_numbers_are_mostly_six_digits():
    dm = data_module_for("successor")
    train, _ = dm.pool_split()
    seven = (train >= 10**6).mean()
    assert 0.04 < seven < 0.05


def test_unknown_task_and_bad_lengths_are_named():
    with pytest.raises(ConfigError, match="unknown task 'exponentiation'"):
        data_module_for("exponentiation")
    with pytest.raises(ConfigError, match=r"cannot produce \[0\]"):
        data_module_for("successor", test_lengths=[6, 0])
    with pytest.raises(ConfigError, match="cannot produce"):
        data_module_for("successor", val_lengths=[10**6])


@pytest.mark.parametrize("task,text", [("addition", "12+"), ("addition", "12*3"), ("successor", "12a"),
                                       ("nx1", "123*45"), ("parity", "1021"), ("successor", ""),
                                       ("division", "123/0"), ("division", "123/45")])
def test_malformed_predict_input(task, text):
    with pytest.raises(InputError, match="is not a"):
        get_task(task).parse(text)


def test_ddp_shards_cover_every_sample_once_and_train_shards_are_equal():
    from abc_lightning.data import EpochShuffle, Shard

    shards = [list(Shard(10, rank, 3)) for rank in range(3)]
    assert sorted(i for s in shards for i in s) == list(range(10))  # no padding, no repeats
    train = [EpochShuffle(11, seed=0, rank=r, world=2) for r in range(2)]
    for sampler in train:
        sampler.set_epoch(4)
    a, b = (list(s) for s in train)
    assert len(a) == len(b) == 5 and not set(a) & set(b)
    single = EpochShuffle(11, seed=0)
    single.set_epoch(4)
    assert sorted(a + b) == sorted(list(single)[:10])  # the same permutation, split


def test_every_task_names_its_data_flag():
    # the data modules are made from the registry (abc_lightning.data), so the task's own
    # docstring is where `grep -- --data=Nx1` has to land
    from abc_lightning import data
    from abc_lightning.tasks import TASKS, class_name

    for name, cls in TASKS.items():
        assert f"``--data={class_name(name)}``" in cls.__doc__, name
        assert getattr(data, class_name(name)).task_class is cls


@pytest.mark.parametrize("name", ["nx1", "addition"])
def test_train_frames_pads_the_training_rows_to_several_widths_and_1_changes_nothing(name):
    one, again = data_module_for(name), data_module_for(name, train_frames=1)
    one.setup("fit")
    again.setup("fit")
    assert np.array_equal(one.train_set.src.numpy(), again.train_set.src.numpy())  # the default, row for row

    three = data_module_for(name, train_frames=3)
    three.setup("fit")
    groups = three._train.groups
    widths = [g.data.src.shape[1] for g in groups]
    assert len(groups) == 3 and len(set(widths)) == 3 and widths[-1] == one.train_set.src.shape[1]
    assert sum(len(g) for g in groups) <= len(one.train_set.src)  # the split is shared, not tripled
    assert three.max_tokens("fit") >= max(widths)
    if name == "nx1":  # the one-digit multiplier is not widened
        assert widths == [one.train_set.src.shape[1] + extra for extra in (2, 1, 0)]

    # leading zeros change no value: the answer gains zero columns at its top, nothing else
    task = three.task
    operands = task.from_pool([np.array([999_999, 123_456, 7]), np.array([9, 8, 7_654_321])])
    base, wide = task.target(operands), task.target(widen(task, operands, 2))
    assert np.array_equal(wide[:, : base.shape[1]], base) and not wide[:, base.shape[1]:].any()
    with pytest.raises(ConfigError, match="data.train_frames"):
        data_module_for(name, train_frames=0)


@pytest.mark.parametrize("name", list(TASKS))
def test_a_task_has_one_name(name):
    """File stem, registry name, --data= value and class say the same word: nx1.py, nx1,
    --data=Nx1 (the data module) and Nx1Task (the task)."""
    from abc_lightning import data
    from abc_lightning.tasks import class_name

    cls = TASKS[name]
    assert cls.__module__ == f"abc_lightning.tasks.{name}"
    assert cls.__name__ == class_name(name) + "Task"
    assert getattr(data, class_name(name)).task_class is cls


def test_no_two_classes_of_the_package_share_a_name():
    import collections
    import importlib
    import inspect
    import pkgutil

    import abc_lightning

    homes = collections.defaultdict(set)
    for info in pkgutil.walk_packages(abc_lightning.__path__, "abc_lightning."):
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == module.__name__:
                homes[obj.__name__].add(module.__name__)
    assert len(homes) > 50
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}
