"""The cell matrix of ``reproduce``: every registered task × the rows of each table.

A cell is one row of a table: a base config, the task and the overrides that make the row
(:class:`Cell`). A task's rows, paper figures and labels come from its class
(``abc_lightning/tasks/``), so a new task gets its cells here without a line of this file or
a config changing. The lengths and sample counts every cell is tested at are here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

LENGTHS = [6, 10, 15, 20, 60, 599, 600, 601, 10000]
# beyond the paper's protocol, on fewer samples; three neighbours, because an input's length
# mod 3 decides the phase at which period-3 CPI meets it (600 has the training frame's)
LONG_LENGTHS, LONG_SAMPLES = [599, 600, 601], 1000
HUGE_LENGTHS, HUGE_SAMPLES = [10000], 100  # the encoder-window cells, whose evaluation is linear
WORST_LENGTHS = [60, *LONG_LENGTHS, *HUGE_LENGTHS]  # the worst-case columns: one per long length, as the phases differ
SHAPE_SAMPLES = 1000  # each of a task's other shapes (Task.shape_tests: more operands, unequal operands)

class Cell(NamedTuple):
    """One row of a reproduction table: a base config, the task and the overrides that make the cell."""

    task: str
    label: str
    config: str
    paper60: float | None = None  # the paper's accuracy at 60 digits, None where it has none
    overrides: tuple[str, ...] = ()  # CLI overrides on top of the config (the task's --data=… first)
    name: str = ""  # record name (results/<table>/<name>.json)
    curve: bool = False  # also evaluate every length 1..60 (CURVE_SAMPLES each) for the figure
    checkpoint: str = "best"  # which checkpoint of the fit is tested: "best" or "last"
    home: str = ""  # table folder that owns the record; a cell shared between tables runs once
    long: bool = False  # also test at LONG_LENGTHS (LONG_SAMPLES each): cells that extrapolate
    huge: bool = False  # also test at HUGE_LENGTHS (HUGE_SAMPLES each): cells whose every attention is windowed
    note: str = ""  # what the paper column shows where it has no number
    seed: int = 0  # --seed_everything and --data.seed (the model/shuffle seed and the permutation Π)

    @property
    def key(self) -> str:
        return self.name or Path(self.config).stem

    @property
    def base_key(self) -> str:
        """The cell's name without its seed: the row of the table its records share."""
        return self.key.split(".seed")[0]

    def for_seed(self, seed: int) -> "Cell":
        """The same cell under another seed: both the model/shuffle seed (``seed_everything``)
        and the split permutation Π (``data.seed``) change. Seed 0 is the configs' own, so its
        command and record name stay as they were; seed S is recorded as ``<name>.seedS``."""
        if seed == self.seed:
            return self
        base = self._replace(name=self.base_key, seed=0,
                             overrides=tuple(o for o in self.overrides if not o.startswith(SEED_FLAGS)))
        if seed == 0:
            return base
        return base._replace(name=f"{base.base_key}.seed{seed}", seed=seed,
                             overrides=(*base.overrides, f"--seed_everything={seed}", f"--data.seed={seed}"))

    @property
    def command(self) -> str:
        return " ".join(["python -m abc_lightning fit --config", self.config, *self.overrides])


@dataclass(frozen=True)
class TableEntry:
    """Where a task sits in the results tables (``reproduce``), and what the papers measured.

    - ``table``: ``table1`` for the papers' tasks (Tables 1 and 3, the baselines), ``beyond``
      for the tasks no paper has length-generalized (``results/beyond.md``); ``order``: its
      place in them;
    - ``rows``, ``baselines``, ``abc``: which cells ``reproduce`` runs for it (Table 1's rows
      ``vanilla``, ``w1``, ``cpi`` (+ T, the task's own period), ``nope_w1``; the baseline
      schemes; an ABC cell); ``vanilla_label``: the name of its vanilla row;
    - ``paper`` and ``paper_abc``: the papers' accuracy at 60 digits per row of Table 1 and of
      Table 3 (``ABC`` and the baseline schemes it compares with), shown beside ours; empty
      where the papers have no number, and ``paper_note`` shown instead where it says why;
    - ``learned_phases``: also an encoder-window row whose T phases are learned vectors
      (``--model.positional=Learned``) instead of sinusoidal ones.
    """

    table: str = "beyond"
    order: int = 100
    rows: tuple[str, ...] = ("vanilla", "w1", "cpi", "nope_w1")
    vanilla_label: str = "Vanilla"
    baselines: bool = True
    abc: bool = True
    paper: dict[str, float] = field(default_factory=dict)
    paper_abc: dict[str, float] = field(default_factory=dict)
    paper_note: str = ""
    learned_phases: bool = False


