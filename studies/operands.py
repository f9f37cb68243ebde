"""k-operand addition (``addition_k``) under ABS: trained on 2-4 operands of up to 7 digits,
tested at more operands and more digits.

    OMP_NUM_THREADS=1 python studies/operands.py run --seeds 0 1 2
    OMP_NUM_THREADS=1 python studies/operands.py speed --seed 0
    python studies/operands.py summary

``run`` fits ``configs/abs.yaml --data=AdditionK`` once per seed (seed S sets
``--seed_everything`` and ``--data.seed``) into ``runs/operands/`` (ignored by git; a seed
with a record is skipped, and a seed with a finished fit is only tested, so runs spread
over sessions add up), then tests its last
checkpoint at 4 operands on 1-6, 10, 20 and 60 digits and at 2, 10, 20 and 40 operands on 6
and 60 digits (``SAMPLES`` random inputs each, and the worst-case set). ``summary`` writes
one table and its JSON, ``results/addition_k.{md,json}``: per operand count and length, the
accuracy of each seed on random inputs and on the worst cases.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from abc_lightning.reproduce.runner import run_logged

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "runs" / "operands"
OUT = ROOT / "results" / "addition_k"
SAMPLES = 1000
GRID = {4: [1, 2, 3, 4, 5, 6, 10, 20, 60], 2: [6, 60], 10: [6, 60], 20: [6, 60], 40: [6, 60]}
FIT = ["fit", "--config", "configs/abs.yaml", "--data=AdditionK"]
#: scheme -> (label, overrides on top of the ABS fit): the task's own windows and period (ABS),
#: NoPE under the same windows, and FIRE with no windows on the same scratchpad. ``run
#: --scheme`` picks one; each keeps its runs in a folder of its own (ABS's: the work folder).
SCHEMES = {"abs": ("ABS", []),
           "nope": ("NoPE + windows", ["--model.positional=NoPE", "--model.position_index=null"]),
           "fire": ("FIRE, no windows", ["--bias=null", "--model.positional=FIRE", "--model.position_index=null"])}


#: said under a table that has other schemes' columns
SCHEMES_NOTE = (" Columns named after a scheme are the same fit under another scheme (`run --scheme nope` or "
                "`fire`): NoPE under the task's windows, without CPI; FIRE with no windows and no CPI, on the same "
                "scratchpad.")


def scheme_dir(work: Path, scheme: str) -> Path:
    return work if scheme == "abs" else work / scheme


def device() -> str:
    """Where this process's fits run: the CUDA device's name, or CPU."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "CPU"


def devices(work: Path, seed: int, tests: list[str]) -> dict[str, str]:
    """Where a seed's fit and tests ran, where not on the CPU (``seed<S>.device`` and
    ``test_<name>/device``, kept like the times): ``{"fit": …, "60x60": …}``."""
    kept = {"fit": work / f"seed{seed}.device",
            **{name: work / f"seed{seed}" / f"test_{name}" / "device" for name in tests}}
    return {stage: path.read_text().strip() for stage, path in kept.items() if path.exists()}


def on_gpu(record: dict) -> str:
    """' (fit, test 60x60 on an <GPU>)' for a record with stages off the CPU, else ''."""
    where: dict[str, list[str]] = {}
    for stage, name in record.get("devices", {}).items():
        where.setdefault(name, []).append("fit" if stage == "fit" else f"test {stage}")
    return "".join(f" ({', '.join(stages)} on an {name})" for name, stages in where.items())


def scheme_records(work: Path) -> list[dict]:
    """Every scheme's records (``seed*.json``), each tagged with its scheme."""
    return [{"scheme": scheme, **json.loads(p.read_text())} for scheme in SCHEMES
            for p in scheme_dir(work, scheme).glob("seed*.json")]


def column(record: dict) -> str:
    """A table column's name: the seed, after the scheme where it is not ABS."""
    scheme = record.get("scheme", "abs")
    return (f"{SCHEMES[scheme][0]}, " if scheme != "abs" else "") + f"seed {record['seed']}"


def cli(args: list[str], log: Path) -> float:
    """Run ``python -m abc_lightning <args>`` from the checkout, its output to ``log``; seconds."""
    code, seconds = run_logged([sys.executable, "-m", "abc_lightning", *args], log, cwd=ROOT)
    if code:
        raise SystemExit(f"operands: {' '.join(args[:4])}… failed (exit {code}); see {log}")
    return seconds


def commit() -> str:
    """The checkout's short commit (``-dirty`` with uncommitted source), or ``ABC_LIGHTNING_COMMIT``'s
    outside a git checkout."""
    from abc_lightning.runs.provenance import short_commit

    return short_commit()


