"""Regenerate a reproduction table: ``python -m abc_lightning reproduce table1``.

For every cell it runs ``fit`` and then ``test`` (on the best checkpoint) in a fresh
process, times both, and writes ``results/<table>.md`` and ``results/<table>.json``: our
accuracy beside the paper's, the training time and the exact command of each cell.
Finished cells are kept under ``results/<table>/`` and skipped on the next call, so an
interrupted reproduction resumes; ``--force`` retrains.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

LENGTHS = [6, 10, 15, 20, 60, 600]

# Table 1 of the paper (seed 003), accuracy % at 60 digits; None where the paper has no number.
TABLE1 = [
    # (task, config label, config path, paper accuracy at 60)
    ("successor", "Vanilla", "configs/table1/successor_vanilla.yaml", 0.0),
    ("successor", "+ w=1", "configs/table1/successor_w1.yaml", 100.0),
    ("successor", "+ T=3", "configs/abs_successor.yaml", 100.0),
    ("successor", "NoPE + w=1", "configs/table1/successor_nope_w1.yaml", 100.0),
    ("addition", "Vanilla", "configs/table1/addition_vanilla.yaml", 0.0),
    ("addition", "+ w=1", "configs/table1/addition_w1.yaml", 0.0),
    ("addition", "+ T=3", "configs/abs_addition.yaml", 100.0),
    ("addition", "NoPE + w=1", "configs/table1/addition_nope_w1.yaml", 99.35),
    ("parity", "Transformer (classification)", "configs/table1/parity_classification_vanilla.yaml", None),
    ("parity", "Vanilla + scratchpad", "configs/table1/parity_vanilla.yaml", 0.0),
    ("parity", "+ w=1", "configs/table1/parity_w1.yaml", 100.0),
    ("parity", "+ T=3", "configs/abs_parity.yaml", 100.0),
    ("parity", "NoPE + w=1", "configs/table1/parity_nope_w1.yaml", 100.0),
    ("nx1", "Vanilla", "configs/table1/nx1_vanilla.yaml", 0.0),
    ("nx1", "+ w=1", "configs/table1/nx1_w1.yaml", 0.0),
    ("nx1", "+ T=3", "configs/abs_nx1.yaml", 100.0),
    ("nx1", "NoPE + w=1", "configs/table1/nx1_nope_w1.yaml", 98.31),
]
PAPER_NOTES = {"configs/table1/parity_classification_vanilla.yaml": "paper: 52.0 / 52.6 overall (Delétang / Ruoss)"}
TABLES = {"table1": TABLE1}


def run(cmd: list[str], log: Path) -> float:
    """Run a command with its output in ``log``; return wall seconds. Raise on failure."""
    start = time.perf_counter()
    with log.open("w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT)
    if proc.returncode:
        raise RuntimeError(f"command failed ({proc.returncode}), see {log}: {' '.join(cmd)}")
    return time.perf_counter() - start


def run_cell(config: str, out_dir: Path, extra: list[str]) -> dict:
    """fit + test one config; returns the cell's record."""
    name = Path(config).stem
    run_dir = out_dir / "runs"
    common = ["--trainer.logger.init_args.save_dir", str(run_dir), "--trainer.logger.init_args.name", name,
              "--trainer.enable_progress_bar", "false", *extra]
    py = [sys.executable, "-m", "abc_lightning"]
    fit_cmd = [*py, "fit", "--config", config, *common, "--trainer.logger.init_args.version", "fit"]
    fit_s = run(fit_cmd, out_dir / f"{name}.fit.log")
    ckpt = run_dir / name / "fit" / "checkpoints" / "best.ckpt"
    test_cmd = [*py, "test", "--config", config, *common, "--trainer.logger.init_args.version", "test",
                "--ckpt_path", str(ckpt)]
    test_s = run(test_cmd, out_dir / f"{name}.test.log")
    test = json.loads((run_dir / name / "test" / "test_accuracy.json").read_text())
    fit_val = json.loads((run_dir / name / "fit" / "val_accuracy.json").read_text())
    return {"config": config, "train_seconds": round(fit_s, 1), "test_seconds": round(test_s, 1),
            "steps": fit_val["global_step"], "rows": test["rows"],
            "command": f"python -m abc_lightning fit --config {config}"}


def fmt(x) -> str:
    return "–" if x is None else f"{x:.2f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


def write_table(table: str, cells: list[tuple], records: dict, out: Path) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    head = (f"## {table}: our accuracy (%) beside the paper's\n\n"
            f"Commit `{commit or 'unknown'}`, {datetime.date.today()}, on {platform.machine()} "
            f"{platform.processor() or ''} with {os.cpu_count()} CPU cores, torch threads = cores. "
            f"Regenerate: `python -m abc_lightning reproduce {table}`.\n\n"
            "| task | config | 6 | 10 | 15 | 20 | 60 | 600 | paper 60 | train time | command |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    lines = []
    for task, label, config, paper60 in cells:
        rec = records.get(config)
        if rec is None:
            lines.append(f"| {task} | {label} | not run |  |  |  |  |  | {fmt(paper60)} |  | `{config}` |")
            continue
        acc = {r["length"]: r["accuracy"] for r in rec["rows"]}
        cols = " | ".join(fmt(acc.get(n)) for n in LENGTHS)
        paper = PAPER_NOTES.get(config, fmt(paper60))
        lines.append(f"| {task} | {label} | {cols} | {paper} | {rec['train_seconds']:.0f} s ({rec['steps']} steps) "
                     f"| `{rec['command']}` |")
    text = head + "\n".join(lines) + "\n"
    (out / f"{table}.md").write_text(text)
    (out / f"{table}.json").write_text(json.dumps({"commit": commit, "date": str(datetime.date.today()),
                                                    "cells": [records[c[2]] for c in cells if c[2] in records]},
                                                   indent=2))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m abc_lightning reproduce", description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=sorted(TABLES))
    parser.add_argument("--only", nargs="*", default=None, help="config paths or stems to run (default: all)")
    parser.add_argument("--force", action="store_true", help="re-run cells that already have results")
    parser.add_argument("--results", default="results", help="output folder (default: results)")
    parser.add_argument("--table-only", action="store_true", help="only rebuild the table from finished cells")
    parser.add_argument("extra", nargs=argparse.REMAINDER, help="extra CLI overrides after --, for every cell")
    args = parser.parse_args(argv)
    cells = TABLES[args.table]
    out = Path(args.results)
    cell_dir = out / args.table
    cell_dir.mkdir(parents=True, exist_ok=True)
    extra = [a for a in args.extra if a != "--"]
    records = {}
    for task, label, config, _ in cells:
        record_file = cell_dir / f"{Path(config).stem}.json"
        wanted = args.only is None or config in args.only or Path(config).stem in args.only
        if wanted and not args.table_only and (args.force or not record_file.exists()):
            print(f"[reproduce] {task} / {label}: {config}", flush=True)
            record_file.write_text(json.dumps(run_cell(config, cell_dir, extra), indent=2))
        if record_file.exists():
            records[config] = json.loads(record_file.read_text())
    print(write_table(args.table, cells, records, out))
    return 0
