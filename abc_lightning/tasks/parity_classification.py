"""Parity as classification: the answer is the parity bit alone."""

from __future__ import annotations

import numpy as np

from abc_lightning.tasks.parity import ParityTask


class ParityClassificationTask(ParityTask):
    """Parity as classification: the target is the single parity bit (``--data=ParityClassification``).

    Example (width 5 for brevity), ``n = 11``: source ``$ 0 1 0 1 1 &``, target ``1``.
    """

    name = "parity_classification"

    def target(self, operands: list[np.ndarray]) -> np.ndarray:
        return super().target(operands)[:, -1:]
