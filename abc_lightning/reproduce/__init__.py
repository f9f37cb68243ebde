"""Regenerate a reproduction table: ``python -m abc_lightning reproduce table1``.

For every cell it runs ``fit`` and then ``test`` (on the best checkpoint) in a fresh
process, times both, and writes ``results/<table>.md`` and ``results/<table>.json``: our
accuracy beside the paper's, the training time and the exact command of each cell.
Each finished cell leaves a record under ``results/<table>/`` (with its log and run folder,
outside the tracked tree) and is skipped on the next call, so an interrupted reproduction
resumes; ``--force`` retrains. The records a table is made from are packed beside it in
``results/<table>.records.json.gz``, and unpacked from there first.
"""

from __future__ import annotations

import datetime
import json
import os
import shlex
import shutil
import sys
import threading
import time
from pathlib import Path

from abc_lightning.runs import files
from abc_lightning.markdown import duration
# the cell matrix and the table writer, also reachable from here (``reproduce.all_cells`` …)
from abc_lightning.reproduce.cells import (CURVE_LENGTHS, CURVE_SAMPLES, HUGE_LENGTHS, HUGE_SAMPLES, LONG_LENGTHS,  # noqa: F401
                                 LONG_SAMPLES, SHAPE_SAMPLES, TABLES, Cell, all_cells, beyond_cells, geometry_cells,
                                 table1_cells, table3_cells)
from abc_lightning.errors import OneLineParser
from abc_lightning.runs.provenance import short_commit
from abc_lightning.reproduce.records import pack, unpack_missing
from abc_lightning.reproduce.runner import in_parallel, run_logged
from abc_lightning.reproduce.tables import fmt, regenerate_commands, write_table  # noqa: F401


ROOT = Path(__file__).resolve().parents[2]  # the checkout the configs live in

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


def run(cmd: list[str], log: Path) -> float:
    """Run a command with its output in ``log``; return wall seconds. Raise on failure."""
    threads = {} if RUN_INFO["threads"] == "all" else {"OMP_NUM_THREADS": str(RUN_INFO["threads"])}
    code, seconds = run_logged(cmd, log, threads)
    if code:
        raise RuntimeError(f"command failed ({code}), see {log}: {' '.join(cmd)}")
    return seconds


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
    info = run_dir / "fit" / "run_info.json"  # where the fit trained: a GPU is named; a CPU run has no device
    device = json.loads(info.read_text()).get("device", "cpu") if info.exists() else "cpu"
    if device != "cpu":
        record["device"] = device
    phases = run_dir / "fit" / "abc" / "phases.json"
    if phases.exists():
        record["phases"] = json.loads(phases.read_text())["seconds"]
    start = time.perf_counter()
    if cell.curve:
        from abc_lightning.tasks import get_task

        curve = get_task(cell.task).curve_lengths or CURVE_LENGTHS
        record["curve"] = test_cell(cell, out_dir, extra, "curve", list(curve), CURVE_SAMPLES,
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
    for wanted, version, lengths, samples in ((cell.long, "long", long, task.long_samples or LONG_SAMPLES),
                                              (cell.huge, "huge", HUGE_LENGTHS, HUGE_SAMPLES)):
        missing = [n for n in lengths if n not in done and n <= task.max_length]
        if wanted and missing:
            say(f"[reproduce] {cell.key}: testing at {missing} ({samples} samples)")
            new += test_cell(cell, out_dir, extra, version, missing, samples)[0]
    return new


def shape_rows(cell: Cell, out_dir: Path, extra: list[str]) -> list[dict]:
    """A task's tests at other shapes (``Task.shape_tests``: more operands, a multiplier of
    another length), :data:`SHAPE_SAMPLES` random inputs each (``Task.shape_samples`` where the
    task sets it), each row tagged with its shape. Like the long lengths, these test
    extrapolation, so only the cells tested there have them (``cell.long``; not the vanilla
    and baseline cells, whose global attention over such answers, up to 15,000 tokens, would
    take hours a shape on one thread)."""
    from abc_lightning.tasks import get_task

    rows = []
    if not cell.long:
        return rows
    task = get_task(cell.task)
    for tag, lengths, flags in task.shape_tests():
        name = "_".join([*(f"{k}{v}" for k, v in tag.items()), *map(str, lengths)])  # e.g. second60_20
        say(f"[reproduce] {cell.key}: testing {name} at {lengths} digits")
        found = test_cell(cell, out_dir, extra, name, lengths, task.shape_samples or SHAPE_SAMPLES, flags)[0]
        rows += [{**tag, **row} for row in found]
    return rows


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


#: Overrides that would change a cell's task: each cell is one task (choose cells with --only).
TASK_KEYS = ("--data", "--data.class_path")


def check_overrides(cell: Cell, extra: list[str]) -> str | None:
    """What is wrong with the overrides given after ``--``, checked on the first cell to run
    before any runs (a mistake would otherwise fail every cell in its own log), or None."""
    changes_task = [a for a in extra if a.split("=", 1)[0] in TASK_KEYS]
    if changes_task:
        return f"{changes_task[0]}: an override cannot change a cell's task; choose cells with --only"
    import contextlib
    import io

    from abc_lightning.cli import ABCLightningCLI
    from abc_lightning.cli.faults import describe
    from abc_lightning.cli.messages import quiet_third_party

    quiet_third_party()

    printed = io.StringIO()
    try:
        with contextlib.redirect_stderr(printed), contextlib.redirect_stdout(io.StringIO()):
            config = cell.config if Path(cell.config).is_file() else str(ROOT / cell.config)
            ABCLightningCLI(args=["--config", config, *cell.overrides, *extra, "--trainer.logger=false",
                                  "--wandb.mode=disabled"], run=False)
    except SystemExit:
        lines = printed.getvalue().strip().splitlines()
        return lines[-1].removeprefix("abc_lightning: error: ") if lines else "the command line was refused"
    except Exception as exc:  # a setting that parses but cannot work
        found = describe(exc)
        if found is None:
            raise
        return found[0]
    return None


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

    try:
        unpacked = unpack_missing(out, args.table)
    except (OSError, ValueError) as exc:
        parser.exit(2, f"abc_lightning: error: {exc}\n")
    if unpacked:
        say(f"[reproduce] {args.table}: {unpacked} finished record(s) unpacked from {out}/{args.table}.records.json.gz")

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
    wrong = check_overrides(queue[0], extra) if queue and extra else None
    if wrong:
        parser.exit(2, f"abc_lightning: error: the overrides after -- do not work ({wrong}); nothing was run\n")
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
        from abc_lightning.runs.provenance import cpu  # imports torch: only when there is something to run

        RUN_INFO.update(cpu=cpu())
        say(f"[reproduce] {args.table}: {len(queue)} run(s) to do, {max(1, args.jobs)} at a time")
    failed = [key for key in in_parallel(work, args.jobs, queue) if key]
    table_json = out / f"{args.table}.json"
    previous = json.loads(table_json.read_text()) if table_json.exists() else {}
    records: dict[str, list[dict]] = {}
    bundle: dict[Path, dict] = {}  # each record by its file, as loaded here
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
            bundle[path] = record
    print(write_table(args.table, cells, records, out))
    if bundle:
        print(f"records packed into {pack(out, args.table, bundle)}")
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
