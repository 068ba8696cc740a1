"""A table of results (records/tables.py) reads into what an asv store reads into: the long
layout of a store gives the same series, a wide table goes through its column mapping, and a
table that cannot be read stops with one line naming the row or the column."""

import json
from pathlib import Path

import pandas as pd
import pytest
from test_results import FIXTURE

from regressions.detection import detect
from regressions.errors import SpyreRegressError
from regressions.groundtruth import tables as planted
from regressions.records import results, tables

MAPPING = Path(__file__).parents[1] / "examples" / "tables" / "torch_spyre_perf.json"


def series_of(frame):
    return [(s.machine, s.env, s.name, s.commits, s.positions, s.samples, s.higher_is_better,
             s.deterministic, s.settings) for s in results.series_from_frame(frame)]


@pytest.fixture(scope="module")
def fixture_frame():
    return results.load_results(FIXTURE)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_store_written_as_a_long_table_reads_back_as_the_same_series(tmp_path, suffix,
                                                                       fixture_frame):
    path = tmp_path / f"store{suffix}"
    table = tables.long_table(fixture_frame, lists=suffix == ".parquet")
    table.to_csv(path, index=False) if suffix == ".csv" else table.to_parquet(path)
    read = tables.load_table(path)
    assert series_of(read) == series_of(fixture_frame)
    assert set(read["status"]) == set(fixture_frame["status"])  # failed and skipped kept


def test_wide_ingest_rows_read_through_the_mapping(tmp_path):
    rows = planted.ingest_rows(24, planted.Step("matmul", "spyre_ms", 15, 1.2))
    path = tmp_path / "perf_benchmarks.csv"
    rows.to_csv(path, index=False)
    frame = tables.load_table(path, mapping=tables.read_mapping(MAPPING))
    found = {s.name: s for s in results.series_from_frame(frame)}
    # one series per operation and figure the mapping names and the rows hold
    assert len(found) == (len(planted.OPS) + 1) * len(planted.METRICS)
    spyre = found["op.matmul.spyre_ms(input_shapes='128x4096x4096', run_mode='op_benchmark')"]
    assert (spyre.machine, spyre.env, spyre.kind) == ("x86_64", "perf-nightly", "time")
    assert spyre.commits[0] == "2026-04-01T03:00:00Z" and len(spyre.commits) == 24
    memory = next(s for name, s in found.items() if name.startswith("op.add.mem_size_mb"))
    assert memory.kind == "memory"
    regressions = detect.run_detection(list(found.values())).regressions
    assert [(r.name, r.bad_commit, r.kind) for r in regressions] == [
        (spyre.name, "2026-04-16T03:00:00Z", "time")]


def test_a_long_table_without_commits_is_ordered_by_its_order_column(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({"benchmark": ["b"] * 4, "order": [3, 1, 2, 10],
                  "value": [1.0, 2.0, 3.0, 4.0]}).to_csv(path, index=False)
    frame = tables.load_table(path)
    assert frame["value"].tolist() == [2.0, 3.0, 1.0, 4.0]
    assert frame["commit"].tolist() == ["1", "2", "3", "10"]
    assert frame["machine"].tolist() == [tables.MACHINE] * 4


def test_kinds_units_direction_and_machine_parameters_of_a_long_table(tmp_path):
    path = tmp_path / "t.csv"
    pd.DataFrame({
        "benchmark": ["ops", "ops", "tput", "tput"], "commit": ["a1", "b2", "a1", "b2"],
        "date": ["2026-01-01", "2026-01-02"] * 2, "value": [10, 10, 5.0, 4.0],
        "kind": ["count", "count", "track", "track"], "higher_is_better": ["", "", "1", "1"],
        "machine.cpu": ["x", "y", "x", "y"]}).to_csv(path, index=False)
    found = {s.name: s for s in results.series_from_frame(tables.load_table(path))}
    assert (found["ops"].kind, found["tput"].kind) == ("count", "track")
    assert found["tput"].higher_is_better and not found["ops"].higher_is_better
    assert found["ops"].settings == ("cpu=x", "cpu=y")


@pytest.mark.parametrize("table, message", [
    ({"benchmark": ["b"], "commit": ["a"]}, "no column 'value'"),
    ({"benchmark": ["b"], "value": [1.0]}, "no column 'commit, order or date'"),
    ({"benchmark": ["b", "b"], "commit": ["a", "c"], "value": ["1.5", "fast"]},
     "row 2 (line 3): value 'fast' in column 'value' is not a number"),
    ({"benchmark": ["b", "b"], "commit": ["a", "a"], "value": [1.0, 2.0]},
     "row 2 (line 3): duplicate key: row 1 (line 2) already gives b at a"),
    ({"benchmark": ["b"], "date": ["yesterday"], "value": [1.0]},
     "row 1 (line 2): date 'yesterday' in column 'date' is not a date"),
    ({"benchmark": ["b"], "commit": ["a"], "value": [1.0], "kind": ["speed"]},
     "row 1 (line 2): kind 'speed' is none of"),
    ({"benchmark": ["b"], "commit": ["a"], "value": [1.0], "samples": ["[1, x]"]},
     "row 1 (line 2): samples '[1, x]' are not a list of numbers"),
])
def test_a_malformed_table_is_one_line_naming_the_row_or_column(tmp_path, table, message):
    path = tmp_path / "t.csv"
    pd.DataFrame(table).to_csv(path, index=False)
    with pytest.raises(SpyreRegressError) as error:
        tables.load_table(path)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("name, text, message", [
    ("t.csv", "", "holds no rows"),
    ("t.csv", "benchmark,commit,value\n", "holds no rows"),
    ("t.parquet", "not parquet", "not readable as Parquet"),
    ("t.txt", "x", "not a table this tool reads"),
])
def test_empty_unreadable_or_unknown_files(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(SpyreRegressError, match=message):
        tables.load_table(path)


@pytest.mark.parametrize("document, message", [
    ({"version": 2, "value": "v"}, "no \"version\": 1"),
    ({"version": 1, "colour": "v"}, "unknown field 'colour'"),
    ({"version": 1, "values": {"x": {"kind": "speed"}}}, "kind 'speed' is none of"),
    ({"version": 1, "benchmark": 3}, "'benchmark' must be a column or a list of columns"),
])
def test_a_bad_mapping_is_one_line(tmp_path, document, message):
    path = tmp_path / "m.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SpyreRegressError, match=message):
        tables.read_mapping(path)


def test_long_rows_plant_the_stated_share_of_steps():
    table, steps = planted.long_rows(40, 30, share=0.05, seed=3)
    assert len(table) == 40 * 30 and len(steps) == 2
    assert all(3 <= at < 27 for at in steps.values())
