"""Files written whole or not at all: a temporary file beside the target, then a rename.

A full disk, a kill or an error mid-write leaves the previous file as it was (a rename
within one directory is atomic; a temporary file elsewhere, such as /tmp, would make the
final step a copy, which a full disk can cut short). Every checkpoint, record, table and
prediction file a run writes goes through here.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, Any, Iterator


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", **kwargs) -> Iterator[IO]:
    """``open(path, mode)`` on a temporary file beside ``path`` that replaces it on success
    (flushed to disk first); on any failure the temporary file is removed and ``path`` kept."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename is None:
            exc.filename = str(path)  # a failed write names no file by itself
        raise


def write_text(path: str | Path, text: str) -> None:
    """``Path.write_text``, atomically."""
    with atomic_open(path, "w", encoding="utf-8") as fh:
        fh.write(text)


def save(obj: Any, path: str | Path) -> None:
    """``torch.save``, atomically. The object is serialized in memory first, so a failed write
    is a plain ``OSError`` (a full disk says ENOSPC) rather than torch's RuntimeError."""
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    with atomic_open(path, "wb") as fh:
        fh.write(buffer.getbuffer())


def savefig(fig, path: str | Path, **kwargs) -> None:
    """``Figure.savefig``, atomically (the format from ``path``'s suffix)."""
    path = Path(path)
    with atomic_open(path, "wb") as fh:
        fig.savefig(fh, format=path.suffix.lstrip(".") or "png", **kwargs)

