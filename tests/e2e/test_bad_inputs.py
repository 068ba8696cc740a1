"""Mistakes a user can make, as a user makes them: the installed script in a subprocess, from
outside the repository. Each is one line naming the problem and the fix, exit 2, no
traceback; a fault of the tool itself is one line and the path of the traceback (exit 70)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import SCRIPT, run_cli, user_environment

from regressions.detection.alerts import Alert, alerts_to_json
from regressions.detection.detect import Regression
from regressions.groundtruth import scratch
from regressions.records import alert_store, lifecycle
from spyre_regress import cli

EXIT_USAGE, EXIT_FAULT, EXIT_PIPE = 2, 70, 141
FIXTURE_RESULTS = Path(__file__).parent.parent / "fixtures" / "asv_results"
DEVICE = "bench_execute.ExecuteDeviceTime.time_device"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A scratch repository of the project: an import and one harmless commit."""
    path = tmp_path_factory.mktemp("scratch") / "repo"
    scratch.build(path, [None])
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """An alerts file with one alert, a bundle's summary.json, a results directory without
    benchmarks.json, a plain file, a directory that is not a repository, an alert store."""
    root = tmp_path_factory.mktemp("inputs")
    member = Regression(machine="m", env="env", benchmark=DEVICE, params="('mlp', 127)",
                        kind="device_time", good_commit="a" * 40, bad_commit="b" * 40,
                        good_position=0, bad_position=1, ratio=1.7, ci=(1.6, 1.8), p=1e-5, q=1e-4,
                        baseline=1.0)
    alerts = root / "alerts.json"
    alerts.write_text(json.dumps(alerts_to_json([Alert("device_time", "a" * 40,
                                                              "b" * 40, (member,), probe=member)])))
    summary = root / "summary.json"
    summary.write_text(json.dumps({"version": 2, "regressions": [], "alerts": 3,
                                   "failures": []}))
    (root / "results").mkdir()
    (root / "plain.txt").write_text("not a directory\n")
    (root / "not-a-repo").mkdir()
    state = root / "state"
    state.mkdir()
    database = alert_store.AlertStore(state / "alerts.sqlite")
    record = lifecycle.AlertRecord(id=1, kind="device_time", good_commit="a" * 40,
                                   bad_commit="b" * 40,
                                   symptoms=lifecycle.symptoms_of(Alert("device_time", "a" * 40,
                                                                        "b" * 40, (member,),
                                                                        probe=member)),
                                   status="reported", culprit="c" * 40)
    database.save([record], {1: {"stage": "kernel",
                                 "report": str(root / ("reports/" + "alert-001/" + "x" * 150))}})
    database.close()
    return {"alerts": alerts, "summary": summary, "results": root / "results",
            "plain": root / "plain.txt", "not_a_repo": root / "not-a-repo", "state": state,
            "root": root}


def usage_error(done, *phrases: str) -> None:
    assert done.returncode == EXIT_USAGE, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spyre-regress: error: "), done.stderr
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])


RANGE = ["--good", "HEAD~1", "--bad", "HEAD"]
WORKLOAD = ["--workload", "mlp", "--shape", "127"]


@pytest.mark.parametrize("command", ["stages", "knobs", "minimize"])
@pytest.mark.parametrize("where, phrases", [
    ("{root}/missing", ("does not exist", "pass --repo pointing at a git clone")),
    ("{plain}", ("is not a directory", "pass --repo")),
    ("{not_a_repo}", ("is not a git repository", "pass --repo pointing at a git clone")),
])
def test_a_repo_that_is_not_a_repository(command, where, phrases, files, outside):
    extra = ["--out", "x.py"] if command == "minimize" else []
    path = where.format(**files)
    usage_error(run_cli(command, "--repo", path, *RANGE, *WORKLOAD, *extra, cwd=outside),
                *phrases)


@pytest.mark.parametrize("command", ["stages", "knobs", "minimize", "bisect"])
def test_a_ref_that_does_not_exist(command, repo, outside):
    extra = {"minimize": [*WORKLOAD, "--out", "x.py"], "bisect": ["--bench", "Execute"]}
    done = run_cli(command, "--repo", str(repo), "--good", "v9.9", "--bad", "HEAD",
                   *extra.get(command, WORKLOAD), cwd=outside)
    usage_error(done, "cannot resolve 'v9.9'", "the ref exists")


@pytest.mark.parametrize("command", ["stages", "knobs", "minimize"])
@pytest.mark.parametrize("name, close", [("mpl", "'mlp'"), ("atention", "'attention'"),
                                         ("transformer", None)])
