"""Exact match and per-length accuracy rows (greedy decoding is ``Seq2SeqTransformer.generate``)."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import torch
from torchmetrics import Metric


def average_attention(model, src: torch.Tensor, steps: int, source: str = "weights",
                      batch_size: int = 256) -> dict[str, list[torch.Tensor]]:
    """Greedy-decode ``steps`` tokens for ``src`` once, and average the attention of every
    kind and layer over the samples: ``{kind: [(H, q, k) per layer]}`` of the pre-softmax
    ``scores`` or the post-softmax ``weights`` (what ABC calibrates from), summed in float64."""
    total: dict[str, list[torch.Tensor]] = {}
    count = 0
    for start in range(0, src.shape[0], batch_size):
        chunk = src[start : start + batch_size]
        for kind, maps in model.attention_on_own_output(chunk, steps).items():
            sums = [(m.scores if source == "scores" else m.weights).double().sum(0) for m in maps]
            total[kind] = sums if kind not in total else [t + a for t, a in zip(total[kind], sums)]
        count += chunk.shape[0]
    return {kind: [t / count for t in layers] for kind, layers in total.items()}


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


class FamilyExactMatch(Metric):
    """Exact match on a worst-case set, counted per family: ``compute()`` gives
    ``{"all": accuracy, family: accuracy, …}`` (DDP-safe sums)."""

    full_state_update = False

    def __init__(self, families: list[str]) -> None:
        super().__init__()
        self.families = list(families)
        self.add_state("correct", default=torch.zeros(len(families), dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("total", default=torch.zeros(len(families), dtype=torch.long), dist_reduce_fx="sum")

    def update(self, predicted: torch.Tensor, target: torch.Tensor, family: torch.Tensor) -> None:
        family = family.to(self.correct.device)
        self.correct.scatter_add_(0, family, (predicted == target).all(dim=1).long())
        self.total.scatter_add_(0, family, torch.ones_like(family))

    def compute(self) -> dict[str, torch.Tensor]:
        rates = self.correct.float() / self.total.clamp(min=1)
        overall = self.correct.sum().float() / self.total.sum().clamp(min=1)
        return {"all": overall, **{name: rates[i] for i, name in enumerate(self.families)}}


def percent(value) -> float:
    return round(100.0 * float(value), 2)


def rows_from_metrics(metrics: dict, prefix: str) -> list[dict]:
    """``{"test/acc@60": 0.99, "test/worst@60": 0.5, "test/worst@60/all_nines": 0, …}`` ->
    ``[{"length": 60, "accuracy": 99.0, "worst": 50.0, "worst_families": {"all_nines": 0.0}}, …]``
    sorted by length (the worst-case keys only where the worst-case set was tested)."""
    rows: dict[int, dict] = {}
    for key, value in metrics.items():
        if not key.startswith(f"{prefix}/"):
            continue
        kind, _, rest = key.removeprefix(f"{prefix}/").partition("@")
        if kind not in ("acc", "worst") or not rest:
            continue
        length, _, family = rest.partition("/")
        row = rows.setdefault(int(length), {"length": int(length)})
        if kind == "acc":
            row["accuracy"] = percent(value)
        elif family:
            row.setdefault("worst_families", {})[family] = percent(value)
        else:
            row["worst"] = percent(value)
    return sorted((r for r in rows.values() if "accuracy" in r), key=lambda r: r["length"])


def answer_of(task, tokens: list[int]) -> str:
    """Generated tokens -> the answer as a person writes it (raw symbols if not all digits)."""
    from abc_lightning import vocab

    digits = tokens[: tokens.index(vocab.EOS)] if vocab.EOS in tokens else tokens
    return task.format_answer(digits) if all(t in task.answer_tokens for t in digits) else vocab.decode(tokens)


def wrong_answer_texts(task, got: list[int], want: list[int]) -> tuple[str, str]:
    """A wrong answer and the expected one as text: printed answers, or the raw tokens where
    the two print alike (signed subtraction's ``0`` from ``00…0-`` and from ``00…0+``)."""
    from abc_lightning import vocab

    output, expected = answer_of(task, got), answer_of(task, want)
    return (vocab.decode(got), vocab.decode(want)) if output == expected else (output, expected)


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


#: Answers of at least this many tokens show a progress bar while they decode (an N×M
#: scratchpad at 100×100 is about 65,000 tokens: minutes).
PROGRESS_TOKENS = 5000


@contextlib.contextmanager
def answer_progress(steps: int, rows: int):
    """A progress bar on stderr for a batch whose answers are long, as ``progress(n)`` (None
    for short ones): tokens decoded of ``steps``, the rate and the time left."""
    if steps < PROGRESS_TOKENS:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=steps, desc=f"decoding {rows} answer(s)", unit="token", file=sys.stderr, leave=False,
              mininterval=0.5 if sys.stderr.isatty() else 10.0) as bar:
        yield bar.update


