"""Regenerate a reproduction table: ``python -m abc_lightning reproduce table1``.

For every cell it runs ``fit`` and then ``test`` (on the best checkpoint) in a fresh
process, times both, and writes ``results/<table>.md`` and ``results/<table>.json``: our
accuracy beside the paper's, the training time and the exact command of each cell.
Finished cells are kept under ``results/<table>/`` and skipped on the next call, so an
interrupted reproduction resumes; ``--force`` retrains.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import NamedTuple

from abc_lightning import files
from abc_lightning.errors import OneLineParser

LENGTHS = [6, 10, 15, 20, 60, 599, 600, 601, 10000]
# beyond the paper's protocol, on fewer samples; three neighbours, because an input's length
# mod 3 decides the phase at which period-3 CPI meets it (600 has the training frame's)
LONG_LENGTHS, LONG_SAMPLES = [599, 600, 601], 1000
HUGE_LENGTHS, HUGE_SAMPLES = [10000], 100  # the encoder-window cells, whose evaluation is linear
WORST_LENGTHS = [60, *LONG_LENGTHS, *HUGE_LENGTHS]  # the worst-case columns: one per long length, as the phases differ
SHAPE_SAMPLES = 1000  # each of a task's other shapes (Task.shape_tests: more operands, unequal operands)

class Cell(NamedTuple):
    """One row of a reproduction table: a base config, the task and the overrides that make the cell."""

    task: str
    label: str
    config: str
    paper60: float | None = None  # the paper's accuracy at 60 digits, None where it has none
    overrides: tuple[str, ...] = ()  # CLI overrides on top of the config (the task's --data=… first)
    name: str = ""  # record name (results/<table>/<name>.json)
    curve: bool = False  # also evaluate every length 1..60 (CURVE_SAMPLES each) for the figure
    checkpoint: str = "best"  # which checkpoint of the fit is tested: "best" or "last"
    home: str = ""  # table folder that owns the record; a cell shared between tables runs once
    long: bool = False  # also test at LONG_LENGTHS (LONG_SAMPLES each): cells that extrapolate
    huge: bool = False  # also test at HUGE_LENGTHS (HUGE_SAMPLES each): cells whose every attention is windowed
    note: str = ""  # what the paper column shows where it has no number
    seed: int = 0  # --seed_everything and --data.seed (the model/shuffle seed and the permutation Π)

    @property
    def key(self) -> str:
        return self.name or Path(self.config).stem

    @property
    def base_key(self) -> str:
        """The cell's name without its seed: the row of the table its records share."""
        return self.key.split(".seed")[0]

    def for_seed(self, seed: int) -> "Cell":
        """The same cell under another seed: both the model/shuffle seed (``seed_everything``)
        and the split permutation Π (``data.seed``) change. Seed 0 is the configs' own, so its
        command and record name stay as they were; seed S is recorded as ``<name>.seedS``."""
        if seed == self.seed:
            return self
        base = self._replace(name=self.base_key, seed=0,
                             overrides=tuple(o for o in self.overrides if not o.startswith(SEED_FLAGS)))
        if seed == 0:
            return base
        return base._replace(name=f"{base.base_key}.seed{seed}", seed=seed,
                             overrides=(*base.overrides, f"--seed_everything={seed}", f"--data.seed={seed}"))

    @property
    def command(self) -> str:
        return " ".join(["python -m abc_lightning fit --config", self.config, *self.overrides])


SEED_FLAGS = ("--seed_everything=", "--data.seed=")

# ---- the cell matrix: every registered task × the rows of each table ------------------
# A task's rows, paper figures and labels come from its class (abc_lightning/tasks/), so a new
# task gets its cells here without a line of this file or a config changing.

ABS, ABC, BASELINE = "configs/abs.yaml", "configs/abc.yaml", "configs/baseline.yaml"
NO_CPI = ("--model.position_index=null",)  # "+ w=1": the window without cyclic position indexing
NOPE = (*NO_CPI, "--model.positional=NoPE")
#: Table 1's "Vanilla": the plain model on Table 1's input form (aligned) and training recipe (configs/abs.yaml's).
TABLE1_PLAIN = ("--data.aligned=true", "--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100",
                "--model.lr_schedule=cosine")