def finished_fit(folder: Path) -> Path | None:
    """The ``last.ckpt`` of the latest fit under ``folder`` that ran to its end (its
    ``val_accuracy.json`` says why it stopped), or None: a fit cut short keeps a
    ``last.ckpt`` of its last epoch, which must not pass for a trained model."""
    done = [info.parent / "checkpoints" / "last.ckpt" for info in folder.glob("abs/version_*/val_accuracy.json")
            if json.loads(info.read_text()).get("stopped")]
    done = [p for p in done if p.exists()]
    return max(done, key=lambda p: p.stat().st_mtime) if done else None


def seconds(path: Path) -> float | None:
    """A time kept beside a run (``seed<S>.train_seconds``, ``test_<name>/seconds``), so a
    record written in a later call still has it; None where it was not kept."""
    return float(path.read_text()) if path.exists() else None


def remark(work: Path, seed: int) -> str:
    """A remark kept by hand beside a seed's runs (``seed<S>.note``: what ran beside it), or ''."""
    path = work / f"seed{seed}.note"
    return path.read_text().strip() if path.exists() else ""


def kept_record(folder: Path, scheme: str, tested: dict[str, list[dict] | None]) -> dict | None:
    """A seed whose fit finished and whose tests did not all (``tested``: each test's rows,
    None where it has not run): the tests it has, marked partial; None where it has a record,
    no finished fit or no test yet."""
    seed, work = int(folder.name.removeprefix("seed")), folder.parent
    if (work / f"seed{seed}.json").exists() or finished_fit(folder) is None:
        return None
    rows = [row for done in tested.values() for row in done or []]
    missing = [name for name, done in tested.items() if done is None]
    if not rows:
        return None
    info = json.loads(max(folder.glob("abs/version_*/run_info.json")).read_text())
    tests = [seconds(p) for p in folder.glob("test_*/seconds")]
    where = devices(work, seed, list(tested))
    made = info["git_commit"] or "unknown"
    return {"scheme": scheme, "seed": seed, "rows": rows, "train_seconds": seconds(work / f"seed{seed}.train_seconds"),
            "test_seconds": round(sum(t for t in tests if t), 1) if tests else None, **({"devices": where} if where else {}),
            "commit": made[:7] + ("-dirty" if made.endswith("-dirty") else ""), "threads": info["torch_threads"],
            "note": "; ".join(filter(None, [remark(work, seed), f"partial: not yet tested at {', '.join(missing)} "
                                                          "(`run` finishes it)"]))}


def test_rows(folder: Path, name: str, tag) -> list[dict] | None:
    """The rows of a seed's finished test ``name`` (its latest ``test_<name>/`` table), each
    with ``tag(row)``'s keys added, or None where that test has not finished."""
    found = sorted((folder / f"test_{name}").glob("**/test_accuracy.json"), key=lambda p: p.stat().st_mtime)
    return [{**tag(row), **row} for row in json.loads(found[-1].read_text())["rows"]] if found else None


def tested(folder: Path, k: int) -> list[dict] | None:
    """The rows of a finished test at ``k`` operands (``test_k<k>/``), tagged, or None."""
    return test_rows(folder, f"k{k}", lambda row: {"operands": k})


def keep_device(path: Path) -> None:
    """Where a fit or test just ran, kept in ``path`` beside its time when it is not the CPU."""
    if (name := device()) != "CPU":
        path.write_text(name)


def run_seed(seed: int, scheme: str = "abs") -> None:
    work = scheme_dir(WORK, scheme)
    record_path = work / f"seed{seed}.json"
    if record_path.exists():
        print(f"{scheme} seed {seed}: done before, skipped")
        return
    folder = work / f"seed{seed}"
    seeds = [f"--seed_everything={seed}", f"--data.seed={seed}"]
    fit = [*FIT, *SCHEMES[scheme][1]]
    save = [f"--trainer.logger.init_args.save_dir={folder}"]
    timed = work / f"seed{seed}.train_seconds"  # kept beside the fit, for a record written in a later call
    if not finished_fit(folder):  # a finished fit is kept
        timed.write_text(str(round(cli([*fit, *seeds, *save], work / f"seed{seed}.fit.log"), 1)))
        keep_device(work / f"seed{seed}.device")
    train_s = seconds(timed)
    ckpt = finished_fit(folder)
    rows, test_s, tests = [], 0.0, [f"k{k}" for k in GRID]
    for k, lengths in GRID.items():
        test_dir = folder / f"test_k{k}"
        if tested(folder, k) is None:  # a finished test is kept, so runs over calls add up
            took = cli(["test", "--ckpt_path", str(ckpt), f"--data.operands={k}", f"--data.test_lengths={lengths}",
                        f"--data.test_samples={SAMPLES}", f"--trainer.logger.init_args.save_dir={test_dir}"],
                       work / f"seed{seed}.k{k}.log")
            (test_dir / "seconds").write_text(str(round(took, 1)))
            keep_device(test_dir / "device")
        test_s += seconds(test_dir / "seconds") or 0.0
        rows += tested(folder, k)
    where = devices(work, seed, tests)
    record = {"seed": seed, "command": " ".join(["python -m abc_lightning", *fit, *seeds]), "rows": rows,
              "train_seconds": None if train_s is None else round(train_s, 1), "test_seconds": round(test_s, 1),
              "commit": commit(), "threads": os.environ.get("OMP_NUM_THREADS", "all"),
              **({"devices": where} if where else {})}
    record_path.write_text(json.dumps(record, indent=2))
    print(f"{scheme} seed {seed}: recorded in {record_path}")


