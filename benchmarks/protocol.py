"""A cell's whole test protocol against the bound its FLOPs set, and where its time goes.

    OMP_NUM_THREADS=1 python benchmarks/protocol.py [--cells abs_addition …] [--out results/bench_protocol]
    python benchmarks/protocol.py --merge a.json b.json --out results/bench_protocol   # runs made apart

For each cell, the tests ``reproduce`` gives it (the config's lengths and samples; the 1-60
curve; 599-601 digits, 10,000 for the encoder-window cells; a task's other shapes; the
worst-case set at every length) are decoded as ``test`` decodes them: the same data module,
the same batches. The model is the cell's config untrained, decoded without a target, so
every answer is decoded whole, as for a model that is right (a trained one that errs stops a
batch early). Per stage and length it records:

- seconds: making the data, the encoder, the decoder (greedy steps), and the worst-case
  sets' share of both;
- answer tokens decoded and tokens per second;
- the FLOPs done (``torch.utils.flop_counter`` on a few rows of each batch, scaled to the
  batch) and the bound they set at the machine's measured matmul rate (a 1024² fp32
  ``torch.mm`` on the same threads), with the ratio of the seconds to it;
- the decoder's per-step cost at batch 1, where the arithmetic is negligible: its time over
  the stage's steps is the Python and dispatch overhead.

A cell's protocol also starts one ``test`` process per stage; their start-up (``python -m
abc_lightning test --help``) is measured once and counted per stage. Its training time is the
committed record's (seed 0, with the CPU it ran on). Writes ``<out>.md`` and ``<out>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CELLS = ["abs_successor", "abs_addition", "abs_parity", "abs_nx1", "addition_T3_encoder_w1",
                 "abs_subtraction", "abs_addition_k", "abs_multiplication"]
FLOP_ROWS = 4  # rows of each batch whose FLOPs are counted (FLOPs grow with the rows)


def matmul_rate(repeats: int = 5) -> float:
    """FLOP/s of a 1024×1024 fp32 matmul on this process's threads, the best of ``repeats``."""
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    torch.mm(a, b)
    best = min(_seconds(lambda: torch.mm(a, b)) for _ in range(repeats))
    return 2 * 1024 ** 3 / best


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def startup_seconds() -> float:
    """Wall seconds of ``python -m abc_lightning test --help``: imports and the parser."""
    return _seconds(lambda: subprocess.run([sys.executable, "-m", "abc_lightning", "test", "--help"], cwd=ROOT,
                                           capture_output=True, check=True))


def stages(cell) -> list[tuple[str, list[str]]]:
    """The test processes ``reproduce`` runs for ``cell``, each as its CLI overrides."""
    from abc_lightning.reproduce import (CURVE_LENGTHS, CURVE_SAMPLES, HUGE_LENGTHS, HUGE_SAMPLES, LONG_LENGTHS,
                                         LONG_SAMPLES, SHAPE_SAMPLES)
    from abc_lightning.tasks import get_task

    task = get_task(cell.task)
    out = [("test", [])]
    if cell.curve:
        curve = list(task.curve_lengths or CURVE_LENGTHS)
        out.append(("curve", [f"--data.test_lengths={curve}", f"--data.test_samples={CURVE_SAMPLES}",
                              "--data.worst_case=false"]))
    long = [n for n in (task.long_lengths or LONG_LENGTHS) if n <= task.max_length]
    if cell.long and long:
        out.append(("long", [f"--data.test_lengths={long}", f"--data.test_samples={task.long_samples or LONG_SAMPLES}"]))
    if cell.huge:
        out.append(("huge", [f"--data.test_lengths={list(HUGE_LENGTHS)}", f"--data.test_samples={HUGE_SAMPLES}"]))
    if cell.long:
        for tag, lengths, flags in task.shape_tests():
            name = "_".join([*(f"{k}{v}" for k, v in tag.items()), *map(str, lengths)])
            out.append((name, [f"--data.test_lengths={lengths}",
                               f"--data.test_samples={task.shape_samples or SHAPE_SAMPLES}", *flags]))
    return out


