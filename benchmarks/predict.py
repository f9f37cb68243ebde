"""Predict throughput of a trained ABS checkpoint: batched (the API and the CLI) against one by one.

    python benchmarks/predict.py [--ckpt PATH] [--inputs 2000] [--digits 60] [--threads 1]

Without ``--ckpt`` it trains the addition + T=3 cell (``configs/abs.yaml --data=Addition``, stopped by
its own interpolation rule) into ``runs/bench_predict/`` once, and reuses it on later calls.
It then answers ``--inputs`` random additions of two ``--digits``-digit numbers:

* ``api``: ``abc_lightning.load(ckpt).predict(inputs)``, best of 3 (inputs grouped by length,
  batches of the config's ``eval_batch_size``);
* ``cli``: ``python -m abc_lightning predict --ckpt_path … --data.predict_file=…``, the whole
  process (start-up, model rebuild, JSONL output) timed from outside;
* ``one_by_one``: the API with batches of one input, on 200 inputs: how predict ran before.

It writes ``results/bench_predict.{json,md}`` with the machine, threads and commit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import torch

from abc_lightning.reproduce.runner import run_logged

ROOT = Path(__file__).resolve().parents[1]


def checkpoint(threads: int) -> Path:
    """The benchmark's ABS checkpoint, trained once."""
    ckpt = ROOT / "runs" / "bench_predict" / "fit" / "checkpoints" / "best.ckpt"
    if not ckpt.exists():
        print("[bench] training configs/abs.yaml --data=Addition once for a checkpoint", flush=True)
        log = ROOT / "runs" / "bench_predict.fit.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        code, _ = run_logged([sys.executable, "-m", "abc_lightning", "fit", "--config", "configs/abs.yaml",
                              "--data=Addition", "--trainer.logger.init_args.save_dir", "runs",
                              "--trainer.logger.init_args.name", "bench_predict", "--trainer.logger.init_args.version",
                              "fit", "--trainer.enable_progress_bar=false", "--wandb.mode=disabled"], log,
                             {"OMP_NUM_THREADS": str(threads)}, cwd=ROOT)
        if code:
            raise SystemExit(f"bench_predict: training failed (exit {code}); see {log}")
    return ckpt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ckpt", default=None, help="an addition checkpoint (default: train one)")
    parser.add_argument("--inputs", type=int, default=2000)
    parser.add_argument("--digits", type=int, default=60)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--out", default=str(ROOT / "results" / "bench_predict"))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from abc_lightning import load
    from abc_lightning.runs.provenance import git_commit

    ckpt = Path(args.ckpt) if args.ckpt else checkpoint(args.threads)
    rng = random.Random(0)
    lo, hi = 10 ** (args.digits - 1), 10**args.digits - 1
    inputs = [f"{rng.randint(lo, hi)}+{rng.randint(lo, hi)}" for _ in range(args.inputs)]
    model = load(ckpt)

    times = []
    for _ in range(3):
        start = time.perf_counter()
        rows = model.predict_rows(inputs)
        times.append(time.perf_counter() - start)
    right = sum(r["correct"] for r in rows)
    start = time.perf_counter()
    model.predict_rows(inputs[:200], batch_size=1)
    one_by_one = time.perf_counter() - start

    def run_cli(lines: list[str]) -> float:
        """Wall seconds of one whole ``predict`` process over ``lines``."""
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "inputs.txt").write_text("\n".join(lines) + "\n")
            code, seconds = run_logged(
                [sys.executable, "-m", "abc_lightning", "predict", "--ckpt_path", str(ckpt.resolve()),
                 f"--data.predict_file={Path(tmp) / 'inputs.txt'}", "--trainer.enable_progress_bar=false",
                 "--trainer.logger.init_args.save_dir", str(Path(tmp) / "runs"), "--wandb.mode=disabled"],
                Path(tmp) / "predict.log", {"OMP_NUM_THREADS": str(args.threads)}, cwd=tmp)
            if code:
                raise SystemExit(f"bench_predict: predict failed (exit {code}): "
                                 f"{(Path(tmp) / 'predict.log').read_text().strip().splitlines()[-1:]}")
            return seconds

    cli = run_cli(inputs)
    startup = run_cli(inputs[:1])  # start-up, model rebuild and one answer

    record = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, {args.threads} torch thread(s), "
                   f"torch {torch.__version__}",
        "commit": git_commit() or "unknown", "checkpoint": os.path.relpath(ckpt, ROOT), "inputs": args.inputs,
        "digits": args.digits, "correct": right,
        "api_inputs_per_s": round(args.inputs / min(times), 1), "api_seconds": [round(t, 2) for t in times],
        "cli_inputs_per_s": round(args.inputs / cli, 1), "cli_seconds": round(cli, 2),
        "cli_one_input_seconds": round(startup, 2),
        "one_by_one_inputs_per_s": round(200 / one_by_one, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2) + "\n")
    out.with_suffix(".md").write_text(
        f"## Predict throughput, {args.digits}-digit additions (ABS + T=3 checkpoint)\n\n"
        f"{record['machine']}; commit `{record['commit']}`. "
        f"Regenerate: `python benchmarks/predict.py --threads {args.threads}`.\n\n"
        "| way | inputs | seconds | inputs/s |\n|---|---:|---:|---:|\n"
        f"| API `load(ckpt).predict` (batched by length, best of 3) | {args.inputs} | {min(times):.2f} | "
        f"{record['api_inputs_per_s']} |\n"
        f"| CLI `predict --data.predict_file` (whole process) | {args.inputs} | {cli:.2f} | {record['cli_inputs_per_s']} |\n"
        f"| CLI `predict`, one input (start-up and model rebuild) | 1 | {startup:.2f} | – |\n"
        f"| one input per batch (how `predict` ran before) | 200 | {one_by_one:.2f} | "
        f"{record['one_by_one_inputs_per_s']} |\n\n"
        f"{right} of {args.inputs} answers were right.\n")
    print(out.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
