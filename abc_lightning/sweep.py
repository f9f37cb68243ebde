"""Run a W&B sweep YAML locally: ``python -m abc_lightning sweep sweeps/<file>.yaml``.

For clusters without a W&B server. The same YAML that ``wandb sweep`` takes is expanded
here: ``method: grid`` runs every combination of the ``values`` lists, ``method:
random`` draws ``--count`` (or the YAML's ``run_cap``) combinations from ``values``,
``min``/``max`` ranges and ``distribution``. The ``command:`` list gets its macros filled
in as W&B's agent fills them (``${env}``, ``${interpreter}``, ``${program}``, ``${args}``,
``${args_no_hyphens}``), with W&B's rendering of values (``--key=value``; lists as JSON).

Each combination has a stable id (a hash of its parameters) and a folder
``<out>/<sweep>/<id>/`` with ``params.json``, ``command.json``, ``output.log`` and, once it
has finished, ``exit_code``. A finished combination (exit code 0) is never run again, so
an interrupted sweep resumes where it stopped. Runs are grouped for W&B with
``WANDB_RUN_GROUP=<sweep>`` and log offline unless W&B is reachable; ``wandb sync`` uploads
them later.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

from abc_lightning.errors import ConfigError

DEFAULT_COMMAND = ["${env}", "${interpreter}", "${program}", "${args}"]


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
        return [dict(zip(names, combo)) for combo in itertools.product(*(choices[n] for n in names))]
    n = count or spec.get("run_cap")
    if not n:
        raise ConfigError("a random sweep needs --count N (or run_cap in the YAML)")
    rng = random.Random(seed)
    return [{name: draw(p, rng) for name, p in params.items()} for _ in range(int(n))]


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m abc_lightning sweep", description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="a W&B sweep YAML, e.g. sweeps/abs_parity_grid.yaml")
    parser.add_argument("--parallel", type=int, default=1, help="combinations run at once (default 1)")
    parser.add_argument("--count", type=int, default=None, help="combinations to draw for a random sweep")
    parser.add_argument("--out", default="runs/sweeps", help="where run records go (default runs/sweeps)")
    parser.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = parser.parse_args(argv)
    try:
        spec = load(args.sweep)
        combos = expand(spec, args.count)
        commands = [command(spec, p) for p in combos]
    except ConfigError as exc:
        print(f"abc_lightning: error: {exc}", file=sys.stderr)
        return 2
    name = spec.get("name") or Path(args.sweep).stem
    root = Path(args.out) / name
    if args.dry_run:
        for cmd in commands:
            print(" ".join(cmd))
        return 0
    env = {**os.environ, "WANDB_RUN_GROUP": name}
    if args.parallel > 1:
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // args.parallel)))

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
        start = time.perf_counter()
        with (folder / "output.log").open("w") as log:
            code = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        done.write_text(f"{code}\n")
        print(f"[sweep] {run_id(params)} exit {code} in {time.perf_counter() - start:.0f} s: {params}", flush=True)
        return code

    print(f"[sweep] {name}: {len(combos)} combinations, {sum(map(finished, combos))} already finished; "
          f"records in {root}", flush=True)
    with ThreadPoolExecutor(max_workers=max(1, args.parallel)) as pool:
        codes = list(pool.map(work, combos, commands))
    failed = sum(c != 0 for c in codes)
    print(f"[sweep] {name}: {len(codes) - failed} finished, {failed} failed", flush=True)
    return 1 if failed else 0
