"""Markdown tables: the one writer that every table of the project goes through (test and
validation logs, ``reproduce``'s tables, sweep summaries, the benchmarks)."""

from __future__ import annotations

import re


def table(head: list[str], rows: list[list], align: str | None = None) -> list[str]:
    """The lines of a markdown table: ``head``, its rule, then one line per row (cells through
    ``str``; an empty one is ``| |``). ``align`` has one letter per column, ``r`` for right-aligned (``---:``); the
    default aligns none."""
    align = align or "l" * len(head)
    if len(align) != len(head):
        raise ValueError(f"align names {len(align)} columns, the head {len(head)}")
    rule = "|" + "".join("---:|" if a == "r" else "---|" for a in align)
    return [line(head), rule, *(line(row) for row in rows)]


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.3 h``."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def line(cells: list) -> str:
    """One row: ``| a | b |``, an empty cell as ``| |``."""
    return re.sub(r"\|  (?=\|)", "| ", "| " + " | ".join(map(str, cells)) + " |")
