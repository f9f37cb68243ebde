"""The training-recipe search: which short schedule keeps Table 1's ABS verdicts (and N×2's, N×3's,
ABC's in Table 3, and the baselines').

    OMP_NUM_THREADS=1 python studies/recipe.py run --candidates cos1k --cells abs_addition --seeds 0 1 2
    python studies/recipe.py summary

``run`` trains and tests each (candidate, cell, seed) through ``reproduce table1`` (``beyond``
for that table's cells, such as ``abs_nx2``; ``table3`` for the ``abc_*`` candidates: the
cell's own command plus the candidate's overrides), two at a time with one torch thread
each, into ``runs/recipe/<candidate>/`` (ignored by git; finished runs are skipped, so a
search spread over sessions adds up). ``summary`` reads every finished run there and writes
one table and its JSON, ``results/recipe_search.{md,json}`` (rows of the previous summary
that have no records here are kept as they were): per candidate, cell and CPU, the steps
trained and the lowest accuracy over the seeds at 1-5 digits (short inputs), 6-20, 60,
599-601 and on every worst case, with the command that remakes each run.

A candidate is picked on seeds 0-2 only; seeds 5-9 are its held-out report. Each ABS candidate
is a set of overrides on ``configs/abs.yaml``, which now holds the chosen recipe
(``cos1k_replay_encdrop05``); the others turn off what they did not have (its ErrorReplay, its
encoder attention drop), so each trains what it trained when it was recorded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from abc_lightning.reproduce.runner import in_parallel, run_logged

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "runs" / "recipe"
OUT = ROOT / "results" / "recipe_search"
SHORT = [1, 2, 3, 4, 5]
TEST_LENGTHS = [*SHORT, 6, 10, 15, 20, 60]

#: candidate -> (what it is, overrides on top of each cell's own command). One 'epoch' is 200 steps.
#: Candidates named abc_* are ABC's (Table 3's cells, ``reproduce table3``), base_* and base3_* the
#: baselines' of Table 1 and Table 3; the rest ABS's (Table 1's).
# calibrate after 5 validations at 99%, retrain from fresh weights without dropout at 2e-3 on a cosine
# for 0.9 of the interpolation's steps, a tenth of the rows carry-rich
#: the encoder attention drop that configs/abs.yaml has held since cos1k_replay_encdrop05 was chosen
ENCODER_DROP = "--model.encoder_attention_drop=0.5"
INTERP5_FRESH09_RICH = ["--bias.phases.patience=5", "--bias.retraining.budget=0.9", "--bias.retraining.lr=0.002",
                        "--bias.retraining.dropout=keep", "--data.carry_rich=0.1"]

CANDIDATES = {
    "abc_patience": ("ABC, the project preset: retraining ends after 30 validations at 99% (Table 3 at 0d32ca6)", []),
    "abc_budget1": ("ABC, retraining for as many steps as the interpolation took, rate on a cosine to 0",
                    ["--bias.retraining.budget=1.0"]),
    "abc_finetune1": ("ABC, fine-tuning the interpolating model (no re-initialization) for as many steps as the "
                      "interpolation took, rate on a cosine to 0",
                      ["--bias.retraining.budget=1.0", "--bias.retraining.reinitialize=false"]),
    "abc_finetune1_nodrop": ("ABC, fine-tuning as abc_finetune1, without the retraining's dropout (the model's 0)",
                             ["--bias.retraining.budget=1.0", "--bias.retraining.reinitialize=false",
                              "--bias.retraining.dropout=keep"]),
    "abc_finetune05_nodrop": ("ABC, fine-tuning the interpolating model without dropout for half as many steps as "
                              "the interpolation took, rate on a cosine to 0",
                              ["--bias.retraining.budget=0.5", "--bias.retraining.reinitialize=false",
                               "--bias.retraining.dropout=keep"]),
    "abc_finetune05_nodrop_rich": ("ABC, as abc_finetune05_nodrop, with a tenth of the training rows drawn "
                                   "carry-rich (all within the training lengths)",
                                   ["--bias.retraining.budget=0.5", "--bias.retraining.reinitialize=false",
                                    "--bias.retraining.dropout=keep", "--data.carry_rich=0.1"]),
    "abc_finetune05_nodrop_k087": ("ABC, as abc_finetune05_nodrop, with the paper's κ_self 0.87 for the decoder's "
                                   "lines (the project's 0.3 keeps lines that reach 2-4 answer positions back)",
                                   ["--bias.retraining.budget=0.5", "--bias.retraining.reinitialize=false",
                                    "--bias.retraining.dropout=keep", "--bias.lines.kappa_self=0.87"]),
    "abc_fresh06_lr2e3_nodrop": ("ABC, retraining from fresh weights without dropout at a 2e-3 rate on a cosine to 0, "
                                 "for 0.6 times the interpolation's steps",
                                 ["--bias.retraining.budget=0.6", "--bias.retraining.lr=0.002",
                                  "--bias.retraining.dropout=keep"]),
    "abc_fresh06_lr2e3": ("ABC, as abc_fresh06_lr2e3_nodrop, with the preset's retraining dropout 0.1",
                          ["--bias.retraining.budget=0.6", "--bias.retraining.lr=0.002"]),
    "abc_fresh09_lr2e3_nodrop": ("ABC, retraining from fresh weights without dropout at a 2e-3 rate on a cosine to 0, "
                                 "for 0.9 times the interpolation's steps",
                                 ["--bias.retraining.budget=0.9", "--bias.retraining.lr=0.002",
                                  "--bias.retraining.dropout=keep"]),
    "abc_fresh09_lr2e3_nodrop_rich": ("ABC, as abc_fresh09_lr2e3_nodrop, with a tenth of the training rows drawn "
                                      "carry-rich (1-7 digits, mostly 9s; both phases)",
                                      ["--bias.retraining.budget=0.9", "--bias.retraining.lr=0.002",
                                       "--bias.retraining.dropout=keep", "--data.carry_rich=0.1"]),
    "abc_interp5_fresh09_rich": ("ABC, as abc_fresh09_lr2e3_nodrop_rich, calibrating once the interpolation has "
                                 "held 99% for 5 validations (not 2)",
                                 INTERP5_FRESH09_RICH),
    "abc_interp5_lr2e3_fresh09_rich": ("ABC, as abc_interp5_fresh09_rich, interpolating at a 2e-3 rate (100 warmup "
                                       "steps, then constant) instead of 1e-3: the project preset and "
                                       "configs/abc.yaml since it was chosen",
                                       ["--model.lr=0.002", "--model.warmup_steps=100", *INTERP5_FRESH09_RICH]),
    "const8k": ("Adam 1e-3 constant, 8,000 steps (configs/abs.yaml of Table 1 at 0d32ca6)",
                ["--trainer.max_epochs=40", "--model.lr=0.001", "--model.warmup_steps=0",
                 "--model.lr_schedule=constant"]),
    "cos1k": ("Adam 2e-3 peak, 100 warmup steps, cosine to 0, 1,000 steps",
              ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100", "--model.lr_schedule=cosine"]),
    "cos1k_rich": ("Adam 2e-3 peak, 100 warmup steps, cosine to 0, 1,000 steps; a tenth of the training rows "
                   "drawn carry-rich (mostly 9s, within the training lengths)",
                   ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100",
                    "--model.lr_schedule=cosine", "--data.carry_rich=0.1"]),
    "cos1k_extremes": ("Adam 2e-3 peak, 100 warmup steps, cosine to 0, 1,000 steps; a tenth of the training rows "
                       "drawn with a third of their digits 9s and a third 0s (within the training lengths)",
                       ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100",
                        "--model.lr_schedule=cosine", "--data.carry_rich=0.1", "--data.rich_digits=extremes"]),
    "cos1k_replay": ("Adam 2e-3 peak, 100 warmup steps, cosine to 0, 1,000 steps; the rows a step got wrong "
                     "(teacher forced) come back in later batches, up to 16 a batch, 8 times each (ErrorReplay)",
                     ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100",
                      "--model.lr_schedule=cosine"]),
    "cos1k_replay_extremes": ("cos1k_replay, with a tenth of the training rows drawn with a third of their digits 9s "
                              "and a third 0s (cos1k_extremes)",
                              ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100",
                               "--model.lr_schedule=cosine", "--data.carry_rich=0.1", "--data.rich_digits=extremes"]),
    "cos1k_replay_encdrop05": ("cos1k_replay, with each training input's encoder self-attention output left out "
                               "of the encoder's residual stream with probability 0.5 (the decoder learns to work "
                               "without the encoder's average over the input)",
                               ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100",
                                "--model.lr_schedule=cosine", ENCODER_DROP]),
    "cos1k_lr1e3": ("Adam 1e-3 peak, 100 warmup steps, cosine to 0, 1,000 steps",
                    ["--trainer.max_epochs=5", "--model.lr=0.001", "--model.warmup_steps=100",
                     "--model.lr_schedule=cosine"]),
    "cos1k_b256": ("Adam 2e-3 peak, 100 warmup, cosine to 0, 1,000 steps of batch 256",
                   ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100",
                    "--model.lr_schedule=cosine", "--data.batch_size=256"]),
    "cos2k": ("Adam 2e-3 peak, 100 warmup steps, cosine to 0, 2,000 steps",
              ["--trainer.max_epochs=10", "--model.lr=0.002", "--model.warmup_steps=100", "--model.lr_schedule=cosine"]),
    "cos4k": ("Adam 2e-3 peak, 100 warmup steps, cosine to 0, 4,000 steps",
              ["--trainer.max_epochs=20", "--model.lr=0.002", "--model.warmup_steps=100", "--model.lr_schedule=cosine"]),
    "lin1k": ("Adam 2e-3 peak, 100 warmup steps, linear to 0, 1,000 steps",
              ["--trainer.max_epochs=5", "--model.lr=0.002", "--model.warmup_steps=100", "--model.lr_schedule=linear"]),
    # the baselines (configs/baseline.yaml: a constant 1e-3 until they hold 100% for 3 validations,
    # up to 8,000 steps) under the rate that ABC's interpolation trains at
    "base_warm2e3": ("Table 1's baselines (trained until they interpolate) at Adam 2e-3 after 100 warmup "
                     "steps, then constant (ABC's interpolation), instead of a constant 1e-3",
                     ["--model.lr=0.002", "--model.warmup_steps=100"]),
    "base3_warm2e3": ("Table 3's baselines, as base_warm2e3", ["--model.lr=0.002", "--model.warmup_steps=100"]),
}
#: ErrorReplay is part of configs/abs.yaml (its last callback); the ABS candidates without it turn it off
NO_REPLAY = "--trainer.callbacks.init_args.rows=0"
REPLAYS = {"cos1k_replay", "cos1k_replay_extremes", "cos1k_replay_encdrop05"}
#: so is its encoder attention drop (ENCODER_DROP); the ABS candidates recorded before it turn it off
NO_ENCODER_DROP = "--model.encoder_attention_drop=0"


def _abs_flags(name: str, flags: list[str]) -> list[str]:
    """A candidate's overrides, with what ``configs/abs.yaml`` now has and the candidate had not turned off."""
    if name.startswith(("abc_", "base")):
        return flags  # their own configs: configs/abc.yaml, configs/baseline.yaml
    return [*flags, *([] if name in REPLAYS else [NO_REPLAY]),
            *([] if ENCODER_DROP in flags else [NO_ENCODER_DROP])]


