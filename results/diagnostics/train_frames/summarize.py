"""Training in several frames (``--data.train_frames=F``, replay keeping a memory per frame;
F = the cell's CPI period) beside the committed records of the same cells and seeds, trained
in one frame.

Makes the runs (one thread each, two at a time), from a checkout of the commit named in
``summary.md``, then the summary::

    OMP_NUM_THREADS=1 python -m abc_lightning reproduce table1 --only abs_nx1 --seeds 0 1 2 3 4 \\
        --results <folder> -- --data.train_frames=3 --trainer.callbacks.init_args.keep_shapes=true
    OMP_NUM_THREADS=1 python -m abc_lightning reproduce beyond --only nx2_T3_encoder_w1 --seeds 0 1 \\
        --results <folder> -- --data.train_frames=3 --trainer.callbacks.init_args.keep_shapes=true
    OMP_NUM_THREADS=1 python -m abc_lightning reproduce beyond --only nx3_T4_encoder_w1 --seeds 0 3 \\
        --results <folder4> -- --data.train_frames=4 --trainer.callbacks.init_args.keep_shapes=true
    python results/diagnostics/train_frames/summarize.py <folder> <folder4>

It writes ``summary.md`` and ``summary.json`` beside itself.
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1]


def row(record: dict) -> dict:
    acc = {x["length"]: x["accuracy"] for x in record["rows"]}
    misses = {x["length"]: sorted(k for k, v in x["worst_families"].items() if v < 100)
              for x in record["rows"] if x.get("worst") is not None and x["worst"] < 100}
    return {"commit": record["commit"], "steps": record["steps"],
            "1-5": min(acc[n] for n in range(1, 6) if n in acc),
            **{str(n): acc.get(n) for n in (10, 20, 60, 599, 600, 601, 10000)},
            "exact": all(x["accuracy"] == 100 and x.get("worst") in (None, 100) for x in record["rows"]),
            "worst_misses": misses}


def frames(record: dict) -> int:
    flag = next((w for w in record["command"].split() if w.startswith("--data.train_frames=")), "=1")
    return int(flag.split("=")[1])


def main(folders: list[str]) -> None:
    rows = []
    for path in sorted(p for folder in folders for p in Path(folder).glob("*/*.json")):
        table, key, record = path.parent.name, path.stem, json.loads(path.read_text())
        rows.append({"cell": key, "frames": frames(record),
                     "one frame (committed record)": row(json.loads((RESULTS / table / path.name).read_text())),
                     "several frames": row(record)})
    (HERE / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["Training in several frames (`--data.train_frames`, `ErrorReplay` keeping a memory per "
             "frame) beside the committed records of the same cells and seeds (one frame). One torch "
             "thread a run, two at a time, AMD EPYC (AVX512). *exact*: 100% at every length and on every "
             "worst case. How to remake it: `summarize.py`'s docstring.", "",
             "| cell, seed | frames | commit | 1-5 | 10 | 20 | 60 | 599 | 600 | 601 | 10,000 | exact | worst cases missed |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for label in ("one frame (committed record)", "several frames"):
            x = r[label]
            miss = "; ".join(f"{n}: {', '.join(f)}" for n, f in x["worst_misses"].items()) or "none"
            lines.append(f"| {r['cell']} | {1 if label.startswith('one') else r['frames']} | `{x['commit']}` | {x['1-5']} | "
                         + " | ".join("–" if x[str(n)] is None else str(x[str(n)]) for n in (10, 20, 60, 599, 600, 601, 10000))
                         + f" | {'yes' if x['exact'] else 'no'} | {miss} |")
    (HERE / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1:])
