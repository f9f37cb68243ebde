"""The one way the project runs other processes: ``reproduce`` (a table's cells), ``sweep``
(a grid's combinations), the studies and the benchmarks each run commands with their output
in a log file, a few at a time."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from abc_lightning.errors import Terminated, on_stop_signals

T = TypeVar("T")


#: The child processes under way, to which a stop signal is passed on; and the signal, once one came.
RUNNING: set[subprocess.Popen] = set()
STOPPING: list[int] = []


def run_logged(cmd: list[str], log: Path, env: dict[str, str] | None = None,
               cwd: str | Path | None = None) -> tuple[int, float]:
    """Run ``cmd`` (in ``cwd``) with its output (stdout and stderr) in ``log``, the environment
    updated by ``env``; return its exit status and wall seconds. Under
    :func:`passing_on_stops`, a stop signal is passed to the command, which saves and ends;
    this then raises :class:`~abc_lightning.errors.Terminated` (and starts nothing more)."""
    if STOPPING:
        raise Terminated(STOPPING[0])
    start = time.perf_counter()
    with Path(log).open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}, cwd=cwd)
        RUNNING.add(proc)
        try:
            code = proc.wait()
        finally:
            RUNNING.discard(proc)
    if STOPPING:
        raise Terminated(STOPPING[0])
    return code, time.perf_counter() - start


@contextlib.contextmanager
def passing_on_stops():
    """While it lasts, a stop signal (SIGTERM; SIGUSR1 outside SLURM) is passed on to the
    commands :func:`run_logged` runs (a fit saves its step and ends: a child that got the
    scheduler's signal too counts the two as one), and no further command starts."""
    def pass_on(signum: int, frame) -> None:
        if STOPPING:  # a second signal: stop now
            raise Terminated(signum)
        STOPPING.append(signum)
        for proc in list(RUNNING):
            with contextlib.suppress(OSError):
                proc.send_signal(signum)

    STOPPING.clear()
    with on_stop_signals(pass_on):
        yield


def in_parallel(work: Callable[..., T], jobs: int, *items: Iterable) -> list[T]:
    """``work`` over ``items`` (zipped, as ``map``), ``jobs`` at a time, results in order."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(work, *items))
