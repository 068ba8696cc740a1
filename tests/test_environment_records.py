"""Environment alerts across nights (regressions/records/environment_records.py): listed once
when new, kept, matched by machine, environment and overlapping range."""

import json

import pytest
from conftest import run_cli

from regressions.detection.environment import EnvironmentAlert
from regressions.errors import SpyreRegressError
from regressions.records import alert_store, environment_records

COMMITS = [f"{i:040x}" for i in range(20)]
PLACE = {c: i for i, c in enumerate(COMMITS)}


def change(good, bad, env="env", direction="worse", members=()):
    return EnvironmentAlert(machine="runner", env=env, good_commit=COMMITS[good],
                            bad_commit=COMMITS[bad], good_position=good, bad_position=bad,
                            cause="shared", direction=direction, moved=28, measured=30,
                            detected=24, median_ratio=1.25, spread=0.01, still_measured=10,
                            members=members)


def test_a_new_change_of_the_machine_is_listed_once_and_kept():
    records, events = environment_records.advance([], [change(9, 10)], PLACE, "night 1")
    assert [(e.alert_id, e.after) for e in events] == [(1, "environment")]
    assert "28 of 30 runner-bound series" in events[0].note and "pin the runner" in \
        events[0].note
    again, events = environment_records.advance(records, [change(9, 10)], PLACE, "night 2")
    assert events == [] and len(again) == 1 and again[0].last_seen == "night 2"
    assert again[0].first_seen == "night 1"
    # another environment of the machine, or another commit, is another change
    more, events = environment_records.advance(again, [change(9, 10, env="other"),
                                                       change(14, 15)], PLACE, "night 3")
    assert [e.alert_id for e in events] == [2, 3] and len(more) == 3


def test_records_round_trip_and_refuse_unknown_versions():
    (record,), _ = environment_records.advance([], [change(3, 4)], PLACE, "n")
    data = json.loads(json.dumps(environment_records.to_dict(record)))
    assert environment_records.from_dict(data) == record
    with pytest.raises(SpyreRegressError, match="version 7"):
        environment_records.from_dict({**data, "version": 7})


def test_the_alerts_command_lists_the_machines_changes(tmp_path, outside):
    records, _ = environment_records.advance([], [change(9, 10)], PLACE, "night 1")
    database = alert_store.AlertStore(tmp_path / "alerts.sqlite")
    database.save_environment(records)
    database.close()
    listing = run_cli("alerts", "--state", str(tmp_path), cwd=outside)
    assert listing.returncode == 0, listing.stderr
    assert "no alerts" in listing.stdout
    assert "environment alerts (the machine changed, not the code): 1" in listing.stdout
    assert f"E1   runner/env {COMMITS[9][:8]}..{COMMITS[10][:8]} worse" in listing.stdout
    assert "first seen night 1" in listing.stdout and "pin the runner" in listing.stdout
