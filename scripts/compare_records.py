"""Compare two sets of `reproduce` records, cell by cell: did they train the same models?

    python scripts/compare_records.py results/table1.records.json.gz <your results>/table1

Each side is a folder of records or a table's bundle of them (`results/<table>.records.json.gz`).

A record (`<cell>[.seedS].json`) holds the steps a cell trained, why it stopped, its
accuracy and worst-case results at every length tested (with the inputs it got wrong and
what it answered), the same at each other shape where the task has them (N×M's M, k-operand
addition's k) and its accuracy curve over lengths 1-60. Two records of one cell that
agree on all of these came from models that answer alike on every input tested, which is
what "the same model" can mean without the weights. Train and test times, the date, the
commit and the machine are not compared; they are printed, so that a difference can be
traced to a commit, a thread count or a CPU.

Prints one Markdown line per cell found in both folders, then the cells found in only one,
and a summary. Exits 0 when every shared cell agrees, 1 when one differs, 2 on bad input.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from abc_lightning.tasks import get_task

COMPARED = ("steps", "stopped", "rows", "shape_rows", "curve")


def load(folder: Path) -> dict[str, dict]:
    """The records of one folder or bundle, by file name without `.json`."""
    if folder.is_file():
        from abc_lightning.reproduce.records import read_bundle

        try:
            return {Path(name).stem: record for name, record in read_bundle(folder).items()}
        except (OSError, ValueError, EOFError) as exc:
            print(f"compare_records: error: {folder} is not a bundle of records ({exc})", file=sys.stderr)
            raise SystemExit(2) from None
    records = {}
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"compare_records: error: {path} is not a readable record ({exc})", file=sys.stderr)
            raise SystemExit(2) from None  # bad input, as the other errors
        if isinstance(record, dict) and "rows" in record:
            records[path.stem] = record
    return records


def row_differences(a: list[dict], b: list[dict], label=None) -> list[str]:
    """Rows whose results differ, each as `<row>: <a> vs <b>` on accuracy and worst case.
    A row is named by its length, or by ``label(row)`` (a shape row's, e.g. `60×20`)."""
    name = label or (lambda row: row["length"])
    by_name_a = {name(row): row for row in a}
    by_name_b = {name(row): row for row in b}
    names = list(dict.fromkeys([*by_name_a, *by_name_b]))
    out = []
    for key in names if label else sorted(names):
        ra, rb = by_name_a.get(key), by_name_b.get(key)
        if ra is None or rb is None:
            out.append(f"{key}: tested in {'the first' if rb is None else 'the second'} only")
        elif ra != rb:
            pair = [f"{tag}{ra.get(k)} vs {rb.get(k)}" for k, tag in (("accuracy", ""), ("worst", "worst "))
                    if ra.get(k) != rb.get(k)]
            out.append(f"{key}: " + ("; ".join(pair) if pair else "same accuracy, other failures"))
    return out


def differences(a: dict, b: dict) -> list[str]:
    out = []
    for key in COMPARED:
        if a.get(key) == b.get(key):
            continue
        if key == "rows":
            out.extend("length " + d for d in row_differences(a.get(key) or [], b.get(key) or []))
        elif key == "shape_rows":  # named as the table names them (`Task.shape_label`)
            label = get_task(a["task"]).shape_label
            out.extend("shape " + d for d in row_differences(a.get(key) or [], b.get(key) or [], label))
        elif key == "curve":
            out.append("curve over lengths 1-60")
        else:
            out.append(f"{key}: {a.get(key)} vs {b.get(key)}")
    return out


def where(record: dict) -> str:
    return f"`{record.get('commit', '?')}`, {record.get('threads', '?')} thread(s), {record.get('cpu', 'CPU not recorded')}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("first", type=Path, help="a folder or bundle of records, e.g. results/table1.records.json.gz")
    parser.add_argument("second", type=Path, help="another folder or bundle of records of the same cells")
    args = parser.parse_args(argv)
    folders = (args.first, args.second)
    for folder in folders:
        if not (folder.is_dir() or folder.is_file() and folder.name.endswith(".gz")):
            print(f"compare_records: error: {folder} is not a folder or a .records.json.gz bundle", file=sys.stderr)
            return 2
    first, second = (load(folder) for folder in folders)
    if not first or not second:
        empty = args.first if not first else args.second
        print(f"compare_records: error: {empty} holds no reproduce records (*.json with rows)", file=sys.stderr)
        return 2
    shared = sorted(set(first) & set(second))
    print(f"| cell | first ({args.first}) | second ({args.second}) | verdict |")
    print("|---|---|---|---|")
    differing = 0
    for name in shared:
        diffs = differences(first[name], second[name])
        differing += bool(diffs)
        verdict = "same" if not diffs else "differs: " + "; ".join(diffs)
        print(f"| {name} | {where(first[name])} | {where(second[name])} | {verdict} |")
    for label, only in (("first", sorted(set(first) - set(second))), ("second", sorted(set(second) - set(first)))):
        if only:
            print(f"\nOnly in the {label} folder: {', '.join(only)}")
    print(f"\n{len(shared) - differing} of {len(shared)} shared cell(s) the same "
          f"(steps, stop reason, every tested length, shape and worst case, the 1-60 curve); {differing} differ.")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
