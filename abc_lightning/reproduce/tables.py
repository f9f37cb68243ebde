"""The markdown and JSON of a reproduction table (``results/<table>.{md,json}``) from its
cells' records: our accuracy beside the paper's, median / min over seeds, the worst-case
families that fail, the short-input column, and the commands that regenerate it."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path

from abc_lightning import markdown
from abc_lightning.runs import files
from abc_lightning.reproduce.cells import (CURVE_SAMPLES, HUGE_LENGTHS, HUGE_SAMPLES, LENGTHS, LONG_LENGTHS, LONG_SAMPLES,
                                 SHAPE_SAMPLES, WORST_LENGTHS, Cell)


def fewer_samples(cells: list[Cell], field: str) -> str:
    """" (multiplication: 200 at 60)": the tasks of ``cells`` whose ``Task.<field>``
    (``long_samples``, ``shape_samples``) sets another number of random inputs, or nothing."""
    from abc_lightning.tasks import get_task

    notes = []
    for name in dict.fromkeys(c.task for c in cells):
        task = get_task(name)
        if samples := getattr(task, field):
            where = f" at {', '.join(map(str, task.long_lengths))}" if field == "long_samples" and task.long_lengths else ""
            notes.append(f"{name}: {samples}{where}")
    return f" ({'; '.join(notes)})" if notes else ""


def shape_table(cells: list[Cell], by_key: dict) -> str:
    """The other-shapes section of a table: per cell, accuracy (and worst cases) at each shape
    of its records' ``shape_rows`` (median / min over seeds)."""
    from abc_lightning.tasks import get_task

    def key(row: dict) -> str:
        return get_task(row["task"]).shape_label(row)

    found = {key({"task": c.task, **r}): None for c in cells for rec in by_key.get(c.key, [])
             for r in rec.get("shape_rows", [])}
    keys = list(found)
    if not keys:
        return ""
    body = []
    for cell in cells:
        recs = [r for r in by_key.get(cell.key, []) if r.get("shape_rows")]
        if not recs:
            continue
        rows = [{key({"task": cell.task, **r}): r for r in rec["shape_rows"]} for rec in recs]
        acc = [spread_of([row.get(k, {}).get("accuracy") for row in rows]) for k in keys]
        worst = [spread_of([row.get(k, {}).get("worst") for row in rows]) for k in keys]
        body.append([cell.task, cell.label, len(recs), *acc, *worst])
    shown = [c for c in cells if by_key.get(c.key)]
    lines = [f"\n### Other shapes ({SHAPE_SAMPLES} random inputs each{fewer_samples(shown, 'shape_samples')}, "
             "and the worst-case set)\n",
             *markdown.table(["task", "config", "seeds", *keys, *(f"worst {k}" for k in keys)], body)]
    return "\n".join(lines) + "\n"


def made_at(records: list[dict], previous: dict) -> tuple[dict[str, int], str]:
    """The commits of a table's cells (with how many cells each) and the latest date.

    Each record carries the commit and date it was made at. Records from before that take
    them from the table as it was last written, so rebuilding a table (``--table-only``)
    never re-dates or re-commits cells that did not run.
    """
    made = [(r.get("commit") or previous.get("commit") or "unknown", r.get("date") or previous.get("date") or "")
            for r in records]
    commits = {c: sum(m == c for m, _ in made) for c in dict.fromkeys(c for c, _ in made)}
    return commits, max((d for _, d in made), default="")


def fmt(x) -> str:
    return "–" if x is None else f"{x:.2f}".rstrip("0").rstrip(".") if isinstance(x, float) else str(x)


def worst_failure_line(cell: Cell, row: dict, lengths: list[int] | None = None) -> str:
    """``- successor / ABC, 60 digits: all_nines 0% (`99…9` gave `0`), …`` for one length, or
    for several (``lengths``) whose families fail alike; the examples are ``row``'s."""
    from abc_lightning.training.callbacks import short

    examples = {f["family"]: f for f in row.get("worst_failures", [])}
    parts = []
    for family, accuracy in row["worst_families"].items():
        if accuracy < 100:
            f = examples.get(family)
            parts.append(f"{family} {fmt(accuracy)}%" + (f" (`{short(f['input'], 8)}` gave `{short(f['output'], 8)}`)"
                                                           if f else ""))
    where = ", ".join(map(str, lengths or [row["length"]]))
    return f"- {cell.task} / {cell.label}, {where} digits: " + "; ".join(parts)


