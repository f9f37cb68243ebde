"""Run a W&B sweep YAML locally: ``python -m abc_lightning sweep sweeps/<file>.yaml``.

For clusters without a W&B server. The same YAML that ``wandb sweep`` takes is expanded
here: ``method: grid`` runs every combination of the ``values`` lists, ``method:
random`` draws ``--count`` (or the YAML's ``run_cap``) combinations from ``values``,
``min``/``max`` ranges and ``distribution``. The ``command:`` list gets its macros filled
in as W&B's agent fills them (``${env}``, ``${interpreter}``, ``${program}``, ``${args}``,
``${args_no_hyphens}``), with W&B's rendering of values (``--key=value``; lists as JSON).

Each combination has a stable id (a hash of its parameters) and a folder
``<out>/<sweep>/<id>/`` with ``params.json``, ``command.json``, ``output.log`` and, once it
has finished, ``exit_code``, ``seconds`` and the run's own accuracy records
(``val_accuracy.json``, ``test_accuracy.json``). A finished combination (exit code 0) is
never run again, so an interrupted sweep resumes where it stopped. Runs are grouped for W&B
with ``WANDB_RUN_GROUP=<sweep>`` and log offline unless W&B is reachable; ``wandb sync``
uploads them later.

Before anything runs, every combination is parsed by the real CLI, so a misspelt key or a
bad value fails at once (``--dry-run`` does the same and prints the commands). With
``--gpus 0,1,2,3`` one combination runs on each GPU at a time (``CUDA_VISIBLE_DEVICES``).
When the sweep ends, and on demand with ``--summary``, ``summary.md``, ``summary.csv`` and
``summary.png`` compare the combinations: parameters, accuracy by length, time, exit status.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import math
import os
import random
import sys
import time
from pathlib import Path
from queue import Queue

import yaml

from abc_lightning import markdown
from abc_lightning.runs import files
from abc_lightning.errors import ConfigError, OneLineParser
from abc_lightning.reproduce.runner import in_parallel, run_logged

DEFAULT_COMMAND = ["${env}", "${interpreter}", "${program}", "${args}"]
#: Set for each run: where the CLI copies its accuracy records (see AccuracyTable).
RECORD_ENV = "ABC_LIGHTNING_SWEEP_RECORD"


def load(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"sweep file not found: {path}")
    try:
        spec = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(spec, dict) or not isinstance(spec.get("parameters"), dict) or not spec["parameters"]:
        raise ConfigError(f"{path}: a sweep needs a 'parameters' mapping")
    if spec.get("method", "grid") not in ("grid", "random"):
        raise ConfigError(f"{path}: method {spec.get('method')!r} is not supported locally; use grid or random")
    for name, p in spec["parameters"].items():
        if not isinstance(p, dict) or not ({"values", "value", "min", "distribution"} & set(p)):
            raise ConfigError(f"{path}: parameter {name!r} needs values, value, or min/max")
        if "values" in p and (not isinstance(p["values"], list) or not p["values"]):
            raise ConfigError(f"{path}: parameter {name!r} has values {p['values']!r}; give a list of at least "
                              "one value (a sweep over an empty list runs nothing)")
        if "min" in p and "max" in p and not p["min"] <= p["max"]:
            raise ConfigError(f"{path}: parameter {name!r} has min {p['min']!r} above max {p['max']!r}")
        if "min" in p and "max" not in p:
            raise ConfigError(f"{path}: parameter {name!r} has min but no max")
    return spec


def expand(spec: dict, count: int | None = None, seed: int = 0) -> list[dict]:
    """The parameter combinations of a sweep, in a stable order."""
    params = spec["parameters"]
    if spec.get("method", "grid") == "grid":
        choices = {}
        for name, p in params.items():
            if "value" in p:
                choices[name] = [p["value"]]
            elif "values" in p:
                choices[name] = list(p["values"])
            else:
                raise ConfigError(f"grid parameter {name!r} needs values or value, not a range")
        names = list(choices)
        combos = [dict(zip(names, combo)) for combo in itertools.product(*(choices[n] for n in names))]
    else:
        n = count or spec.get("run_cap")
        if not n:
            raise ConfigError("a random sweep needs --count N (or run_cap in the YAML)")
        rng = random.Random(seed)
        combos = [{name: draw(p, rng) for name, p in params.items()} for _ in range(int(n))]
    nulls = sorted({name for combo in combos for name, value in combo.items() if value is None})
    if nulls:
        raise ConfigError(f"parameter {nulls[0]!r} has a null value, which W&B passes as the string 'None'; "
                          "leave the key out of the sweep to keep the config's value")
    return combos


def draw(p: dict, rng: random.Random):
    """One value of a parameter, for random search (W&B's distribution names)."""
    if "value" in p:
        return p["value"]
    if "values" in p:
        return rng.choice(list(p["values"]))
    lo, hi = p["min"], p["max"]
    dist = p.get("distribution") or ("int_uniform" if isinstance(lo, int) and isinstance(hi, int) else "uniform")
    if dist == "int_uniform":
        return rng.randint(lo, hi)
    if dist == "uniform":
        return rng.uniform(lo, hi)
    if dist == "log_uniform_values":
        return math.exp(rng.uniform(math.log(lo), math.log(hi)))
    raise ConfigError(f"distribution {dist!r} is not supported locally")


def render(value) -> str:
    """A value as W&B's agent writes it after ``--key=``."""
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def command(spec: dict, params: dict) -> list[str]:
    """The sweep's ``command:`` with its macros filled in for one combination."""
    args = [f"--{k}={render(v)}" for k, v in params.items()]
    out: list[str] = []
    for part in spec.get("command") or DEFAULT_COMMAND:
        if part == "${env}":
            continue  # W&B prefixes /usr/bin/env; the environment is passed directly here
        elif part == "${interpreter}":
            out.append(sys.executable)
        elif part == "${program}":
            if "program" not in spec:
                raise ConfigError("the command uses ${program} but the sweep has no 'program'")
            out.append(str(spec["program"]))
        elif part == "${args}":
            out += args
        elif part == "${args_no_hyphens}":
            out += [a[2:] for a in args]
        else:
            out.append(str(part))
    if out and out[0] == "python":
        out[0] = sys.executable  # the environment that runs the sweep
    return out


def run_id(params: dict) -> str:
    return hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]


