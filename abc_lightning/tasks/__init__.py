"""Arithmetic tasks. Each is pure and seeded; its docstring shows a worked example."""

from abc_lightning.errors import ConfigError
from abc_lightning.tasks.addition import Addition
from abc_lightning.tasks.base import Task
from abc_lightning.tasks.multiply import MultiplyBySingleDigit
from abc_lightning.tasks.parity import Parity, ParityClassification
from abc_lightning.tasks.successor import Successor

TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (Successor, Addition, Parity, ParityClassification, MultiplyBySingleDigit)
}


def get_task(name: str) -> Task:
    """Look a task up by name; unknown names get a ConfigError listing the known ones."""
    try:
        return TASKS[name]()
    except KeyError:
        raise ConfigError(f"unknown task {name!r}; choose one of {sorted(TASKS)}") from None


__all__ = ["TASKS", "Task", "get_task", "Successor", "Addition", "Parity",
           "ParityClassification", "MultiplyBySingleDigit"]
