"""asv stores as they are: format 1 read as asv reads it (never rewritten), what was left out
in one warning line, and each alert marked open or recovered at its series' newest commit,
open ones first (`spyre-regress detect`, run as a user runs it)."""

import hashlib
import json
import logging
import math
import shutil

import pytest
from conftest import run_cli
from test_results import write

from regressions.detection.alerts import ALERTS_VERSION, Alert, alerts_from_json
from regressions.detection.detect import SUMMARY, Regression
from regressions.groundtruth import synthetic
from regressions.records import lifecycle, results, standing

EXIT_REGRESSED = 1
COMMITS = 40  # recovery_store: Stays x1.3 from 20 on; Recovers x1.4 from 10, back from 30


def store(tmp_path, format_version=1):
    return write(tmp_path / f"v{format_version}" / "results",
                 synthetic.recovery_store(COMMITS, format_version=format_version))


def fingerprint(root):
    """Every file of a store: its bytes' hash and its modification time."""
    return {p: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*")) if p.is_file()}


def migrated_by_asv(root, into):
    """A copy of the store migrated by asv's own code, as `asv update` does."""
    from asv.results import Results

    shutil.copytree(root, into)
    for path in into.glob("*/*.json"):
        if path.name != "machine.json":
            Results.update(str(path))
    return into


def test_format_1_reads_as_asv_migrates_it_and_as_the_same_store_in_format_2(tmp_path):
    old = store(tmp_path)
    assert json.loads(next(old.glob("oldbox/0*.json")).read_text())["version"] == 1
    by_asv = migrated_by_asv(old, tmp_path / "asv")
    assert json.loads(next(by_asv.glob("oldbox/0*.json")).read_text())["version"] == 2
    frames = [results.load_results(r) for r in (old, by_asv, store(tmp_path, 2))]
    keys = ["benchmark", "commit", "value", "status"]
    stats = ["ci_99_a", "ci_99_b", "q_25", "q_75"]
    assert frames[0][keys + stats].equals(frames[1][keys + stats])  # what asv itself reads
    assert frames[2][keys].equals(frames[0][keys])
    # asv keeps 5 significant digits of the statistics it migrates
    for column in stats:
        assert frames[0][column].to_numpy() == pytest.approx(frames[2][column].to_numpy(),
                                                              rel=1e-4)
    assert len(frames[0]) == 3 * COMMITS


def test_skipped_files_are_one_warning_with_a_count_and_an_example(tmp_path, caplog):
    root = store(tmp_path)
    (root / "oldbox" / "broken-env.json").write_text("{")
    (root / "oldbox" / "future-env.json").write_text(json.dumps(
        {"version": 3, "commit_hash": "ab" * 20}))
    (root / "oldbox" / "other-tool.json").write_text(json.dumps({"name": "not asv"}))
    with caplog.at_level(logging.INFO, logger="regressions"):
        frame = results.load_results(root)
    assert len(frame) == 3 * COMMITS
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].startswith(f"skipped 3 of {COMMITS + 3} result file(s) (e.g. ")
    listed = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert any("future-env.json" in m and "version 3" in m for m in listed)
    assert any("other-tool.json" in m and "not an asv result document" in m for m in listed)
    assert any("broken-env.json" in m and "not readable JSON" in m for m in listed)


def test_back_at_is_the_trailing_run_nearer_the_good_level():
    assert lifecycle.back_at([2.0, 2.1, 1.0, 1.1], good=1.0, bad=2.0) == 2
    assert lifecycle.back_at([2.0, 1.0, 2.0], good=1.0, bad=2.0) is None  # came back, left
    assert lifecycle.back_at([2.0, 1.9], good=1.0, bad=2.0) is None
    assert lifecycle.back_at([], good=1.0, bad=2.0) is None


def member(name, ratio, q, bad="b"):
    return Regression(machine="m", env="e", benchmark=name, params="", kind="time", good_commit="a",
                      bad_commit=bad, good_position=0, bad_position=1, ratio=ratio,
                      ci=None if ratio is None else (ratio, ratio), p=q, q=q, baseline=1.0)


def alert(*members):
    return Alert("time", "a", "b", members, probe=members[0])


