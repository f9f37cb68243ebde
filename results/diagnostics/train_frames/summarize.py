"""Training in several frames (``--data.train_frames=F``, replay keeping a memory per frame;
F = the cell's CPI period) beside the same cells and seeds trained in one frame.

Seeds 0-4 are compared with the committed records (one frame). The seeds no committed record
has (5-9, held out: the frame counts were picked on seeds 0-4) are compared with one-frame
runs made beside them, from the same checkout (``--controls``).

Makes the runs (one thread each, two at a time), from a checkout of the commit named in
``summary.md``, then the summary::

    OMP_NUM_THREADS=1 python -m abc_lightning reproduce table1 --only abs_nx1 --seeds 0 1 2 3 4 \\
        --results <folder> -- --data.train_frames=3 --trainer.callbacks.init_args.keep_shapes=true
    OMP_NUM_THREADS=1 python -m abc_lightning reproduce beyond --only nx2_T3_encoder_w1 --seeds 0 1 \\
        --results <folder> -- --data.train_frames=3 --trainer.callbacks.init_args.keep_shapes=true
    OMP_NUM_THREADS=1 python -m abc_lightning reproduce beyond --only nx3_T4_encoder_w1 --seeds 0 3 \\
        --results <folder4> -- --data.train_frames=4 --trainer.callbacks.init_args.keep_shapes=true
    # held out: seeds 5-9 in four frames, and in one
    OMP_NUM_THREADS=1 python -m abc_lightning reproduce beyond --only nx3_T4_encoder_w1 --seeds 5 6 7 8 9 \\
        --results <held4> -- --data.train_frames=4 --trainer.callbacks.init_args.keep_shapes=true
    OMP_NUM_THREADS=1 python -m abc_lightning reproduce beyond --only nx3_T4_encoder_w1 --seeds 5 6 7 8 9 \\
        --results <held1>
    python results/diagnostics/train_frames/summarize.py <folder> <folder4> <held4> --controls <held1>

It writes ``summary.md`` and ``summary.json`` beside itself.
"""
import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parents[1]
LENGTHS = (10, 20, 60, 599, 600, 601, 10000)


def row(record: dict) -> dict:
    acc = {x["length"]: x["accuracy"] for x in record["rows"]}
    misses = {x["length"]: sorted(k for k, v in x["worst_families"].items() if v < 100)
              for x in record["rows"] if x.get("worst") is not None and x["worst"] < 100}
    return {"commit": record["commit"], "steps": record["steps"],
            "1-5": min(acc[n] for n in range(1, 6) if n in acc),
            **{str(n): acc.get(n) for n in LENGTHS},
            "exact": all(x["accuracy"] == 100 and x.get("worst") in (None, 100) for x in record["rows"]),
            "worst_misses": misses}


def frames(record: dict) -> int:
    flag = next((w for w in record["command"].split() if w.startswith("--data.train_frames=")), "=1")
    return int(flag.split("=")[1])


def one_frame_twin(table: str, name: str, controls: list[str]) -> tuple[dict, str]:
    """The one-frame record of the same cell and seed: a control run's, else the committed one."""
    for folder in controls:
        path = Path(folder) / table / name
        if path.exists():
            return json.loads(path.read_text()), "one frame (run beside it)"
    return json.loads((RESULTS / table / name).read_text()), "one frame (committed record)"


def seed_of(name: str) -> int:
    parts = name.split(".")
    return int(parts[1][4:]) if len(parts) > 2 and parts[1].startswith("seed") else 0


def main(folders: list[str], controls: list[str]) -> None:
    rows = []
    for path in sorted((p for folder in folders for p in Path(folder).glob("*/*.json")),
                       key=lambda p: (p.stem.split(".")[0], seed_of(p.name))):
        table, key, record = path.parent.name, path.stem, json.loads(path.read_text())
        twin, source = one_frame_twin(table, path.name, controls)
        rows.append({"cell": key, "frames": frames(record), "held out": seed_of(path.name) >= 5,
                     "one frame": {**row(twin), "source": source}, "several frames": row(record)})
    (HERE / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["Training in several frames (`--data.train_frames`, `ErrorReplay` keeping a memory per "
             "frame) beside the same cells and seeds in one frame: the committed records for seeds 0-4, "
             "one-frame runs made beside them for seeds 5-9 (held out). One torch thread a run, two at a "
             "time, AMD EPYC (AVX512). *exact*: 100% at every length and on every worst case. How to "
             "remake it: `summarize.py`'s docstring.", ""]
    head = ("| cell, seed | frames | commit | 1-5 | " + " | ".join(f"{n:,}" for n in LENGTHS)
            + " | exact | worst cases missed |")
    for title, held in (("Seeds the frame counts were tried on", False), ("Held out (seeds 5-9)", True)):
        part = [r for r in rows if r["held out"] == held]
        if not part:
            continue
        lines += [f"### {title}", "", head, "|" + "---|" * 13]
        for r in part:
            for label in ("one frame", "several frames"):
                x = r[label]
                miss = "; ".join(f"{n}: {', '.join(f)}" for n, f in x["worst_misses"].items()) or "none"
                lines.append(f"| {r['cell']} | {1 if label == 'one frame' else r['frames']} | `{x['commit']}` | "
                             f"{x['1-5']} | " + " | ".join("–" if x[str(n)] is None else str(x[str(n)]) for n in LENGTHS)
                             + f" | {'yes' if x['exact'] else 'no'} | {miss} |")
        lines.append("")
    (HERE / "summary.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", help="--results folders of runs in several frames")
    parser.add_argument("--controls", nargs="*", default=[], help="--results folders of one-frame runs beside them")
    args = parser.parse_args()
    main(args.folders, args.controls)