TABLE1_ROWS = {  # row -> (label, config, overrides, record name)
    "vanilla": (None, BASELINE, TABLE1_PLAIN, "{task}_vanilla"),
    "w1": ("+ w=1", ABS, NO_CPI, "{task}_w1"),
    "T3": ("+ T=3", ABS, (), "abs_{task}"),
    "nope_w1": ("NoPE + w=1", ABS, NOPE, "{task}_nope_w1"),
}
#: Baseline schemes: label and the model overrides that choose them.
SCHEMES = {"vanilla": ("Vanilla", ()), "learned": ("Learned", ("--model.positional=Learned",)),
           "nope": ("NoPE", ("--model.positional=NoPE",)), "rope": ("RoPE", ("--model.positional=Rotary",)),
           "alibi": ("ALiBi", ("--model.positional=ALiBi",)), "t5": ("T5 bias", ("--model.positional=T5Relative",)),
           "sandwich": ("Sandwich", ("--model.positional=Sandwich",)), "fire": ("FIRE", ("--model.positional=FIRE",)),
           "randomized": ("Randomized", ("--model.position_index=RandomizedIndex",
                                         "--model.position_index.max_position=1024"))}


def data_flag(task: str) -> str:
    from abc_lightning.tasks import class_name

    return f"--data={class_name(task)}"


def task_flags(task: str) -> tuple[str, ...]:
    """``--data=<Task>`` and the overrides the task's every cell takes (``Task.cell_overrides``)."""
    from abc_lightning.tasks import get_task

    return (data_flag(task), *get_task(task).cell_overrides)


def _tasks(table: str | None = None) -> dict:
    """The registered tasks (of one table: ``table1`` for the paper's, ``beyond`` for ours)."""
    from abc_lightning.tasks import TASKS

    return {name: task for name, task in TASKS.items() if table is None or task.table == table}


def abs_rows(table: str) -> list[Cell]:
    """Table 1's rows (vanilla, + w=1, + T, NoPE + w=1) for the tasks of ``table``."""
    cells = []
    for name, task in _tasks(table).items():
        for row in task.rows:
            label, config, over, key = TABLE1_ROWS[row]
            if row == "T3":
                label = f"+ T={task.cpi_period}"  # the config's period: task
            cells.append(Cell(name, label or task.vanilla_label, config, task.paper.get(row),
                              (*task_flags(name), *over), key.format(task=name), home=table,
                              long=row != "vanilla",
                              note=task.paper_note if row == "vanilla" else ""))
    return cells


def encoder_window_rows(table: str) -> list[Cell]:
    """Not in the paper: + T with the encoder windowed too (w=1 each side), which makes
    evaluation linear in the length (docs/speed.md). These are the cells tested at 10,000
    digits: every other cell's encoder attends to the whole input, which is quadratic."""
    return [Cell(name, f"+ T={task.cpi_period}, encoder window w=1 (ours)", ABS, None,
                 (*task_flags(name), "--bias.encoder_width=1"), f"{name}_T3_encoder_w1", home=table,
                 long=True, huge=True)
            for name, task in _tasks(table).items() if "T3" in task.rows]


def table1_cells() -> list[Cell]:
    """Table 1: the paper's tasks under ABS, the schemes it ablates, and two rows of ours."""
    cells = abs_rows("table1")
    # Supplementary: the CPU configs use dropout 0; the paper's 0.3 matters for sinusoidal cells.
    cells.append(Cell("successor", "+ w=1, dropout 0.3 (paper's)", ABS, 100.0,
                      (data_flag("successor"), *NO_CPI, "--model.dropout=0.3"), "successor_w1_dropout03",
                      home="table1", long=True))
    return cells + encoder_window_rows("table1")


def geometry_cells() -> list[Cell]:
    """Which cross-attention window geometry works (the papers leave it open)."""
    runs = [("successor", g, 1) for g in ("trailing", "symmetric", "leading")]
    runs += [("addition", g, w) for g, w in (("trailing", 0), ("trailing", 1), ("symmetric", 1))]
    return [Cell(task, f"NoPE, self w=1, cross {g} w={w}", ABS, None,
                 (data_flag(task), *NOPE, f"--bias.geometry={g}", f"--bias.cross_width={w}"), f"{task}_{g}_cross{w}")
            for task, g, w in runs]


