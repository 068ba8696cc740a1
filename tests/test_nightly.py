"""Nightly state: commit selection, alert keys and triage, the lock, and bisection records."""

import os

import pytest

from regressions import results, store
from regressions.detect import Alert, Regression
from regressions.errors import SpyreRegressError
from spyre_regress import nightly


def test_stride_keeps_every_nth_commit_and_the_newest():
    history = [f"c{i}" for i in range(10)]
    assert nightly.select_commits(history, 3) == ["c0", "c3", "c6", "c9"]
    assert nightly.select_commits(history, 4) == ["c0", "c4", "c8", "c9"]
    assert nightly.select_commits(history, 1) == history
    with pytest.raises(SpyreRegressError, match="stride"):
        nightly.select_commits(history, 0)


def _alert(bad="b" * 40, params="('mlp', 127)"):
    member = Regression("m", "env", "bench_execute.X.time_device", params, "device_time",
                        "a" * 40, bad, 0, 1, 1.5, (1.4, 1.6), 1e-4, 1e-3, 1.0)
    return Alert("device_time", "a" * 40, bad, (member,), member)


def test_an_alert_is_stored_once_and_can_be_triaged(tmp_path):
    database = store.AlertStore(tmp_path / "alerts.sqlite")
    first = _alert()
    first_id, new = database.upsert(nightly.alert_key(first), "device_time", "a", "b",
                                    first.to_dict())
    again_id, again_new = database.upsert(nightly.alert_key(_alert()), "device_time", "a", "b",
                                          _alert().to_dict())
    other = _alert(bad="c" * 40)
    other_id, _ = database.upsert(nightly.alert_key(other), "device_time", "a", "c",
                                  other.to_dict())
    assert new and not again_new and again_id == first_id and other_id != first_id
    database.update(first_id, status="reported", culprit="d" * 40, stage="kernel",
                    report="reports/alert-001")
    database.update(first_id, status="acknowledged")
    with pytest.raises(SpyreRegressError, match="status must be one of"):
        database.update(first_id, status="ignored")
    with pytest.raises(SpyreRegressError, match="there is no alert 99"):
        database.update(99, status="fixed")
    database.close()
    reopened = store.AlertStore(tmp_path / "alerts.sqlite")  # state survives a restart
    row = next(r for r in reopened.rows() if r["id"] == first_id)
    assert (row["status"], row["stage"]) == ("acknowledged", "kernel")
    reopened.close()


def test_two_nightlies_cannot_overlap_and_a_stale_lock_is_taken_over(tmp_path):
    lock = tmp_path / "nightly.lock"
    with store.exclusive_lock(lock):
        with pytest.raises(SpyreRegressError, match="another nightly run"):
            with store.exclusive_lock(lock):
                pass
    assert not lock.exists()
    lock.write_text("999999999")  # a pid that is not running: a crashed run's lock
    with store.exclusive_lock(lock):
        assert lock.read_text() == str(os.getpid())


def test_bisection_measurements_read_back_as_asv_results(tmp_path):
    params = [["'mlp'", "'attention'"], ["127", "128"]]
    for commit, base, day in (("1" * 40, 1.0, 1), ("2" * 40, 1.3, 2)):
        for _ in range(2):  # two batches merge into one sample list
            store.record_measurement(
                tmp_path, "bisect", "worktree-probe", commit, day * 86_400_000,
                "bench_execute.ExecuteDeviceTime.time_device", 1, 4, params,
                [base * (1 + 0.01 * k) for k in range(5)], False, "execute-device-1")
    frame = results.load_results(tmp_path)
    measured = frame[frame["status"] == "ok"]
    assert set(measured["params"]) == {"('mlp', 128)"}
    assert sorted(len(s) for s in measured["samples"]) == [10, 10]
    skipped = frame[frame["params"] == "('mlp', 127)"]
    assert set(skipped["status"]) == {"skipped"}
