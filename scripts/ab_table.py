"""An A/B of one `reproduce` cell: its records in two (or more) results folders, one per arm,
side by side by seed, as a Markdown table and its JSON.

    python scripts/ab_table.py beyond abs_multiplication \\
        --arm "0.5 (configs' default)" <results folder of arm A> \\
        --arm "0 (--model.encoder_attention_drop=0)" <results folder of arm B> \\
        --question "does the encoder attention drop hurt N×M's 60×60 inputs?" \\
        --out results/nxm_drop_ab

Each arm is a folder that `reproduce <table> --only <cell> --results <folder>` wrote into
(or where `reproduce` unpacked a table's `<table>.records.json.gz`); its records are
`<folder>/<table>/<cell>[.seedS].json`. Every seed found in any arm gets a line per arm that
has it. Columns: the accuracy at each tested length of at least ``--from-length`` digits (20
by default), then at each other shape the task tests (N×M's `60×6`); *worst*: the lowest
worst-case accuracy at any length or shape; *wrong at 60*: the wrong answers among the
random inputs with a 60-digit operand, of how many. The JSON holds the same figures, each
line's record path and the command that made it, so each figure can be checked.
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path

from abc_lightning.runs import files
from abc_lightning.tasks import get_task

SEED = re.compile(r"\.seed(\d+)$")


def arm_records(folder: Path, table: str, cell: str) -> dict[int, tuple[str, dict]]:
    """``{seed: (path in the folder, record)}`` for ``cell``'s records under ``folder/table``."""
    found = {}
    for path in sorted((folder / table).glob(f"{cell}*.json")):
        stem = path.stem[len(cell):]
        match = SEED.fullmatch(stem)
        if stem and not match:
            continue  # another cell whose name starts with this one's
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            print(f"ab_table: error: {path} is not a readable record ({exc})", file=sys.stderr)
            raise SystemExit(2) from None  # bad input, as the other errors
        if isinstance(record, dict) and "rows" in record:
            seed = int(match.group(1)) if match else int(record.get("seed") or 0)
            found[seed] = (path.relative_to(folder).as_posix(), record)
    return found


def row_label(task, row: dict, shape: bool) -> str:
    if shape:
        return task.shape_label(row)
    if getattr(task, "second", "absent") is None:  # N×M: a length's own row is L×L
        return task.shape_label({"length": row["length"], "second": row["length"]})
    return str(row["length"])


def summary(record: dict, from_length: int, long: int = 60) -> dict:
    """One record's line: accuracy by column, the lowest worst case, wrong answers at ``long``."""
    task = get_task(record["task"])
    accuracy, worst, wrong, inputs = {}, [], 0, 0
    for shape, rows in ((False, record.get("rows") or []), (True, record.get("shape_rows") or [])):
        for row in rows:
            if row.get("worst") is not None:
                worst.append(row["worst"])
            if not shape and row["length"] < from_length:
                continue
            accuracy[row_label(task, row, shape)] = row["accuracy"]
            if long in (row["length"], row.get("second")) and row.get("samples"):
                inputs += row["samples"]
                wrong += round((100 - row["accuracy"]) * row["samples"] / 100)
    return {"accuracy": accuracy, "worst": min(worst) if worst else None,
            "wrong_at_60": wrong, "inputs_at_60": inputs}


def build(table: str, cell: str, arms: list[tuple[str, Path]], from_length: int) -> dict:
    lines = []
    for name, folder in arms:
        for seed, (path, record) in arm_records(folder, table, cell).items():
            lines.append({"seed": seed, "arm": name, "record": path,
                          "steps": record.get("steps"), "train_seconds": record.get("train_seconds"),
                          "commit": record.get("commit"), "cpu": record.get("cpu"),
                          "command": record.get("command"), **summary(record, from_length)})
    order = {name: i for i, (name, _) in enumerate(arms)}
    lines.sort(key=lambda line: (line["seed"], order[line["arm"]]))
    return {"table": table, "cell": cell, "arms": [name for name, _ in arms], "lines": lines}


