"""The behaviour fingerprint: what every table's runs do, recorded small enough to check in CI.

Every result table is made of cells (``abc_lightning.reproduce.cells``): a base config, a task and a
few overrides. The fingerprint runs each distinct kind of cell as a tiny fit through the
real command line (``run_cli``, the cell's own config and overrides, then :data:`TINY`):
every task under each bias strategy it has in the tables (ABS, ABC, none), and every
other override a table uses (positional schemes, window geometries, CPI off, the encoder
window, the paper's ABC preset …) once, on the first task that has it. A
:class:`Recorder` callback writes down, for each run:

- ``data``: SHA-256 of the whole encoded training split and of the validation sets;
- ``steps``: per optimizer step, a digest of the batch as trained (after error replay),
  the training loss and the learning rate the schedule sets next;
- ``validations``: ``val/loss`` and ``val/acc`` at each validation, and ABC's phase;
- ``bias``: per attention kind and layer, at a short input and at the longest validation
  length: which cells the summed bias (causal mask, positional bias, ABS windows, ABC's
  calibrated bias) leaves open (a digest), and the values of its parts (:func:`bias_record`);
- ``positions``: the position indices of the decoder and the encoder at both sizes;
- ``greedy``: the model's greedy answers to a few inputs at both sizes, with each answer's
  smallest top-1/top-2 logit margin;
- ``weights``: the sum of squares of the final weights.

Integers and digests must match exactly. Floats carry float noise: another CPU kernel
family (AVX2 against AVX512, or the generic kernels), another thread count or another BLAS
reorders sums. Measured over every run against a reference written on AVX512 kernels at 2
threads, that noise is at most 8e-7 (relative) in a loss and 3e-6 in the weights, on AVX512
at 1 thread and on AVX2 kernels (``ATEN_CPU_CAPABILITY=avx2``, MKL and oneDNN held to AVX2)
at 1 thread. :data:`TOLERANCE` (1e-4) sits 30x above it; each one-line change of
``tests/test_fingerprint.py`` moves some float by 3e-3 or more (30x above it), besides the
exact parts it changes. ABC's calibrated values (:data:`CALIBRATED`) are noisier, and a
greedy answer may differ only where its recorded margin is below :data:`MARGIN` (a near-tie
that float noise can flip).

A change that keeps the fingerprint keeps every table. A change that alters behaviour
rewrites it on purpose, and the rows it touches are remade::

    python -m tests.fingerprint --write          # every run; or name some: --write abs_addition
    python -m tests.fingerprint                  # compare, one line per run
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import lightning as L
import torch

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).with_name("fingerprint.json")

#: What makes a cell tiny: 24 steps of a 32-wide model on batches of 32, validated every 12
#: steps on a few inputs at 6 and 9 digits, no figures, no W&B. Everything else is the cell's own.
TINY = ("--trainer.max_epochs=2", "--trainer.limit_train_batches=12", "--trainer.max_time=null",
        "--data.batch_size=32", "--data.val_lengths=[6,9]", "--data.val_samples=8", "--data.val_split_samples=32",
        "--model.d_model=32", "--model.feedforward=64",
        "--trainer.enable_progress_bar=false", "--wandb.mode=disabled")
#: A config whose schedule warms up over 100 steps warms up over 4 here.
WARMUP = "--model.warmup_steps=4"
#: ABC calibrates at the first validation (12 steps), from 32 decoded inputs, then retrains.
ABC = ("--bias.phases.threshold=0.0", "--bias.phases.patience=1", "--bias.lines.samples=32")
#: Tasks whose answers grow faster than their operands (N×M: 6.5 N² tokens) train on smaller
#: batches and are validated shorter.
SHORTER = {"multiplication": ("--data.val_lengths=[3,5]", "--data.batch_size=8")}
#: The greedy probe: a few inputs of 3 digits (per operand) and of the longest validation length.
PROBE_SHORT, PROBE_ROWS, PROBE_SALT = 3, 4, 991

TOLERANCE = 1e-4  # relative, on every float (absolute below 1)
#: ABC's calibrated values: averages of a barely trained model's attention, minus their
#: maximum; the paper's preset averages pre-softmax scores, and there the difference of
#: nearby averages turns 1e-7 noise in the weights into up to 4e-4 in the bias.
CALIBRATED = 1e-2
MARGIN = 1e-3  # logits: a greedy token this close to the runner-up may flip with float noise


# ---- which runs -------------------------------------------------------------------
def runs() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Run name -> (config, overrides): the first cell of every (task, config) pair, then the
    first cell of every other override pattern the tables use, in the tables' order."""
    from abc_lightning.reproduce.cells import all_cells, task_flags

    chosen: dict[str, tuple[str, tuple[str, ...]]] = {}
    seen_patterns = set()
    cells = all_cells()
    pairs: dict[tuple[str, str], object] = {}
    for cell in cells:  # a pair's cell: the config as it is (ABS: + T), else the pair's first
        pair = (cell.task, cell.config)
        if pair not in pairs or (_pattern(cell, task_flags)[1] == () and _pattern(pairs[pair], task_flags)[1]):
            pairs[pair] = cell
    for (task, config), cell in pairs.items():
        seen_patterns.add(_pattern(cell, task_flags))
        chosen[f"{Path(config).stem}_{task}"] = (cell.config, cell.overrides)
    for cell in cells:
        pattern = _pattern(cell, task_flags)
        if pattern not in seen_patterns:
            seen_patterns.add(pattern)
            chosen[cell.key] = (cell.config, cell.overrides)
    return chosen