CANDIDATES = {name: (what, _abs_flags(name, flags)) for name, (what, flags) in CANDIDATES.items()}

#: every run also tests 1-5 digits (all their inputs up to 10,000 samples)
COMMON = [f"--data.test_lengths={TEST_LENGTHS}".replace(" ", "")]


def table_of(candidate: str, cell: str) -> str:
    """The table whose cell it is: Table 3 for ABC's candidates and ``base3_`` (Table 3's
    baselines), the beyond table for its tasks' cells."""
    from abc_lightning.reproduce.cells import beyond_cells

    if candidate.startswith(("abc_", "base3_")):
        return "table3"
    return "beyond" if cell in {c.key for c in beyond_cells()} else "table1"


def record_path(candidate: str, cell: str, seed: int) -> Path:
    # Table 3's baseline cells are the baselines table's: reproduce writes their records there
    folder = "baselines" if candidate.startswith("base3_") else table_of(candidate, cell)
    return WORK / candidate / folder / (f"{cell}.json" if seed == 0 else f"{cell}.seed{seed}.json")


def run_one(candidate: str, cell: str, seed: int) -> str:
    if record_path(candidate, cell, seed).exists():
        return f"skip {candidate} {cell} seed {seed} (done)"
    cmd = [sys.executable, "-m", "abc_lightning", "reproduce", table_of(candidate, cell), "--results", str(WORK / candidate),
           "--jobs", "2", "--seeds", str(seed), "--only", cell, "--", *CANDIDATES[candidate][1], *COMMON]
    log = WORK / candidate / f"{cell}.seed{seed}.driver.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    rc, _ = run_logged(cmd, log, {"OMP_NUM_THREADS": "1"}, cwd=ROOT)
    return f"{'done' if rc == 0 else f'FAILED ({rc})'} {candidate} {cell} seed {seed}"


