"""N×3 multiplication with a column scratchpad: y = x1 × x2, x2 of exactly three digits."""

from __future__ import annotations

import re

from abc_lightning.tasks.fixed_width import MultiplyFixedWidth


class Nx3Task(MultiplyFixedWidth):
    """N×3 multiplication (the second operand has exactly three digits, e.g. ``1234*567``) (``--data=Nx3``)."""

    name = "nx3"
    arity = 2
    m = 3
    self_width = 4  # back to the same slot of the previous column (M + 1 steps)
    cpi_period = 4  # the block: q0, q1, q2, s
    pattern = re.compile(r"\d+\*\d\d\d")