def decode_batch(model, task, batch: dict) -> list[dict]:
    """Greedy-decode one batch of predict inputs: a row per input with the answer, the
    expected answer, whether the whole output sequence matched, and both raw outputs."""
    from abc_lightning import vocab

    src, expected = batch["src"], batch["tgt_out"]
    steps = expected.shape[1]
    with answer_progress(steps, src.shape[0]) as progress:
        predicted = model.generate(src.to(next(model.parameters()).device), steps=steps, progress=progress).cpu()
    task = task.for_shape(src.shape[1], expected.shape[1])
    rows = []
    for i, text in enumerate(batch["text"]):
        got, want = predicted[i].tolist(), expected[i].tolist()
        rows.append({"input": text, "output": answer_of(task, got), "expected": answer_of(task, want),
                     "correct": got == want, "raw_output": vocab.decode(got), "raw_expected": vocab.decode(want),
                     "index": batch["index"][i]})
    return rows


def evaluate_by_length(model, dm, lengths: list[int], samples: int, batch_size: int = 1000,
                       worst_case: bool = True) -> list[dict]:
    """The test protocol: ``[{"length", "samples", "accuracy"}]`` with min(10^L − 10^(L−1),
    ``samples``) inputs of exactly L digits each (the test sets of ``dm``), exact match;
    with ``worst_case`` also ``worst`` (the worst-case set), ``worst_samples`` and
    ``worst_families`` (accuracy per family), as ``test`` reports them."""
    device = next(model.parameters()).device
    rows = []
    for length in lengths:
        sets = [dm.test_set(length, samples)] + ([dm.worst_set(length)] if worst_case else [])
        row = {"length": length}
        for ds in sets:
            families = getattr(ds, "families", None)
            metric = ExactMatch() if families is None else FamilyExactMatch(families)
            data = ds.data
            for start in range(0, data.src.shape[0], batch_size):
                part = slice(start, start + batch_size)
                target = data.tgt_out[part].long()
                predicted = model.generate(data.src[part].long().to(device), steps=target.shape[1],
                                           target=None if families is not None else target.to(device)).cpu()
                metric.update(predicted, target, *([] if families is None else [ds.family[part]]))
            if families is None:
                row.update(samples=int(metric.total), accuracy=percent(metric.compute()))
            else:
                result = {name: percent(value) for name, value in metric.compute().items()}
                row.update(worst=result.pop("all"), worst_samples=len(ds), worst_families=result)
        rows.append(row)
    return rows


SHOWN = 20  # predict answers printed; all of them go to predictions.jsonl


def write_predictions(predictions: list[dict], out: Path) -> None:
    """``predict``'s answers: all of them to ``out/predictions.jsonl`` (in input order), the
    first :data:`SHOWN` printed, each marked right or wrong, and how many were right."""
    from abc_lightning.runs import files

    rows = sorted(predictions, key=lambda r: r["index"])
    out.mkdir(parents=True, exist_ok=True)
    with files.atomic_open(out / "predictions.jsonl", "w") as fh:
        for r in rows:
            fh.write(json.dumps({k: v for k, v in r.items() if k != "index"}) + "\n")
    shown = rows[:SHOWN]
    width = max(len(r["input"]) for r in shown)
    for r in shown:
        mark = "ok" if r["correct"] else (f"WRONG (expected {r['expected']}; generated {r['raw_output']!r}, "
                                          f"expected {r['raw_expected']!r}, least significant digit first)")
        print(f"{r['input']:>{width}} = {r['output']}   {mark}")
    right = sum(r["correct"] for r in rows)
    more = f"; the first {SHOWN} are shown" if len(rows) > SHOWN else ""
    print(f"{right} of {len(rows)} right{more}; every answer in {out / 'predictions.jsonl'}")
