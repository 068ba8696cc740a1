import json
import subprocess
import sys

import pytest
from test_results import DATES, FIXTURE, epoch_ms, make_repo, sha, track, write

from regressions import cli, synthetic


def detect(*args: str) -> int:
    return cli.main(["detect", *args])


def test_real_asv_run_gives_exactly_the_injected_alerts(tmp_path, capsys):
    out = tmp_path / "alerts.json"
    assert detect("--results", str(FIXTURE), "--json", str(out)) == cli.EXIT_REGRESSED
    doc = json.loads(out.read_text())
    assert doc["version"] == 1
    summary = [(a["kind"], a["good_commit"], a["bad_commit"],
                sorted(m["benchmark"] + m["params"] for m in a["members"]),
                a["probe"]["benchmark"] + a["probe"]["params"]) for a in doc["alerts"]]
    assert summary == [
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
    slowdown = doc["alerts"][0]["members"]
    for member in slowdown:
        assert 1.5 < member["ratio"] < 2.6  # the toy runs 'add' twice
        assert member["ci"][0] < member["ratio"] < member["ci"][1]
        assert member["p"] <= member["q"] <= 0.05
    exact = doc["alerts"][1]["members"][0]
    assert (exact["ratio"], exact["ci"], exact["p"], exact["q"]) == (2.0, [2.0, 2.0], None, None)
    assert doc["alerts"][2]["members"][0]["ratio"] == pytest.approx(0.8)
    printed = capsys.readouterr().out
    assert printed.startswith("7 series over 8 commits on 1 machine(s): 4 alert(s)")
    assert "probe bench_execute.Work.time_work(16, 'add')" in printed


def test_threshold_and_direction_overrides(tmp_path):
    out = tmp_path / "alerts.json"
    # A 2x slowdown is below a 150% floor; declaring the error higher-is-better makes its
    # doubling an improvement.
    assert detect("--results", str(FIXTURE), "--json", str(out), "--threshold",
                  r"time_work\(=1.5", "--higher-is-better", "track_rel_error") == 1
    kinds = [a["kind"] for a in json.loads(out.read_text())["alerts"]]
    assert kinds == ["track", "failure"]


def test_no_regression_exits_zero(tmp_path, capsys):
    commits = [(f"{i + 1:08x}" * 5, 1_700_000_000_000 + i) for i in range(4)]
    root = write(tmp_path / "results", synthetic.asv_results_documents(commits, track([1] * 4)))
    out = tmp_path / "alerts.json"
    assert detect("--results", str(root), "--json", str(out)) == cli.EXIT_OK
    assert json.loads(out.read_text()) == {"version": 1, "alerts": []}
    assert "0 alert(s)" in capsys.readouterr().out


def test_repo_orders_history_and_names_the_bad_commit(tmp_path, capsys):
    repo, shas = make_repo(tmp_path, DATES)
    docs = {}
    for i, (commit, date) in enumerate(zip(shas, DATES, strict=True)):
        docs |= synthetic.asv_results_documents([(commit, epoch_ms(date))],
                                                track([1.0 if i < 2 else 2.0]))
    root = write(tmp_path / "results", docs)
    out = tmp_path / "alerts.json"
    assert detect("--results", str(root), "--repo", str(repo), "--json", str(out)) == 1
    (alert,) = json.loads(out.read_text())["alerts"]
    assert (alert["good_commit"], alert["bad_commit"]) == (shas[1], shas[2])
    assert "(commit 2)" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--results", "{tmp}/missing"], "does not exist"),
    (["--results", "{tmp}"], "no asv results"),
    (["--results", str(FIXTURE), "--machine", "ci"], "machines found: fixture"),
    (["--results", str(FIXTURE), "--repo", "{tmp}"], "git says"),
    (["--results", str(FIXTURE), "--json", "{tmp}/no/such/dir/a.json"], "cannot write"),
])
def test_input_errors_exit_two(tmp_path, capsys, args, message):
    args = [a.format(tmp=tmp_path) for a in args]
    assert detect(*args) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("spyre-regress: error: ") and message in err


@pytest.mark.parametrize("args", [
    ["--results", str(FIXTURE), "--threshold", "a(=0.1"],
    ["--results", str(FIXTURE), "--threshold", "time_x"],
    ["--results", str(FIXTURE), "--threshold", "time_x=-1"],
    ["--results", str(FIXTURE), "--higher-is-better", "[unclosed"],
    ["--results", str(FIXTURE), "--fdr", "0"],
    [],
])
def test_usage_errors_exit_two(args, capsys):
    with pytest.raises(SystemExit) as stop:
        detect(*args)
    assert stop.value.code == cli.EXIT_USAGE
    assert "spyre-regress detect: error:" in capsys.readouterr().err


def test_damaged_file_is_a_warning_not_a_failure(tmp_path, capsys):
    commits = [(f"{i + 1:08x}" * 5, 1_700_000_000_000 + i) for i in range(3)]
    root = write(tmp_path / "results", synthetic.asv_results_documents(commits, track([1] * 3)))
    (root / "synthetic" / "broken-env.json").write_text("{")
    assert detect("--results", str(root)) == cli.EXIT_OK
    err = capsys.readouterr().err
    assert "spyre-regress: warning: skipping" in err and "broken-env.json" in err


def test_runs_as_a_module_with_exit_codes(tmp_path):
    # scripts/bench_detect.py times `python -m regressions.cli detect` in a fresh process.
    done = subprocess.run([sys.executable, "-m", "regressions.cli", "detect", "--results",
                           str(FIXTURE)], capture_output=True, text=True, check=False)
    assert done.returncode == cli.EXIT_REGRESSED
    assert "4 alert(s)" in done.stdout
    missing = subprocess.run([sys.executable, "-m", "regressions.cli", "detect", "--results",
                              str(tmp_path / "none")], capture_output=True, text=True, check=False)
    assert missing.returncode == cli.EXIT_USAGE and "does not exist" in missing.stderr