def _pattern(cell, task_flags) -> tuple:
    flags = set(task_flags(cell.task, cell.config))
    return cell.config, tuple(o for o in cell.overrides if o not in flags)


def command(config: str, overrides: tuple[str, ...], save_dir: str) -> list[str]:
    """The ``fit`` arguments of a tiny run of the cell (config, overrides)."""
    from abc_lightning.tasks import TASKS, class_name

    task = next((name for name in TASKS if f"--data={class_name(name)}" in overrides), None)
    extra = [*SHORTER.get(task, ())]
    if Path(config).stem in ("abs", "abc"):
        extra.append(WARMUP)
    if Path(config).stem == "abc":
        extra += ABC
    return ["fit", "--config", str(ROOT / config), *overrides, *TINY, *extra,
            f"--trainer.logger.init_args.save_dir={save_dir}"]


# ---- recording --------------------------------------------------------------------
def digest(*tensors: torch.Tensor) -> str:
    h = hashlib.sha256()
    for t in tensors:
        t = t.detach().cpu().contiguous()
        h.update(str((t.dtype, tuple(t.shape))).encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()[:16]


def _float(x) -> float:
    return float(x.detach().cpu()) if isinstance(x, torch.Tensor) else float(x)


class Recorder(L.Callback):
    """Writes down what a fit does (the module docstring lists it) into :attr:`record`."""

    last: "Recorder | None" = None

    def __init__(self) -> None:
        self.record: dict = {"steps": [], "validations": []}
        Recorder.last = self

    def on_fit_start(self, trainer, pl_module) -> None:
        dm = trainer.datamodule
        train = dm._train.groups if hasattr(dm._train, "groups") else [dm._train]
        self.record["data"] = {
            "train": digest(*(t for g in train for t in (g.data.src, g.data.tgt_in, g.data.tgt_out))),
            "train_rows": sum(len(g.data.src) for g in train),
            "val": digest(*(t for ds in dm._val for t in (ds.data.src, ds.data.tgt_in, ds.data.tgt_out))),
        }

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        self._batch = digest(batch["src"], batch["tgt_in"], batch["tgt_out"])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        lr = trainer.optimizers[0].param_groups[0]["lr"]  # the rate after this step's schedule update
        self.record["steps"].append({"batch": self._batch, "loss": _float(outputs["loss"]), "lr": float(lr)})

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.sanity_checking:
            return
        metrics = trainer.callback_metrics
        entry = {"step": trainer.global_step,
                 **{k: _float(metrics[k]) for k in ("val/loss", "val/acc") if k in metrics}}
        abc = next((cb for cb in trainer.callbacks if hasattr(cb, "phase") and hasattr(cb, "lines")), None)
        if abc is not None:
            entry["abc_phase"] = abc.phase
        self.record["validations"].append(entry)

    def on_fit_end(self, trainer, pl_module) -> None:
        model, dm = pl_module.model, trainer.datamodule
        was_training = model.training
        model.eval()
        bias, positions, greedy = {}, {}, {}
        with torch.no_grad():
            for length in (PROBE_SHORT, max(dm.val_lengths)):
                data = dm.length_set(length, PROBE_ROWS, salt=PROBE_SALT).data
                src, steps = data.src.long(), data.tgt_out.shape[1]
                t_pos = model.position_index(steps, src.device)
                s_pos = model.position_index.source(src.shape[1], src.device)
                positions[str(length)] = digest(t_pos, s_pos)
                kinds = {"encoder": (s_pos, s_pos, len(model.encoder)), "decoder": (t_pos, t_pos, len(model.decoder)),
                         "cross": (t_pos, s_pos, len(model.decoder))}
                for kind, (q_pos, k_pos, layers) in kinds.items():
                    for layer in range(layers):
                        bias[f"{kind}@{length}/{layer}"] = bias_record(model, kind, q_pos, k_pos, layer,
                                                                       (src.shape[1], steps))
                answer = model.generate(src, steps)
                tgt_in = torch.cat([data.tgt_in[:, :1].long(), answer[:, :-1]], dim=1)
                logits = model(src, tgt_in).logits
                top2 = logits.topk(2, dim=-1).values
                greedy[str(length)] = {"tokens": ["".join(f"{int(t):x}" for t in row) for row in answer],
                                       "margin": [float(m) for m in (top2[..., 0] - top2[..., 1]).min(dim=1).values]}
        model.train(was_training)
        self.record.update(bias=bias, positions=positions, greedy=greedy,
                           weights=float(sum(p.detach().double().pow(2).sum() for p in model.parameters())))


def _sum(bias: torch.Tensor | None) -> dict | None:
    """A bias's open cells as a float sum and the sum of their sizes (which bounds its float error)."""
    if bias is None:
        return None
    cells = bias[torch.isfinite(bias)].double()
    return {"sum": float(cells.sum()), "size": float(cells.abs().sum())}


def bias_record(model, kind: str, q_pos: torch.Tensor, k_pos: torch.Tensor, layer: int, sizes) -> dict | None:
    """One attention's bias: which cells the summed bias leaves open (exact), and the values of
    its float parts: a positional scheme's bias where it has no weights (a learned scheme's bias
    is its weights, which the losses and ``weights`` check; FIRE's, at the first query, divides
    by a learned threshold that Adam moves by noise-sized gradients) and each bias source's
    (ABS windows: 0 where open; ABC: the calibrated values)."""
    total = model.attention_bias(kind, q_pos, k_pos, layer=layer, sizes=sizes)
    if total is None:
        return None
    entry = {"open": digest(torch.isfinite(total))}
    scheme = model.positional
    if model.use_positional and not any(True for _ in scheme.parameters()):
        part = _sum(scheme.score_bias(kind, q_pos, k_pos))
        if part is not None:
            entry["scheme"] = part
    for name, source in model.bias_sources.items():
        part = _sum(source(kind, len(q_pos), len(k_pos), q_pos.device, layer, sizes=sizes))
        if part is not None:
            entry[name] = part
    return entry


# ---- running ----------------------------------------------------------------------
@contextmanager
def no_figures():
    """Figures are not behaviour: heatmaps are left undrawn (they cost seconds a run)."""
    from abc_lightning.training.heatmaps import AttentionHeatmaps

    saved = AttentionHeatmaps.draw, AttentionHeatmaps.draw_calibrated
    AttentionHeatmaps.draw = AttentionHeatmaps.draw_calibrated = lambda *a, **k: []
    try:
        yield
    finally:
        AttentionHeatmaps.draw, AttentionHeatmaps.draw_calibrated = saved


def record(name: str, save_dir: str | None = None) -> dict:
    """Run ``name`` (one of :func:`runs`) tiny and return what the :class:`Recorder` saw."""
    import contextlib
    import io

    from abc_lightning.cli import run_cli

    config, overrides = runs()[name]
    with tempfile.TemporaryDirectory() as tmp:
        args = command(config, overrides, save_dir or tmp)
        args.append(f"--trainer.callbacks+={__name__}.Recorder")
        Recorder.last = None
        out = io.StringIO()
        with no_figures(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            status = run_cli(args)
        if status != 0 or Recorder.last is None:
            raise RuntimeError(f"fingerprint run {name} failed (exit {status}):\n{out.getvalue()[-3000:]}")
    return Recorder.last.record


def reference() -> dict:
    return json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}


# ---- comparing --------------------------------------------------------------------
def close(a: float, b: float, tol: float = TOLERANCE) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def deviation(a: float, b: float) -> float:
    """The relative difference :func:`close` compares with :data:`TOLERANCE`."""
    return abs(a - b) / max(1.0, abs(a), abs(b))


def differences(expected: dict, got: dict) -> list[str]:
    """What differs between two records beyond float noise, one line each (empty: the same)."""
    out: list[str] = []

    def walk(path: str, a, b) -> None:
        if isinstance(a, dict) and isinstance(b, dict) and {"sum", "size"} <= set(a) & set(b):
            # a sum's float error is bounded by the sum of its terms' sizes, not by the sum
            tol = CALIBRATED if path.endswith("/abc") else TOLERANCE
            if abs(a["sum"] - b["sum"]) > tol * max(1.0, a["size"], b["size"]):
                out.append(f"{path}/sum: {a['sum']!r}, now {b['sum']!r}")
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                if key not in a or key not in b:
                    out.append(f"{path}/{key}: {'missing' if key not in b else 'new'}")
                elif path == "greedy":
                    greedy(f"{path}/{key}", a[key], b[key])
                else:
                    walk(f"{path}/{key}" if path else key, a[key], b[key])
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                out.append(f"{path}: {len(a)} entries, now {len(b)}")
            for i, (x, y) in enumerate(zip(a, b)):
                walk(f"{path}[{i}]", x, y)
        elif isinstance(a, float) and isinstance(b, float):
            if not close(a, b):
                out.append(f"{path}: {a!r}, now {b!r}")
        elif a != b:
            out.append(f"{path}: {a!r}, now {b!r}")

    def greedy(path: str, a: dict, b: dict) -> None:
        rows = zip(a["tokens"], b["tokens"], a["margin"], b["margin"])
        for i, (x, y, m, n) in enumerate(rows):
            if x != y and min(m, n) >= MARGIN:
                k = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
                out.append(f"{path} row {i}: token {k} was {x[k:k + 1] or 'the end'}, now {y[k:k + 1] or 'the end'} "
                           f"(the answer's smallest margin {min(m, n):.2g})")
        if len(a["tokens"]) != len(b["tokens"]):
            out.append(f"{path}: {len(a['tokens'])} answers, now {len(b['tokens'])}")

    walk("", expected, got)
    return out


def largest_deviation(expected, got) -> float:
    """The largest relative difference between matching floats of two records (noise)."""
    if isinstance(expected, dict) and isinstance(got, dict) and {"sum", "size"} <= set(expected) & set(got):
        return abs(expected["sum"] - got["sum"]) / max(1.0, expected["size"], got["size"])
    if isinstance(expected, dict) and isinstance(got, dict):
        keys = set(expected) & set(got) - {"margin"}
        return max((largest_deviation(expected[k], got[k]) for k in keys), default=0.0)
    if isinstance(expected, list) and isinstance(got, list):
        return max((largest_deviation(x, y) for x, y in zip(expected, got)), default=0.0)
    if isinstance(expected, float) and isinstance(got, float) and not (math.isnan(expected) or math.isnan(got)):
        return deviation(expected, got)
    return 0.0


def main(argv: list[str]) -> int:
    import argparse
    import time

    parser = argparse.ArgumentParser(prog="python -m tests.fingerprint", description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="runs to record (default: every run)")
    parser.add_argument("--write", action="store_true", help=f"write the records into {REFERENCE.name}")
    parser.add_argument("--json", help="also write this comparison's records and deviations to this file")
    args = parser.parse_args(argv)
    known = runs()
    unknown = [n for n in args.names if n not in known]
    if unknown:
        print(f"fingerprint: unknown run {unknown[0]!r}; runs: {', '.join(known)}", file=sys.stderr)
        return 2
    ref = reference()
    results, failed = {}, 0
    for name in args.names or list(known):
        start = time.perf_counter()
        got = record(name)
        results[name] = got
        if name in ref:
            diff = differences(ref[name], got)
            failed += bool(diff)
            state = "same" if not diff else f"DIFFERS ({len(diff)}): " + "; ".join(diff[:3])
            state += f", largest float deviation {largest_deviation(ref[name], got):.1e}"
        else:
            state = "new"
        print(f"{name:40s} {time.perf_counter() - start:5.1f} s  {state}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": torch.backends.cpu.get_cpu_capability(),
                                               "threads": torch.get_num_threads(), "records": results}, indent=1))
    if args.write:
        ref.update(results)
        ordered = {name: ref[name] for name in known if name in ref}
        REFERENCE.write_text(json.dumps(ordered, indent=1, sort_keys=False) + "\n")
        print(f"wrote {len(results)} run(s) into {REFERENCE.relative_to(ROOT)}")
        return 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