def test_an_unknown_workload_names_the_close_ones(command, name, close, repo, outside):
    extra = ["--out", "x.py"] if command == "minimize" else []
    done = run_cli(command, "--repo", str(repo), *RANGE, "--workload", name, "--shape",
                   "127", *extra, cwd=outside)
    usage_error(done, f"unknown workload '{name}'", "pass --workload with one of", "mlp")
    assert (f"did you mean {close}?" in done.stderr) if close else "did you mean" not in \
        done.stderr


def test_a_stage_the_compiler_lacks_is_named_with_its_stages(repo, outside):
    done = run_cli("stages", "--repo", str(repo), *RANGE, "--workload", "mlp", "--shape",
                   "127", "--metric", "compile_time", "--stage", "lowr", cwd=outside)
    usage_error(done, "--stage 'lowr': spyre_sim has no such stage", "did you mean 'lower'?",
                "its stages are dynamo, decompose, lower, layout, kernel, sdsc, backend, runtime")


@pytest.mark.slow  # lists the suite in a probe (a torch import)
@pytest.mark.parametrize("bench, params, phrases", [
    ("ExecuteDeviceTim$", "('mlp', 127)",
     ("matches no benchmark", "did you mean 'bench_execute.ExecuteDeviceTime.time_device'")),
    ("Execute", "('mlp', 127)", ("matches", "make it match exactly one")),
    ("ExecuteDeviceTime", "('mlp', 126)",
     ("is not a combination", "seq 126 is not one of", "did you mean 127 or 128?")),
    ("ExecuteDeviceTime", "('mpl', 127)", ("workload 'mpl' is not one of", "'mlp'")),
    ("ExecuteDeviceTime", "('mlp',)", ("takes parameters (workload, seq)", "e.g.")),
    ("ExecuteDeviceTime", "mlp 127", ("cannot read params", "as detect prints them")),
])
def test_bisect_refuses_what_the_suite_does_not_have(bench, params, phrases, repo, outside):
    done = run_cli("bisect", "--repo", str(repo), *RANGE, "--bench", bench, "--params",
                   params, cwd=outside)
    usage_error(done, *phrases)


@pytest.mark.parametrize("args, phrases", [
    (["--alerts", "{summary}"], ("is not an alerts file", "detect --json")),
    (["--alerts", "{root}/none.json"], ("does not exist", "detect --json")),
    (["--alerts", "{plain}"], ("is not valid JSON", "detect --json")),
    (["--alerts", "{alerts}", "--alert", "2"], ("--alert 2", "holds 1 alert(s)", "pass 1..1")),
    (["--alerts", "{alerts}", "--alert", "0"], ("--alert 0", "pass 1..1")),
    (["--alerts", "{alerts}", "--results", "{root}/missing"],
     ("does not exist", "results_dir")),
    (["--alerts", "{alerts}", "--results", "{results}"], ("benchmarks.json", "results_dir")),
    (["--investigation", "{summary}"], ("summary.json", "lists the investigation fields")),
])
def test_report_refuses_the_wrong_files(args, phrases, files, repo, outside):
    given = [a.format(**files) for a in args]
    if "--results" not in given:
        given += ["--results", str(files["results"])]
    if "--investigation" in given:
        given = given[:2]
    done = run_cli("report", "--repo", str(repo), *given, "--out", str(files["root"] / "out"),
                   cwd=outside)
    usage_error(done, *phrases)


def test_nightly_refuses_a_state_file_and_a_non_repository(repo, files, outside):
    usage_error(run_cli("nightly", "--repo", str(repo), "--state", str(files["plain"]),
                        cwd=outside), "is a file", "pass a directory")
    usage_error(run_cli("nightly", "--repo", str(files["not_a_repo"]), cwd=outside),
                "is not a git repository")


def test_alerts_refuses_an_unknown_id_or_status_and_changes_nothing(files, outside):
    state = str(files["state"])
    usage_error(run_cli("alerts", "--state", state, "--set", "9", "fixed", cwd=outside),
                "there is no alert 9", "lists them")
    usage_error(run_cli("alerts", "--state", state, "--set", "1", "done", cwd=outside),
                "it can become ['acknowledged', 'fixed', 'invalid'], not 'done'")
    usage_error(run_cli("alerts", "--state", str(files["root"]), cwd=outside),
                "does not exist", "run `spyre-regress nightly` first")
    listing = run_cli("alerts", "--state", state, cwd=outside)
    assert listing.returncode == 0 and " 1 reported " in listing.stdout
    report = str(files["root"] / ("reports/" + "alert-001/" + "x" * 150))
    assert f"    report: {report}\n" in listing.stdout  # whole, to be copied
    assert max(len(line) for line in listing.stdout.splitlines()
               if not line.startswith("    report: ")) <= 100  # the rest fits the terminal