def build(cell, overrides: list[str]):
    """The cell's untrained model (its bias strategy installed) and data module."""
    from abc_lightning.cli import ABCLightningCLI

    cli = ABCLightningCLI(args=["--config", cell.config, *cell.overrides, "--trainer.logger=false",
                                "--wandb.mode=disabled", *overrides], run=False)
    for callback in cli.trainer.callbacks:
        if hasattr(callback, "apply_to"):
            callback.apply_to(cli.model, cli.datamodule)
    return cli.model.model.eval(), cli.datamodule


def _attention_flops(query, key, *args, **kwargs) -> int:
    """Scores and weighted values of one fused attention call (given the shapes of its
    query and key): 2 · 2 · b · h · q · k · d."""
    b, h, q, d = query
    return 4 * b * h * q * key[-2] * d


def flops(model, src: torch.Tensor, steps: int) -> float:
    """FLOPs of encoding and greedy-decoding ``src``, counted on its first rows and scaled
    (torch's counter has no formula for the CPU's fused attention; it gets one here)."""
    from torch.utils.flop_counter import FlopCounterMode

    rows = min(FLOP_ROWS, src.shape[0])
    fused = [getattr(torch.ops.aten, name) for name in ("_scaled_dot_product_flash_attention_for_cpu",
                                                        "_scaled_dot_product_attention_math")
             if hasattr(torch.ops.aten, name)]
    counter = FlopCounterMode(display=False, custom_mapping={op: _attention_flops for op in fused})
    with counter:
        model.generate(src[:rows], steps)
    return counter.get_total_flops() * src.shape[0] / rows


def per_step_overhead(model, src: torch.Tensor, steps: int, max_steps: int = 5000) -> float | None:
    """Seconds per decoding step at batch 1 (arithmetic negligible), or None for long answers."""
    if steps > max_steps:
        return None
    seconds = _seconds(lambda: model.generate(src[:1], steps)) - _seconds(lambda: model.encode_in_chunks(src[:1]))
    return seconds / steps


def run_stage(cell, name: str, overrides: list[str], rate: float) -> list[dict]:
    from abc_lightning.data import WorstCaseDataset

    model, dm = build(cell, overrides)
    made = _seconds(lambda: dm.setup("test"))
    rows = []
    with torch.inference_mode():
        for loader in dm.test_dataloader():
            worst = isinstance(loader.dataset, WorstCaseDataset)
            encoder = decoder = 0.0
            inputs = tokens = 0
            per_row_flop = step_cost = None
            for batch in loader:
                src, steps = batch["src"], batch["tgt_out"].shape[1]
                if per_row_flop is None:  # each row of a loader has the same width and steps
                    per_row_flop = flops(model, src, steps) / src.shape[0]
                    step_cost = per_step_overhead(model, src, steps)
                enc = _seconds(lambda: model.encode_in_chunks(src))
                total = _seconds(lambda: model.generate(src, steps))
                encoder, decoder = encoder + enc, decoder + max(total - enc, 0.0)
                inputs, tokens = inputs + src.shape[0], tokens + src.shape[0] * steps
            n_batches = len(loader)
            seconds, flop = encoder + decoder, (per_row_flop or 0.0) * inputs
            overhead = None if step_cost is None else step_cost * steps * n_batches
            tag = str(loader.dataset.tag)
            rows.append({"cell": cell.key, "stage": name, "length": tag.removeprefix("worst@"), "worst": worst,
                         "inputs": inputs, "batches": n_batches, "answer_tokens": tokens, "seconds": round(seconds, 2),
                         "encoder_seconds": round(encoder, 2), "decoder_seconds": round(decoder, 2),
                         "overhead_seconds": None if overhead is None else round(overhead, 2),
                         "tokens_per_second": round(tokens / seconds) if seconds else None,
                         "gflop": round(flop / 1e9, 2), "bound_seconds": round(flop / rate, 3),
                         "over_bound": round(seconds / (flop / rate), 1) if flop else None})
            print(json.dumps(rows[-1]), flush=True)
    rows.append({"cell": cell.key, "stage": name, "data_seconds": round(made, 2)})
    return rows


