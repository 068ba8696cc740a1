"""Nightly state: commit selection, alert keys and triage, the lock, and bisection records."""

import json
import os
import subprocess

import pytest

from regressions import git
from regressions.detection.alerts import Alert
from regressions.detection.detect import Regression
from regressions.errors import SpyreRegressError
from regressions.probing.protocol import BenchAnswer
from regressions.records import alert_store, asv_documents, files, lifecycle, results
from spyre_regress import nightly


def test_stride_keeps_every_nth_commit_and_the_newest():
    history = [f"c{i}" for i in range(10)]
    assert nightly.select_commits(history, 3) == ["c0", "c3", "c6", "c9"]
    assert nightly.select_commits(history, 4) == ["c0", "c4", "c8", "c9"]
    assert nightly.select_commits(history, 1) == history
    with pytest.raises(SpyreRegressError, match="stride"):
        nightly.select_commits(history, 0)


def _alert(bad="b" * 40, params="('mlp', 127)"):
    member = Regression(machine="m", env="env", benchmark="bench_execute.X.time_device",
                        params=params, kind="device_time",
                        good_commit="a" * 40, bad_commit=bad, good_position=0, bad_position=1,
                        ratio=1.5, ci=(1.4, 1.6), p=1e-4, q=1e-3, baseline=1.0)
    return Alert("device_time", "a" * 40, bad, (member,), probe=member)


def test_alert_records_survive_a_restart_and_triage_follows_the_lifecycle(tmp_path):
    database = alert_store.AlertStore(tmp_path / "alerts.sqlite")
    night = lifecycle.advance([], [_alert(), _alert(bad="c" * 40, params="('mlp', 128)")],
                              {"a" * 40: 0, "b" * 40: 1, "c" * 40: 2}, "night 1")
    database.save(night.records, {1: {"stage": "kernel", "report": "reports/x"}})
    database.close()
    reopened = alert_store.AlertStore(tmp_path / "alerts.sqlite")
    records = reopened.records()
    assert records == night.records and [r.status for r in records] == ["new", "new"]
    assert reopened.extras()[1] == {"stage": "kernel", "report": "reports/x"}
    with pytest.raises(SpyreRegressError, match="can become"):
        lifecycle.triage(records[0], "acknowledged")  # new -> acknowledged is not allowed
    reopened.save([lifecycle.triage(records[0], "invalid")])
    assert [r.status for r in reopened.records()] == ["invalid", "new"]
    assert reopened.extras()[1]["report"] == "reports/x"  # kept when the record changes
    reopened.close()


def test_a_schema_2_database_is_carried_over(tmp_path):
    import sqlite3

    path = tmp_path / "alerts.sqlite"
    old = sqlite3.connect(path)
    old.execute("CREATE TABLE alerts (id INTEGER PRIMARY KEY, key TEXT UNIQUE, status TEXT, "
                "kind TEXT, good TEXT, bad TEXT, culprit TEXT, stage TEXT, report TEXT, "
                "document TEXT, created REAL, updated REAL, note TEXT)")
    old.execute("INSERT INTO alerts (id, status, kind, document, culprit, stage, report) "
                "VALUES (4, 'reported', 'device_time', ?, ?, 'kernel', 'r/4')",
                (json.dumps(_alert().to_dict()), "d" * 40))
    old.commit()
    old.close()
    database = alert_store.AlertStore(path)
    (record,) = database.records()
    assert (record.id, record.status, record.culprit) == (4, "reported", "d" * 40)
    assert database.extras()[4] == {"stage": "kernel", "report": "r/4"}
    database.close()


def test_two_nightlies_cannot_overlap_and_a_stale_lock_is_taken_over(tmp_path):
    lock = tmp_path / "nightly.lock"
    with files.exclusive_lock(lock):
        with pytest.raises(SpyreRegressError, match="another nightly run"):
            with files.exclusive_lock(lock):
                pass
    assert not lock.exists()
    lock.write_text("999999999")  # a pid that is not running: a crashed run's lock
    with files.exclusive_lock(lock):
        assert lock.read_text() == str(os.getpid())


def test_bisection_measurements_read_back_as_asv_results(tmp_path):
    params = (("'mlp'", "'attention'"), ("127", "128"))
    for commit, base, day in (("1" * 40, 1.0, 1), ("2" * 40, 1.3, 2)):
        for _ in range(2):  # two batches merge into one sample list
            answer = BenchAnswer(status="ok",
                                 samples=tuple(base * (1 + 0.01 * k) for k in range(5)),
                                 deterministic=False, param_index=1, combos=4,
                                 param_lists=params, benchmark_version="execute-device-1")
            asv_documents.record_measurement(
                tmp_path, machine="bisect", env_name="worktree-probe", commit=commit,
                commit_date_ms=day * 86_400_000,
                benchmark="bench_execute.ExecuteDeviceTime.time_device", measured=answer)
    frame = results.load_results(tmp_path)
    measured = frame[frame["status"] == "ok"]
    assert set(measured["params"]) == {"('mlp', 128)"}
    assert sorted(len(s) for s in measured["samples"]) == [10, 10]
    skipped = frame[frame["params"] == "('mlp', 127)"]
    assert set(skipped["status"]) == {"skipped"}


def test_asvs_set_up_is_a_phase_of_its_own(tmp_path):
    """asv's set-up before its first benchmark (environments, installs, discovery) is taken
    out of the night's "benchmark" phase and named first."""
    runner = nightly.AsvRunner(nightly.NightlyOptions(repo=tmp_path, state_dir=tmp_path,
                                                      reports_dir=tmp_path),
                               lambda _: None)
    night_phases = {"benchmark": 100.0, "detect": 1.0, "publish": 2.0}
    assert nightly._phases(night_phases, runner) == night_phases  # no asv run tonight
    runner.setup_seconds = 30.0
    assert list(nightly._phases(night_phases, runner).items()) == [
        ("asv set-up", 30.0), ("benchmark", 70.0), ("detect", 1.0), ("publish", 2.0)]


def test_the_night_starts_at_since_and_refuses_a_commit_off_the_branch(tmp_path):
    """A checkout whose early history the suite cannot build (torch-spyre's before its torch
    2.13 upgrade) is benchmarked from `--since` on."""
    repo = git.init_repository(tmp_path / "repo")
    shas = []
    for index in range(4):
        (repo / "f.txt").write_text(str(index))
        shas.append(git.commit_all(repo, f"c{index}", 1_767_225_600 + 3600 * index))
    assert nightly.branch_history(repo, "main") == shas
    assert nightly.branch_history(repo, "main", shas[1][:10]) == shas[1:]
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "-b", "side", shas[1]], check=True)
    (repo / "g.txt").write_text("x")
    off = git.commit_all(repo, "side", 1_767_300_000)
    with pytest.raises(SpyreRegressError, match="not on main's first-parent history"):
        nightly.branch_history(repo, "main", off)