@pytest.mark.slow  # over 4 s: out of the quick loop, still in CI
def test_version_and_an_example_in_every_help(outside):
    done = run_cli("--version", cwd=outside)
    assert done.returncode == 0 and re.fullmatch(r"spyre-regress \d+\.\d+\.\d+\n", done.stdout)
    for command in cli.COMMANDS:
        name = command.__name__.rsplit(".", 1)[1].replace("_", "-")
        shown = run_cli(name, "--help", cwd=outside)
        last = shown.stdout.rstrip().splitlines()[-2:]
        assert shown.returncode == 0 and last[0] == "example:", shown.stdout
        assert last[1].strip().startswith(f"spyre-regress {name} ")


def test_a_fault_of_the_tool_is_one_line_and_a_traceback_file(monkeypatch, capsys):
    def broken(args):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(cli.alerts, "run", broken)
    assert cli.main(["alerts", "--state", "."]) == EXIT_FAULT
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("spyre-regress: internal error: ZeroDivisionError: a bug")
    written = re.search(r"traceback is in (\S+);", line)
    assert written is not None
    path = Path(written.group(1))
    assert "raise ZeroDivisionError" in path.read_text()
    path.unlink()


def test_a_path_the_system_refuses_is_a_usage_error(monkeypatch, capsys):
    def refused(args):
        raise PermissionError(13, "Permission denied", "/srv/reports/out.json")

    monkeypatch.setattr(cli.alerts, "run", refused)
    assert cli.main(["alerts", "--state", "."]) == EXIT_USAGE
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == ("spyre-regress: error: cannot use /srv/reports/out.json: Permission "
                    "denied; check the path and its permissions")



# --- state, pipes, ranges, outputs ---------------------------------------------------------

@pytest.mark.parametrize("content, phrase", [
    (b"", "is empty"),
    (b"not a database at all\n" * 50, "is not an SQLite database"),
    (b"SQLite format 3\x00" + bytes(range(256)) * 20, "cannot be used (file is not a database)"),
])
@pytest.mark.parametrize("command", ["alerts", "nightly"])
def test_a_damaged_alert_database_is_refused_and_left_as_it_was(command, content, phrase,
                                                                 repo, tmp_path, outside):
    state = tmp_path / "state"
    state.mkdir()
    database = state / "alerts.sqlite"
    database.write_bytes(content)
    args = ["--state", str(state)] + (["--repo", str(repo)] if command == "nightly" else [])
    done = run_cli(command, *args, cwd=outside)
    usage_error(done, str(database), phrase, "restore it from a backup, or move it away")
    assert database.read_bytes() == content  # nothing rewritten: the history is still there
    assert sorted(p.name for p in state.iterdir()) == ["alerts.sqlite"]  # and no lock left


def test_another_programs_database_is_refused(tmp_path, outside):
    import sqlite3

    state = tmp_path / "state"
    state.mkdir()
    connection = sqlite3.connect(state / "alerts.sqlite")
    connection.execute("CREATE TABLE users (name TEXT)")
    connection.commit()
    connection.close()
    before = (state / "alerts.sqlite").read_bytes()
    usage_error(run_cli("alerts", "--state", str(state), cwd=outside),
                "an SQLite database of another program", "['users']")
    assert (state / "alerts.sqlite").read_bytes() == before


