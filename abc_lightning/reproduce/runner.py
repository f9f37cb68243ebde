"""The one way the project runs other processes: ``reproduce`` (a table's cells), ``sweep``
(a grid's combinations), the studies and the benchmarks each run commands with their output
in a log file, a few at a time."""

from __future__ import annotations

import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, TypeVar

T = TypeVar("T")


def run_logged(cmd: list[str], log: Path, env: dict[str, str] | None = None,
               cwd: str | Path | None = None) -> tuple[int, float]:
    """Run ``cmd`` (in ``cwd``) with its output (stdout and stderr) in ``log``, the environment
    updated by ``env``; return its exit status and wall seconds."""
    start = time.perf_counter()
    with Path(log).open("w") as fh:
        code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})},
                              cwd=cwd).returncode
    return code, time.perf_counter() - start


def in_parallel(work: Callable[..., T], jobs: int, *items: Iterable) -> list[T]:
    """``work`` over ``items`` (zipped, as ``map``), ``jobs`` at a time, results in order."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(work, *items))