SPEED_SHAPES = [(4, 6), (40, 6), (4, 60), (40, 60)]  # (operands, digits)


def speed(seed: int, samples: int = 100, ckpt: str | None = None) -> None:
    """Cached decoding time per answer token of seed ``seed``'s model (or the checkpoint
    ``ckpt``), at shapes whose answers run from 80 to 5,120 tokens: flat when the windows
    keep each step's work constant."""
    import torch

    from abc_lightning import load

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    ckpt = ckpt or finished_fit(WORK / f"seed{seed}")
    trained = load(ckpt)
    rows = []
    for k, length in SPEED_SHAPES:
        data = type(trained.data)(seed=seed, operands=k).length_set(length, samples, salt=13).data
        src, steps = data.src.long(), data.tgt_out.shape[1]
        with torch.inference_mode():
            trained.module.model.generate(src[:2], steps)  # warm up
            start = time.perf_counter()
            out = trained.module.model.generate(src, steps)
            seconds = time.perf_counter() - start
        rows.append({"operands": k, "length": length, "answer_tokens": steps, "samples": samples,
                     "ms_per_token": round(1000 * seconds / steps, 2),
                     "correct": int((out == data.tgt_out.long()).all(1).sum())})
        print(rows[-1])
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "speed.json").write_text(json.dumps({"seed": seed, "commit": commit(), "rows": rows,
                                                  "threads": os.environ.get("OMP_NUM_THREADS", "all")}, indent=2))


def fmt(x) -> str:
    return "–" if x is None else f"{x:.2f}".rstrip("0").rstrip(".")


def write_summary(out: Path, records: list[dict], title: str, intro: str, head: list[str], key_of, order,
                  cells, where, speed: str) -> None:
    """One benchmark table and its JSON (``out.md``, ``out.json``): a row per test shape
    (``key_of(row)``, sorted by ``order``; ``cells(key)`` its first columns, named ``head``),
    a column per record (scheme and seed) on random inputs, then one per record on the worst
    cases; the worst-case families below 100% (``where(row)`` names the shape), each
    record's times and devices, and ``speed`` (a paragraph, or '')."""
    from abc_lightning import markdown

    by_record = [{key_of(row): row for row in r["rows"]} for r in records]
    keys = sorted({key for rows in by_record for key in rows}, key=order)
    body = [[*cells(key), *(fmt(rows.get(key, {}).get("accuracy")) for rows in by_record),
             *(fmt(rows.get(key, {}).get("worst")) for rows in by_record)] for key in keys]
    lines = [title, "", intro + (SCHEMES_NOTE if len({r["scheme"] for r in records}) > 1 else ""), "",
             *markdown.table([*head, *(column(r) for r in records), *(f"worst, {column(r)}" for r in records)], body)]

    def fails(row):
        return [f"{name} {fmt(v)}%" for name, v in row.get("worst_families", {}).items() if v < 100]

    failing = []
    for r in records:
        bad = [row for row in r["rows"] if fails(row)]
        if bad and len(bad) == len(r["rows"]) and len(bad) > 3:  # a model that fails everywhere: one line
            failing.append(f"- {column(r)}: below 100% at every shape tested ({len(bad)}), e.g. "
                           f"{where(bad[0])}: {', '.join(fails(bad[0]))}")
        else:
            failing += [f"- {column(r)}, {where(row)}: " + ", ".join(fails(row)) for row in bad]
    if failing:
        lines += ["", "Worst-case families below 100%:", "", *failing]
    times = ", ".join(f"{column(r)} " + (f"{r['train_seconds']:.0f} s train, " if r["train_seconds"] else "")
                      + (f"{r['test_seconds']:.0f} s tests" if r["test_seconds"] else "tests untimed")
                      + on_gpu(r) + (f" ({r['note']})" if r.get("note") else "") for r in records)
    lines += ["", f"Run time: {times}."] + (["", speed] if speed else [])
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"records": records}, indent=2))
    print("\n".join(lines))