def closed_pipe(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """`spyre-regress ARGS | head -0`: the reader is gone before the first line is written."""
    process = subprocess.Popen([str(SCRIPT), *args], cwd=cwd, env=user_environment(),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None  # both piped
    process.stdout.close()
    stderr = process.stderr.read()
    return subprocess.CompletedProcess(args, process.wait(timeout=300), "", stderr)


def test_a_closed_pipe_is_a_quiet_exit(files, outside):
    for args in (["alerts", "--state", str(files["state"])],
                 ["detect", "--results", str(FIXTURE_RESULTS)]):
        done = closed_pipe(*args, cwd=outside)
        assert (done.returncode, done.stderr) == (EXIT_PIPE, ""), (args, done)
    # as a shell pipeline: head has what it asked for, and nothing else is said
    shown = subprocess.run(f"'{SCRIPT}' detect --results '{FIXTURE_RESULTS}' | head -2",
                           shell=True, cwd=outside, env=user_environment(),
                           capture_output=True, text=True, timeout=300)
    assert len(shown.stdout.splitlines()) == 2 and "Error" not in shown.stderr, shown.stderr


@pytest.mark.parametrize("args, phrases", [
    (["stages", *RANGE, *WORKLOAD, "--width", "-1"],
     ("argument --width: '-1' is not a model width from 1 to 16384", "stages --help")),
    (["knobs", *RANGE, "--workload", "mlp", "--shape", "99999"],
     ("argument --shape: '99999' is not a sequence length from 1 to 8192",)),
    (["minimize", *RANGE, *WORKLOAD, "--metric", "compile_time", "--out", "x.py"],
     ("argument --metric: invalid choice: 'compile_time'", "'device_time', 'numerics'")),
    (["nightly", "--stride", "0"], ("argument --stride: '0' is not a whole number",)),
    (["nightly", "--threshold", "compile=-1"],
     ("'compile=-1' is not REGEX=FRACTION with a fraction >= 0 (0.05 is 5%)",)),
    (["stages", "--good", "HEAD", "--bad", "HEAD", *WORKLOAD],
     ("--good HEAD and --bad HEAD are the same commit", "pass an older commit as --good")),
    (["bisect", "--good", "HEAD", "--bad", "HEAD~1", "--bench", "Execute"],
     ("is not on the first-parent history of --bad HEAD~1", "pass an older commit")),
])
def test_numbers_and_ranges_are_checked_before_anything_runs(args, phrases, repo, outside):
    command, rest = args[0], args[1:]
    usage_error(run_cli(command, "--repo", str(repo), *rest, cwd=outside, timeout=60),
                *phrases)


@pytest.mark.parametrize("args, phrases", [
    (["minimize", *RANGE, *WORKLOAD, "--out", "{root}"], ("--out", "is a directory")),
    (["bisect", *RANGE, "--bench", "Execute", "--json", "{plain}/bisect.json"],
     ("cannot write --json", "plain.txt is not a directory")),
    (["stages", *RANGE, *WORKLOAD, "--json", "{root}"], ("--json", "is a directory")),
    (["nightly", "--reports", "{plain}"], ("--reports", "is a file; pass a directory")),
    (["report", "--alerts", "{alerts}", "--results", "{results}", "--out", "{plain}/out"],
     ("cannot write --out", "is not a directory")),
])
def test_outputs_are_checked_writable_before_the_work_and_nothing_is_left(
        args, phrases, files, repo, outside):
    given = [a.format(**files) for a in args]
    before = sorted(p.name for p in files["root"].iterdir())
    done = run_cli(given[0], "--repo", str(repo), *given[1:], cwd=outside, timeout=60)
    usage_error(done, *phrases)
    assert "bisecting" not in done.stderr  # refused before the work
    assert sorted(p.name for p in files["root"].iterdir()) == before  # no temp file left


def test_a_regression_that_does_not_reproduce_is_an_answer_not_a_usage_error(
        monkeypatch, files, repo, tmp_path, capsys):
    """`report` on an alert whose bisection finds no change exits 1 and says so: an answer,
    as bisect's. The investigation is replaced by the answer it gives for such an alert."""
    from regressions.bisection.commits import BisectResult
    from regressions.investigation import investigator

    def not_reproduced(self, alert, target, out_dir, floors=()):
        raise investigator.NotReproduced("the regression did not reproduce between aaaa and "
                                         "bbbb",
                                         BisectResult(culprit=None, good="a", bad="b",
                                                      commits_in_range=1, commits_measured=2,
                                                      steps=[]))

    monkeypatch.setattr(investigator.Investigator, "investigate", not_reproduced)
    (files["results"] / "benchmarks.json").write_text(json.dumps({"version": 2, DEVICE: {
        "name": DEVICE, "type": "time", "params": [["'mlp'"], ["127"]],
        "param_names": ["workload", "seq"], "unit": "seconds", "version": "1"}}))
    try:
        code = cli.main(["report", "--repo", str(repo), "--alerts", str(files["alerts"]),
                         "--results", str(files["results"]), "--out", str(tmp_path / "out")])
    finally:
        (files["results"] / "benchmarks.json").unlink()
    assert code == 1
    out = capsys.readouterr().out
    assert out.startswith("alert 1 of ") and "does not reproduce: the regression did not " \
        "reproduce between aaaa and bbbb; no bundle written" in out
    assert not list((tmp_path / "out").glob("**/report.md"))


def test_a_floor_above_100_percent_is_said_not_taken_silently(outside):
    done = run_cli("detect", "--results", str(FIXTURE_RESULTS), "--threshold", "compile=5",
                   cwd=outside)
    assert done.returncode in (0, 1)  # allowed: a floor of 500% is a choice one can make
    assert done.stderr.splitlines()[0] == (
        "spyre-regress: warning: --threshold 'compile=5' is a floor of 500%: only regressions "
        "worse than x6.00 are reported there; for 5% pass 0.05")
