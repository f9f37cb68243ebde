"""A table's per-run records as one compressed file: ``results/<table>.records.json.gz``.

A record is the JSON a cell's run leaves (``<folder>/<table>/<cell>[.seedS].json``: its
accuracy rows, times, commit, CPU and command). The run folders, logs and loose records
stay out of the tracked tree; the bundle beside the table keeps every record the table was
made from, by its path under the results folder. ``reproduce`` unpacks the records it lacks
before it runs (so finished cells are skipped from a fresh checkout) and packs them again
after, byte for byte the same when nothing changed.
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

from abc_lightning.runs import files


def bundle_path(folder: Path, table: str) -> Path:
    return Path(folder) / f"{table}.records.json.gz"


def read_bundle(path: Path) -> dict[str, dict]:
    """The records of a bundle, by their path under the results folder (``table1/abs_addition.json``)."""
    records = json.loads(gzip.decompress(Path(path).read_bytes()))
    if not isinstance(records, dict) or not all(isinstance(r, dict) and "rows" in r for r in records.values()):
        raise ValueError(f"{path} is not a bundle of records")
    return records


def write_bundle(path: Path, records: dict[str, dict]) -> None:
    """Write ``records`` (path -> record) compressed, with no time stamp: the same records give the same bytes."""
    text = json.dumps(dict(sorted(records.items())), indent=1, sort_keys=True) + "\n"
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as out:
        out.write(text.encode())
    with files.atomic_open(path, "wb") as fh:
        fh.write(raw.getvalue())


def unpack_missing(folder: Path, table: str) -> int:
    """Write each record of ``table``'s bundle that ``folder`` lacks; how many were written."""
    path = bundle_path(folder, table)
    if not path.exists():
        return 0
    records = read_bundle(path)
    outside = [name for name in records if ".." in Path(name).parts or Path(name).is_absolute()]
    if outside:
        raise ValueError(f"{path}: record path {outside[0]!r} is not a <table>/<cell>.json path")
    written = 0
    for name, record in records.items():
        target = Path(folder) / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            files.write_text(target, json.dumps(record, indent=2))
            written += 1
    return written


def pack(folder: Path, table: str, records: dict[Path, dict]) -> Path:
    """The bundle of ``table`` from its records, each by its file under ``folder``."""
    path = bundle_path(folder, table)
    write_bundle(path, {file.relative_to(folder).as_posix(): record for file, record in records.items()})
    return path


def table_records(folder: Path, table: str) -> list[dict]:
    """Every record in ``table``'s bundle, in path order."""
    return list(read_bundle(bundle_path(folder, table)).values())
