"""`spyre-regress detect`, run as a user runs it: the installed script in a subprocess."""

import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_cli
from test_results import DATES, FIXTURE, FIXTURE_COMMITS, epoch_ms, make_repo, sha, track, write

from regressions.detection import alerts as detection
from regressions.groundtruth import synthetic
from regressions.groundtruth import tables as planted
from regressions.records import results, tables

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2
FIXTURE_ORDER = [c["sha"] for c in FIXTURE_COMMITS["commits"]]


def detect(*args: str, cwd):
    return run_cli("detect", *args, cwd=cwd, timeout=300)


def test_real_asv_run_gives_exactly_the_injected_alerts(tmp_path, outside):
    out = tmp_path / "alerts.json"
    done = detect("--results", str(FIXTURE), "--json", str(out), cwd=outside)
    assert done.returncode == EXIT_REGRESSED, done.stderr
    doc = json.loads(out.read_text())
    assert doc["version"] == detection.ALERTS_VERSION == 5
    assert doc["source"] == {"results": str(FIXTURE)}
    summary = [(a["kind"], a["good_commit"], a["bad_commit"],
                sorted(m["benchmark"] + m["params"] for m in a["members"]),
                a["probe"]["benchmark"] + a["probe"]["params"]) for a in doc["alerts"]]
    # open first, the costliest first (x2.0 exact, x1.94, x0.8); the failure was fixed
    assert [(a["kind"], a["status"], a["recovered_in"]) for a in doc["alerts"]] == [
        ("numerics", "open", None), ("time", "open", None), ("track", "open", None),
        ("failure", "recovered", [sha("toy: break flaky"), sha("toy: fix flaky")])]
    assert [a["judged_by"] for a in doc["alerts"]] == ["exact values", "samples",
                                                       "exact values", "samples"]
    assert sorted(summary, key=lambda a: FIXTURE_ORDER.index(a[2])) == [
        ("time", sha("toy: docs only"), sha("toy: slow down add"),
         ["bench_execute.Work.time_work(16, 'add')", "bench_execute.Work.time_work(64, 'add')"],
         "bench_execute.Work.time_work(16, 'add')"),
        ("numerics", sha("toy: slow down add"), sha("toy: worse rounding"),
         ["bench_numerics.track_rel_error"], "bench_numerics.track_rel_error"),
        ("track", sha("toy: slow down add"), sha("toy: worse rounding"),
         ["bench_execute.track_items_per_second"], "bench_execute.track_items_per_second"),
        ("failure", sha("toy: worse rounding"), sha("toy: break flaky"),
         ["bench_execute.time_flaky"], "bench_execute.time_flaky"),
    ]
    slowdown = doc["alerts"][1]["members"]
    for member in slowdown:
        assert 1.5 < member["ratio"] < 2.6  # the toy runs 'add' twice
        assert member["ci"][0] < member["ratio"] < member["ci"][1]
        assert member["p"] <= member["q"] <= 0.05
    exact = doc["alerts"][0]["members"][0]
    assert (exact["ratio"], exact["ci"], exact["p"], exact["q"]) == (2.0, [2.0, 2.0], None, None)
    assert doc["alerts"][2]["members"][0]["ratio"] == pytest.approx(0.8)
    assert done.stdout.startswith("7 series over 8 commits on 1 machine(s): 4 alert(s) "
                                  "(3 open, 1 recovered)")
    assert "probe bench_execute.Work.time_work(16, 'add')" in done.stdout
    # the file reads back into the same alerts
    alerts = detection.alerts_from_json(doc, "alerts.json")
    marks = ("status", "recovered_in", "judged_by")

    def unmarked(alert):
        return {**{k: v for k, v in alert.items() if k not in marks}, "members": [
            {k: v for k, v in m.items() if k not in marks} for m in alert["members"]]}

    assert [a.to_dict() for a in alerts] == [unmarked(a) for a in doc["alerts"]]


def test_threshold_and_direction_overrides(tmp_path, outside):
    out = tmp_path / "alerts.json"
    # A 2x slowdown is below a 150% floor; declaring the error higher-is-better makes its
    # doubling an improvement.
    done = detect("--results", str(FIXTURE), "--json", str(out), "--threshold",
                  r"time_work\(=1.5", "--higher-is-better", "track_rel_error", cwd=outside)
    assert done.returncode == EXIT_REGRESSED
    kinds = [a["kind"] for a in json.loads(out.read_text())["alerts"]]
    assert kinds == ["track", "failure"]


def test_no_regression_exits_zero(tmp_path, outside):
    commits = [(f"{i + 1:08x}" * 5, 1_700_000_000_000 + i) for i in range(4)]
    root = write(tmp_path / "results", synthetic.asv_results_documents(commits, track([1] * 4)))
    out = tmp_path / "alerts.json"
    done = detect("--results", str(root), "--json", str(out), cwd=outside)
    assert done.returncode == EXIT_OK
    assert json.loads(out.read_text()) == {"version": 5, "source": {"results": str(root)},
                                           "alerts": [], "environment": []}
    assert "0 alert(s)" in done.stdout


def test_repo_orders_history_and_names_the_bad_commit(tmp_path, outside):
    repo, shas = make_repo(tmp_path, DATES)
    docs: dict[str, dict] = {}
    for i, (commit, date) in enumerate(zip(shas, DATES, strict=True)):
        docs |= synthetic.asv_results_documents([(commit, epoch_ms(date))],
                                                track([1.0 if i < 2 else 2.0]))
    root = write(tmp_path / "results", docs)
    out = tmp_path / "alerts.json"
    done = detect("--results", str(root), "--repo", str(repo), "--json", str(out), cwd=outside)
    assert done.returncode == EXIT_REGRESSED
    (alert,) = json.loads(out.read_text())["alerts"]
    assert (alert["good_commit"], alert["bad_commit"]) == (shas[1], shas[2])
    assert "(commit 2)" in done.stdout


