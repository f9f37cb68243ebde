"""Pack the records of a `reproduce` results folder into one JSON file, or unpack them again.

    python scripts/records_bundle.py pack <results folder> <bundle>.json
    python scripts/records_bundle.py unpack <bundle>.json <results folder>

A table made over several sessions keeps its finished records in git between them; one
bundle holds them as one file (`results/` stays a curated folder). Unpacked into an empty
folder, they are the finished cells `reproduce --results <folder>` skips, so the next
session runs only what is left. Only the records (`<table>/<cell>[.seedS].json`) travel:
the logs, run folders and tables are made again.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from abc_lightning import files


def records(folder: Path) -> dict[str, dict]:
    """Each record under ``folder``, by its path there (``table1/abs_addition.seed1.json``)."""
    found = {}
    for path in sorted(folder.glob("*/*.json")):
        record = json.loads(path.read_text())
        if isinstance(record, dict) and "rows" in record:
            found[path.relative_to(folder).as_posix()] = record
    return found


def pack(folder: Path, bundle: Path) -> int:
    found = records(folder)
    bundle.parent.mkdir(parents=True, exist_ok=True)
    files.write_text(bundle, json.dumps(found, indent=1) + "\n")
    return len(found)


def unpack(bundle: Path, folder: Path) -> int:
    found = json.loads(bundle.read_text())
    bad = [name for name in found if Path(name).is_absolute() or ".." in Path(name).parts or len(Path(name).parts) != 2]
    if bad:  # checked before anything is written
        raise SystemExit(f"records_bundle: error: {bad[0]!r} is not a <table>/<cell>.json path")
    for name, record in found.items():
        # whole or not at all: reproduce skips a cell whose record exists, so a torn one would be lost
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        files.write_text(folder / name, json.dumps(record, indent=2))
    return len(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["pack", "unpack"])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    args = parser.parse_args(argv)
    if not args.source.exists():
        parser.exit(2, f"records_bundle: error: {args.source} does not exist\n")
    try:
        n = pack(args.source, args.target) if args.action == "pack" else unpack(args.source, args.target)
    except (OSError, json.JSONDecodeError) as exc:
        parser.exit(2, f"records_bundle: error: {exc}\n")
    print(f"{args.action}ed {n} record(s): {args.source} -> {args.target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
