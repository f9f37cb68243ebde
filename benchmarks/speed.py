"""Speed benchmarks: decoding, the paper's evaluation protocol, training throughput.

    python benchmarks/speed.py [--only decode protocol training] [--threads N] [--out results/bench_speed]

Sections (each writes its figures into ``<out>.json`` and ``<out>.md``):

* ``decode``: greedy decoding throughput (samples/s) at 6, 60, 600 and 1 000 digits, for
  the naive decoder (full recomputation each step), the KV-cached decoder, and the
  KV-cached decoder that skips keys the bias closes (the default), in one run, with
  ratios. The naive and fast outputs are compared token for token on the same inputs.
  Model: the NoPE + w=1 addition cell (CPU size). Weights are random: greedy decoding
  runs a fixed number of steps, so its cost does not depend on them.
* ``protocol``: wall time of the paper's evaluation protocol (lengths 6, 10, 15, 20 and 60
  at min(10^L − 10^(L−1), 10 000) samples) for each ABS Table 1 config, as ``test`` runs
  it: data generation plus batched greedy decoding under ``torch.inference_mode``. Also
  time per sample at 60 and 1 000 digits, the linear-cost check.
* ``training``: training throughput (tokens/s) for each ABS Table 1 cell, and the
  time to the first validation at 100% on 60 digits, estimated as (step of that
  validation, from the committed Table 1 fit metrics) ÷ (measured steps/s).
* ``steps``: where a fit's time goes, in one run, on the same batches: optimizer steps/s
  with attention through ``scaled_dot_product_attention`` and the additive bias (what the
  model does), through plain matmul-softmax (before), under ``torch.compile``
  (compile time apart) and under bfloat16 autocast (``torch.autocast("cpu")``, mixed
  precision), with the largest loss difference from the eager model over the steps; and
  the seconds of one validation pass, by validation set, beside the seconds of the 200
  training steps between two validations.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import torch

from abc_lightning.callbacks import AttentionWindow
from abc_lightning.cli import ABCLightningCLI
from abc_lightning.reproduce import table1_cells

# Table 1's ABS cells of every registered task (+ T=3, NoPE + w=1, and + T=3 with the encoder
# windowed too, which is not in the paper): record name -> config and overrides.
ABS_CELLS = {cell.key: [cell.config, *cell.overrides] for cell in table1_cells()
             if cell.label in ("+ T=3", "NoPE + w=1") or cell.key.endswith("_T3_encoder_w1")}


def machine() -> str:
    return (f"{platform.machine()}, {os.cpu_count()} CPU cores, {torch.get_num_threads()} torch threads, "
            f"torch {torch.__version__}" + (f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""))


def build(config: str, *overrides: str):
    """The config's model (eval mode, ABS window installed) and its data module."""
    cli = ABCLightningCLI(args=["--config", config, "--trainer.logger=false", *overrides], run=False)
    model, dm = cli.model, cli.datamodule
    for cb in cli.trainer.callbacks:
        if isinstance(cb, AttentionWindow):
            cb.apply_to(model, dm)
    return model.eval(), dm


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def decode_section(lengths=(6, 60, 600, 1000)) -> list[dict]:
    model, dm = build(*ABS_CELLS["addition_nope_w1"])
    rows = []
    for length in lengths:
        n_fast = 1000 if length <= 60 else 200
        n_naive = {6: 1000, 60: 200}.get(length, 2)
        ds = dm.length_set(length, n_fast, salt=9)
        src, steps = ds.data.src.long(), ds.data.tgt_out.shape[1]
        row = {"digits": length, "source_tokens": src.shape[1], "steps": steps}
        with torch.inference_mode():
            t_fast, fast = timed(lambda: model.model.generate(src, steps))
            t_cache, _ = timed(lambda: model.model.generate(src[:n_fast // 4], steps, skip_closed=False))
            t_naive, naive = timed(lambda: model.model.generate(src[:n_naive], steps, use_cache=False))
            t_same, same = timed(lambda: model.model.generate(src[:n_naive], steps))  # the naive run's batch
        row.update(
            fast_samples_per_s=round(n_fast / t_fast, 2), cached_no_band_samples_per_s=round(n_fast // 4 / t_cache, 2),
            naive_samples_per_s=round(n_naive / t_naive, 3), samples=dict(fast=n_fast, cached=n_fast // 4, naive=n_naive),
            fast_over_naive=round(t_naive / t_same, 1),  # same inputs, same batch
            same_tokens=bool(torch.equal(same, naive) and torch.equal(fast[:n_naive], naive)),
        )
        rows.append(row)
        print(row, flush=True)
    return rows


def protocol_section(cells: dict[str, list[str]]) -> list[dict]:
    rows = []
    for name, (config, *overrides) in cells.items():
        model, dm = build(config, *overrides)
        lengths, cap, batch = dm.test_lengths, dm.test_samples, dm.eval_batch_size
        total, per_length = 0.0, {}
        with torch.inference_mode():
            for length in lengths:
                t, _ = timed(lambda: [model.model.generate(b["src"], b["tgt_out"].shape[1])
                                      for b in _batches(dm.length_set(length, cap, salt=4), batch)])
                per_length[length], total = round(t, 2), total + t
            per_sample, encoder = {}, {}
            # per-sample cost in batches of 100 at both lengths (1 000 samples at 60 digits,
            # 100 at 1 000), the best of a few repeats: a 60-digit batch takes a tenth of a
            # second, and one noisy run moved the ratio by a quarter
            for length, n, repeats in ((60, 1000, 3), (1000, 100, 2)):
                ds = dm.length_set(length, n, salt=5)
                t = min(timed(lambda: [model.model.generate(b["src"], b["tgt_out"].shape[1])
                                       for b in _batches(ds, 100)])[0] for _ in range(repeats))
                per_sample[length] = t / len(ds)
                t_enc = min(timed(lambda: [model.model.encode_in_chunks(b["src"]) for b in _batches(ds, 100)])[0]
                            for _ in range(repeats))
                encoder[length] = t_enc / len(ds)  # the encoder's full self-attention is quadratic
        row = {"cell": name, "config": " ".join([config, *overrides]), "lengths": lengths, "samples_cap": cap, "seconds": round(total, 1),
               "seconds_by_length": per_length, "ms_per_sample_60": round(1000 * per_sample[60], 3),
               "ms_per_sample_1000": round(1000 * per_sample[1000], 3),
               "ratio_1000_over_60": round(per_sample[1000] / per_sample[60], 1),
               "encoder_ms_per_sample_60": round(1000 * encoder[60], 3),
               "encoder_ms_per_sample_1000": round(1000 * encoder[1000], 3),
               "decoder_ratio_1000_over_60": round((per_sample[1000] - encoder[1000]) / (per_sample[60] - encoder[60]), 1)}
        rows.append(row)
        print(row, flush=True)
    return rows


def _batches(ds, size: int):
    for start in range(0, len(ds), size):
        yield ds.__getitems__(list(range(start, min(start + size, len(ds)))))


def first_full_at_60(cell: str) -> int | None:
    """Step of the first validation at 100% on 60 digits in the Table 1 fit metrics, if present."""
    path = Path("results/table1/runs") / cell / "fit" / "metrics.csv"
    if not path.exists():
        return None
    for row in csv.DictReader(path.open()):
        if row.get("val/acc@60") and float(row["val/acc@60"]) >= 1.0:
            return int(row["step"]) + 1
    return None


def training_section(cells: dict[str, list[str]], steps: int = 60) -> list[dict]:
    rows = []
    for name, (config, *overrides) in cells.items():
        model, dm = build(config, *overrides)
        model.train()
        dm.setup("fit")
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loader = iter(dm.train_dataloader())
        batches = [next(loader) for _ in range(steps + 5)]
        tokens = sum(int(b["src"].numel() + b["tgt_in"].numel()) for b in batches[5:])

        def step(batch):
            opt.zero_grad(set_to_none=True)
            model.loss(batch).backward()
            opt.step()

        for b in batches[:5]:
            step(b)
        t, _ = timed(lambda: [step(b) for b in batches[5:]])
        first = first_full_at_60(name)
        row = {"cell": name, "config": " ".join([config, *overrides]), "tokens_per_s": round(tokens / t), "steps_per_s": round(steps / t, 2),
               "batch_size": dm.batch_size, "first_100_at_60_step": first,
               "est_seconds_to_100_at_60": None if first is None else round(first / (steps / t), 1)}
        rows.append(row)
        print(row, flush=True)
    return rows


def _matmul_attention(q, k, v, attn_mask=None, **_):
    """softmax(q·kᵀ/√d + bias)·v without SDPA: the attention before it."""
    import math

    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    return torch.softmax(scores if attn_mask is None else scores + attn_mask, dim=-1) @ v


def steps_section(cell: str = "abs_addition", steps: int = 40) -> dict:
    """Steps/s of one cell's training under three attention paths and in mixed precision,
    and a validation's cost."""
    import contextlib

    from abc_lightning.model import attention

    config, *overrides = ABS_CELLS[cell]
    out = {"cell": cell, "steps": steps, "variants": []}
    batches, losses = None, {}
    for variant in ("sdpa", "matmul", "compile", "bf16 autocast"):
        torch.manual_seed(0)
        model, dm = build(config, *overrides)
        model.train()
        if batches is None:
            dm.setup("fit")
            loader = iter(dm.train_dataloader())
            batches = [next(loader) for _ in range(steps + 5)]
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        loss_fn = model.loss
        if variant == "compile":
            loss_fn = torch.compile(model.loss)
        original = attention.F.scaled_dot_product_attention
        if variant == "matmul":
            attention.F.scaled_dot_product_attention = _matmul_attention
        seen = []
        precision = (torch.autocast("cpu", dtype=torch.bfloat16) if variant == "bf16 autocast"
                     else contextlib.nullcontext())

        def step(batch):
            opt.zero_grad(set_to_none=True)
            with precision:
                loss = loss_fn(batch)
            loss.backward()
            opt.step()
            seen.append(float(loss))

        try:
            t_first, _ = timed(lambda: [step(b) for b in batches[:5]])  # includes compiling
            t, _ = timed(lambda: [step(b) for b in batches[5:]])
        finally:
            attention.F.scaled_dot_product_attention = original
        losses[variant] = seen
        out["variants"].append({"attention": variant, "steps_per_s": round(steps / t, 2),
                                "first_5_steps_s": round(t_first, 1),
                                "max_loss_diff_vs_sdpa": round(max(abs(a - b) for a, b in zip(seen, losses["sdpa"])), 6)})
        print(out["variants"][-1], flush=True)
    # one validation pass, by set, under the eager model
    model, dm = build(config, *overrides)
    dm.setup("fit")
    per_set = {}
    with torch.inference_mode():
        for ds in dm._val:
            per_set[str(ds.tag)] = round(timed(lambda: [model.model.generate(b["src"], b["tgt_out"].shape[1])
                                                        for b in _batches(ds, dm.eval_batch_size)])[0], 2)
    sdpa = out["variants"][0]["steps_per_s"]
    out.update(validation_seconds_by_set=per_set, validation_seconds=round(sum(per_set.values()), 2),
               train_seconds_per_200_steps=round(200 / sdpa, 1),
               val_sizes={str(ds.tag): len(ds) for ds in dm._val})
    print(out, flush=True)
    return out


def markdown(record: dict) -> str:
    conditions = f" ({record['note']})" if record.get("note") else ""
    command = record.get("command", "python benchmarks/speed.py")
    out = [f"### Speed benchmarks\n\n`{command}`{conditions} on {record['machine']}, {record['date']}.\n"]
    if "decode" in record:
        out += ["#### Greedy decoding, addition, NoPE + w=1 (d 64, 4 heads, 1 + 3 layers)\n",
                "| digits | steps | naive (samples/s) | KV cache (samples/s) | KV cache + band (samples/s) "
                "| band ÷ naive (same inputs and batch) | same tokens |", "|---|---|---|---|---|---|---|"]
        out += [f"| {r['digits']} | {r['steps']} | {r['naive_samples_per_s']} | {r['cached_no_band_samples_per_s']} "
                f"| {r['fast_samples_per_s']} | {r['fast_over_naive']}× | {r['same_tokens']} |" for r in record["decode"]]
    if "protocol" in record:
        out += ["\n#### The paper's evaluation protocol (6, 10, 15, 20, 60 digits; up to 10 000 samples each)\n",
                "| cell | wall time | by length (s) | ms/sample at 60 | ms/sample at 1 000 | 1 000 ÷ 60 "
                "| of which encoder, 60 / 1 000 (ms) | decoder alone, 1 000 ÷ 60 |",
                "|---|---|---|---|---|---|---|---|"]
        out += [f"| {r['cell']} | {r['seconds']} s | {r['seconds_by_length']} | {r['ms_per_sample_60']} "
                f"| {r['ms_per_sample_1000']} | {r['ratio_1000_over_60']}× "
                f"| {r.get('encoder_ms_per_sample_60', '–')} / {r.get('encoder_ms_per_sample_1000', '–')} "
                f"| {str(r['decoder_ratio_1000_over_60']) + '×' if 'decoder_ratio_1000_over_60' in r else '–'} |"
                for r in record["protocol"]]
    if "training" in record:
        out += ["\n#### Training throughput (ABS Table 1 cells)\n",
                "| cell | tokens/s | steps/s | batch | first 100% at 60 (step) | est. time to it |", "|---|---|---|---|---|---|"]
        out += [f"| {r['cell']} | {r['tokens_per_s']} | {r['steps_per_s']} | {r['batch_size']} "
                f"| {r['first_100_at_60_step'] or '–'} | "
                f"{'–' if r['est_seconds_to_100_at_60'] is None else str(r['est_seconds_to_100_at_60']) + ' s'} |"
                for r in record["training"]]
    if "steps" in record:
        r = record["steps"]
        out += [f"\n#### Where a fit's time goes ({r['cell']}, {r['steps']} steps on the same batches)\n",
                "| attention, precision | steps/s | first 5 steps (s; compiling included) | largest loss difference from SDPA |",
                "|---|---|---|---|"]
        out += [f"| {v['attention']} | {v['steps_per_s']} | {v['first_5_steps_s']} | {v['max_loss_diff_vs_sdpa']} |"
                for v in r["variants"]]
        out += ["", f"One validation pass: {r['validation_seconds']} s ({r['validation_seconds_by_set']}, samples "
                f"{r['val_sizes']}), against {r['train_seconds_per_200_steps']} s for the 200 training steps "
                "between two validations."]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=["decode", "protocol", "training", "steps"],
                        default=["decode", "protocol", "training"])
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--cells", nargs="*", default=list(ABS_CELLS), choices=list(ABS_CELLS))
    parser.add_argument("--out", default="results/bench_speed")
    parser.add_argument("--note", default=None, help="conditions of this run, printed with the results")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    out = Path(args.out)
    record = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else {}
    record.update(machine=machine(), date=time.strftime("%Y-%m-%d"),
                  command=shlex.join(["python", "benchmarks/speed.py", *sys.argv[1:]]))
    if args.note is not None:
        record["note"] = args.note
    cells = {k: ABS_CELLS[k] for k in args.cells}
    if "decode" in args.only:
        record["decode"] = decode_section()
    if "protocol" in args.only:  # rows of cells not measured this time are kept
        fresh = protocol_section(cells)
        record["protocol"] = [r for r in record.get("protocol", []) if r["cell"] not in cells] + fresh
    if "training" in args.only:
        record["training"] = training_section(cells)
    if "steps" in args.only:
        record["steps"] = steps_section()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    out.with_suffix(".md").write_text(markdown(record))
    print(markdown(record))


if __name__ == "__main__":
    main()