def baseline_cells() -> list[Cell]:
    """Every task × scheme, natural input form (Figure 1, Tables 1 and 3)."""
    return [Cell(name, label, BASELINE, task.paper_abc.get(key), (data_flag(name), *over), f"{name}_{key}",
                 curve=True, home="baselines")
            for name, task in _tasks("table1").items() if task.baselines for key, (label, over) in SCHEMES.items()]


def abc_cells(table: str) -> list[Cell]:
    """The ABC cell of every task of ``table`` that has one: the documented command, one
    fit that interpolates, calibrates and retrains. It is tested on the model at the end of
    retraining (the lowest validation loss can belong to the interpolation phase, before any
    bias exists)."""
    rows = []
    for name, task in _tasks(table).items():
        if task.abc:
            config, over = ABC, (data_flag(name),)
            label = "ABC" if "ABC" in task.paper_abc else "ABC (beyond the paper)"
            rows.append(Cell(name, label, config, task.paper_abc.get("ABC"), over, f"abc_{name}", checkpoint="last",
                             curve=True, home=table if table != "table1" else "table3", long=True,
                             note="– (the paper's vanilla model does not interpolate parity)" if name == "parity" else ""))
    return rows


def table3_cells() -> list[Cell]:
    """Table 3: ABC against the baselines that fail, natural input form. The baseline rows are
    cells of the baselines table (run once, shared) for the schemes the paper reports; the
    last rows are ABC under the paper's own settings (``--bias.preset=paper``)."""
    tasks = _tasks("table1")
    rows = [cell for cell in baseline_cells() if cell.key.split("_", 1)[1] in tasks[cell.task].paper_abc]
    paper = [cell._replace(label="ABC, the paper's preset", overrides=(*cell.overrides, "--bias.preset=paper"),
                           name=f"abc_paper_{cell.task}", curve=False, long=False)
             for cell in abc_cells("table1")]
    return rows + abc_cells("table1") + paper


#: The baseline of the tasks beyond the paper: FIRE, the positional scheme with the best
#: length generalization on addition in the literature (Zhou et al., 2024), on the natural form.
BEYOND_BASELINE = "fire"


def beyond_cells() -> list[Cell]:
    """The tasks no paper has length-generalized (subtraction, signed subtraction,
    three-operand addition, N×2): Table 1's rows, the encoder-window row, ABC and a
    positional-scheme baseline, under the same protocol."""
    label, over = SCHEMES[BEYOND_BASELINE]
    baselines = [Cell(name, f"{label} (baseline)", BASELINE, None, (*task_flags(name), *over),
                      f"{name}_{BEYOND_BASELINE}", curve=True, home="beyond")
                 for name, task in _tasks("beyond").items() if task.baselines]
    return abs_rows("beyond") + encoder_window_rows("beyond") + abc_cells("beyond") + baselines


TABLES = {"table1": table1_cells, "geometry": geometry_cells, "baselines": baseline_cells, "table3": table3_cells,
          "beyond": beyond_cells}


def all_cells() -> list[Cell]:
    return [cell for make in TABLES.values() for cell in make()]


CURVE_LENGTHS = list(range(1, 61))
CURVE_SAMPLES = 500


ROOT = Path(__file__).resolve().parent.parent  # the checkout the configs live in

RUN_INFO = {"jobs": 1, "threads": "all"}  # how cells are run (set by --jobs), recorded with each cell


def say(line: str) -> None:
    """Print one whole line: cells that run at once never splice their lines together."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Progress:
    """How far a ``reproduce`` call is: runs done of those it set out to do, and the time left
    at the pace so far."""

    def __init__(self, total: int):
        self.total, self.finished, self.start = total, 0, time.perf_counter()
        self.lock = threading.Lock()

    def done(self, record: dict) -> str:
        """``(3 of 20; 60 digits 100%; about 1.9 h left)`` for a run that just finished."""
        with self.lock:
            self.finished += 1
            elapsed, left = time.perf_counter() - self.start, self.total - self.finished
        at60 = next((r["accuracy"] for r in record.get("rows", []) if r["length"] == 60), None)
        parts = [f"{self.finished} of {self.total}"] + ([f"60 digits {fmt(at60)}%"] if at60 is not None else [])
        if left:
            # with several runs at once, one has finished every elapsed/finished seconds on average
            parts.append(f"about {duration(elapsed / self.finished * left)} left")
        return f"({'; '.join(parts)})"


def duration(seconds: float) -> str:
    """``45 s``, ``12 min``, ``2.3 h``."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min" if seconds < 5400 else f"{seconds / 3600:.1f} h"


