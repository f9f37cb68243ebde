"""LightningDataModules for the arithmetic tasks: splits, encoding, one loader per length.

Each registered task has its own data module, a thin subclass of
:class:`ArithmeticDataModule` named after it and chosen by class name like every other
variant: ``--data=Addition``, ``--data=Nx1``, ``--data=Parity`` (YAML: ``data: {class_path:
Addition, init_args: {aligned: true}}``).

Protocol (the papers'): a seeded permutation Π of [0, 2^20] split 7:1 into train and
validation; binary tasks draw both operands independently from the split. Evaluation at
length L uses min(10^L − 10^(L−1), n) numbers of exactly L digits, greedy decoding and
exact match over the whole output. A task may add carry-rich rows to its training split
(``carry_rich``, see :func:`carry_rich_values`); the papers' tasks add none.
"""

from __future__ import annotations

from abc_lightning.data.module import ArithmeticDataModule, check_count, check_lengths
from abc_lightning.data.sets import (MAX_EVAL_LENGTH, Encoded, EncodedDataset, EpochShuffle, GroupedDataset, Shard,
                                     WorstCaseDataset, carry_rich_values, concat, encode, eval_size, widen)
from abc_lightning.errors import ConfigError
from abc_lightning.tasks import TASKS, Task, class_name

__all__ = ["MAX_EVAL_LENGTH", "ArithmeticDataModule", "Encoded", "EncodedDataset", "EpochShuffle", "GroupedDataset",
           "Shard", "WorstCaseDataset", "carry_rich_values", "check_count", "check_lengths", "concat",
           "data_module_for", "data_module_names", "encode", "eval_size", "resolve_data_seed", "resolve_task_period",
           "widen"]


def data_module(task_class: type[Task]) -> type[ArithmeticDataModule]:
    """The data module of a task: a subclass of :class:`ArithmeticDataModule` named after it."""
    name = class_name(task_class.name)
    doc = (f"Data for the ``{task_class.name}`` task (``--data={name}``).\n\n"
           + (task_class.__doc__ or "").strip() + "\n\n" + ArithmeticDataModule.__doc__.split("\n", 2)[2])
    return type(name, (ArithmeticDataModule,), {"task_class": task_class, "__module__": __name__,
                                                "__qualname__": name, "__doc__": doc})


def data_module_names() -> list[str]:
    """The class names of every task's data module, in the registry's (alphabetical) order."""
    return [class_name(name) for name in TASKS]


# One data module per registered task: abc_lightning.data.Addition, abc_lightning.data.Nx1, …
# (each task's class docstring names its flag, so `grep -rn -- --data=Nx1 abc_lightning` finds the task)
DATA_MODULES: dict[str, type[ArithmeticDataModule]] = {name: data_module(cls) for name, cls in TASKS.items()}
globals().update({cls.__name__: cls for cls in DATA_MODULES.values()})


def data_module_for(task: str, **kwargs) -> ArithmeticDataModule:
    """The data module of the task named ``task`` (``"addition"``), built with ``kwargs``."""
    if task not in DATA_MODULES:
        raise ConfigError(f"unknown task {task!r}; choose one of {list(DATA_MODULES)}")
    return DATA_MODULES[task](**kwargs)


def resolve_data_seed(config, fallback: int | None = None) -> None:
    """``data.seed`` left out -> the run's ``seed_everything``, in the config itself (the saved
    config and the checkpoint hold the number); without an integer ``seed_everything`` (before
    ``seed_everything: true`` has drawn one), ``fallback`` (a checkpoint's own) or 0."""
    init = getattr(config.get("data"), "init_args", None)
    if init is None or init.get("seed") is not None:
        return
    seed = config.get("seed_everything")
    if isinstance(seed, bool) or not isinstance(seed, int):
        seed = 0 if fallback is None else fallback
    init.seed = seed


def resolve_task_period(config) -> None:
    """``position_index.period: task`` -> the ``--data`` task's own CPI period, in the config
    itself, so that the saved config and the checkpoint hold the number."""
    index = (config.get("model") or {}).get("position_index")
    init = getattr(index, "init_args", None)
    if init is None or init.get("period") != "task":
        return
    data = config.get("data")
    module = globals().get(str(getattr(data, "class_path", "")).rsplit(".", 1)[-1])  # a data module class
    task_class = getattr(module, "task_class", None)
    if task_class is None:
        raise ConfigError("model.position_index.period=task takes the period of the --data task; give a task "
                          "(e.g. --data=Addition) or an integer period")
    init.period = task_class.cpi_period
