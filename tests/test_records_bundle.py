"""scripts/records_bundle.py: a results folder's records into one file and back."""
import json
from pathlib import Path

import pytest

from tests.helpers import load_script

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "records_bundle.py"


@pytest.fixture(scope="module")
def bundle():
    return load_script(SCRIPT)


def test_pack_then_unpack_gives_back_the_records_and_nothing_else(bundle, tmp_path):
    results = tmp_path / "results"
    (results / "table1" / "runs" / "abs_addition" / "fit").mkdir(parents=True)
    (results / "beyond").mkdir()
    one = {"rows": [{"length": 60, "accuracy": 100.0}], "seed": 0, "commit": "abc1234"}
    two = {"rows": [{"length": 60, "accuracy": 99.5}], "seed": 1, "commit": "abc1234"}
    (results / "table1" / "abs_addition.json").write_text(json.dumps(one))
    (results / "beyond" / "abs_nx2.seed1.json").write_text(json.dumps(two))
    (results / "table1.json").write_text(json.dumps({"cells": [one]}))  # a table, not a record
    (results / "table1" / "runs" / "abs_addition" / "fit" / "val_accuracy.json").write_text("{}")
    (results / "table1" / "abs_addition.fit.log").write_text("log")

    packed = tmp_path / "records.json"
    assert bundle.main(["pack", str(results), str(packed)]) == 0
    assert sorted(json.loads(packed.read_text())) == ["beyond/abs_nx2.seed1.json", "table1/abs_addition.json"]

    out = tmp_path / "again"
    assert bundle.main(["unpack", str(packed), str(out)]) == 0
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "beyond/abs_nx2.seed1.json", "table1/abs_addition.json"]
    assert json.loads((out / "table1" / "abs_addition.json").read_text()) == one
    assert json.loads((out / "beyond" / "abs_nx2.seed1.json").read_text()) == two


def test_unpack_refuses_a_path_outside_the_folder(bundle, tmp_path):
    packed = tmp_path / "records.json"
    packed.write_text(json.dumps({"table1/fine.json": {"rows": []}, "../escape.json": {"rows": []}}))
    with pytest.raises(SystemExit, match="not a <table>/<cell>.json path"):
        bundle.main(["unpack", str(packed), str(tmp_path / "out")])
    assert not (tmp_path / "escape.json").exists()
    assert not (tmp_path / "out").exists()  # nothing written before the refusal


def test_a_missing_source_is_one_line(bundle, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        bundle.main(["pack", str(tmp_path / "nowhere"), str(tmp_path / "records.json")])
    assert exit_.value.code == 2
    assert "does not exist" in capsys.readouterr().err
