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


def answer_of(task, tokens: list[int]) -> str:
    """Generated tokens -> the answer as a person writes it (raw symbols if not all digits)."""
    from abc_lightning import vocab

    digits = tokens[: tokens.index(vocab.EOS)] if vocab.EOS in tokens else tokens
    return task.format_answer(digits) if all(t < 10 for t in digits) else vocab.decode(tokens)


def group_inputs(parsed: list[dict], batch_size: int) -> list[dict]:
    """Parsed predict inputs -> batches of equal shape (inputs grouped by length), each with
    ``src (n, S)``, ``tgt_out (n, m)``, ``text`` and ``index`` (the inputs' original order)."""
    by_shape: dict[tuple[int, int], list[int]] = {}
    for i, item in enumerate(parsed):
        by_shape.setdefault((item["src"].shape[1], item["tgt_out"].shape[1]), []).append(i)
    batches = []
    for indices in by_shape.values():
        for start in range(0, len(indices), batch_size):
            chunk = indices[start : start + batch_size]
            batches.append({"src": torch.cat([parsed[i]["src"] for i in chunk]),
                            "tgt_out": torch.cat([parsed[i]["tgt_out"] for i in chunk]),
                            "text": [parsed[i]["text"] for i in chunk], "index": chunk, "tag": "predict"})
    return batches


def decode_batch(model, task, batch: dict) -> list[dict]:
    """Greedy-decode one batch of predict inputs: a row per input with the answer, the
    expected answer, whether the whole output sequence matched, and both raw outputs."""
    from abc_lightning import vocab

    src, expected = batch["src"], batch["tgt_out"]
    predicted = model.generate(src.to(next(model.parameters()).device), steps=expected.shape[1]).cpu()
    rows = []
    for i, text in enumerate(batch["text"]):
        got, want = predicted[i].tolist(), expected[i].tolist()
        rows.append({"input": text, "output": answer_of(task, got), "expected": answer_of(task, want),
                     "correct": got == want, "raw_output": vocab.decode(got), "raw_expected": vocab.decode(want),
                     "index": batch["index"][i]})
    return rows


def evaluate_by_length(model, dm, lengths: list[int], samples: int, batch_size: int = 1000) -> list[dict]:
    """The test protocol: ``[{"length", "samples", "accuracy"}]`` with min(10^L − 10^(L−1),
    ``samples``) inputs of exactly L digits each (the test sets of ``dm``), exact match."""
    rows = []
    for length in lengths:
        data = dm.test_set(length, samples).data
        metric = ExactMatch()
        for start in range(0, data.src.shape[0], batch_size):
            src = data.src[start : start + batch_size].long()
            target = data.tgt_out[start : start + batch_size].long()
            metric.update(model.generate(src.to(next(model.parameters()).device), steps=target.shape[1]).cpu(),
                          target)
        rows.append({"length": length, "samples": int(metric.total),
                     "accuracy": round(100.0 * float(metric.compute()), 2)})
    return rows