def check_commands(commands: list[list[str]]) -> list[str]:
    """Errors of the combinations whose ``abc_lightning`` command does not parse."""
    from abc_lightning.cli.check import check_args

    errors = []
    for cmd in commands:
        if "abc_lightning" in cmd and cmd.index("abc_lightning") > 0 and cmd[cmd.index("abc_lightning") - 1] == "-m":
            problem = check_args(cmd[cmd.index("abc_lightning") + 1 :], build=True)
            if problem:
                errors.append(problem)
    return list(dict.fromkeys(errors))


def summary_rows(root: Path, combos: list[dict]) -> list[dict]:
    """One row per combination: parameters, status, accuracy by length, train time."""
    rows = []
    for params in combos:
        folder = root / run_id(params)
        code = (folder / "exit_code").read_text().strip() if (folder / "exit_code").exists() else None
        row = {"id": run_id(params), **{k: v if isinstance(v, (int, float, str)) else render(v)
                                        for k, v in params.items()},
               "status": "not run" if code is None else "ok" if code == "0" else f"exit {code}"}
        for stage in ("val", "test"):
            record = folder / f"{stage}_accuracy.json"
            if record.exists():
                data = json.loads(record.read_text())
                row.update({f"{stage}/acc@{r['length']}": r["accuracy"] for r in data["rows"]})
                row.update({f"{stage}/worst@{r['length']}": r["worst"] for r in data["rows"] if "worst" in r})
                if stage == "val":
                    row["train s"], row["steps"] = data.get("seconds"), data.get("global_step")
        if (folder / "seconds").exists():
            row["wall s"] = float((folder / "seconds").read_text())
        rows.append(row)
    return rows


