"""scripts/compare_records.py: two folders of reproduce records, compared cell by cell."""
import json
from pathlib import Path

import pytest

from tests.helpers import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "compare_records.py"


@pytest.fixture(scope="module")
def compare():
    return load_script(SCRIPT)


def record(commit: str, accuracy_60: float = 100.0, steps: int = 8000) -> dict:
    return {
        "steps": steps, "stopped": "step budget", "commit": commit, "threads": "1", "cpu": "x",
        "rows": [{"length": 6, "accuracy": 100.0, "worst": 100.0},
                 {"length": 60, "accuracy": accuracy_60, "worst": 100.0}],
        "curve": [{"length": 1, "accuracy": 100.0, "samples": 9}],
    }


def write(folder: Path, records: dict) -> Path:
    folder.mkdir()
    for name, rec in records.items():
        (folder / f"{name}.json").write_text(json.dumps(rec))
    return folder


def test_same_cells_agree_and_differences_are_named(compare, tmp_path, capsys):
    a = write(tmp_path / "a", {"abs_parity": record("aaa"), "abs_nx1": record("aaa"), "only_a": record("aaa")})
    b = write(tmp_path / "b", {"abs_parity": record("bbb"), "abs_nx1": record("bbb", accuracy_60=99.5, steps=7000)})
    assert compare.main([str(a), str(b)]) == 1
    out = capsys.readouterr().out
    parity = next(line for line in out.splitlines() if line.startswith("| abs_parity "))
    nx1 = next(line for line in out.splitlines() if line.startswith("| abs_nx1 "))
    assert parity.endswith("| same |") and "`aaa`" in parity and "`bbb`" in parity
    assert "steps: 8000 vs 7000" in nx1 and "length 60: 100.0 vs 99.5" in nx1
    assert "Only in the first folder: only_a" in out
    assert "1 of 2 shared cell(s) the same" in out


def test_identical_folders_exit_zero(compare, tmp_path, capsys):
    a = write(tmp_path / "a", {"abs_parity": record("aaa")})
    b = write(tmp_path / "b", {"abs_parity": record("bbb")})
    assert compare.main([str(a), str(b)]) == 0
    assert "1 of 1 shared cell(s) the same" in capsys.readouterr().out


def test_bad_input_is_one_line(compare, tmp_path, capsys):
    a = write(tmp_path / "a", {"abs_parity": record("aaa")})
    assert compare.main([str(a), str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not a folder" in err[0]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert compare.main([str(a), str(empty)]) == 2
    assert "holds no reproduce records" in capsys.readouterr().err


def test_an_unreadable_record_is_one_line_and_exit_2(compare, tmp_path, capsys):
    a = write(tmp_path / "a", {"abs_parity": record("aaa")})
    b = write(tmp_path / "b", {"abs_parity": record("bbb")})
    (b / "abs_parity.json").write_text('{"rows": [')  # torn
    with pytest.raises(SystemExit) as exit_:
        compare.main([str(a), str(b)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "abs_parity.json is not a readable record" in err[0]


def test_shape_rows_are_compared(compare, tmp_path, capsys):
    def with_shapes(commit: str, accuracy: float) -> dict:
        rec = {**record(commit), "task": "multiplication"}
        rec["shape_rows"] = [{"second": 20, "length": 60, "accuracy": accuracy, "worst": 100.0},
                             {"second": 6, "length": 60, "accuracy": 100.0, "worst": 100.0}]
        return rec
    a = write(tmp_path / "a", {"abs_multiplication": with_shapes("aaa", 100.0)})
    b = write(tmp_path / "b", {"abs_multiplication": with_shapes("bbb", 99.5)})
    assert compare.main([str(a), str(b)]) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| abs_multiplication "))
    assert line.endswith("differs: shape 60×20: 100.0 vs 99.5 |")