@pytest.mark.parametrize("args, message", [
    (["--results", "{tmp}/missing"], "does not exist"),
    (["--results", "{tmp}"], "no asv results"),
    (["--results", f"{FIXTURE}/fixture"], "pass the results directory above it"),
    (["--results", str(FIXTURE), "--machine", "ci"], "machines found: fixture"),
    (["--results", str(FIXTURE), "--repo", "{tmp}"], "git says"),
    # a missing folder is created; a file where a folder should be is refused before the work
    (["--results", str(FIXTURE), "--json", f"{FIXTURE}/fixture/machine.json/a.json"],
     "cannot write"),
])
def test_input_errors_exit_two(tmp_path, outside, args, message):
    done = detect(*[a.format(tmp=tmp_path) for a in args], cwd=outside)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith("spyre-regress: error: ") and message in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_store_as_a_table_gives_its_alerts_and_json_apart_from_the_source(tmp_path, outside,
                                                                           suffix):
    table = tmp_path / f"results{suffix}"
    rows = tables.long_table(results.load_results(FIXTURE), lists=suffix == ".parquet")
    rows.to_csv(table, index=False) if suffix == ".csv" else rows.to_parquet(table)
    from_store = detect("--results", str(FIXTURE), "--json", str(tmp_path / "a.json"),
                        cwd=outside)
    from_table = detect("--table", str(table), "--json", str(tmp_path / "b.json"), cwd=outside)
    assert from_store.returncode == from_table.returncode == EXIT_REGRESSED, from_table.stderr
    assert from_table.stdout == from_store.stdout
    documents = [json.loads((tmp_path / name).read_text()) for name in ("a.json", "b.json")]
    assert [d.pop("source") for d in documents] == [{"results": str(FIXTURE)},
                                                    {"table": str(table)}]
    assert documents[0] == documents[1] and documents[0]["alerts"]


def test_wide_rows_read_through_the_torch_spyre_mapping(tmp_path, outside):
    table = tmp_path / "perf_benchmarks.parquet"
    planted.ingest_rows(21, planted.Step("add", "compile_ms", 14, 1.4)).to_parquet(table)
    mapping = Path(__file__).parents[1] / "examples" / "tables" / "torch_spyre_perf.json"
    out = tmp_path / "alerts.json"
    done = detect("--table", str(table), "--mapping", str(mapping), "--json", str(out),
                  cwd=outside)
    assert done.returncode == EXIT_REGRESSED, done.stderr
    (alert,) = json.loads(out.read_text())["alerts"]
    assert (alert["kind"], alert["good_commit"], alert["bad_commit"], alert["status"]) == (
        "time", "2026-04-14T03:00:00Z", "2026-04-15T03:00:00Z", "open")
    assert [m["benchmark"] for m in alert["members"]] == ["op.add.compile_ms"]
    assert "good 2026-04-14T03:00:00Z -> bad 2026-04-15T03:00:00Z" in done.stdout


@pytest.mark.parametrize("rows, message", [
    ({"benchmark": ["b"], "commit": ["a"]}, "no column 'value'"),
    ({"benchmark": ["b", "b"], "commit": ["a", "c"], "value": ["1.5", "n/a"]},
     "row 2 (line 3): value 'n/a' in column 'value' is not a number"),
    ({"benchmark": ["b", "b"], "commit": ["a", "a"], "value": [1.0, 2.0]},
     "row 2 (line 3): duplicate key"),
    ({"benchmark": [], "commit": [], "value": []}, "the table holds no rows"),
])
def test_a_malformed_table_exits_two_in_one_line_and_writes_nothing(tmp_path, outside, rows,
                                                                    message):
    table, out = tmp_path / "results.csv", tmp_path / "alerts.json"
    pd.DataFrame(rows).to_csv(table, index=False)
    done = detect("--table", str(table), "--json", str(out), cwd=outside)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith("spyre-regress: error: ") and message in done.stderr
    assert done.stderr.count("\n") == 1 and not out.exists()


@pytest.mark.parametrize("args", [
    ["--results", str(FIXTURE), "--threshold", "a(=0.1"],
    ["--results", str(FIXTURE), "--threshold", "time_x"],
    ["--results", str(FIXTURE), "--threshold", "time_x=-1"],
    ["--results", str(FIXTURE), "--higher-is-better", "[unclosed"],
    ["--results", str(FIXTURE), "--fdr", "0"],
    ["--results", str(FIXTURE), "--table", "t.csv"],
    [],
])
def test_usage_errors_exit_two(args, outside):
    done = detect(*args, cwd=outside)
    assert done.returncode == EXIT_USAGE
    assert done.stderr.startswith("spyre-regress: error:")
    assert "(see `spyre-regress detect --help`)" in done.stderr


def test_damaged_file_is_a_warning_not_a_failure(tmp_path, outside):
    commits = [(f"{i + 1:08x}" * 5, 1_700_000_000_000 + i) for i in range(3)]
    root = write(tmp_path / "results", synthetic.asv_results_documents(commits, track([1] * 3)))
    (root / "synthetic" / "broken-env.json").write_text("{")
    done = detect("--results", str(root), cwd=outside)
    assert done.returncode == EXIT_OK
    assert "spyre-regress: warning: skipped 1 of 4 result file(s)" in done.stderr
    assert "broken-env.json" in done.stderr