def worst_failure_lines(cell: Cell, rows: list[dict]) -> list[str]:
    """One :func:`worst_failure_line` per run of failing lengths, in order, whose failing families
    and accuracies are the same (599, 600 and 601 digits usually are), with the first's examples."""
    groups: list[tuple[dict, list[dict]]] = []  # (failing families and accuracies, their rows)
    for row in rows:
        failing = {f: a for f, a in row["worst_families"].items() if a < 100}
        if groups and groups[-1][0] == failing:
            groups[-1][1].append(row)
        else:
            groups.append((failing, [row]))
    return [worst_failure_line(cell, g[0], [r["length"] for r in g]) for _, g in groups]


SHORT_LENGTHS = [1, 2, 3, 4, 5]  # the short-input column: below the 6 digits every table starts at


def short_inputs(record: dict) -> float | None:
    """A record's lowest accuracy on 1-5-digit inputs: from its test rows at those lengths,
    else from its curve; None where it has neither."""
    for rows in (record.get("rows", []), record.get("curve", [])):
        found = [r["accuracy"] for r in rows if r["length"] in SHORT_LENGTHS]
        if found:
            return min(found)
    return None


def spread_of(values: list[float | None]) -> str:
    """One table cell over seeds: the value of a single seed, or ``median / min``."""
    present = [v for v in values if v is not None]
    if not present:
        return "–"
    if len(present) == 1:
        return fmt(present[0])
    return f"{fmt(statistics.median(present))} / {fmt(min(present))}"


def threads_of(record: dict) -> str:
    """The torch thread count a record ran with: a number, or ``all`` (the machine's default)."""
    return str(record.get("threads", "all"))


def regenerate_commands(table: str, cells: list[Cell], by_key: dict) -> str:
    """The ``reproduce`` command(s) that give back the table's records: one command when every
    cell that ran has the same seeds and thread count, else one per group of cells that share
    them. Records made with a set number of torch threads get ``OMP_NUM_THREADS`` in front, since
    the thread count changes the float sums and so the model (run one cell at a time with it)."""
    groups: dict[tuple, list[str]] = {}
    for cell in cells:
        recs = by_key.get(cell.key)
        if recs:
            threads = {threads_of(r) for r in recs}
            key = (tuple(sorted({r.get("seed", 0) for r in recs})), threads.pop() if len(threads) == 1 else "all")
            groups.setdefault(key, []).append(cell.key)

    def command(seeds: tuple, threads: str, only: str) -> str:
        env = f"OMP_NUM_THREADS={threads} " if threads.isdigit() else ""
        return f"`{env}python -m abc_lightning reproduce {table} --seeds {' '.join(map(str, seeds))}{only}`"

    if len(groups) <= 1:
        seeds, threads = next(iter(groups), ((0,), "all"))
        return command(seeds, threads, "")
    ordered = sorted(groups.items(), key=lambda g: (-len(g[0][0]), g[0]))  # most seeds first
    return "; ".join(f"{command(seeds, threads, ' --only ' + ' '.join(keys))} "
                     f"({len(keys)} cell{'s' if len(keys) > 1 else ''})" for (seeds, threads), keys in ordered)


def note_refs(recs: list[dict], notes: dict[str, int]) -> str:
    """Point a cell at the hand-written notes of its records, numbered once for the whole table.

    A note (e.g. that a run shared the CPU, or that a test stopped before it ended) is often the same
    for every seed and every cell; written out in the cell it would fill the table. ``notes`` maps
    each note to its number and grows as cells are added. With several seeds, a note that only some
    of them carry names those seeds."""
    seeds_of: dict[str, list[int]] = {}
    for r in recs:
        if r.get("note"):
            seeds_of.setdefault(r["note"], []).append(r.get("seed", 0))
    refs = []
    for note, seeds in seeds_of.items():
        n = notes.setdefault(note, len(notes) + 1)
        some = len(seeds) < len(recs) and len(recs) > 1
        refs.append(f"note {n}" + (f" (seed{'s' * (len(seeds) > 1)} {', '.join(map(str, seeds))})" if some else ""))
    return "; " + ", ".join(refs) if refs else ""


