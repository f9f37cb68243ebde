"""Can an in-distribution check see the rare errors a short fit leaves at long lengths?

    OMP_NUM_THREADS=1 python studies/in_distribution.py run --results <folder of reproduce table1>
    python studies/in_distribution.py summary --results <that folder>

A stopping rule may look only at in-distribution data. So before building one that trains on
when a fit is not yet exact, this asks whether such data can tell the runs apart: ``run``
takes every record of a ``reproduce table1 --results <folder>`` that was tested at 599-601
digits, loads the checkpoint its test read, and decodes the task's worst-case sets at 1-6
digits and ``--samples`` random inputs at 5 and at 6 digits (seeded apart from the test's,
so not the test's inputs). One line per run goes to ``<folder>/in_distribution.jsonl`` (a
run with a line is skipped). ``summary`` writes ``results/in_distribution.{md,json}``: per
cell, the runs exact in their record (100% at every length and on every worst case) and
the runs the check flags (any wrong answer), then every run that is not exact, with both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "results" / "in_distribution"
LENGTHS = (5, 6)  # random inputs at these lengths (the training operands have up to 6 digits, and 7 up to 2^20)
WORST = range(1, 7)  # worst-case sets at these lengths
SEED = 12345  # + the length: the random inputs' seed (the test protocol's are seeded otherwise)


def exact(record: dict) -> bool:
    return all(r.get("accuracy", 100) == 100 and r.get("worst", 100) == 100 for r in record["rows"])


def check_run(checkpoint: Path, samples: int) -> dict:
    """Wrong answers of one checkpoint on the worst-case sets at 1-6 digits and on random inputs."""
    from abc_lightning import load

    model = load(str(checkpoint))
    task = model.task
    out = {"worst_wrong": 0, "worst_inputs": 0}
    for length in WORST:
        texts = task.worst_case_set(length)[3]
        out["worst_inputs"] += len(texts)
        out["worst_wrong"] += sum(not r["correct"] for r in model.predict_rows(texts))
    for length in LENGTHS:
        texts = task.expressions(task.sample(np.random.default_rng(SEED + length), samples, length))
        out[f"random_wrong_{length}"] = sum(not r["correct"] for r in model.predict_rows(texts))
    return out


def run(folder: Path, samples: int) -> None:
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    lines = folder / "in_distribution.jsonl"
    done = {json.loads(x)["key"] for x in lines.read_text().splitlines()} if lines.exists() else set()
    for path in sorted(folder.glob("*.json")):
        record = json.loads(path.read_text())
        if path.stem in done or not isinstance(record, dict) or not any(r["length"] >= 599 for r in record.get("rows", [])):
            continue
        start = time.perf_counter()
        checkpoint = folder / "runs" / path.stem / "fit" / "checkpoints" / "best.ckpt"
        row = {"key": path.stem, "samples": samples, **check_run(checkpoint, samples)}
        row["seconds"] = round(time.perf_counter() - start, 1)
        print(json.dumps(row), flush=True)
        with lines.open("a") as f:
            f.write(json.dumps(row) + "\n")


def summary(folder: Path, out: Path = OUT) -> None:
    from abc_lightning import markdown

    rows = [json.loads(x) for x in (folder / "in_distribution.jsonl").read_text().splitlines()]
    runs = []
    for row in rows:
        record = json.loads((folder / f"{row['key']}.json").read_text())
        wrong = row["worst_wrong"] + sum(row[f"random_wrong_{n}"] for n in LENGTHS)
        long = [r for r in record["rows"] if r["length"] >= 599]
        runs.append({**row, "cell": row["key"].split(".")[0], "seed": record.get("seed", 0), "label": record["label"],
                     "task": record["task"], "commit": record.get("commit"), "exact": exact(record), "flagged": wrong > 0,
                     "acc_60": next((r["accuracy"] for r in record["rows"] if r["length"] == 60), None),
                     "acc_long": min(r["accuracy"] for r in long),  # 599-601 digits, and 10,000 where tested
                     "worst_min": min(r.get("worst", 100) for r in record["rows"])})
    tasks = ["successor", "addition", "parity", "nx1"]
    order = lambda r: (tasks.index(r["task"]) if r["task"] in tasks else len(tasks), r["task"], r["label"])  # noqa: E731
    runs.sort(key=order)
    cells = list(dict.fromkeys(r["cell"] for r in runs))
    body = []
    for cell in cells:
        mine = [r for r in runs if r["cell"] == cell]
        missed = [r for r in mine if not r["exact"]]
        body.append([mine[0]["task"], mine[0]["label"], str(len(mine)), f"{sum(r['exact'] for r in mine)}/{len(mine)}",
                     f"{sum(r['flagged'] for r in mine)}/{len(mine)}",
                     f"{sum(r['flagged'] for r in missed)}/{len(missed)}" if missed else "–"])
    lost = [[r["task"], r["label"], str(r["seed"]), f"{r['acc_60']:g}", f"{r['acc_long']:g}", f"{r['worst_min']:g}",
             f"{r['worst_wrong']}/{r['worst_inputs']}", *(str(r[f"random_wrong_{n}"]) for n in LENGTHS)]
            for r in runs if not r["exact"]]
    samples = runs[0]["samples"]
    commits = sorted({str(r["commit"]) for r in runs})
    text = [
        "### Can an in-distribution check see a short fit's rare long-length errors?", "",
        f"Every Table 1 run tested at 599-601 digits ({len(runs)} runs, records at commit "
        f"{', '.join(f'`{c}`' for c in commits)}): the checkpoint its test read, on the task's worst-case sets "
        f"at 1-6 digits and {samples:,} random inputs at each of {' and '.join(map(str, LENGTHS))} digits "
        f"(seeded apart from the test's). *Exact*: 100% at every length and on every worst case in the record. "
        f"*Flagged*: the check finds a wrong answer. *599+*: 599-601 digits, and 10,000 where tested. One torch thread. Remake: `OMP_NUM_THREADS=1 python "
        f"studies/in_distribution.py run --results <folder of reproduce table1>`, then `summary`.", "",
        *markdown.table(["task", "config", "runs", "exact", "flagged", "not exact and flagged"], body, "llrrrr"), "",
        "Runs that are not exact:", "",
        *markdown.table(["task", "config", "seed", "60 %", "599+ % (lowest)", "worst % (lowest)",
                         "wrong: worst 1-6", *(f"wrong: random at {n}" for n in LENGTHS)], lost, "llrrrrrrr"), ""]
    out.with_suffix(".md").write_text("\n".join(text))
    out.with_suffix(".json").write_text(json.dumps({"samples": samples, "lengths": list(LENGTHS),
                                                    "worst_lengths": list(WORST), "runs": runs}, indent=2) + "\n")
    print(f"written to {out.with_suffix('.md')}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["run", "summary"])
    parser.add_argument("--results", type=Path, required=True, help="a folder of reproduce table1 (records + runs/)")
    parser.add_argument("--samples", type=int, default=50_000, help="random inputs at each length (default 50,000)")
    args = parser.parse_args()
    if not args.results.is_dir():
        print(f"in_distribution: error: {args.results} is not a folder", file=sys.stderr)
        return 2
    run(args.results, args.samples) if args.action == "run" else summary(args.results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
