"""Where a result came from: the source tree's git commit and the CPU whose kernels computed
it. Every run's ``run_info.json`` and every record ``reproduce`` writes carries both."""

from __future__ import annotations

import os
from pathlib import Path


def git_commit() -> str | None:
    """The source tree's git commit (with ``-dirty`` for uncommitted changes); outside a git
    checkout, the commit an image was built from (``ABC_LIGHTNING_COMMIT``), else None."""
    import subprocess

    root = Path(__file__).resolve().parents[2]  # the checkout: abc_lightning/runs/provenance.py
    baked = os.environ.get("ABC_LIGHTNING_COMMIT") or None
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        if head.returncode:
            return baked
        # results/ is what the runs write (reproduce's records and logs), not source
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":(exclude)results"], capture_output=True, text=True, timeout=10).stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return baked


def cpu() -> str:
    """The CPU a run's float kernels were picked for: ``Intel(R) Xeon(R) Processor, AVX512``.

    torch chooses its vectorised CPU kernels by the instruction set it finds (``AVX512``,
    ``AVX2``, …), and they sum in different orders, so one seed on one thread trains the same
    model again only where this string is the same."""
    import platform

    import torch

    name = None
    try:
        name = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                     if line.startswith("model name")), None)
    except OSError:
        pass
    return f"{name or platform.processor() or platform.machine()}, {torch.backends.cpu.get_cpu_capability()}"


def short_commit() -> str:
    """The short commit of the source tree (``-dirty`` with uncommitted changes), or ``unknown``."""
    commit = git_commit()
    return "unknown" if commit is None else commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")