#: Each task's place in the results tables, by task name. A task named nowhere here gets
#: every row of the beyond table (``TableEntry()``), after these.
TASK_TABLES: dict[str, TableEntry] = {
    "successor": TableEntry("table1", 0, paper={"vanilla": 0.0, "w1": 100.0, "cpi": 100.0, "nope_w1": 100.0},
                            paper_abc={"vanilla": 0.0, "rope": 0.0, "alibi": 0.0, "ABC": 100.0}),
    "addition": TableEntry("table1", 1, paper={"vanilla": 0.0, "w1": 0.0, "cpi": 100.0, "nope_w1": 99.35},
                           paper_abc={"vanilla": 0.0, "rope": 0.0, "alibi": 0.0, "ABC": 99.8}),
    "parity": TableEntry("table1", 2, paper={"vanilla": 0.0, "w1": 100.0, "cpi": 100.0, "nope_w1": 100.0},
                         vanilla_label="Vanilla + scratchpad"),
    # one row: the classifier the scratchpad is compared with
    "parity_classification": TableEntry("table1", 3, rows=("vanilla",), vanilla_label="Transformer (classification)",
                                        paper_note="52.0 / 52.6 at any length (Delétang / Ruoss)", baselines=False,
                                        abc=False),
    "nx1": TableEntry("table1", 4, paper={"vanilla": 0.0, "w1": 0.0, "cpi": 100.0, "nope_w1": 98.31},
                      paper_abc={"vanilla": 0.0, "rope": 0.0, "ABC": 100.0}),
    "subtraction": TableEntry("beyond", 10),
    "addition3": TableEntry("beyond", 11),
    "nx2": TableEntry("beyond", 12),
    "signed_subtraction": TableEntry("beyond", 13),
    # its encoder-window model misreads the multiplicand at one of the 4 sinusoidal phases
    # (docs/results.md, "Limits we have diagnosed"); learned phase vectors are the row that tests it
    "nx3": TableEntry("beyond", 14, learned_phases=True),
    # no vanilla row: the FIRE baseline is the plain model on the same scratchpad; no ABC: a
    # token's row above sits 2R steps back, and R grows with W, so there is no fixed line to calibrate
    "addition_k": TableEntry("beyond", 15, rows=("w1", "cpi", "nope_w1"), abc=False),
    # no ABC: a token's row above sits 3R steps back, and R grows with the operands: no fixed line
    "multiplication": TableEntry("beyond", 16, rows=("w1", "cpi", "nope_w1"), abc=False),
    # no ABC cell yet (not tried); the vanilla row and FIRE are its baselines
    "division": TableEntry("beyond", 17, rows=("vanilla", "w1", "cpi"), abc=False),
}


def table_entry(task: str) -> TableEntry:
    """The task's :class:`TableEntry` (the beyond table's defaults for a task not in :data:`TASK_TABLES`)."""
    return TASK_TABLES.get(task, TableEntry())


SEED_FLAGS = ("--seed_everything=", "--data.seed=")

