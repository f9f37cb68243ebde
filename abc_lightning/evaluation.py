"""Exact match and per-length accuracy rows (greedy decoding is ``Seq2SeqTransformer.generate``)."""

from __future__ import annotations

import torch
from torchmetrics import Metric



class ExactMatch(Metric):
    """Fraction of samples whose whole decoded sequence equals the target (DDP-safe sums)."""

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        self.add_state("correct", default=torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0), dist_reduce_fx="sum")

    def update(self, predicted: torch.Tensor, target: torch.Tensor) -> None:
        self.correct += (predicted == target).all(dim=1).sum()
        self.total += target.shape[0]

    def compute(self) -> torch.Tensor:
        return self.correct.float() / self.total.clamp(min=1)


def rows_from_metrics(metrics: dict, prefix: str) -> list[dict]:
    """``{"test/acc@60": 0.99, …}`` -> ``[{"length": 60, "accuracy": 99.0}, …]`` sorted by length."""
    rows = []
    for key, value in metrics.items():
        if key.startswith(f"{prefix}/acc@"):
            rows.append({"length": int(key.split("@")[1]), "accuracy": round(100.0 * float(value), 2)})
    return sorted(rows, key=lambda r: r["length"])
