"""The README's results table, from the committed tables' JSON: ABS (+ T, the task's own
period) and ABC on each of the paper's tasks, and + T on each task beyond the paper.

    python scripts/readme_table.py             # print it
    python scripts/readme_table.py --write     # replace the table in README.md

Every figure is read from the records the tables were made from
(``results/table1.records.json.gz``, ``table3`` and ``beyond``); a cell over several seeds
shows *median / min*, as the tables do.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from abc_lightning.reproduce.cells import table_entry
from abc_lightning.reproduce.records import table_records
from abc_lightning.reproduce.tables import fmt, short_inputs, spread_of

ROOT = Path(__file__).resolve().parents[1]

NAMES = {"successor": "successor", "addition": "addition", "parity": "parity", "nx1": "N×1",
         "subtraction": "subtraction", "signed_subtraction": "signed subtraction",
         "addition3": "3-operand addition", "nx2": "N×2", "nx3": "N×3",
         "addition_k": "k-operand addition", "multiplication": "N×M multiplication", "division": "N÷1 division"}
PAPER_TASKS = ["successor", "addition", "parity", "nx1"]
BEYOND_TASKS = ["subtraction", "signed_subtraction", "addition3", "nx2", "nx3", "addition_k",
                "multiplication", "division"]
HEADER = ["task", "cell", "commit", "seeds", "1-5", "60", "600", "worst 60", "paper, 60"]


def _at(record: dict, length: int, key: str) -> float | None:
    return next((r.get(key) for r in record["rows"] if r["length"] == length and "second" not in r
                 and "operands" not in r), None)


def _row(task: str, cell: str, records: list[dict], paper: str) -> list[str]:
    commits = sorted({r.get("commit") or "?" for r in records})
    figures = [spread_of([_at(r, n, key) for r in records]) for key, n in
               (("accuracy", 60), ("accuracy", 600), ("worst", 60))]
    return [task, cell, ", ".join(f"`{c}`" for c in commits), str(len(records)),
            spread_of([short_inputs(r) for r in records]), *figures, paper]


def _is_abs(label: str) -> bool:
    """Table 1's and the beyond table's + T row (not the encoder-window one)."""
    return label.startswith("+ T=") and "encoder" not in label


def _is_abc(label: str) -> bool:
    """Table 3's ABC row under the project preset (``ABC`` or ``ABC (beyond the paper)``)."""
    return label.startswith("ABC") and "paper's preset" not in label


def _cells(records: list[dict], task: str, chosen) -> list[dict]:
    return sorted((c for c in records if c["task"] == task and chosen(c["label"])), key=lambda c: c.get("seed") or 0)


def table(results: Path) -> str:
    t1, t3, beyond = (table_records(results, t) for t in ("table1", "table3", "beyond"))
    lines = []
    for task in PAPER_TASKS:
        paper = table_entry(task).paper
        abs_ = _cells(t1, task, _is_abs)
        if abs_:
            lines.append(_row(NAMES[task], f"ABS {abs_[0]['label']}", abs_, fmt(paper.get("cpi")) if "cpi" in paper else "–"))
        abc = _cells(t3, task, _is_abc)
        if abc:
            paper_abc = table_entry(task).paper_abc
            lines.append(_row(NAMES[task], abc[0]["label"], abc, fmt(paper_abc["ABC"]) if "ABC" in paper_abc else "–"))
    for task in BEYOND_TASKS:
        abs_ = _cells(beyond, task, _is_abs)
        if abs_:
            lines.append(_row(f"{NAMES[task]} (beyond)", f"ABS {abs_[0]['label']}", abs_, "–"))
    out = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    return "\n".join(out + ["| " + " | ".join(line) + " |" for line in lines])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--write", action="store_true", help="replace the results table in README.md")
    args = parser.parse_args(argv)
    made = table(args.results)
    if not args.write:
        print(made)
        return 0
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    found = re.search(r"^\| task \| cell \|.*?(?=\n\n)", text, flags=re.M | re.S)
    if not found:
        sys.stderr.write("readme_table: README.md has no results table (a line starting '| task | cell |')\n")
        return 1
    readme.write_text(text[:found.start()] + made + text[found.end():], encoding="utf-8")
    print(f"README.md: results table rewritten ({made.count(chr(10)) - 1} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
