"""A table's records packed into one compressed bundle beside it, and unpacked again."""
import gzip
import json

import pytest

from abc_lightning.reproduce.records import bundle_path, pack, read_bundle, unpack_missing, write_bundle


def test_pack_then_unpack_gives_back_the_records_and_nothing_else(tmp_path):
    results = tmp_path / "results"
    (results / "table1" / "runs" / "abs_addition" / "fit").mkdir(parents=True)
    (results / "beyond").mkdir()
    one = {"rows": [{"length": 60, "accuracy": 100.0}], "seed": 0, "commit": "abc1234"}
    two = {"rows": [{"length": 60, "accuracy": 99.5}], "seed": 1, "commit": "abc1234"}
    (results / "table1" / "abs_addition.json").write_text(json.dumps(one))
    (results / "beyond" / "abs_nx2.seed1.json").write_text(json.dumps(two))
    (results / "table1" / "abs_addition.fit.log").write_text("log")

    packed = pack(results, "table1", {results / "table1" / "abs_addition.json": one,
                                      results / "beyond" / "abs_nx2.seed1.json": two})
    assert packed == bundle_path(results, "table1")
    assert read_bundle(packed) == {"beyond/abs_nx2.seed1.json": two, "table1/abs_addition.json": one}

    again = tmp_path / "again"
    again.mkdir()
    (again / "table1.records.json.gz").write_bytes(packed.read_bytes())
    assert unpack_missing(again, "table1") == 2
    assert sorted(p.relative_to(again).as_posix() for p in again.rglob("*.json")) == [
        "beyond/abs_nx2.seed1.json", "table1/abs_addition.json"]
    assert json.loads((again / "table1" / "abs_addition.json").read_text()) == one
    assert unpack_missing(again, "table1") == 0  # what is there already is kept, not rewritten


def test_the_same_records_give_the_same_bytes(tmp_path):
    records = {"table1/b.json": {"rows": [], "seed": 1}, "table1/a.json": {"rows": [], "seed": 0}}
    write_bundle(tmp_path / "x.records.json.gz", records)
    first = (tmp_path / "x.records.json.gz").read_bytes()
    write_bundle(tmp_path / "x.records.json.gz", dict(reversed(records.items())))
    assert (tmp_path / "x.records.json.gz").read_bytes() == first


def test_unpack_refuses_a_path_outside_the_folder_before_writing_anything(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    write_bundle(bundle_path(out, "table1"), {"table1/fine.json": {"rows": []}, "../escape.json": {"rows": []}})
    with pytest.raises(ValueError, match="not a <table>/<cell>.json path"):
        unpack_missing(out, "table1")
    assert not (tmp_path / "escape.json").exists() and not (out / "table1").exists()


def test_a_file_that_is_not_a_bundle_is_refused(tmp_path):
    path = tmp_path / "t.records.json.gz"
    path.write_bytes(gzip.compress(b'{"a.json": {"no rows": 1}}'))
    with pytest.raises(ValueError, match="not a bundle of records"):
        read_bundle(path)


def test_the_committed_bundles_hold_every_table_cell_the_tables_show():
    from pathlib import Path

    results = Path(__file__).resolve().parents[1] / "results"
    for table in ("table1", "table3", "baselines", "geometry", "beyond"):
        records = read_bundle(bundle_path(results, table))
        shown = json.loads((results / f"{table}.json").read_text())["cells"]
        assert sum(len(c["seeds"]) for c in shown) == len(records) > 0, table
