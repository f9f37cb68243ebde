"""Would testing 600 digits alone change a verdict? Every committed record tested at 599,
600 and 601 digits, read back: which runs are exact (100% on random inputs and on the
worst-case set) at 600 digits but not at a neighbour, or the reverse.

    python results/diagnostics/long_neighbours/neighbours.py

Writes neighbours.md and neighbours.json beside this file. No model is run.
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent.parent
TABLES = ("table1", "table3", "baselines", "geometry", "beyond")
LENGTHS = (599, 600, 601)


def exact(row: dict) -> bool:
    return row["accuracy"] == 100.0 and row.get("worst", 100.0) in (None, 100.0)


def main() -> None:
    runs, differ = 0, []
    for table in TABLES:
        for path in sorted((RESULTS / table).rglob("*.json")):
            record = json.loads(path.read_text())
            # plain lengths only: a task's other shapes (more operands, M digits) are their own rows
            rows = {r["length"]: r for r in record.get("rows", []) if "length" in r}
            if not all(n in rows for n in LENGTHS):
                continue
            runs += 1
            verdicts = [exact(rows[n]) for n in LENGTHS]
            if len(set(verdicts)) > 1:
                differ.append({"table": table, "record": path.stem, "commit": record.get("commit"),
                               "accuracy": [rows[n]["accuracy"] for n in LENGTHS],
                               "worst": [rows[n].get("worst") for n in LENGTHS],
                               "exact": verdicts})
    missed = [d for d in differ if d["exact"][1]]  # exact at 600, not at a neighbour
    summary = {"runs": runs, "verdicts_differ": len(differ), "exact_at_600_only": len(missed), "runs_that_differ": differ}
    (HERE / "neighbours.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = ["### Would 600 digits alone change a verdict?", "",
             f"`python results/diagnostics/long_neighbours/neighbours.py`: the {runs} committed records of "
             f"{', '.join(TABLES)} tested at 599, 600 and 601 digits (1,000 random inputs each, and the worst-case "
             "set). *Exact*: 100% on both. In "
             f"{runs - len(differ)} the three lengths agree; in {len(differ)} they do not, and {len(missed)} of those "
             "are exact at 600 digits alone, so a protocol of 600 digits would call them exact.", "",
             "| table | record | commit | accuracy 599 / 600 / 601 | worst 599 / 600 / 601 | exact at 600 |",
             "|---|---|---|---|---|---|"]
    for d in differ:
        lines.append(f"| {d['table']} | {d['record']} | `{d['commit']}` | {' / '.join(map(str, d['accuracy']))} | "
                     f"{' / '.join('–' if w is None else str(w) for w in d['worst'])} | "
                     f"{'yes' if d['exact'][1] else 'no'} |")
    (HERE / "neighbours.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