def train_seconds(key: str) -> tuple[float | None, str | None]:
    """The committed seed-0 record's training seconds and CPU."""
    from abc_lightning.reproduce.records import read_bundle

    for bundle in sorted((ROOT / "results").glob("*.records.json.gz")):
        for name, record in read_bundle(bundle).items():
            if Path(name).stem == key:
                return record.get("train_seconds"), record.get("cpu")
    return None, None


def summary(cells: list[str], rows: list[dict], startup: float, rate: float) -> list[dict]:
    out = []
    for key in cells:
        mine = [r for r in rows if r["cell"] == key and "seconds" in r]
        data = sum(r["data_seconds"] for r in rows if r["cell"] == key and "data_seconds" in r)
        n_stages = len({r["stage"] for r in rows if r["cell"] == key})
        decode = sum(r["seconds"] for r in mine)
        total = decode + data + startup * n_stages
        train, cpu = train_seconds(key)
        flop = sum(r["gflop"] for r in mine) * 1e9
        overhead = [r["overhead_seconds"] for r in mine]
        out.append({"cell": key, "test_seconds": round(total, 1), "decode_seconds": round(decode, 1),
                    "encoder_seconds": round(sum(r["encoder_seconds"] for r in mine), 1),
                    "decoder_seconds": round(sum(r["decoder_seconds"] for r in mine), 1),
                    "overhead_seconds": None if None in overhead else round(sum(overhead), 1),
                    "worst_case_seconds": round(sum(r["seconds"] for r in mine if r["worst"]), 1),
                    "data_seconds": round(data, 1), "startup_seconds": round(startup * n_stages, 1),
                    "processes": n_stages, "answer_tokens": sum(r["answer_tokens"] for r in mine),
                    "tokens_per_second": round(sum(r["answer_tokens"] for r in mine) / decode) if decode else None,
                    "bound_seconds": round(flop / rate, 1), "over_bound": round(decode / (flop / rate), 1) if flop else None,
                    "train_seconds": train, "train_cpu": cpu,
                    "test_over_train": round(total / train, 2) if train else None})
    return out


def markdown_report(meta: dict, cells: list[dict], rows: list[dict]) -> str:
    from abc_lightning import markdown

    head = ["cell", "test s", "processes", "start-up s", "data s", "encoder s", "decoder s", "of which overhead s",
            "worst-case s", "answer tokens", "tokens/s", "FLOP bound s", "× bound", "train s (record)", "test / train"]
    lines = [[c["cell"], c["test_seconds"], c["processes"], c["startup_seconds"], c["data_seconds"],
              c["encoder_seconds"], c["decoder_seconds"], "–" if c["overhead_seconds"] is None else c["overhead_seconds"],
              c["worst_case_seconds"], f"{c['answer_tokens']:,}", c["tokens_per_second"], c["bound_seconds"],
              c["over_bound"], c["train_seconds"], c["test_over_train"]] for c in cells]
    long = ["cell", "stage", "length", "inputs", "seconds", "encoder s", "decoder s", "overhead s", "tokens/s",
            "GFLOP", "bound s", "× bound"]
    by_stage = [[r["cell"], r["stage"] + (" (worst)" if r["worst"] else ""), r["length"], r["inputs"], r["seconds"],
                 r["encoder_seconds"], r["decoder_seconds"], "–" if r["overhead_seconds"] is None else r["overhead_seconds"],
                 r["tokens_per_second"], r["gflop"], r["bound_seconds"], r["over_bound"]]
                for r in rows if "seconds" in r and r["stage"] != "test" and not r["worst"]]
    return "\n".join([
        "## A cell's test protocol against its FLOP bound", "",
        f"{meta['machine']}; commit {meta['commit']}; matmul rate {meta['matmul_gflops']} GFLOP/s (1024² fp32); "
        f"`python -m abc_lightning test --help` start-up {meta['startup_seconds']} s. Untrained models of each cell's "
        "config, every answer decoded whole (the cost of a model that is right everywhere). *test s*: data, "
        "encoder and decoder of every stage, plus one start-up per test process `reproduce` runs. *overhead*: "
        "the decoder's per-step cost at batch 1 times the steps (– where answers are over 5,000 tokens). "
        "*× bound*: decode seconds over FLOPs ÷ matmul rate. *train s*: the committed seed-0 record's, on its own "
        "CPU. Remake: `" + meta["command"] + "`.", "",
        *markdown.table(head, lines), "", "Beyond the configs' lengths (each stage's random inputs):", "",
        *markdown.table(long, by_stage), ""])


