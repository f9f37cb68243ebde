"""Which inputs a trained model gets wrong, and at which column: for rare errors at long lengths.

    python scripts/wrong_answers.py runs/abs/version_0/checkpoints/best.ckpt --length 60 --samples 20000

Draws ``--samples`` random inputs of exactly ``--length`` digits (the task's own sampler,
seeded by ``--seed``; not the test protocol's inputs), answers them with the checkpoint, and
prints each wrong answer with the column (counted from the answer's last digit, 1 = the
units) where it first departs from the right one, and the operands' digits in the columns
around it, lowest column last. A model whose errors are rare local patterns shows the same
few column contexts again and again; one whose errors grow with the length does not.
Ends with one line: how many were wrong.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
import torch


def first_wrong_column(got: str, want: str) -> int:
    """1 for the units digit; the longer answer is padded on the left."""
    width = max(len(got), len(want))
    got, want = got.rjust(width), want.rjust(width)
    return next(width - i for i in range(width - 1, -1, -1) if got[i] != want[i])


def columns(answer: str, hi: int, lo: int) -> str:
    """Columns ``hi`` down to ``lo`` of an answer (1 = the units), blank where it is shorter."""
    answer = answer.rjust(hi)
    return answer[len(answer) - hi:len(answer) - lo + 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--length", type=int, default=60, help="digits of every operand (default 60)")
    parser.add_argument("--samples", type=int, default=10_000, help="random inputs (default 10,000)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the inputs (default 1)")
    parser.add_argument("--around", type=int, default=4, help="columns shown on each side (default 4)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from abc_lightning import load
    from abc_lightning.errors import CheckpointError, ConfigError, InputError
    from abc_lightning.tasks.base import digits_text

    try:
        model = load(args.checkpoint)
        task = model.task
        operands = task.sample(np.random.default_rng(args.seed), args.samples, args.length)
        texts = task.expressions(operands)
        rows = model.predict_rows(texts)
    except (CheckpointError, ConfigError, InputError, OSError) as err:
        print(f"wrong_answers: error: {err}", file=sys.stderr)
        return 2
    wrong = 0
    for i, row in enumerate(rows):
        if row["correct"]:
            continue
        wrong += 1
        col = first_wrong_column(row["output"], row["expected"])
        lo, hi = max(1, col - args.around), col + args.around
        around = []
        for op in operands:
            text = digits_text(op[i])
            if len(text) < lo:  # a short operand (N×1's multiplier) is shown whole
                around.append(f"{text} (whole)")
                continue
            text = text.rjust(hi, "0")
            around.append(" ".join(text[len(text) - c] for c in range(hi, lo - 1, -1)))
        print(f"column {col} of {len(row['expected'])}: columns {hi}..{lo} of the operands "
              f"[{' | '.join(around)}]; right {columns(row['expected'], hi, lo)}, "
              f"got {columns(row['output'], hi, lo)}")
    print(f"{wrong} of {args.samples} wrong at {args.length} digits ({100 * (1 - wrong / args.samples):.4f}% right)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