def write_summary(root: Path, spec: dict, combos: list[dict]) -> Path | None:
    """``summary.md``, ``summary.csv`` and ``summary.png`` of a sweep; the markdown's path."""
    from abc_lightning.plotting import sweep_heatmaps

    rows = summary_rows(root, combos)
    if not rows:
        return None
    columns = list(dict.fromkeys(k for r in rows for k in r))
    acc = sorted((c for c in columns if "/acc@" in c or "/worst@" in c),
                 key=lambda c: (c.split("/")[0], c.split("/")[1].startswith("worst"), int(c.split("@")[1])))
    columns = [c for c in columns if c not in acc and c not in ("train s", "steps", "wall s")]
    columns += acc + [c for c in ("train s", "steps", "wall s") if any(c in r for r in rows)]
    root.mkdir(parents=True, exist_ok=True)
    with files.atomic_open(root / "summary.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    cell = lambda v: "" if v is None else f"{v:g}" if isinstance(v, float) else str(v)  # noqa: E731
    lines = [f"## sweep {root.name}: {len(rows)} combinations", "",
             *markdown.table(columns, [[cell(r.get(c)) for c in columns] for r in rows])]
    metric = (spec.get("metric") or {}).get("name")
    metric = metric if metric in acc else (max(acc, key=lambda c: (c.startswith("val"), int(c.split("@")[1])))
                                           if acc else None)
    axes = [name for name in spec["parameters"] if len({r[name] for r in rows}) > 1]
    if metric and axes:
        import matplotlib.pyplot as plt

        fig = sweep_heatmaps(rows, axes, metric, title=f"{root.name}: {metric} (%)")
        files.savefig(fig, root / "summary.png", dpi=100)
        plt.close(fig)
        lines += ["", f"![{metric} over the swept axes](summary.png)"]
    files.write_text(root / "summary.md", "\n".join(lines) + "\n")
    return root / "summary.md"


def gpu_list(text: str | None) -> list[str]:
    """``"0,1,3"`` -> ``["0", "1", "3"]``; ConfigError for anything but distinct device ids."""
    if text is None:
        return []
    gpus = [g.strip() for g in text.split(",")]
    if not all(g.isdigit() for g in gpus) or len(set(gpus)) != len(gpus):
        raise ConfigError(f"--gpus takes distinct GPU ids separated by commas, e.g. 0,1,2,3; got {text!r}")
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    missing = [g for g in gpus if int(g) >= count]
    if missing:
        have = f"GPUs 0-{count - 1}" if count else "no CUDA GPU"
        raise ConfigError(f"--gpus {text}: torch sees {have} here, not GPU {missing[0]}; leave --gpus out to run "
                          "on the CPU")
    return gpus


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m abc_lightning sweep", description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="a W&B sweep YAML, e.g. sweeps/abs_grid.yaml")
    parser.add_argument("--parallel", type=int, default=None,
                        help="combinations run at once (default 1, or one per GPU with --gpus)")
    parser.add_argument("--gpus", default=None,
                        help="GPU ids, e.g. 0,1,2,3: one combination per GPU at a time (CUDA_VISIBLE_DEVICES)")
    parser.add_argument("--count", type=int, default=None, help="combinations to draw for a random sweep")
    parser.add_argument("--out", default="runs/sweeps", help="where run records go (default runs/sweeps)")
    parser.add_argument("--dry-run", action="store_true", help="check and print the commands, run nothing")
    parser.add_argument("--summary", action="store_true",
                        help="only write the summary table and figure of the runs so far")
    args = parser.parse_args(argv)
    try:
        gpus = gpu_list(args.gpus)
        if args.count is not None and args.count < 1:
            raise ConfigError(f"--count must be >= 1, got {args.count}")
        if args.parallel is not None and args.parallel < 1:
            raise ConfigError(f"--parallel must be >= 1, got {args.parallel}")
        if gpus and args.parallel is not None and args.parallel != len(gpus):
            raise ConfigError(f"--parallel {args.parallel} with {len(gpus)} GPUs: a sweep runs one combination "
                              "per GPU; leave --parallel out")
        spec = load(args.sweep)
        combos = expand(spec, args.count)
        commands = [command(spec, p) for p in combos]
        name = spec.get("name") or Path(args.sweep).stem
        root = Path(args.out) / name
        if args.summary:
            written = write_summary(root, spec, combos)
            print(f"[sweep] summary: {written}" if written else f"[sweep] nothing in {root} yet", flush=True)
            return 0
        errors = check_commands(commands)
        if errors:
            raise ConfigError(f"{len(errors)} problem(s) in the sweep's commands, e.g.: {errors[0]}")
    except ConfigError as exc:
        print(f"abc_lightning: error: {exc}", file=sys.stderr)
        return 2
    if args.dry_run:
        for cmd in commands:
            print(" ".join(cmd))
        return 0
    parallel = len(gpus) or args.parallel or 1
    env = {**os.environ, "WANDB_RUN_GROUP": name}
    if parallel > 1:
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // parallel)))
    free: Queue = Queue()
    for gpu in gpus:
        free.put(gpu)

    def finished(params: dict) -> bool:
        done = root / run_id(params) / "exit_code"
        return done.exists() and done.read_text().strip() == "0"

    def work(params: dict, cmd: list[str]) -> int:
        if finished(params):
            return 0
        folder = root / run_id(params)
        done = folder / "exit_code"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "params.json").write_text(json.dumps(params, indent=2))
        (folder / "command.json").write_text(json.dumps(cmd))
        gpu = free.get() if gpus else None
        run_env = {**env, RECORD_ENV: str(folder.resolve())}
        if gpu is not None:
            run_env["CUDA_VISIBLE_DEVICES"] = gpu
        try:
            code, seconds = run_logged(cmd, folder / "output.log", run_env)
        finally:
            if gpu is not None:
                free.put(gpu)
        (folder / "seconds").write_text(f"{seconds:.1f}\n")
        done.write_text(f"{code}\n")
        where = f" on GPU {gpu}" if gpu is not None else ""
        print(f"[sweep] {run_id(params)} exit {code} in {seconds:.0f} s{where}: {params}", flush=True)
        return code

    print(f"[sweep] {name}: {len(combos)} combinations, {sum(map(finished, combos))} already finished; "
          f"records in {root}", flush=True)
    codes = in_parallel(work, parallel, combos, commands)
    failed = sum(c != 0 for c in codes)
    print(f"[sweep] {name}: {len(codes) - failed} finished, {failed} failed; summary: "
          f"{write_summary(root, spec, combos)}", flush=True)
    return 1 if failed else 0
