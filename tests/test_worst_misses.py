"""scripts/worst_misses.py: where in the answer each worst-case miss of a record goes wrong."""
import json
from pathlib import Path

import pytest

from tests.helpers import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "worst_misses.py"


@pytest.fixture(scope="module")
def misses():
    return load_script(SCRIPT)


def failure(family: str, text: str, output: str, expected: str) -> dict:
    return {"length": 4, "family": family, "input": text, "output": output, "expected": expected}


def test_each_miss_is_placed_from_the_answers_end(misses, tmp_path, capsys):
    record = {"rows": [
        {"length": 4, "worst_failures": [
            failure("zero_digits", "9999*90", "011880000000", "01188000000&"),  # a 0 for the end mark
            failure("near_equal", "1000-999", "1001", "1")]},                    # runs past the end
        {"length": 6}]}
    (tmp_path / "abs_nx2.seed3.json").write_text(json.dumps(record))
    (tmp_path / "summary.json").write_text(json.dumps({"cells": 1}))  # not a record: passed over in a folder
    assert misses.main([str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "- abs_nx2.seed3, 4 digits, zero_digits: `9999*90`: 12 tokens for 12, 1 wrong, the first 1 from the end; "
        "expected `000000&`, got `0000000`",
        "- abs_nx2.seed3, 4 digits, near_equal: `1000-999`: 4 tokens for 1, 3 wrong, from past the expected end; "
        "expected `1`, got `1001`"]


def test_records_without_misses_and_bad_paths(misses, tmp_path, capsys):
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps({"rows": [{"length": 6, "worst": 100.0}]}))
    assert misses.main([str(clean)]) == 0
    assert capsys.readouterr().out.strip() == "No worst-case misses in these records."
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    for bad in (tmp_path / "missing.json", other):
        assert misses.main([str(bad)]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("worst_misses: error: ") and str(bad) in err and "\n" not in err
