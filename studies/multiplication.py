"""N×M multiplication (``multiplication``) under ABS: trained on both operands of up to 7
digits, tested with both operands longer, equal and unequal.

    OMP_NUM_THREADS=1 python studies/multiplication.py run --seeds 0 1 2
    OMP_NUM_THREADS=1 python studies/multiplication.py run --seeds 3 --tests square
    OMP_NUM_THREADS=1 python studies/multiplication.py speed --seed 0
    python studies/multiplication.py summary

``run`` fits ``configs/abs_multiplication.yaml`` (``configs/abs.yaml --data=Multiplication``
with 2,000 steps in batches of 32, validation at 6 and 10 digits) once per seed (seed S sets
``--seed_everything`` and ``--data.seed``) into ``runs/multiplication/`` (ignored by git; a seed with a
record is skipped, a seed with a finished fit only tested), then tests its last checkpoint
at N = M digits (:data:`SQUARE`) and at the unequal shapes of :data:`SHAPES`, on
:data:`SAMPLES` random inputs each and the worst-case set. ``summary`` writes
``results/multiplication.{md,json}``: per shape, the accuracy of each seed on random inputs
and on the worst cases. ``speed`` times cached decoding per answer token at 20×20 and 60×60.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from operands import (SCHEMES, cli, command_line, commit, devices, finished_fit, keep_device, kept_record, remark,
                      scheme_dir, scheme_records, seconds, test_rows, write_summary)

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "runs" / "multiplication"
OUT = ROOT / "results" / "multiplication"
SAMPLES = 1000
SQUARE = [1, 2, 3, 4, 5, 6, 10, 20]
#: (N, M) tested apart: the moonshot 60×60 on fewer inputs (23,250 answer tokens each), and
#: the unequal shapes
SHAPES = {(60, 60): 200, (60, 6): SAMPLES, (6, 60): SAMPLES, (20, 60): SAMPLES}
FIT = ["fit", "--config", "configs/abs_multiplication.yaml"]


TESTS = [("square", SQUARE, None, SAMPLES)] + [(f"{n}x{m}", [n], m, k) for (n, m), k in SHAPES.items()]


def tested_rows(folder: Path, name: str, second: int | None) -> list[dict] | None:
    """The rows of a finished test of this seed (``test_<name>/``), tagged with the
    multiplier's length, or None where it has not finished."""
    return test_rows(folder, name, lambda row: {"second": row["length"] if second is None else second})


def run_seed(seed: int, only: list[str] | None = None, scheme: str = "abs") -> None:
    work = scheme_dir(WORK, scheme)
    record_path = work / f"seed{seed}.json"
    if record_path.exists():
        print(f"{scheme} seed {seed}: done before, skipped")
        return
    folder = work / f"seed{seed}"
    seeds = [f"--seed_everything={seed}", f"--data.seed={seed}"]
    fit = [*FIT, *SCHEMES[scheme][1]]
    timed = work / f"seed{seed}.train_seconds"  # kept beside the fit, for a record written in a later call
    if not finished_fit(folder):  # a finished fit is kept
        timed.write_text(str(round(cli([*fit, *seeds, f"--trainer.logger.init_args.save_dir={folder}"],
                                       work / f"seed{seed}.fit.log"), 1)))
        keep_device(work / f"seed{seed}.device")
    train_s = seconds(timed)
    ckpt = finished_fit(folder)
    rows, test_s, skipped = [], 0.0, []
    for name, lengths, second, samples in TESTS:
        done = tested_rows(folder, name, second)  # a finished test is kept, so runs over sessions add up
        if done is None and only is not None and name not in only:
            skipped.append(name)
            continue
        if done is None:
            extra = [] if second is None else [f"--data.second_length={second}"]
            took = cli(["test", "--ckpt_path", str(ckpt), f"--data.test_lengths={lengths}", *extra,
                        f"--data.test_samples={samples}",
                        f"--trainer.logger.init_args.save_dir={folder / f'test_{name}'}"],
                       work / f"seed{seed}.{name}.log")
            (folder / f"test_{name}" / "seconds").write_text(str(round(took, 1)))
            keep_device(folder / f"test_{name}" / "device")
            done = tested_rows(folder, name, second)
        test_s += seconds(folder / f"test_{name}" / "seconds") or 0.0
        rows += done
    if skipped:
        print(f"seed {seed}: not yet tested at {', '.join(skipped)} (--tests); no record yet, `summary` shows the rest")
        return
    where, note = devices(work, seed, [name for name, *_ in TESTS]), remark(work, seed)
    record = {"seed": seed, "command": " ".join(["python -m abc_lightning", *fit, *seeds]), "rows": rows,
              "train_seconds": train_s, "test_seconds": round(test_s, 1),
              "commit": commit(), "threads": os.environ.get("OMP_NUM_THREADS", "all"),
              **({"devices": where} if where else {}), **({"note": note} if note else {})}
    record_path.write_text(json.dumps(record, indent=2))
    print(f"{scheme} seed {seed}: recorded in {record_path}")


