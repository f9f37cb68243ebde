"""Cached decoding time per answer token of one checkpoint, at growing lengths: flat when the
windows keep each step's work constant, growing where something is built over every key.

    OMP_NUM_THREADS=1 python benchmarks/decoding.py <ckpt> --lengths 20 60 --samples 5

The time of a greedy decode does not depend on what the model learned: it always decodes the
answer's whole length. So an untrained model of a config times the decoder as well as a
trained one, and one is made in seconds:

    python -m abc_lightning fit --config configs/abs.yaml --data=AdditionK --trainer.max_steps=2 \\
        --model.warmup_steps=1 --data.val_lengths=[6] --trainer.logger.init_args.save_dir=/tmp/untrained

To compare two commits, run this file from a checkout of each (``PYTHONPATH=<checkout>``) on
the same checkpoint and inputs. Prints one row per length: answer tokens, seconds, ms per
token, and how many answers were right (all wrong, for an untrained model).
"""

from __future__ import annotations

import argparse
import os
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("ckpt", help="a checkpoint (best.ckpt or last.ckpt of a fit)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[20, 60], help="operand digits")
    parser.add_argument("--samples", type=int, default=5, help="inputs decoded at once, per length")
    args = parser.parse_args()

    import torch

    from abc_lightning import load
    from abc_lightning.runs.provenance import cpu, short_commit

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    model = load(args.ckpt)
    print(f"commit {short_commit()}, {cpu()}, torch threads {torch.get_num_threads()}, {args.ckpt}")
    print("| length | answer tokens | samples | seconds | ms per token | right |")
    print("|---:|---:|---:|---:|---:|---:|")
    for length in args.lengths:
        data = model.data.length_set(length, args.samples, salt=13).data  # the checkpoint's own data settings
        src, steps = data.src.long(), data.tgt_out.shape[1]
        with torch.inference_mode():
            start = time.perf_counter()
            out = model.module.model.generate(src, steps)
            seconds = time.perf_counter() - start
        right = int((out == data.tgt_out.long()).all(1).sum())
        print(f"| {length} | {steps} | {args.samples} | {seconds:.1f} | {1000 * seconds / steps:.2f} | {right} |",
              flush=True)


if __name__ == "__main__":
    main()
