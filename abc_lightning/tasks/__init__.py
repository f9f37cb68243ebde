"""Arithmetic tasks, one file each. Each is pure and seeded; its docstring shows a worked example.

Every :class:`Task` subclass with a ``name`` in a module of this package is registered in
:data:`TASKS` when the package is imported, so a new task is one new file here. The registry
drives everything else: the data modules (``--data=Addition``), the cells ``reproduce``
runs (each task's place in the tables: ``abc_lightning.reproduce.cells.TASK_TABLES``), the benchmarks and
the tests that go over every task.
"""

from __future__ import annotations

import importlib
import pkgutil

from abc_lightning.errors import ConfigError
from abc_lightning.tasks.base import Task


def _discover() -> dict[str, type[Task]]:
    for info in pkgutil.iter_modules(__path__):
        if info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
    found, todo = [], [Task]
    while todo:
        for sub in todo.pop(0).__subclasses__():
            todo.append(sub)
            if "name" in vars(sub):
                found.append(sub)
    found.sort(key=lambda cls: cls.name)
    return {cls.name: cls for cls in found}


#: Every task by its name (``"addition"``), in alphabetical order (``cells.TASK_TABLES`` orders the tables).
TASKS: dict[str, type[Task]] = _discover()


def get_task(name: str) -> Task:
    """Look a task up by name; unknown names get a ConfigError listing the known ones."""
    try:
        return TASKS[name]()
    except KeyError:
        raise ConfigError(f"unknown task {name!r}; choose one of {list(TASKS)}") from None


def class_name(name: str) -> str:
    """A task's name as its data module's class name: ``nx1`` -> ``Nx1``, ``parity_classification``
    -> ``ParityClassification``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


__all__ = ["TASKS", "Task", "class_name", "get_task"]