def summary() -> None:
    records = scheme_records(WORK)
    records += [r for scheme in SCHEMES for folder in scheme_dir(WORK, scheme).glob("seed*/")
                if (r := kept_record(folder, scheme, {f"k{k}": tested(folder, k) for k in GRID})) is not None]
    records.sort(key=lambda r: (list(SCHEMES).index(r["scheme"]), r["seed"]))
    if not records:
        raise SystemExit(f"operands: no records in {WORK}; run `python studies/operands.py run` first")
    seeds = [r["seed"] for r in records if r["scheme"] == "abs"]
    intro = (
        f"`configs/abs.yaml --data=AdditionK` (rows of running sums, each digit beside its carry; windows from "
        f"the task's dependencies; CPI period 6), 1,000 steps, one fit per seed. Trained on 2, 3 and 4 operands "
        f"from the pool [0, 2^20] (up to 7 digits). Each cell: accuracy (%) of exact match on {SAMPLES} random "
        f"inputs of that many operands, each of exactly that many digits (all of them below 1,000), then on the "
        f"worst-case set (all nines, 9…9 + 1, a sum of nines then 1, carry chains, mixed lengths, repeated "
        f"digits). Commits: {', '.join(sorted({r['commit'] for r in records}))}; torch threads per run: "
        f"{', '.join(sorted({str(r['threads']) for r in records}))}. Remake: "
        f"`OMP_NUM_THREADS=1 python studies/operands.py run --seeds {' '.join(map(str, seeds))}`, then "
        f"`python studies/operands.py summary`. No ABC row: ABC extends lines of a fixed offset, and a "
        f"token's cell in the row above sits 2R answer steps back, R growing with the operands' length, so no "
        f"line of the training frame reaches it at 60 digits.")
    speed, speed_path = "", WORK / "speed.json"
    if speed_path.exists():
        sp = json.loads(speed_path.read_text())
        speed = (f"**Decoding time per answer token** (seed {sp['seed']}'s model, a batch of "
                 f"{sp['rows'][0]['samples']} inputs, cached decoding, {sp['threads']} torch thread(s), "
                 f"commit {sp['commit']}; `python studies/operands.py speed`): "
                 + "; ".join(f"{r['operands']} operands of {r['length']} digits ({r['answer_tokens']} tokens) "
                             f"{r['ms_per_token']} ms" for r in sp["rows"]) + ".")
    write_summary(OUT, records,
                  "## k-operand addition under ABS: trained on 2-4 operands, tested at up to 40 operands and 60 digits",
                  intro, ["operands", "digits"], lambda row: (row["operands"], row["length"]), lambda key: key,
                  lambda key: [str(key[0]), str(key[1])],
                  lambda row: f"{row['operands']} operands, {row['length']} digits", speed)


def command_line(doc: str, table: str, work: Path, run_seed, speed, summary, tests: list[str] | None = None) -> None:
    """``run``, ``speed`` and ``summary``, the subcommands of a benchmark that fits one model
    per seed (this one, ``multiplication.py``) and writes ``results/<table>.{md,json}``.
    Where the benchmark names its ``tests``, ``run --tests`` runs only those (its record is
    written once every test has run; ``summary`` shows a seed's finished tests meanwhile)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    run = sub.add_parser("run", help="fit and test each seed (finished seeds are skipped)")
    run.add_argument("--seeds", type=int, nargs="+", default=[0])
    run.add_argument("--scheme", choices=list(SCHEMES), default="abs",
                     help="ABS (the task's windows and period), NoPE under the same windows, or FIRE without windows")
    if tests:
        run.add_argument("--tests", nargs="+", choices=tests, default=tests,
                         help="which tests to run after the fit (default: all)")
    sub.add_parser("summary", help=f"write results/{table}.{{md,json}} from the records")
    timing = sub.add_parser("speed", help="decoding time per answer token of one seed's model")
    timing.add_argument("--seed", type=int, default=0)
    timing.add_argument("--ckpt", help="time this checkpoint (a task's model) instead of the seed's fit here")
    args = parser.parse_args()
    if args.what == "speed":
        speed(args.seed, ckpt=args.ckpt)
    elif args.what == "run":
        scheme_dir(work, args.scheme).mkdir(parents=True, exist_ok=True)
        for seed in args.seeds:
            if tests:
                run_seed(seed, args.tests, scheme=args.scheme)
            else:
                run_seed(seed, scheme=args.scheme)
    else:
        summary()


def main() -> None:
    command_line(__doc__, "addition_k", WORK, run_seed, speed, summary)


if __name__ == "__main__":
    main()