def write_table(table: str, cells: list[Cell], records: dict, out: Path) -> str:
    """The table of ``cells`` from ``records`` (cell key -> a record, or one record per seed).

    With several seeds a length's column shows the median and the minimum over them, and
    ``≥ 99 at 60`` how many seeds reached 99% at 60 digits (– where none was tested there)."""
    by_key = {k: (v if isinstance(v, list) else [v]) for k, v in records.items()}
    every = [r for c in cells for r in by_key.get(c.key, [])]
    previous_path = out / f"{table}.json"
    previous = json.loads(previous_path.read_text()) if previous_path.exists() else {}
    commits, date = made_at(every, previous)
    only = next(iter(commits)) if len(commits) == 1 else None
    commit = (f"`{only}`" if only else
              "several: " + ", ".join(f"`{c}` ({n} runs)" for c, n in commits.items()) if commits else "none")
    runs = sorted({(r.get("jobs", 1), threads_of(r)) for r in every})
    jobs = max((r.get("jobs", 1) for r in every), default=1)
    busy = [r["train_seconds"] + r.get("test_seconds", 0) + r.get("other_test_seconds", 0) for r in every]
    took = (f" Its {len(every)} runs took {markdown.duration(sum(busy))} of run time in all (train and every test; "
            f"training alone {markdown.duration(sum(r['train_seconds'] for r in every))}), about "
            f"{markdown.duration(sum(busy) / jobs)} of wall time at {jobs} at a time"
            + ("" if all("other_test_seconds" in r for r in every) else
               "; records made before the curve and long-length tests were timed count their main test only")
            + ".") if every else ""
    how = "; ".join(f"{j} cell(s) at a time with {t} torch thread(s) each" for j, t in runs) or "no cells run yet"
    seeds = sorted({r.get("seed", 0) for r in every})
    cpus = sorted({r["cpu"] for r in every if r.get("cpu")})  # records from before they named it have none
    kernels = f"; CPU {' and '.join(f'`{c}`' for c in cpus)} (torch's kernels for it)" if cpus else ""
    on_gpu = [r["device"] for r in every if r.get("device")]  # a record names its device only where not the CPU
    kernels += (f"; {len(on_gpu)} run(s) trained and tested on "
                f"{' and '.join(f'`{g}`' for g in sorted(set(on_gpu)))}" if on_gpu else "")
    regenerate = regenerate_commands(table, cells, by_key)
    # the configs and code of the records' commit, not of a later checkout
    checkout = (f" from a checkout of that commit (`git checkout {only}`)" if only and only != "unknown" else
                " each record from a checkout of its own commit (its `commit` field; `git checkout <commit>`)"
                if len(commits) > 1 else "")
    head = (f"## {table}: our accuracy (%) beside the paper's\n\n"
            f"Commit {commit}, {date or 'undated'}, on {platform.machine()} "
            f"with {os.cpu_count()} CPU cores ({how}{kernels}). Seeds: {', '.join(map(str, seeds)) or 'none'}; "
            f"seed S sets both the model/shuffle seed and the permutation Π (`--seed_everything=S "
            f"--data.seed=S`).{took} Regenerate{checkout} into a folder of its own (add `--results <empty folder>`: "
            f"finished cells are skipped, and a checkout's `results/<table>.records.json.gz` holds the records it was committed with): "
            f"{regenerate}. With several seeds a cell shows *median / min* over them. "
            f"Lengths up to 60 use min(10^L − 10^(L−1), test_samples) samples (10 000 in the configs); "
            f"{', '.join(map(str, LONG_LENGTHS))} digits use {LONG_SAMPLES}"
            f"{fewer_samples([c for c in cells if by_key.get(c.key)], 'long_samples')}, and only cells that extrapolate are "
            f"tested there; {', '.join(map(str, HUGE_LENGTHS))} digits use {HUGE_SAMPLES}, for the encoder-window cells, "
            f"whose every attention is windowed and evaluation linear in the length (the other cells' encoders "
            f"attend globally, which is quadratic; `--long-only` adds both to finished cells). "
            f"*Worst* columns: accuracy on the task's worst-case set at that length (hand-picked inputs "
            f"such as 99…9 + 1, the same for every seed; `data.worst_case`, docs/results.md); – where the "
            f"cell was not tested there. "
            f"*1-5*: the lowest accuracy on 1-5-digit inputs (as many samples as the rule above gives; "
            f"from the curve's {CURVE_SAMPLES} where the test did not run them). "
            f"Families that fail are listed under the table.\n\n")
    columns = ["task", "config", "seeds", "≥ 99 at 60", "1-5", *map(str, LENGTHS),
               *(f"worst {n}" for n in WORST_LENGTHS), "paper 60", "train time", "command"]
    lines, failures, notes, cells_json = [], [], {}, []
    for cell in cells:
        recs = sorted(by_key.get(cell.key, []), key=lambda r: r.get("seed", 0))
        if not recs:
            lines.append([cell.task, cell.label, "not run", "", "", *[""] * (len(LENGTHS) + len(WORST_LENGTHS)),
                          cell.note or fmt(cell.paper60), "", f"`{cell.command}`"])
            continue
        acc = [{r["length"]: r["accuracy"] for r in rec["rows"]} for rec in recs]
        shorts = [short_inputs(r) for r in recs]
        worst = [{r["length"]: r.get("worst") for r in rec["rows"]} for rec in recs]
        cells_json.append({"task": cell.task, "config": cell.label, "key": cell.key,
                           "seeds": [r.get("seed", 0) for r in recs],
                           "accuracy": {str(n): [a.get(n) for a in acc] for n in LENGTHS if any(n in a for a in acc)},
                           "worst": {str(n): [w.get(n) for w in worst] for n in WORST_LENGTHS
                                     if any(w.get(n) is not None for w in worst)},
                           "short_inputs": shorts,
                           "train_seconds": [r["train_seconds"] for r in recs], "steps": [r["steps"] for r in recs],
                           "commits": sorted({r.get("commit") or "unknown" for r in recs}),
                           "command": recs[0]["command"]})
        cols = [*(spread_of([a.get(n) for a in acc]) for n in LENGTHS),
                *(spread_of([w.get(n) for w in worst]) for n in WORST_LENGTHS)]
        at60 = [a.get(60) for a in acc]
        tested = [v for v in at60 if v is not None]
        reached = f"{sum(v >= 99 for v in tested)}/{len(tested)}" if tested else "–"  # – : no seed tested at 60
        for rec in recs:
            tag = f" (seed {rec['seed']})" if rec.get("seed") else ""
            failing = [r for r in rec["rows"] if any(a < 100 for a in r.get("worst_families", {}).values())]
            # the columns' lengths, and any other length where a model whose columns are clean fails
            clean = not any(r["length"] in WORST_LENGTHS for r in failing)
            shown = [r for r in failing if clean or r["length"] in WORST_LENGTHS]
            failures += [line + tag for line in worst_failure_lines(cell, shown)]
        paper = cell.note or fmt(cell.paper60)
        first = recs[0]
        steps = sorted(r["steps"] for r in recs)
        seconds = statistics.median([r["train_seconds"] for r in recs])
        time_note = (f"{first['train_seconds']:.0f} s ({first['steps']} steps)" if len(recs) == 1 else
                     f"median {seconds:.0f} s ({steps[0]}–{steps[-1]} steps)")
        label = cell.label
        capped = [r for r in recs if r.get("stopped") == "time cap"]
        if capped:  # never shown as if it had finished its budget
            label += " **(capped)**"
            time_note += (f"; **capped** in {len(capped)} of {len(recs)} seeds: max_time ran out before the step "
                          "budget or the stopping rule")
        if "phases" in first and len(recs) == 1:
            p = first["phases"]
            time_note += f"; interpolate {p['interpolate']:.0f} s, calibrate {p['calibrate']:.1f} s, retrain {p['retrain']:.0f} s"
        time_note += note_refs(recs, notes)
        short = spread_of(shorts)
        lines.append([cell.task, label, len(recs), reached, short, *cols, paper, time_note, f"`{first['command']}`"])
    text = head + "\n".join(markdown.table(columns, lines)) + "\n" + shape_table(cells, by_key)
    if notes:
        text += ("\nNotes recorded by hand with the runs (the *train time* column points here):\n\n"
                 + "\n".join(f"{n}. {note}" for note, n in notes.items()) + "\n")
    if failures:
        text += "\nWorst-case families below 100% (first wrong answer of each):\n\n" + "\n".join(failures) + "\n"
    files.write_text(out / f"{table}.md", text)
    # the table's figures per cell and seed; each run's whole record is in <table>.records.json.gz
    files.write_text(out / f"{table}.json", json.dumps({"commit": next(iter(commits)) if len(commits) == 1 else None,
                                                    "commits": commits, "date": date, "cells": cells_json,
                                                    "records": f"{table}.records.json.gz"}, indent=1))
    return text