ABS, ABC, BASELINE = "configs/abs.yaml", "configs/abc.yaml", "configs/baseline.yaml"
NO_CPI = ("--model.position_index=null",)  # "+ w=1": the window without cyclic position indexing
NOPE = (*NO_CPI, "--model.positional=NoPE")
#: Table 1's "Vanilla": the plain model on Table 1's input form (aligned), trained as a baseline
#: is (a constant rate, up to 8,000 steps, stopped once it interpolates): a row that never learned
#: the task says nothing about extrapolation, and aligned vanilla addition needs about 5,000 steps.
TABLE1_PLAIN = ("--data.aligned=true",)
TABLE1_ROWS = {  # row -> (label, config, overrides, record name)
    "vanilla": (None, BASELINE, TABLE1_PLAIN, "{task}_vanilla"),
    "w1": ("+ w=1", ABS, NO_CPI, "{task}_w1"),
    "cpi": ("+ T", ABS, (), "abs_{task}"),  # + T: CPI with the task's own period
    "nope_w1": ("NoPE + w=1", ABS, NOPE, "{task}_nope_w1"),
}
#: Baseline schemes: label and the model overrides that choose them.
SCHEMES = {"vanilla": ("Vanilla", ()), "learned": ("Learned", ("--model.positional=Learned",)),
           "nope": ("NoPE", ("--model.positional=NoPE",)), "rope": ("RoPE", ("--model.positional=Rotary",)),
           "alibi": ("ALiBi", ("--model.positional=ALiBi",)), "t5": ("T5 bias", ("--model.positional=T5Relative",)),
           "sandwich": ("Sandwich", ("--model.positional=Sandwich",)), "fire": ("FIRE", ("--model.positional=FIRE",)),
           "randomized": ("Randomized", ("--model.position_index=RandomizedIndex",
                                         "--model.position_index.max_position=1024"))}


def data_flag(task: str) -> str:
    from abc_lightning.tasks import class_name

    return f"--data={class_name(task)}"


def task_flags(task: str, config: str | None = None) -> tuple[str, ...]:
    """``--data=<Task>``, the overrides the task's every cell takes (``Task.cell_overrides``) and,
    for a cell of ``configs/abs.yaml``, those of its ABS cells (``Task.abs_overrides``)."""
    from abc_lightning.tasks import get_task

    spec = get_task(task)
    return (data_flag(task), *spec.cell_overrides, *(spec.abs_overrides if config == ABS else ()))


def _tasks(table: str | None = None) -> dict:
    """The registered tasks (of one table: ``table1`` for the paper's, ``beyond`` for ours)."""
    from abc_lightning.tasks import TASKS

    chosen = [name for name in TASKS if table is None or table_entry(name).table == table]
    return {name: TASKS[name] for name in sorted(chosen, key=lambda n: (table_entry(n).order, n))}


def abs_rows(table: str) -> list[Cell]:
    """Table 1's rows (vanilla, + w=1, + T, NoPE + w=1) for the tasks of ``table``."""
    cells = []
    for name, task in _tasks(table).items():
        entry = table_entry(name)
        for row in entry.rows:
            label, config, over, key = TABLE1_ROWS[row]
            if row == "cpi":
                label = f"+ T={task.cpi_period}"  # the config's period: task
            cells.append(Cell(name, label or entry.vanilla_label, config, entry.paper.get(row),
                              (*task_flags(name, config), *over), key.format(task=name), home=table,
                              long=row != "vanilla",
                              note=entry.paper_note if row == "vanilla" else ""))
    return cells


def encoder_window_rows(table: str) -> list[Cell]:
    """Not in the paper: + T with the encoder windowed too (w=1 each side), which makes
    evaluation linear in the length (docs/speed.md). These are the cells tested at 10,000
    digits: every other cell's encoder attends to the whole input, which is quadratic."""
    rows = []
    for name, task in _tasks(table).items():
        if "cpi" not in table_entry(name).rows:
            continue
        label, key = f"+ T={task.cpi_period}, encoder window w=1", f"{name}_T{task.cpi_period}_encoder_w1"
        over = (*task_flags(name, ABS), "--bias.encoder_width=1")
        rows.append(Cell(name, f"{label} (ours)", ABS, None, over, key, home=table, long=True, huge=True))
        if table_entry(name).learned_phases:
            rows.append(Cell(name, f"{label}, learned phases (ours)", ABS, None, (*over, "--model.positional=Learned"),
                             f"{key}_learned", home=table, long=True, huge=True))
    return rows


