"""Shared test helpers."""

import torch

from abc_lightning import vocab


def random_batch(b: int = 3, s: int = 9, t: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Random digit sources framed by SOS/EOS and decoder inputs starting with SOS."""
    src = torch.randint(0, 10, (b, s))
    src[:, 0], src[:, -1] = vocab.SOS, vocab.EOS
    tgt = torch.randint(0, 10, (b, t))
    tgt[:, 0] = vocab.SOS
    return src, tgt


def worst_case_rows(task_name: str, length: int):
    """A task and its worst-case set at ``length``: ``(task, [(expression, target row), …])``."""
    from abc_lightning.tasks import get_task

    task = get_task(task_name)
    _, _, operands, texts = task.worst_case_set(length)
    return task, list(zip(texts, task.target(operands)))