def run(cmd: list[str], log: Path) -> float:
    """Run a command with its output in ``log``; return wall seconds. Raise on failure."""
    start = time.perf_counter()
    with log.open("w") as fh:
        threads = {} if RUN_INFO["threads"] == "all" else {"OMP_NUM_THREADS": str(RUN_INFO["threads"])}
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, env={**os.environ, **threads})
    if proc.returncode:
        raise RuntimeError(f"command failed ({proc.returncode}), see {log}: {' '.join(cmd)}")
    return time.perf_counter() - start


def cell_command(cell: Cell, out_dir: Path, extra: list[str], stage: str, version: str) -> list[str]:
    """``python -m abc_lightning <stage>`` for a cell, logging to ``<out_dir>/runs/<key>/<version>``."""
    return [sys.executable, "-m", "abc_lightning", stage, "--config", cell.config,
            "--trainer.logger.init_args.save_dir", str(out_dir / "runs"), "--trainer.logger.init_args.name", cell.key,
            "--trainer.enable_progress_bar", "false", *cell.overrides, *extra,
            "--trainer.logger.init_args.version", version]


def recorded_command(cell: Cell, extra: list[str]) -> str:
    """The command a record shows: the cell's own, with any overrides given after ``--``."""
    return " ".join([cell.command, *map(shlex.quote, extra)])


def run_cell(cell: Cell, out_dir: Path, extra: list[str]) -> dict:
    """fit + test one cell; returns the cell's record."""
    name, run_dir = cell.key, out_dir / "runs" / cell.key
    # A re-run starts from an empty folder: Lightning would otherwise keep the old last.ckpt
    # and write the new one as last-v1.ckpt, and the test would read the stale one.
    shutil.rmtree(run_dir, ignore_errors=True)
    fit_s = run(cell_command(cell, out_dir, extra, "fit", "fit"), out_dir / f"{name}.fit.log")
    rows, test_s = test_cell(cell, out_dir, extra, "test")
    fit_val = json.loads((run_dir / "fit" / "val_accuracy.json").read_text())
    record = {"config": cell.config, "task": cell.task, "label": cell.label, "train_seconds": round(fit_s, 1),
              "test_seconds": round(test_s, 1), "steps": fit_val["global_step"], "stopped": fit_val.get("stopped"),
              "rows": rows,
              "command": recorded_command(cell, extra), "seed": cell.seed, "commit": short_commit(), "date": str(datetime.date.today()),
              **RUN_INFO}
    phases = run_dir / "fit" / "abc" / "phases.json"
    if phases.exists():
        record["phases"] = json.loads(phases.read_text())["seconds"]
    start = time.perf_counter()
    if cell.curve:
        record["curve"] = test_cell(cell, out_dir, extra, "curve", CURVE_LENGTHS, CURVE_SAMPLES,
                                    ["--data.worst_case=false"])[0]
    record["rows"] += long_rows(cell, out_dir, extra, record["rows"])
    record["shape_rows"] = shape_rows(cell, out_dir, extra)
    if not record["shape_rows"]:
        del record["shape_rows"]
    record["other_test_seconds"] = round(time.perf_counter() - start, 1)  # the curve, the long lengths, the counts
    return record


def long_rows(cell: Cell, out_dir: Path, extra: list[str], rows: list[dict]) -> list[dict]:
    """The cell's tests beyond the configs' lengths that ``rows`` lacks: 599-601 digits for
    cells that extrapolate, 10,000 for the encoder-window ones."""
    from abc_lightning.tasks import get_task

    task = get_task(cell.task)
    done = {r["length"] for r in rows}
    new = []
    long = LONG_LENGTHS if task.long_lengths is None else list(task.long_lengths)
    for wanted, version, lengths, samples in ((cell.long, "long", long, LONG_SAMPLES),
                                              (cell.huge, "huge", HUGE_LENGTHS, HUGE_SAMPLES)):
        missing = [n for n in lengths if n not in done and n <= task.max_length]
        if wanted and missing:
            say(f"[reproduce] {cell.key}: testing at {missing} ({samples} samples)")
            new += test_cell(cell, out_dir, extra, version, missing, samples)[0]
    return new


