"""Print the lines an ABC calibration kept, per kind, layer, direction and head.

    python scripts/abc_lines.py <run dir>/abc/lines.pt [more lines.pt …]

Each line is named by its invariant c = j − Δ·i in training coordinates: for Δ = −1
(anti-diagonal) in cross-attention, the source column read at output step 0; for Δ = 1
(diagonal) in decoder self-attention, the offset to the step attended (0: itself, −1: the
step before); for Δ = 0 (vertical), the fixed column. A head with no line is shown as [].
Table 3's diagnosis of the runs that do not extrapolate compares these between runs.
"""

import sys

import torch

from abc_lightning.biases.abc import unpack_lines


def kept(values: torch.Tensor, c_min: int) -> list[list[int]]:
    """Per head, the invariants c of the lines with a finite bias."""
    return [[c_min + int(i) for i in torch.nonzero(torch.isfinite(row)).flatten()] for row in values]


for path in sys.argv[1:]:
    print(f"== {path}")
    for kind, entry in unpack_lines(torch.load(path, weights_only=True)).items():
        for layer, lines in enumerate(entry if isinstance(entry, list) else [entry]):
            for d in lines.directions:
                print(f"{kind:8s} layer {layer}  Δ={d.delta:+d}  ({lines.m}×{lines.n}): {kept(d.values, d.c_min)}")
