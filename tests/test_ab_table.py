"""scripts/ab_table.py: one cell's records in two results folders, side by side by seed."""
import json
from pathlib import Path

import pytest

from tests.helpers import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "ab_table.py"


@pytest.fixture(scope="module")
def ab():
    return load_script(SCRIPT)


def nxm_record(seed: int, acc60: float, worst: float = 100.0) -> dict:
    return {"task": "multiplication", "seed": seed, "steps": 2000, "train_seconds": 10.0,
            "commit": "abc1234", "cpu": "test CPU", "command": f"fit --seed_everything={seed}",
            "rows": [{"length": 6, "accuracy": 100.0, "worst": 90.0 if seed else 100.0, "samples": 1000},
                     {"length": 20, "accuracy": 100.0, "worst": 100.0, "samples": 1000},
                     {"length": 60, "accuracy": acc60, "worst": worst, "samples": 200}],
            "shape_rows": [{"length": 60, "second": 6, "accuracy": 99.5, "worst": 100.0, "samples": 200},
                           {"length": 6, "second": 60, "accuracy": 100.0, "worst": 100.0, "samples": 200}]}


def write(folder: Path, name: str, record: dict) -> None:
    (folder / "beyond").mkdir(parents=True, exist_ok=True)
    (folder / "beyond" / name).write_text(json.dumps(record))


def test_two_arms_side_by_side_with_wrong_answers_counted(ab, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "abs_multiplication.json", nxm_record(0, 96.5))
    write(a, "abs_multiplication.seed1.json", nxm_record(1, 100.0))
    write(a, "abs_multiplication_T6_encoder_w1.json", nxm_record(0, 0.0))  # another cell: ignored
    write(b, "abs_multiplication.json", nxm_record(0, 99.5))
    out = tmp_path / "ab"
    assert ab.main(["beyond", "abs_multiplication", "--arm", "drop", str(a), "--arm", "no drop", str(b),
                    "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    assert [(l["seed"], l["arm"]) for l in result["lines"]] == [(0, "drop"), (0, "no drop"), (1, "drop")]
    first = result["lines"][0]
    # 60×60 (96.5% of 200: 7 wrong) and 60×6 (99.5% of 200: 1) and 6×60 (none): 8 of 600
    assert first["accuracy"] == {"20×20": 100.0, "60×60": 96.5, "60×6": 99.5, "6×60": 100.0}
    assert (first["wrong_at_60"], first["inputs_at_60"]) == (8, 600)
    assert first["worst"] == 100.0 and result["lines"][2]["worst"] == 90.0  # the lowest at any length
    assert first["record"] == "beyond/abs_multiplication.json"
    md = out.with_suffix(".md").read_text()
    assert "| 0 | drop | 100 | 96.5 | 99.5 | 100 | 100 | 8 of 600 |" in md
    # only seed 0 ran in both arms, so the totals are of it alone
    assert "Over the seeds every arm ran (0): drop: 8 wrong of 600; no drop: 2 wrong of 600." in md
    assert "python scripts/ab_table.py beyond abs_multiplication" in md


def test_an_arm_without_the_cell_is_one_line(ab, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "abs_multiplication.json", nxm_record(0, 100.0))
    write(b, "abs_nx2.json", nxm_record(0, 100.0))
    with pytest.raises(SystemExit) as exit_:
        ab.main(["beyond", "abs_multiplication", "--arm", "a", str(a), "--arm", "b", str(b),
                 "--out", str(tmp_path / "ab")])
    assert exit_.value.code == 2
    assert "arm 'b' holds no beyond/abs_multiplication record" in capsys.readouterr().err
    assert not (tmp_path / "ab.md").exists()


def test_a_missing_folder_is_one_line(ab, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        ab.main(["beyond", "abs_multiplication", "--arm", "a", str(tmp_path / "nowhere"),
                 "--arm", "b", str(tmp_path), "--out", str(tmp_path / "ab")])
    assert exit_.value.code == 2
    assert "is not a folder" in capsys.readouterr().err


def test_an_unreadable_record_is_one_line_and_exit_2(ab, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "abs_multiplication.json", nxm_record(0, 100.0))
    (b / "beyond").mkdir(parents=True)
    (b / "beyond" / "abs_multiplication.json").write_text('{"rows": [')  # torn
    with pytest.raises(SystemExit) as exit_:
        ab.main(["beyond", "abs_multiplication", "--arm", "a", str(a), "--arm", "b", str(b),
                 "--out", str(tmp_path / "ab")])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "abs_multiplication.json is not a readable record" in err[0]
    assert not (tmp_path / "ab.md").exists()
