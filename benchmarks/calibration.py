"""Benchmark: ABC calibration time, vectorized against the paper's per-element loops.

    python benchmarks/calibration.py [--out results/bench_calibration]

Paper sizes: 8 heads, an averaged cross-attention of a 6-7 digit addition model
(about 10 × 19), extended to 60 digits (about 62 × 125). Both implementations get the same
input; the script checks that they agree and writes JSON and markdown with the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import torch

from abc_lightning.calibration.lines import calibrate, extend, extend_loop


def best_of(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/bench_calibration")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--source", type=int, nargs=2, default=[10, 19], metavar=("m", "n"))
    parser.add_argument("--target", type=int, nargs=2, default=[62, 125], metavar=("M", "N"))
    args = parser.parse_args()
    torch.manual_seed(0)
    (m, n), (M, N) = args.source, args.target
    a_bar = torch.softmax(torch.randn(args.heads, m, n) * 3, dim=-1)

    fast = extend(calibrate(a_bar, kappa=2.0), M, N)
    slow = extend_loop(a_bar, M, N, kappa=2.0)
    assert torch.allclose(fast, slow, atol=1e-5) and torch.equal(torch.isinf(fast), torch.isinf(slow))

    t_fast = best_of(lambda: extend(calibrate(a_bar, kappa=2.0), M, N), 20)
    t_slow = best_of(lambda: extend_loop(a_bar, M, N, kappa=2.0), 3)
    record = {
        "heads": args.heads, "source": [m, n], "target": [M, N], "directions": 3,
        "vectorized_ms": round(1000 * t_fast, 3), "per_element_loop_ms": round(1000 * t_slow, 1),
        "speedup": round(t_slow / t_fast, 1), "outputs_equal": True,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPU cores, torch {torch.__version__}",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(record, indent=2))
    out.with_suffix(".md").write_text(
        "### ABC calibration time (best of repeated runs)\n\n"
        f"`python benchmarks/calibration.py` on {record['machine']}.\n\n"
        "| heads | Ā (m × n) | target (M × N) | vectorized | per-element loop | ratio |\n|---|---|---|---|---|---|\n"
        f"| {args.heads} | {m} × {n} | {M} × {N} | {record['vectorized_ms']} ms | {record['per_element_loop_ms']} ms "
        f"| {record['speedup']}× |\n")
    print(json.dumps(record, indent=2))


if __name__ == "__main__":
    main()