def test_open_alerts_come_first_the_costliest_first():
    small, large = alert(member("s", 1.1, 1e-3)), alert(member("l", 3.0, 1e-2))
    # half the throughput costs as much as twice the time; the more confident ranks higher
    halved, doubt = alert(member("h", 0.5, 1e-9)), alert(member("d", 2.0, 1e-2))
    gone = alert(member("g", 4.0, 1e-9, bad="c"))
    known = {standing.key_of(gone.members[0]): standing.Standing(("c", "d"), 3, SUMMARY)}
    order = [a.members[0].benchmark for a, _ in standing.ranked(
        [small, large, halved, doubt, gone], known)]
    assert order == ["l", "h", "d", "s", "g"]
    assert standing.worsening(halved.members[0]) == pytest.approx(1.0)
    assert math.isinf(standing.worsening(member("f", None, None)))


def detect(*args, cwd):
    return run_cli("detect", *args, cwd=cwd, timeout=300)


def standing_of(document):
    return {a["members"][0]["benchmark"]: (a["status"], a["recovered_in"],
                                           a["members"][0]["judged_by"])
            for a in document["alerts"]}


def test_detect_reads_a_format_1_store_as_is_and_marks_open_and_recovered(tmp_path, outside):
    root = store(tmp_path)
    before = fingerprint(root)
    out = tmp_path / "alerts.json"
    done = detect("--results", str(root), "--json", str(out), cwd=outside)
    assert done.returncode == EXIT_REGRESSED, done.stderr
    assert len(done.stderr.splitlines()) <= 3
    assert fingerprint(root) == before  # nothing written, nothing touched
    document = json.loads(out.read_text())
    assert document["version"] == ALERTS_VERSION == 5
    marks = standing_of(document)
    commit = {c: f"{c + 1:08x}" + "ab" * 16 for c in range(COMMITS)}
    assert set(marks) == {"bench_suite.Stays.time_run", "bench_suite.Recovers.time_run"}
    assert marks["bench_suite.Stays.time_run"] == ("open", None, SUMMARY)
    assert marks["bench_suite.Recovers.time_run"] == (
        "recovered", [commit[29], commit[30]], SUMMARY)
    assert [a["members"][0]["bad_commit"] for a in document["alerts"]] == [commit[20],
                                                                           commit[10]]
    assert "2 alert(s) (1 open, 1 recovered)" in done.stdout.splitlines()[0]
    first, second = [line for line in done.stdout.splitlines() if line.startswith("alert ")]
    assert first.startswith("alert 1: OPEN;") and "Stays" in first
    assert first.endswith(f"judged by {SUMMARY}")
    assert second.startswith(f"alert 2: recovered at {commit[30][:8]} (back after "
                             f"{commit[29][:8]})")
    assert alerts_from_json(document, "alerts.json")[0].members[0].benchmark == \
        "bench_suite.Stays.time_run"  # the new fields read back


def test_same_alerts_as_after_asv_update(tmp_path, outside):
    root = store(tmp_path)
    by_asv = migrated_by_asv(root, tmp_path / "asv")
    documents = []
    for results_dir in (root, by_asv):
        out = tmp_path / f"{results_dir.parent.name}.json"
        done = detect("--results", str(results_dir), "--json", str(out), cwd=outside)
        assert done.returncode == EXIT_REGRESSED, done.stderr
        document = json.loads(out.read_text())
        assert document.pop("source") == {"results": str(results_dir)}
        documents.append(document)
    assert documents[0] == documents[1] and len(documents[0]["alerts"]) == 2


def test_open_shows_only_the_open_alerts(tmp_path, outside):
    out = tmp_path / "open.json"
    done = detect("--results", str(store(tmp_path)), "--open", "--json", str(out),
                  cwd=outside)
    assert done.returncode == EXIT_REGRESSED, done.stderr
    assert standing_of(json.loads(out.read_text())) == {
        "bench_suite.Stays.time_run": ("open", None, SUMMARY)}
    assert [line for line in done.stdout.splitlines() if line.startswith("alert ")] == [
        line for line in done.stdout.splitlines() if line.startswith("alert 1: OPEN;")]


def test_verbose_lists_each_skipped_file(tmp_path, outside):
    root = store(tmp_path)
    for k in range(5):
        (root / "oldbox" / f"broken{k}-env.json").write_text("{")
    quiet = detect("--results", str(root), cwd=outside)
    assert quiet.returncode == EXIT_REGRESSED
    (line,) = quiet.stderr.splitlines()
    assert line.startswith(f"spyre-regress: warning: skipped 5 of {COMMITS + 5} result file")
    loud = detect("--results", str(root), "--verbose", cwd=outside)
    assert sum("broken" in x for x in loud.stderr.splitlines()) == 6  # summary + each