def shape_rows(cell: Cell, out_dir: Path, extra: list[str]) -> list[dict]:
    """A task's tests at other shapes (``Task.shape_tests``: more operands, a multiplier of
    another length), :data:`SHAPE_SAMPLES` random inputs each, each row tagged with its shape."""
    from abc_lightning.tasks import get_task

    rows = []
    for tag, lengths, flags in get_task(cell.task).shape_tests():
        name = "_".join([*(f"{k}{v}" for k, v in tag.items()), *map(str, lengths)])  # e.g. second60_20
        say(f"[reproduce] {cell.key}: testing {name} at {lengths} digits")
        found = test_cell(cell, out_dir, extra, name, lengths, SHAPE_SAMPLES, flags)[0]
        rows += [{**tag, **row} for row in found]
    return rows


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
    lines = [f"\n### Other shapes ({SHAPE_SAMPLES} random inputs each, and the worst-case set)\n",
             "| task | config | seeds | " + " | ".join(keys) + " | " + " | ".join(f"worst {k}" for k in keys) + " |",
             "|---|---|---|" + "---|" * (2 * len(keys))]
    for cell in cells:
        recs = [r for r in by_key.get(cell.key, []) if r.get("shape_rows")]
        if not recs:
            continue
        rows = [{key({"task": cell.task, **r}): r for r in rec["shape_rows"]} for rec in recs]
        acc = [spread_of([row.get(k, {}).get("accuracy") for row in rows]) for k in keys]
        worst = [spread_of([row.get(k, {}).get("worst") for row in rows]) for k in keys]
        lines.append(f"| {cell.task} | {cell.label} | {len(recs)} | " + " | ".join(acc + worst) + " |")
    return "\n".join(lines) + "\n"


def test_cell(cell: Cell, out_dir: Path, extra: list[str], version: str, lengths: list[int] | None = None,
              samples: int | None = None, more: list[str] = ()) -> tuple[list[dict], float]:
    """Test the cell's fitted checkpoint (on the config's lengths, or on ``lengths``):
    the accuracy rows (with the worst-case figures of each length) and the wall seconds.
    The first wrong answer of each failing worst-case family goes with the rows' length."""
    ckpt = out_dir / "runs" / cell.key / "fit" / "checkpoints" / f"{cell.checkpoint}.ckpt"
    if not ckpt.exists():
        raise RuntimeError(f"{ckpt} is missing: re-run the cell with --force")
    cmd = cell_command(cell, out_dir, extra, "test", version) + ["--ckpt_path", str(ckpt)]
    if lengths is not None:
        cmd += [f"--data.test_lengths={lengths}", f"--data.test_samples={samples}"]
    seconds = run(cmd + list(more), out_dir / f"{cell.key}.{version}.log")
    record = json.loads((out_dir / "runs" / cell.key / version / "test_accuracy.json").read_text())
    for row in record["rows"]:
        failing = [f for f in record.get("worst_failures", []) if f["length"] == row["length"]]
        if failing:
            row["worst_failures"] = failing
    return record["rows"], seconds


def short_commit() -> str:
    """The short commit of the source tree (``-dirty`` with uncommitted changes), or ``unknown``."""
    from abc_lightning.provenance import git_commit

    commit = git_commit()
    return "unknown" if commit is None else commit[:7] + ("-dirty" if commit.endswith("-dirty") else "")


def provenance(records: list[dict], previous: dict) -> tuple[dict[str, int], str]:
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


def worst_failure_line(cell: Cell, row: dict) -> str:
    """``- successor / ABC, 60 digits: all_nines 0% (`99…9` gave `0`), …`` for one length."""
    from abc_lightning.callbacks.training import short

    examples = {f["family"]: f for f in row.get("worst_failures", [])}
    parts = []
    for family, accuracy in row["worst_families"].items():
        if accuracy < 100:
            f = examples.get(family)
            parts.append(f"{family} {fmt(accuracy)}%" + (f" (`{short(f['input'], 8)}` gave `{short(f['output'], 8)}`)"
                                                           if f else ""))
    return f"- {cell.task} / {cell.label}, {row['length']} digits: " + "; ".join(parts)


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