def markdown(result: dict, question: str, remake: str) -> str:
    lines = result["lines"]
    columns = list(dict.fromkeys(col for line in lines for col in line["accuracy"]))
    commits = sorted({str(line["commit"]) for line in lines})
    cpus = sorted({str(line["cpu"]) for line in lines})
    fmt = lambda v: "–" if v is None else f"{v:g}"
    out = [f"# {result['table']} / {result['cell']}: A/B", "",
           f"{question}", "",
           f"Commit(s) {', '.join(f'`{c}`' for c in commits)}; CPU(s) {'; '.join(cpus)} (each line's "
           "in the JSON). Each arm is its own results folder of `reproduce` records. *worst*: the "
           "lowest worst-case accuracy at any length or shape; *wrong at 60*: wrong answers of the "
           "random inputs with a 60-digit operand. Remade by:", "", f"```bash\n{remake}\n```", "",
           "| seed | arm | " + " | ".join(columns) + " | worst | wrong at 60 | steps | train s | cpu |",
           "|---" * (len(columns) + 7) + "|"]
    for line in lines:
        cells = [fmt(line["accuracy"].get(col)) for col in columns]
        out.append(f"| {line['seed']} | {line['arm']} | " + " | ".join(cells)
                   + f" | {fmt(line['worst'])} | {line['wrong_at_60']} of {line['inputs_at_60']}"
                   + f" | {line['steps']} | {fmt(line['train_seconds'])} | {line['cpu']} |")
    paired = set.intersection(*({l["seed"] for l in lines if l["arm"] == arm} for arm in result["arms"]))
    totals = []
    for arm in result["arms"]:
        mine = [line for line in lines if line["arm"] == arm and line["seed"] in paired]
        totals.append(f"{arm}: {sum(l['wrong_at_60'] for l in mine)} wrong of {sum(l['inputs_at_60'] for l in mine)}")
    seeds = ", ".join(map(str, sorted(paired))) or "none"
    out += ["", f"Over the seeds every arm ran ({seeds}): " + "; ".join(totals) + "."]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("table", help="the reproduce table: table1, table3, beyond, …")
    parser.add_argument("cell", help="the cell's name, e.g. abs_multiplication")
    parser.add_argument("--arm", nargs=2, action="append", metavar=("NAME", "FOLDER"), required=True,
                        help="an arm's name and its results folder (give two or more)")
    parser.add_argument("--question", default="", help="what the A/B asks, for the table's head")
    parser.add_argument("--from-length", type=int, default=20, help="shortest length shown (default 20)")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT.md and OUT.json")
    args = parser.parse_args(argv)
    arms = [(name, Path(folder)) for name, folder in args.arm]
    if len(arms) < 2:
        parser.exit(2, "ab_table: error: an A/B needs two --arm NAME FOLDER or more\n")
    for name, folder in arms:
        if not (folder / args.table).is_dir():
            parser.exit(2, f"ab_table: error: arm {name!r}: {folder / args.table} is not a folder\n")
    try:
        result = build(args.table, args.cell, arms, args.from_length)
    except KeyError as exc:
        parser.exit(2, f"ab_table: error: a record names an unknown task ({exc})\n")
    missing = [name for name in result["arms"] if not any(l["arm"] == name for l in result["lines"])]
    if missing:
        parser.exit(2, f"ab_table: error: arm {missing[0]!r} holds no {args.table}/{args.cell} record\n")
    remake = "python scripts/ab_table.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    result = {"question": args.question, "command": remake, **result}
    files.write_text(args.out.with_suffix(".md"), markdown(result, args.question, remake))
    files.write_text(args.out.with_suffix(".json"), json.dumps(result, indent=1, ensure_ascii=False) + "\n")
    print(f"ab_table: {len(result['lines'])} line(s) -> {args.out.with_suffix('.md')} and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