def table1_cells() -> list[Cell]:
    """Table 1: the paper's tasks under ABS, the schemes it ablates, and two rows of ours."""
    cells = abs_rows("table1")
    # Supplementary: the CPU configs use dropout 0; the paper's 0.3 matters for sinusoidal cells.
    cells.append(Cell("successor", "+ w=1, dropout 0.3 (paper's)", ABS, 100.0,
                      (data_flag("successor"), *NO_CPI, "--model.dropout=0.3"), "successor_w1_dropout03",
                      home="table1", long=True))
    return cells + encoder_window_rows("table1")


def geometry_cells() -> list[Cell]:
    """Which cross-attention window geometry works (the papers leave it open)."""
    runs = [("successor", g, 1) for g in ("trailing", "symmetric", "leading")]
    runs += [("addition", g, w) for g, w in (("trailing", 0), ("trailing", 1), ("symmetric", 1))]
    return [Cell(task, f"NoPE, self w=1, cross {g} w={w}", ABS, None,
                 (data_flag(task), *NOPE, f"--bias.geometry={g}", f"--bias.cross_width={w}"), f"{task}_{g}_cross{w}")
            for task, g, w in runs]


def baseline_cells() -> list[Cell]:
    """Every task × scheme, natural input form (Figure 1, Tables 1 and 3)."""
    return [Cell(name, label, BASELINE, table_entry(name).paper_abc.get(key), (data_flag(name), *over), f"{name}_{key}",
                 curve=True, home="baselines")
            for name, task in _tasks("table1").items() if table_entry(name).baselines for key, (label, over) in SCHEMES.items()]


def abc_cells(table: str) -> list[Cell]:
    """The ABC cell of every task of ``table`` that has one: the documented command, one
    fit that interpolates, calibrates and retrains. It is tested on the model at the end of
    retraining (the lowest validation loss can belong to the interpolation phase, before any
    bias exists)."""
    rows = []
    for name in _tasks(table):
        paper = table_entry(name).paper_abc
        if table_entry(name).abc:
            config, over = ABC, (data_flag(name),)
            label = "ABC" if "ABC" in paper else "ABC (beyond the paper)"
            rows.append(Cell(name, label, config, paper.get("ABC"), over, f"abc_{name}", checkpoint="last",
                             curve=True, home=table if table != "table1" else "table3", long=True,
                             note="– (the paper's vanilla model does not interpolate parity)" if name == "parity" else ""))
    return rows


def table3_cells() -> list[Cell]:
    """Table 3: ABC against the baselines that fail, natural input form. The baseline rows are
    cells of the baselines table (run once, shared) for the schemes the paper reports; the
    last rows are ABC under the paper's own settings (``--bias.preset=paper``)."""
    tasks = _tasks("table1")
    rows = [cell for cell in baseline_cells() if cell.key.split("_", 1)[1] in table_entry(cell.task).paper_abc]
    paper = [cell._replace(label="ABC, the paper's preset", overrides=(*cell.overrides, "--bias.preset=paper"),
                           name=f"abc_paper_{cell.task}", curve=False, long=False)
             for cell in abc_cells("table1")]
    return rows + abc_cells("table1") + paper


#: The baseline of the tasks beyond the paper: FIRE, the positional scheme with the best
#: length generalization on addition in the literature (Zhou et al., 2024), on the natural form.
BEYOND_BASELINE = "fire"


def beyond_cells() -> list[Cell]:
    """The tasks no paper has length-generalized (subtraction, signed subtraction,
    three-operand addition, N×2): Table 1's rows, the encoder-window row, ABC and a
    positional-scheme baseline, under the same protocol."""
    label, over = SCHEMES[BEYOND_BASELINE]
    baselines = [Cell(name, f"{label} (baseline)", BASELINE, None, (*task_flags(name), *over),
                      f"{name}_{BEYOND_BASELINE}", curve=True, home="beyond")
                 for name, task in _tasks("beyond").items() if table_entry(name).baselines]
    return abs_rows("beyond") + encoder_window_rows("beyond") + abc_cells("beyond") + baselines


TABLES = {"table1": table1_cells, "geometry": geometry_cells, "baselines": baseline_cells, "table3": table3_cells,
          "beyond": beyond_cells}


def all_cells() -> list[Cell]:
    return [cell for make in TABLES.values() for cell in make()]


CURVE_LENGTHS = list(range(1, 61))
CURVE_SAMPLES = 500