def write_table(table: str, cells: list[Cell], records: dict, out: Path) -> str:
    """The table of ``cells`` from ``records`` (cell key -> a record, or one record per seed).

    With several seeds a length's column shows the median and the minimum over them, and
    ``≥ 99 at 60`` how many seeds reached 99% at 60 digits."""
    by_key = {k: (v if isinstance(v, list) else [v]) for k, v in records.items()}
    every = [r for c in cells for r in by_key.get(c.key, [])]
    previous_path = out / f"{table}.json"
    previous = json.loads(previous_path.read_text()) if previous_path.exists() else {}
    commits, date = provenance(every, previous)
    only = next(iter(commits)) if len(commits) == 1 else None
    commit = (f"`{only}`" if only else
              "several: " + ", ".join(f"`{c}` ({n} runs)" for c, n in commits.items()) if commits else "none")
    runs = sorted({(r.get("jobs", 1), threads_of(r)) for r in every})
    jobs = max((r.get("jobs", 1) for r in every), default=1)
    busy = [r["train_seconds"] + r.get("test_seconds", 0) + r.get("other_test_seconds", 0) for r in every]
    took = (f" Its {len(every)} runs took {sum(busy) / 3600:.1f} h of run time in all (train and every test; "
            f"training alone {sum(r['train_seconds'] for r in every) / 3600:.1f} h), about "
            f"{sum(busy) / jobs / 3600:.1f} h of wall time at {jobs} at a time"
            + ("" if all("other_test_seconds" in r for r in every) else
               "; records made before the curve and long-length tests were timed count their main test only")
            + ".") if every else ""
    how = "; ".join(f"{j} cell(s) at a time with {t} torch thread(s) each" for j, t in runs) or "no cells run yet"
    seeds = sorted({r.get("seed", 0) for r in every})
    cpus = sorted({r["cpu"] for r in every if r.get("cpu")})  # records from before they named it have none
    kernels = f"; CPU {' and '.join(f'`{c}`' for c in cpus)} (torch's kernels for it)" if cpus else ""
    regenerate = regenerate_commands(table, cells, by_key)
    # the configs and code of the records' commit, not of a later checkout
    checkout = f" from a checkout of that commit (`git checkout {only}`)" if only and only != "unknown" else ""
    head = (f"## {table}: our accuracy (%) beside the paper's\n\n"
            f"Commit {commit}, {date or 'undated'}, on {platform.machine()} "
            f"with {os.cpu_count()} CPU cores ({how}{kernels}). Seeds: {', '.join(map(str, seeds)) or 'none'}; "
            f"seed S sets both the model/shuffle seed and the permutation Π (`--seed_everything=S "
            f"--data.seed=S`).{took} Regenerate{checkout} into a folder of its own (add `--results <empty folder>`: "
            f"finished cells are skipped, and a checkout's `results/` holds the records it was committed with): "
            f"{regenerate}. With several seeds a cell shows *median / min* over them. "
            f"Lengths up to 60 use min(10^L − 10^(L−1), test_samples) samples (10 000 in the configs); "
            f"{', '.join(map(str, LONG_LENGTHS))} digits use {LONG_SAMPLES}, and only cells that extrapolate are "
            f"tested there; {', '.join(map(str, HUGE_LENGTHS))} digits use {HUGE_SAMPLES}, for the encoder-window cells, "
            f"whose every attention is windowed and evaluation linear in the length (the other cells' encoders "
            f"attend globally, which is quadratic; `--long-only` adds both to finished cells). "
            f"*Worst* columns: accuracy on the task's worst-case set at that length (hand-picked inputs "
            f"such as 99…9 + 1, the same for every seed; `data.worst_case`, docs/results.md); – where the "
            f"cell was not tested there. "
            f"*1-5*: the lowest accuracy on 1-5-digit inputs (as many samples as the rule above gives; "
            f"from the curve's {CURVE_SAMPLES} where the test did not run them). "
            f"Families that fail are listed under the table.\n\n"
            f"| task | config | seeds | ≥ 99 at 60 | 1-5 | {' | '.join(map(str, LENGTHS))} | "
            f"{' | '.join(f'worst {n}' for n in WORST_LENGTHS)} | paper 60 | train time | command |\n"
            f"|---|---|---|---|---|{'---|' * (len(LENGTHS) + len(WORST_LENGTHS))}---|---|---|\n")
    lines, failures = [], []
    for cell in cells:
        recs = sorted(by_key.get(cell.key, []), key=lambda r: r.get("seed", 0))
        if not recs:
            blank = " |" * (len(LENGTHS) + len(WORST_LENGTHS))
            lines.append(f"| {cell.task} | {cell.label} | not run | | |{blank} {cell.note or fmt(cell.paper60)} |  "
                         f"| `{cell.command}` |")
            continue
        acc = [{r["length"]: r["accuracy"] for r in rec["rows"]} for rec in recs]
        worst = [{r["length"]: r.get("worst") for r in rec["rows"]} for rec in recs]
        cols = " | ".join([*(spread_of([a.get(n) for a in acc]) for n in LENGTHS),
                           *(spread_of([w.get(n) for w in worst]) for n in WORST_LENGTHS)])
        at60 = [a.get(60) for a in acc]
        reached = f"{sum(v >= 99 for v in at60 if v is not None)}/{sum(v is not None for v in at60)}"
        for rec in recs:
            tag = f" (seed {rec['seed']})" if rec.get("seed") else ""
            failing = [r for r in rec["rows"] if any(a < 100 for a in r.get("worst_families", {}).values())]
            # the columns' lengths, and any other length where a model whose columns are clean fails
            clean = not any(r["length"] in WORST_LENGTHS for r in failing)
            failures += [worst_failure_line(cell, r) + tag for r in failing if clean or r["length"] in WORST_LENGTHS]
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
        notes = [f"seed {r.get('seed', 0)}: {r['note']}" if len(recs) > 1 else r["note"] for r in recs if "note" in r]
        if notes:  # a remark recorded by hand, e.g. a test stopped before it ended
            time_note += "; note: " + "; ".join(notes)
        short = spread_of([short_inputs(r) for r in recs])
        lines.append(f"| {cell.task} | {label} | {len(recs)} | {reached} | {short} | {cols} | {paper} | {time_note} "
                     f"| `{first['command']}` |")
    text = head + "\n".join(lines) + "\n" + shape_table(cells, by_key)
    if failures:
        text += "\nWorst-case families below 100% (first wrong answer of each):\n\n" + "\n".join(failures) + "\n"
    files.write_text(out / f"{table}.md", text)
    files.write_text(out / f"{table}.json", json.dumps({"commit": next(iter(commits)) if len(commits) == 1 else None,
                                                    "commits": commits, "date": date, "cells": every}, indent=2))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m abc_lightning reproduce", description=__doc__.splitlines()[0])
    parser.add_argument("table", choices=sorted(TABLES))
    parser.add_argument("--only", nargs="*", default=None, help="cell names to run (default: all)")
    parser.add_argument("--force", action="store_true", help="re-run cells that already have results")
    parser.add_argument("--results", default="results", help="output folder (default: results)")
    parser.add_argument("--table-only", action="store_true", help="only rebuild the table from finished cells")
    parser.add_argument("--long-only", action="store_true",
                        help=f"only add the {LONG_LENGTHS} and {HUGE_LENGTHS}-digit tests to finished cells that "
                             "lack them (no training)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="cells run at once, each with cores/jobs torch threads (default 1)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0],
                        help="run each cell once per seed (default: 0, the configs' own); finished seeds are "
                             "skipped. Seed S sets --seed_everything=S and --data.seed=S")
    parser.epilog = "Overrides for every cell go after a literal --, e.g. -- --trainer.max_epochs=2"
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    cells = TABLES[args.table]()
    out = Path(args.results)
    if args.jobs < 1:
        parser.exit(2, f"abc_lightning: error: --jobs must be >= 1, got {args.jobs}\n")
    unknown = [name for name in args.only or [] if not any(name == c.key for c in cells)]
    if unknown or args.only == []:
        known = ", ".join(c.key for c in cells)
        parser.exit(2, f"abc_lightning: error: --only {' '.join(unknown) or '(nothing)'}: no such cell in "
                       f"{args.table}; its cells are {known}\n")

    def cell_dir(cell: Cell) -> Path:
        folder = out / (cell.home or args.table)
        folder.mkdir(parents=True, exist_ok=True)
        return folder
    if args.jobs > 1:
        RUN_INFO.update(jobs=args.jobs, threads=str(max(1, (os.cpu_count() or 1) // args.jobs)))
    else:
        RUN_INFO.update(threads=os.environ.get("OMP_NUM_THREADS", "all"))

    if any(seed < 0 for seed in args.seeds):
        parser.exit(2, f"abc_lightning: error: --seeds must be >= 0, got {args.seeds}\n")
    seeds = list(dict.fromkeys(args.seeds))

    def wanted(cell: Cell) -> bool:
        return args.only is None or cell.base_key in args.only

    def todo(cell: Cell) -> bool:
        return wanted(cell) and not args.table_only and (args.force or not (cell_dir(cell) / f"{cell.key}.json").exists())

    if args.long_only:
        for cell in [c.for_seed(s) for c in cells for s in seeds]:
            path = cell_dir(cell) / f"{cell.key}.json"
            if (cell.long or cell.huge) and wanted(cell) and path.exists():
                record = json.loads(path.read_text())
                new = long_rows(cell, cell_dir(cell), extra, record["rows"])
                if new:
                    record["rows"] += new
                    files.write_text(path, json.dumps(record, indent=2))
        args.table_only = True

    queue = [c.for_seed(s) for s in seeds for c in cells if todo(c.for_seed(s))]
    progress = Progress(len(queue))

    def work(cell: Cell) -> str | None:
        """Run one cell; the cell's key if it failed (its log says why), else None."""
        say(f"[reproduce] {cell.task} / {cell.label}: {cell.command}")
        try:
            record = run_cell(cell, cell_dir(cell), extra)
        except RuntimeError as error:  # a failed command: the other cells go on, and the table keeps what finished
            say(f"[reproduce] failed {cell.key}: {error}")
            return cell.key
        files.write_text(cell_dir(cell) / f"{cell.key}.json", json.dumps(record, indent=2))
        say(f"[reproduce] done {cell.key} {progress.done(record)}")
        return None

    if queue:
        from abc_lightning.provenance import cpu  # imports torch: only when there is something to run

        RUN_INFO.update(cpu=cpu())
        say(f"[reproduce] {args.table}: {len(queue)} run(s) to do, {max(1, args.jobs)} at a time")
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        failed = [key for key in pool.map(work, queue) if key]
    table_json = out / f"{args.table}.json"
    previous = json.loads(table_json.read_text()) if table_json.exists() else {}
    records: dict[str, list[dict]] = {}
    for cell in cells:  # every seed on disk, whether or not this call ran it
        for path in [cell_dir(cell) / f"{cell.key}.json", *sorted(cell_dir(cell).glob(f"{cell.key}.seed*.json"))]:
            if not path.exists():
                continue
            record = json.loads(path.read_text())
            if not record.get("commit") and previous.get("commit"):
                # a record from before records kept their commit takes the table's, once, for good
                record.update(commit=previous["commit"], date=record.get("date") or previous.get("date"))
                files.write_text(path, json.dumps(record, indent=2))
            records.setdefault(cell.key, []).append(record)
    print(write_table(args.table, cells, records, out))
    curves: dict[str, dict[str, list[dict]]] = {}
    for cell in cells:  # the figure draws seed 0 (or the lowest seed run)
        recs = sorted(records.get(cell.key, []), key=lambda r: r.get("seed", 0))
        if recs and "curve" in recs[0]:
            curves.setdefault(cell.task, {})[cell.label] = recs[0]["curve"]
    if curves:
        from abc_lightning.plotting import accuracy_curves

        figure = out / f"{args.table}_curves.png"
        files.savefig(accuracy_curves(curves, title=f"{args.table}: accuracy by length ({CURVE_SAMPLES} samples "
                                                     "per length)"), figure, dpi=120)
        print(f"figure written to {figure}")
    if failed:
        sys.stderr.write(f"abc_lightning: error: {len(failed)} of {len(queue)} run(s) failed ({', '.join(failed)}); "
                         f"their logs are in {out}, the table has the runs that finished, and the same command "
                         "again retries only what is missing\n")
        return 1
    return 0
