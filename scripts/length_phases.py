"""Accuracy of trained checkpoints at lengths of every residue mod 3 (CPI's period).

    python scripts/length_phases.py --out results/diagnostics/<name>/phases.json \\
        NAME=<best.ckpt> [NAME=<best.ckpt> ...] [--lengths 9 10 11 ...] [--samples 1000] [--long-samples 200]

The tables test at 6, 10, 15, 20, 60 and 600 digits. With the training frame of 8 cells
and a test frame of L + 2, the lengths 6, 15, 60 and 600 give a frame of the training
frame's length mod 3, and only 10 and 20 of the others; this script tests lengths next to
each other (59, 60, 61, 62, …) so that a model whose accuracy hangs on that phase shows
it. Lengths up to 100 use ``--samples`` inputs, longer ones ``--long-samples``; every
length also runs the task's worst-case set. Writes JSON and a markdown table beside it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from abc_lightning import load

LENGTHS = [9, 10, 11, 20, 21, 22, 59, 60, 61, 62, 99, 100, 101, 599, 600, 601]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", help="NAME=path/to/best.ckpt")
    parser.add_argument("--out", required=True, help="JSON file to write (a .md table is written beside it)")
    parser.add_argument("--lengths", type=int, nargs="+", default=LENGTHS)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--long-samples", type=int, default=200)
    args = parser.parse_args()
    out = Path(args.out)
    results = json.loads(out.read_text()) if out.exists() else {}
    for item in args.checkpoints:
        name, _, path = item.partition("=")
        if not path:
            parser.error(f"{item!r}: give NAME=path/to/checkpoint")
        if name in results:
            print(f"{name}: done before, skipped")
            continue
        model, rows, start = load(path), [], time.time()
        for length in args.lengths:
            samples = args.samples if length <= 100 else args.long_samples
            rows += model.evaluate([length], samples=samples)
            r = rows[-1]
            print(f"{name} {length:>4} digits: {r['accuracy']:.2f}% of {r['samples']}, worst {r.get('worst', float('nan')):.2f}%",
                  flush=True)
        results[name] = {"checkpoint": path, "seconds": round(time.time() - start, 1), "rows": rows}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
    lengths = args.lengths
    table = ["| checkpoint | " + " | ".join(f"{n} ({(n + 2) % 3})" for n in lengths) + " |",
             "|---|" + "---|" * len(lengths)]
    for name, result in results.items():
        by_length = {r["length"]: r for r in result["rows"]}
        cells = [f"{by_length[n]['accuracy']:g}" + ("" if by_length[n].get("worst", 100) == 100 else f" (w {by_length[n]['worst']:g})")
                 if n in by_length else "–" for n in lengths]
        table.append(f"| {name} | " + " | ".join(cells) + " |")
    note = ("Accuracy (%) by length; the header gives (L + 2) mod 3, the test frame's phase "
            "(training: 8 mod 3 = 2); (w x): worst-case set accuracy where it is below 100.\n\n")
    out.with_suffix(".md").write_text(note + "\n".join(table) + "\n")
    print(f"written to {out} and {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