def partial_record(folder: Path, scheme: str) -> dict | None:
    """A seed whose fit finished and whose tests did not all: the tests it has, marked."""
    return kept_record(folder, scheme, {name: tested_rows(folder, name, second) for name, _, second, _ in TESTS})


def speed(seed: int, samples: int = 20, ckpt: str | None = None) -> None:
    """Cached decoding time per answer token at 6×6, 20×20 and 60×60 (408 to 23,250 tokens)
    of seed ``seed``'s model (or the checkpoint ``ckpt``): flat when the windows keep each
    step's work constant."""
    import torch

    from abc_lightning import load

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    ckpt = ckpt or finished_fit(WORK / f"seed{seed}")
    trained = load(ckpt)
    rows = []
    for length in (6, 20, 60):
        data = type(trained.data)(seed=seed).length_set(length, samples, salt=13).data
        src, steps = data.src.long(), data.tgt_out.shape[1]
        with torch.inference_mode():
            if not rows:  # warm up once, on the smallest answer (a product is decoded whole: its rows fix its frame)
                trained.module.model.generate(src[:2], steps)
            start = time.perf_counter()
            out = trained.module.model.generate(src, steps)
            seconds = time.perf_counter() - start
        rows.append({"length": length, "answer_tokens": steps, "samples": samples,
                     "ms_per_token": round(1000 * seconds / steps, 2),
                     "correct": int((out == data.tgt_out.long()).all(1).sum())})
        print(rows[-1])
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "speed.json").write_text(json.dumps({"seed": seed, "commit": commit(), "rows": rows,
                                                  "threads": os.environ.get("OMP_NUM_THREADS", "all")}, indent=2))


def summary() -> None:
    records = scheme_records(WORK)
    records += [r for scheme in SCHEMES for folder in scheme_dir(WORK, scheme).glob("seed*/")
                if (r := partial_record(folder, scheme)) is not None]
    records.sort(key=lambda r: (list(SCHEMES).index(r["scheme"]), r["seed"]))
    if not records:
        raise SystemExit(f"multiplication: no records in {WORK}; run `python studies/multiplication.py run` first")
    seeds = [r["seed"] for r in records if r["scheme"] == "abs"]
    intro = (
        "`configs/abs_multiplication.yaml` (`configs/abs.yaml --data=Multiplication`: rows of running sums, one per multiplier digit, each "
        "column written as its multiplier digit, its digit and its carry; windows from the task's dependencies; "
        "CPI period 6; 2,000 steps in batches of 32), one fit per seed, both operands drawn from the pool [0, 2^20] (up to 7 "
        f"digits). Each cell: accuracy (%) of exact match on random inputs of exactly N × M digits ({SAMPLES} "
        f"each, {SHAPES[(60, 60)]} at 60×60; all of them below 1,000 inputs), then on the worst-case set (9…9 × "
        "9…9, powers of ten, 9…9 × 1…1 and × 10…01, repeated digits, mixed lengths). Commits: "
        f"{', '.join(sorted({r['commit'] for r in records}))}; torch threads per run: "
        f"{', '.join(sorted({str(r['threads']) for r in records}))}. Remake: "
        f"`OMP_NUM_THREADS=1 python studies/multiplication.py run --seeds {' '.join(map(str, seeds))}`, then "
        "`python studies/multiplication.py summary`. No ABC row: ABC extends lines of a fixed offset, "
        "and a token's cell in the row above sits 3R answer steps back, R growing with the operands' length, "
        "so no line of the 7-digit training frame reaches it at 20 digits.")
    speed, speed_path = "", WORK / "speed.json"
    if speed_path.exists():
        sp = json.loads(speed_path.read_text())
        speed = (f"**Decoding time per answer token** (seed {sp['seed']}'s model, a batch of "
                 f"{sp['rows'][0]['samples']} inputs, cached decoding, {sp['threads']} torch thread(s), "
                 f"commit {sp['commit']}; `python studies/multiplication.py speed`): "
                 + "; ".join(f"{r['length']}×{r['length']} ({r['answer_tokens']} tokens) {r['ms_per_token']} ms"
                             for r in sp["rows"]) + ".")
    write_summary(OUT, records,
                  "## N×M multiplication under ABS: trained on operands of up to 7 digits, tested at up to 60×60",
                  intro, ["N × M"], lambda row: (row["length"], row["second"]),
                  lambda k: (k[0] != k[1], k[0] * k[1], k), lambda key: [f"{key[0]} × {key[1]}"],
                  lambda row: f"{row['length']} × {row['second']}", speed)


def main() -> None:
    command_line(__doc__, "multiplication", WORK, run_seed, speed, summary, [name for name, *_ in TESTS])


if __name__ == "__main__":
    main()