def merge(paths: list[Path], out: str) -> None:
    """One report from the JSON of several runs (each of its own cells, on one machine and commit)."""
    from abc_lightning.runs import files

    runs = [json.loads(p.read_text()) for p in paths]
    meta = {k: runs[0][k] for k in ("machine", "commit", "matmul_gflops", "startup_seconds")}
    meta["command"] = "; ".join(r["command"] for r in runs) + " (at once, one thread each), then --merge"
    for key in ("machine", "commit"):
        if len({r[key] for r in runs}) > 1:
            raise SystemExit(f"protocol: the runs differ in {key}: {sorted({r[key] for r in runs})}")
    cells, rows = [c for r in runs for c in r["cells"]], [row for r in runs for row in r["rows"]]
    files.write_text(f"{out}.json", json.dumps({**meta, "cells": cells, "rows": rows}, indent=1))
    files.write_text(f"{out}.md", markdown_report(meta, cells, rows))
    print(markdown_report(meta, cells, rows))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", nargs="+", default=DEFAULT_CELLS)
    parser.add_argument("--out", default=str(ROOT / "results" / "bench_protocol"))
    parser.add_argument("--merge", nargs="+", default=None, help="the .json of runs made apart, into one table")
    args = parser.parse_args()
    if args.merge:
        return merge([Path(p) for p in args.merge], args.out)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    os.chdir(ROOT)
    from abc_lightning.reproduce import all_cells
    from abc_lightning.runs import files
    from abc_lightning.runs.provenance import cpu, short_commit

    known = {c.key: c for c in all_cells()}
    unknown = [k for k in args.cells if k not in known]
    if unknown:
        parser.exit(2, f"protocol: error: no cell {unknown[0]!r}; e.g. {', '.join(DEFAULT_CELLS[:3])}\n")
    rate, startup = matmul_rate(), startup_seconds()
    rows = []
    for key in args.cells:
        for name, overrides in stages(known[key]):
            rows += run_stage(known[key], name, overrides, rate)
    meta = {"machine": f"{platform.machine()}, {cpu()}, {torch.get_num_threads()} torch thread(s)",
            "commit": short_commit(), "matmul_gflops": round(rate / 1e9, 1), "startup_seconds": round(startup, 2),
            "command": "OMP_NUM_THREADS=1 python benchmarks/protocol.py" + (
                "" if args.cells == DEFAULT_CELLS else " --cells " + " ".join(args.cells))}
    cells = summary(args.cells, rows, startup, rate)
    files.write_text(f"{args.out}.json", json.dumps({**meta, "cells": cells, "rows": rows}, indent=1))
    files.write_text(f"{args.out}.md", markdown_report(meta, cells, rows))
    print(markdown_report(meta, cells, rows))


if __name__ == "__main__":
    main()
