"""N×2 multiplication with a column scratchpad: y = x1 × x2, x2 of exactly two digits."""

from __future__ import annotations

import re

from abc_lightning.tasks.fixed_width import MultiplyFixedWidth


class Nx2Task(MultiplyFixedWidth):
    """N×2 multiplication (the second operand has exactly two digits, e.g. ``1234*56``) (``--data=Nx2``)."""

    name = "nx2"
    arity = 2
    m = 2
    self_width = 3  # back to the same slot of the previous column (M + 1 steps)
    cpi_period = 3  # the block: q0, q1, s
    pattern = re.compile(r"\d+\*\d\d")
