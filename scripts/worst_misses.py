"""Where in the answer each worst-case miss of some `reproduce` records goes wrong.

    python scripts/worst_misses.py results/beyond/abs_nx2.seed4.json results/beyond/abs_nx3.seed2.json
    python scripts/worst_misses.py results/beyond            # every record of a folder

(`reproduce beyond --table-only` unpacks the table's records from `results/beyond.records.json.gz`.)

A record keeps, for each length and worst-case family that failed, the first input it got
wrong, what it answered and what was expected (whole, however long). The tables show them
shortened in the middle, which hides a miss at the answer's end. This prints one Markdown
line per such failure: how many tokens the expected answer has, how many of them are wrong,
where the first wrong one is counted back from the answer's end (1 is its last token), and
the tails of both answers from a little before it. A miss that is all at the end (the end
mark `&` where a 0 was due, or the other way round) shows as a first wrong token a few from
the end; a drift shows as wrong tokens spread along the answer.

Exits 0, or 2 on bad input (a path that is not a record or a folder of them).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

TAIL = 6  # tokens shown before the first wrong one


def records(paths: list[Path]) -> list[tuple[Path, dict]]:
    """The records named, and those of the folders named (their other JSON files, such as a
    table's summary, are passed over)."""
    for path in paths:
        if not path.is_dir() and not (path.suffix == ".json" and path.is_file()):
            raise ValueError(f"{path} is neither a record (.json) nor a folder of them")
    found = []
    for path in paths:
        for file in sorted(path.glob("*.json")) if path.is_dir() else [path]:
            record = json.loads(file.read_text())
            if isinstance(record, dict) and "rows" in record:
                found.append((file, record))
            elif file == path:
                raise ValueError(f"{path} is not a reproduce record (no rows)")
    return found


def miss(failure: dict) -> dict:
    """The wrong tokens of one failure, against the expected answer."""
    got, want = failure["output"], failure["expected"]
    wrong = [i for i in range(max(len(got), len(want))) if i >= len(got) or i >= len(want) or got[i] != want[i]]
    first = wrong[0] if wrong else None
    start = max(0, (first or 0) - TAIL)
    return {"tokens": len(want), "answered": len(got), "wrong": len(wrong),
            "first_from_end": None if first is None else len(want) - first, "want": want[start:], "got": got[start:]}


def clip(text: str, keep: int = 24) -> str:
    return text if len(text) <= keep else text[:keep] + "…"


def lines(path: Path, record: dict) -> list[str]:
    out = []
    for row in record["rows"]:
        for failure in row.get("worst_failures", []):
            m = miss(failure)
            text = failure["input"]
            shown = text if len(text) <= 20 else f"{text[:6]}…{text[-10:]}"
            where = (f"the first {m['first_from_end']} from the end" if m["first_from_end"]
                     else "from past the expected end")
            out.append(f"- {path.stem}, {row['length']} digits, {failure['family']}: `{shown}`: {m['answered']} tokens "
                       f"for {m['tokens']}, {m['wrong']} wrong, {where}; expected `{clip(m['want'])}`, got `{clip(m['got'])}`")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="records (.json) or folders of them")
    args = parser.parse_args(argv)
    try:
        found = [line for path, record in records(args.paths) for line in lines(path, record)]
    except (OSError, ValueError, KeyError, json.JSONDecodeError) as exc:
        print(f"worst_misses: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(found) if found else "No worst-case misses in these records.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