def low(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def summarize(records: list[dict]) -> dict:
    """The lowest figures over a cell's seeds."""
    def rows(rec):
        return {r["length"]: r for r in rec["rows"]}
    each = [rows(r) for r in records]

    def lowest(lengths, key="accuracy"):
        return low([low([rs[n].get(key) for n in lengths if n in rs]) for rs in each])
    return {"seeds": sorted(r["seed"] for r in records), "steps": sorted(r["steps"] for r in records),
            "train_seconds": sorted(r["train_seconds"] for r in records),
            "short": lowest(SHORT), "6-20": lowest([6, 10, 15, 20]), "60": lowest([60]),
            "599-601": lowest([599, 600, 601]), "10000": lowest([10000]),
            "worst": lowest([*SHORT, 6, 10, 15, 20, 60, 599, 600, 601, 10000], "worst"),
            "exact": sum(all(r["accuracy"] == 100 and r.get("worst", 100) == 100 for r in rec["rows"])
                         for rec in records),
            "phases": {r["seed"]: r["phases"] for r in records if "phases" in r},
            "at60_99": sum((rows(r).get(60, {}).get("accuracy") or 0) >= 99 for r in records),
            "retrain_over_interpolate": max((r["phases"]["retrain"] / r["phases"]["interpolate"] for r in records
                                             if r.get("phases")), default=None),
            "per_seed_60_600": {r["seed"]: [rows(r).get(60, {}).get("accuracy"), rows(r).get(600, {}).get("accuracy")]
                                for r in records},
            "commits": sorted({r.get("commit", "unknown") for r in records}),
            "command": records[0]["command"]}


#: the summary's seed groups, in the order its rows show them
SEED_SETS = {"picked on": [0, 1, 2], "other": [3, 4], "held out": [5, 6, 7, 8, 9]}


def group_order(item: tuple[str, dict]) -> tuple[int, str]:
    """A group ``"<kind>"`` or ``"<kind>, <CPU>"`` sorts by its kind's place in :data:`SEED_SETS`;
    rows of earlier summaries, which do not name their CPU, come before those that do."""
    kinds = list(SEED_SETS)
    kind = item[0].partition(", ")[0]
    return (kinds.index(kind) if kind in kinds else len(kinds)), item[0]


def fmt(x) -> str:
    return "–" if x is None else f"{x:.2f}".rstrip("0").rstrip(".")


def summary(seed_sets: dict[str, list[int]] = SEED_SETS) -> None:
    table = {}
    # rows of the previous summary whose records are not under runs/recipe (made in an earlier
    # session or on another machine) are kept as they were; a (candidate, seeds, cell) row with
    # records here is remade from them
    previous_json = OUT.with_suffix(".json")
    previous = json.loads(previous_json.read_text())["results"] if previous_json.exists() else {}
    for cand, groups in previous.items():
        for group, cells in groups.items():
            table.setdefault(cand, {}).setdefault(group, {}).update(cells)
    for cand_dir in sorted(p for p in WORK.glob("*") if p.is_dir() and p.name in CANDIDATES):
        for group, seeds in seed_sets.items():
            by_cell: dict[tuple[str, str], list[dict]] = {}  # (group and CPU, cell) -> records
            for path in sorted(cand_dir.glob("*/*.json")):  # table1/, table3/, baselines/ or beyond/
                rec = json.loads(path.read_text())
                if rec["seed"] in seeds:  # a seed trains another model on another CPU: one row per CPU
                    by_cell.setdefault((f"{group}, {rec.get('cpu', 'CPU not recorded')}", path.name.split(".")[0]),
                                       []).append(rec)
            for (where, cell), recs in sorted(by_cell.items()):
                table.setdefault(cand_dir.name, {}).setdefault(where, {})[cell] = summarize(recs)
    lines = ["## Recipe search: short schedules against Table 1's ABS verdicts (and N×2's, N×3's)", "",
             "Each row: one candidate on one cell, the lowest figure over the seeds run (accuracy %, "
             "random inputs; *10000*: the encoder-window cells only; *worst*: every worst-case set tested, "
             "1-10,000 digits). *exact*: seeds at 100% on every length and worst case tested. "
             "*retrain ÷ interpolate*: ABC's phase times, the largest over the seeds. One torch thread per run, "
             "two runs at a time. Picked on seeds 0-2; seeds 5-9 are held out. A row names the CPU its runs "
             "trained on (a seed trains another model on another CPU); rows without one were recorded before "
             "the summary named it (docs/results.md says where each search ran). Remake: "
             "`OMP_NUM_THREADS=1 python studies/recipe.py run --candidates <c> --cells <cell> --seeds <s>`, "
             "then `python studies/recipe.py summary`.", ""]
    table = {cand: {g: dict(sorted(cells.items())) for g, cells in sorted(groups.items(), key=group_order)}
             for cand, groups in sorted(table.items())}
    for cand, groups in table.items():
        lines += [f"### `{cand}`: {CANDIDATES[cand][0]}", "", "`" + " ".join(CANDIDATES[cand][1]) + "`", "",
                  "| seeds | cell | exact | ≥ 99 at 60 | steps | train s | retrain ÷ interpolate | 1-5 | 6-20 | 60 | "
                  "599-601 | 10000 | worst |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for group, cells in groups.items():
            for cell, s in cells.items():
                n = len(s["seeds"])
                kind, _, cpu = group.partition(", ")
                seeds = f"{kind} ({','.join(map(str, s['seeds']))}){', ' + cpu if cpu else ''}"
                lines.append(f"| {seeds} | {cell} | {s['exact']}/{n} | {s['at60_99']}/{n} | "
                             f"{'/'.join(map(str, sorted(set(s['steps']))))} | "
                             f"{fmt(min(s['train_seconds']))}–{fmt(max(s['train_seconds']))} | "
                             f"{fmt(s['retrain_over_interpolate'])} | {fmt(s['short'])} | "
                             f"{fmt(s['6-20'])} | {fmt(s['60'])} | {fmt(s['599-601'])} | {fmt(s['10000'])} | {fmt(s['worst'])} |")
        made = sorted({c for cells in groups.values() for x in cells.values() for c in x["commits"]})
        lines += ["", f"Commits of these records: {', '.join(f'`{c}`' for c in made)}.", ""]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.with_suffix(".md").write_text("\n".join(lines))
    OUT.with_suffix(".json").write_text(json.dumps({"candidates": {k: {"about": v[0], "overrides": v[1] + COMMON}
                                                                   for k, v in CANDIDATES.items()},
                                                    "results": table}, indent=2))
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["run", "summary"])
    parser.add_argument("--candidates", nargs="+", default=[], choices=sorted(CANDIDATES))
    parser.add_argument("--cells", nargs="+", default=[])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    if args.action == "run":
        todo = [(c, cell, s) for c in args.candidates for s in args.seeds for cell in args.cells]
        for line in in_parallel(lambda t: run_one(*t), args.jobs, todo):
            print(line, flush=True)
    summary()


if __name__ == "__main__":
    main()
