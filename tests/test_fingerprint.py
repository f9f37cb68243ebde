"""The behaviour fingerprint (tests/fingerprint.py): every kind of table cell, run tiny, does
what tests/fingerprint.json recorded; a one-line change to data, a mask, a position index,
the schedule, replay or calibration is caught; another CPU kernel family is not."""

import inspect
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import fingerprint

REFERENCE = fingerprint.reference()
RUNS = fingerprint.runs()


def test_every_kind_of_cell_has_a_recorded_fingerprint():
    missing = [name for name in RUNS if name not in REFERENCE]
    assert not missing, f"no fingerprint for {missing}: record them with python -m tests.fingerprint --write " \
                        + " ".join(missing)
    assert not set(REFERENCE) - set(RUNS), "fingerprint.json holds runs no table has any more"
    # every task under every bias strategy the tables give it
    from abc_lightning.reproduce.cells import all_cells

    pairs = {(cell.task, Path(cell.config).stem) for cell in all_cells()}
    assert len(pairs) > 30 and all(f"{config}_{task}" in RUNS for task, config in pairs)


@pytest.mark.parametrize("name", list(RUNS))
def test_behaviour_matches_the_fingerprint(name):
    got = fingerprint.record(name)
    differ = fingerprint.differences(REFERENCE[name], got)
    assert not differ, (f"{name} no longer does what the tables' runs did ({len(differ)} differences):\n  "
                        + "\n  ".join(differ[:12]) + "\nIf the change is meant, rewrite the fingerprint "
                        f"(python -m tests.fingerprint --write {name}) and remake the table rows it touches.")


# ---- the fingerprint can fail ---------------------------------------------------------
def edited(function, old: str, new: str):
    """``function`` compiled again from its source with one line changed (``old`` -> ``new``)."""
    source = textwrap.dedent(inspect.getsource(function))
    assert source.count(old) == 1, f"{old!r} is not one place in {function.__qualname__}"
    namespace = dict(vars(inspect.getmodule(function)))
    exec(compile(source.replace(old, new), inspect.getsourcefile(function), "exec"), namespace)
    return namespace[function.__name__]


def _perturbations():
    from abc_lightning.data import module as data
    from abc_lightning.training import module
    from abc_lightning.calibration import lines as calibration
    from abc_lightning.scaffolding import windows
    from abc_lightning.training.replay import ErrorReplay
    from abc_lightning.model.position_index import CyclicIndex
    from abc_lightning.tasks import base, needs

    return {
        # run, what the line decides, (owner, attribute, function, old, new)
        "position index": ("abs_addition", CyclicIndex, "source", CyclicIndex.source,
                           "torch.arange(length - 1, -1, -1, device=device)", "torch.arange(length, 0, -1, device=device)"),
        "task window (mask)": ("abs_addition", base, "dependency_windows", needs.dependency_windows,
                               "cross[row_of[used], positions[used] - low] = True",
                               "cross[row_of[used], positions[used] - low - 1] = True"),
        "width window (mask)": ("successor_trailing_cross1", windows, "self_window", windows.self_window,
                                "(i - j <= width)", "(i - j < width)"),
        "training data": ("abs_addition", data, "SALT_TRAIN", None, data.SALT_TRAIN, data.SALT_TRAIN + 1),
        "learning-rate schedule": ("abs_successor", module, "lr_factor", module.lr_factor,
                                   "0.5 * (1.0 + math.cos(math.pi * progress))",
                                   "0.5 * (1.0 + math.cos(math.pi * progress * 0.99))"),
        "error replay": ("abs_successor", ErrorReplay, "_generator", ErrorReplay._generator,
                         "self.seed * 1_000_003 + step", "self.seed * 1_000_003 + step + 1"),
        "calibration": ("abc_addition", calibration, "drop_off", calibration.drop_off,
                        "keep &= z > kappa", "keep &= z > kappa + 0.25"),
    }


@pytest.mark.parametrize("what", list(_perturbations()))
def test_a_one_line_change_fails_the_fingerprint(what, monkeypatch):
    run, owner, attribute, function, old, new = _perturbations()[what]
    monkeypatch.setattr(owner, attribute, new if function is None else edited(function, old, new))
    differ = fingerprint.differences(REFERENCE[run], fingerprint.record(run))
    assert differ, f"changing {what} ({old!r} -> {new!r}) left {run}'s fingerprint as it was"


def test_float_noise_within_the_tolerance_passes_and_more_does_not():
    record = REFERENCE["abs_successor"]
    noisy = {**record, "steps": [{**s, "loss": s["loss"] * (1 + fingerprint.TOLERANCE / 2)} for s in record["steps"]]}
    assert fingerprint.differences(record, noisy) == []
    worse = {**record, "steps": [{**s, "loss": s["loss"] * (1 + fingerprint.TOLERANCE * 2)} for s in record["steps"]]}
    assert len(fingerprint.differences(record, worse)) == len(record["steps"])


def test_a_greedy_answer_may_flip_only_at_a_near_tie():
    answers = {"tokens": ["0123", "4567"], "margin": [fingerprint.MARGIN / 10, 2.0]}
    record = {"greedy": {"9": answers}}
    tie_flipped = {"greedy": {"9": {**answers, "tokens": ["0124", "4567"]}}}
    assert fingerprint.differences(record, tie_flipped) == []
    clear_flipped = {"greedy": {"9": {**answers, "tokens": ["0123", "4568"]}}}
    assert fingerprint.differences(record, clear_flipped) == [
        "greedy/9 row 1: token 3 was 7, now 8 (the answer's smallest margin 2)"]


@pytest.mark.slow
def test_other_cpu_kernels_pass():
    """The generic kernels (no AVX) on one thread: another summation order everywhere, the
    same fingerprint. The CI machine's own family (AVX2 or AVX512) is the parametrized test."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
           "ONEDNN_MAX_CPU_ISA": "SSE41", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    names = ["abs_addition", "abc_addition", "baseline_addition", "successor_alibi"]
    done = subprocess.run([sys.executable, "-m", "tests.fingerprint", *names], env=env, capture_output=True,
                          text=True, cwd=fingerprint.ROOT, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    assert done.stdout.count(" same, ") == len(names), done.stdout
