"""The alert lifecycle: matching across nights, provisional alerts, dismissal and revival,
the publishing predicate, grouping by culprit, triage and the storage form."""

import dataclasses
import json
import math

import pytest

from regressions import codec
from regressions.detection import detect
from regressions.detection.alerts import cluster_alerts
from regressions.errors import SpyreRegressError
from regressions.records import lifecycle

COMMITS = [f"{i:040x}" for i in range(40)]
PLACE = {c: i for i, c in enumerate(COMMITS)}


def regression(good, bad, params="('mlp', 128)", kind="time", edge=None, ratio=1.2,
               benchmark="bench_execute.ExecuteDeviceTime.time_device"):
    return detect.Regression(machine="m", env="env", benchmark=benchmark, params=params, kind=kind,
                             good_commit=COMMITS[good], bad_commit=COMMITS[bad],
                             good_position=good, bad_position=bad, ratio=ratio,
                             ci=(ratio - 0.05, ratio + 0.05), p=1e-6, q=1e-5, baseline=1.0,
                             edge=edge)


def alert(*members):
    (a,) = cluster_alerts(list(members))
    return a


def evidence(ratio, ci, floor=0.01, higher=False, good=3, bad=4, members=()):
    return lifecycle.Evidence(good_commit=COMMITS[good], bad_commit=COMMITS[bad], ratio=ratio,
                              ci=ci, pvalue=1e-3, samples=(100, 100), floor=floor,
                              higher_is_better=higher, alert_good=COMMITS[good],
                              alert_bad=COMMITS[bad], members=tuple(members))


def night(records, alerts, label, place=PLACE):
    return lifecycle.advance(records, alerts, place, label)


def key(params="('mlp', 128)", benchmark="bench_execute.ExecuteDeviceTime.time_device"):
    return lifecycle.series_key("m", "env", benchmark, params)


# --- provisional alerts ------------------------------------------------------------------

def test_a_provisional_alert_is_confirmed_when_its_level_holds():
    first = night([], [alert(regression(9, 10, edge="newest"))], "n1")
    (record,) = first.records
    assert (record.status, record.provisional, first.investigate) == ("new", True, [record.id])
    reported = lifecycle.investigated(record, lifecycle.Outcome(
        COMMITS[10], evidence(1.2, (1.18, 1.22), good=9, bad=10)), "n1")
    assert reported.status == "reported"
    second = night([reported], [alert(regression(9, 10))], "n2")
    (confirmed,) = second.records
    assert (confirmed.status, confirmed.provisional) == ("reported", False)
    assert confirmed.note.startswith("confirmed on n2")
    assert second.investigate == []  # reported once


def test_a_provisional_alert_is_withdrawn_with_a_note_when_detection_drops_it():
    first = night([], [alert(regression(9, 10, edge="newest"))], "n1")
    second = night(first.records, [], "n2", PLACE)
    (withdrawn,) = second.records
    assert withdrawn.status == "withdrawn"
    assert withdrawn.note.startswith("withdrawn on n2: detection no longer finds it")
    assert "commit(s) landed after" in withdrawn.note
    (event,) = second.events
    assert (event.before, event.after) == ("new", "withdrawn")
    # Measured again with no commit after it: the note says so.
    quiet = {c: i for c, i in PLACE.items() if i <= 10}
    again = night(first.records, [], "n2", quiet).records[0]
    assert "measured again" in again.note
    # A withdrawn record never matches: if the regression returns it is a new alert.
    third = night(second.records, [alert(regression(9, 10, edge="newest"))], "n3")
    assert [r.id for r in third.records] == [1, 2] and third.investigate == [2]


def test_a_confirmed_alert_that_detection_misses_one_night_is_kept():
    first = night([], [alert(regression(9, 10))], "n1")
    assert night(first.records, [], "n2").records == first.records


# --- matching ------------------------------------------------------------------------------

def test_a_range_that_narrows_as_commits_are_added_is_the_same_alert():
    first = night([], [alert(regression(6, 12))], "n1")
    second = night(first.records, [alert(regression(8, 9))], "n2")
    (record,) = second.records
    assert (record.id, record.good_commit, record.bad_commit) == (1, COMMITS[8], COMMITS[9])
    assert list(second.alerts) == [1] and second.investigate == [1]


def test_a_provisional_alert_whose_range_moves_inside_its_window_is_the_same_alert():
    # Tonight the newest commit 12 showed it (window 9..12); re-measurement tomorrow puts
    # the step at 10, held by three commits.
    first = night([], [alert(regression(9, 12, edge="newest"))], "n1")
    second = night(first.records, [alert(regression(9, 10))], "n2")
    (record,) = second.records
    assert (record.id, record.bad_commit, record.provisional) == (1, COMMITS[10], False)


def test_no_match_across_kinds_disjoint_series_or_disjoint_ranges():
    first = night([], [alert(regression(9, 12))], "n1")
    others = [alert(regression(9, 12, kind="compile",
                               benchmark="bench_compile.CompileTotal.time_compile")),
              alert(regression(9, 12, params="('attention', 1)")),
              alert(regression(12, 14))]
    for other in others:
        second = night(first.records, [other], "n2")
        assert len(second.records) == 2 and second.investigate == [1, 2]


def test_two_regressions_in_one_window_split_into_two_alerts():
    # One alert over (9, 12] with two series; re-measurement shows two steps, 10 and 12.
    first = night([], [alert(regression(9, 12), regression(9, 12, params="('mlp', 1)"))], "n1")
    split = [alert(regression(9, 10)), alert(regression(11, 12, params="('mlp', 1)"))]
    second = night(first.records, split, "n2")
    assert list(second.alerts) == [1, 2]
    assert [(r.id, r.bad_commit) for r in second.records] == [(1, COMMITS[10]),
                                                              (2, COMMITS[12])]


def test_match_prefers_the_most_shared_series():
    records = night([], [alert(regression(9, 12, params="('a', 1)")),
                         alert(regression(12, 14, params="('b', 1)"),
                               regression(12, 14, params="('b', 2)"))], "n1").records
    tonight = alert(regression(11, 13, params="('a', 1)"), regression(11, 13, params="('b', 1)"),
                    regression(11, 13, params="('b', 2)"))
    assert lifecycle.match(records, [tonight], PLACE) == [(1, 0)]
    # Equally shared and overlapping: the older record.
    tied = alert(regression(11, 13, params="('a', 1)"), regression(11, 13, params="('b', 1)"))
    assert lifecycle.match(records, [tied], PLACE) == [(0, 0)]


# --- not reproduced ----------------------------------------------------------------------

def test_a_not_reproduced_alert_is_not_investigated_again_nor_published():
    first = night([], [alert(regression(3, 4))], "n1")
    measured = evidence(1.0, (0.99, 1.01), members=(key(),))
    dismissed = lifecycle.investigated(first.records[0], lifecycle.Outcome(None, measured), "n1")
    assert dismissed.status == "not-reproduced" and dismissed.evidence == measured
    assert "x1.000 [0.990, 1.010]" in dismissed.note
    assert lifecycle.group_by_culprit([dismissed]) == []
    again = night([dismissed], [alert(regression(3, 4))], "n2")
    assert again.investigate == [] and again.records[0].status == "not-reproduced"
    narrower = night([dismissed], [alert(regression(3, 4, ratio=1.5))], "n3")
    assert narrower.investigate == []  # more samples at the same range are not new data


def test_new_data_revives_a_not_reproduced_alert():
    first = night([], [alert(regression(3, 6))], "n1")
    measured = lifecycle.Evidence(good_commit=COMMITS[3], bad_commit=COMMITS[6], ratio=1.0,
                                  ci=(0.99, 1.01), pvalue=0.5, samples=(100, 100),
                                  floor=0.01, higher_is_better=False, alert_good=COMMITS[3],
                                  alert_bad=COMMITS[6], members=(key(),))
    dismissed = lifecycle.investigated(first.records[0], lifecycle.Outcome(None, measured), "n1")
    inside = night([dismissed], [alert(regression(4, 5))], "n2")
    assert inside.investigate == []  # narrowed inside the measured range
    joined = night([dismissed], [alert(regression(3, 6), regression(3, 6, params="('x', 1)"))],
                   "n2")
    assert joined.investigate == [1] and "1 new affected series" in joined.records[0].note
    moved = night([dismissed], [alert(regression(5, 7))], "n2")
    assert moved.investigate == [1] and "moved to" in moved.records[0].note


def test_a_failed_investigation_stays_new():
    record = night([], [alert(regression(3, 4))], "n1").records[0]
    failed = lifecycle.investigated(record, lifecycle.Outcome(None, None, "no culprit"), "n1")
    assert failed.status == "new" and "investigation failed" in failed.note
    with pytest.raises(SpyreRegressError, match="only new alerts"):
        lifecycle.investigated(lifecycle.triage(failed, "invalid"), lifecycle.Outcome(
            None, None), "n2")


# --- publishing --------------------------------------------------------------------------

def test_publishable_needs_the_floor_and_an_interval_excluding_one():
    assert lifecycle.publishable(evidence(1.06, (1.04, 1.08), floor=0.05))
    assert not lifecycle.publishable(evidence(1.00, (0.993, 1.151), floor=0.05))  # the issue's
    assert not lifecycle.publishable(evidence(1.04, (1.03, 1.05), floor=0.05))  # below floor
    assert not lifecycle.publishable(evidence(1.08, (0.99, 1.17), floor=0.05))  # includes 1
    assert not lifecycle.publishable(evidence(0.9, (0.88, 0.92)))  # an improvement
    assert lifecycle.publishable(evidence(0.8, (0.78, 0.82), higher=True))  # less throughput
    assert not lifecycle.publishable(evidence(1.2, (1.1, 1.3), higher=True))
    assert lifecycle.publishable(evidence(2.0, (2.0, 2.0), floor=0.05))  # exact
    assert lifecycle.publishable(evidence(math.inf, (math.inf, math.inf)))  # from zero error
    assert not lifecycle.publishable(evidence(math.nan, (math.nan, math.nan)))
    assert not lifecycle.publishable(None)
    failure = lifecycle.Evidence(good_commit=COMMITS[3], bad_commit=COMMITS[4], ratio=None, ci=None,
                                 pvalue=None, samples=(20, 0), floor=0.0,
                                 failed=True)
    assert lifecycle.publishable(failure)


def test_a_refuted_measurement_is_not_published_and_says_why():
    """A compile-time rise at a culprit that executes no more instructions: the ratio alone
    would publish it; the investigation's finding outweighs it, and the record says so."""
    slower = evidence(1.12, (1.08, 1.16), floor=0.05)
    refuted = dataclasses.replace(slower, refuted="no stage executes more instructions")
    assert lifecycle.publishable(slower) and not lifecycle.publishable(refuted)
    first = night([], [alert(regression(3, 4))], "n1")
    record = lifecycle.investigated(first.records[0], lifecycle.Outcome(COMMITS[4], refuted),
                                    "n1")
    assert record.status == "not-reproduced"
    assert "but no stage executes more instructions" in record.note
    assert codec.from_json(lifecycle.Evidence, codec.to_json(refuted)) == refuted


def test_a_culprit_whose_measurement_does_not_confirm_is_not_reported():
    record = night([], [alert(regression(3, 4))], "n1").records[0]
    unconfirmed = lifecycle.investigated(record, lifecycle.Outcome(
        COMMITS[4], evidence(1.00, (0.993, 1.151), floor=0.05)), "n1")
    assert unconfirmed.status == "not-reproduced" and unconfirmed.culprit == COMMITS[4]


def test_alerts_with_one_culprit_make_one_report_listing_every_symptom():
    alerts = [alert(regression(3, 6)),
              alert(regression(3, 6, kind="compile", params="('decompose', 'mlp', 128)",
                               benchmark="bench_compile.CompileStage.time_stage")),
              alert(regression(5, 6, kind="numerics", params="('mlp', 128, 'kernel')",
                               benchmark="bench_numerics.E.track_rmse")),
              alert(regression(20, 21, params="('attention', 1)"))]
    state = night([], alerts, "n1")
    culprits = [COMMITS[5], COMMITS[5], COMMITS[5], COMMITS[21]]
    records = [lifecycle.investigated(r, lifecycle.Outcome(c, evidence(1.2, (1.1, 1.3))), "n1")
               for r, c in zip(state.records, culprits, strict=True)]
    first, second = lifecycle.group_by_culprit(records)
    assert (first.culprit, first.alert_ids, first.kinds) == (COMMITS[5], (1, 2, 3),
                                                             ("time", "compile", "numerics"))
    assert [s.benchmark for s in first.symptoms] == [
        "bench_execute.ExecuteDeviceTime.time_device", "bench_compile.CompileStage.time_stage",
        "bench_numerics.E.track_rmse"]
    assert (second.culprit, second.alert_ids) == (COMMITS[21], (4,))


# --- triage and storage ------------------------------------------------------------------

def test_triage_transitions():
    record = night([], [alert(regression(3, 4))], "n1").records[0]
    reported = lifecycle.investigated(record, lifecycle.Outcome(
        COMMITS[4], evidence(1.2, (1.1, 1.3))), "n1")
    acknowledged = lifecycle.triage(reported, "acknowledged", "on it")
    assert acknowledged.note == "reported -> acknowledged: on it"
    assert lifecycle.triage(acknowledged, "fixed").status == "fixed"
    with pytest.raises(SpyreRegressError, match="can become"):
        lifecycle.triage(record, "fixed")
    with pytest.raises(SpyreRegressError, match="not 'reported'"):
        lifecycle.triage(record, "reported")


def test_records_round_trip_through_json():
    record = night([], [alert(regression(3, 4, edge="newest"))], "n1").records[0]
    record = lifecycle.investigated(record, lifecycle.Outcome(
        COMMITS[4], evidence(1.2, (1.1, 1.3), members=(key(),))), "n1")
    data = json.loads(json.dumps(lifecycle.to_dict(record)))
    assert data["version"] == lifecycle.ALERT_RECORD_VERSION
    assert lifecycle.from_dict(data) == record
    with pytest.raises(SpyreRegressError, match="version 99"):
        lifecycle.from_dict({**data, "version": 99})


def head(fixed, ratio=1.0):
    return lifecycle.HeadCheck(head=COMMITS[9], ratio=ratio, ci=(ratio - 0.01, ratio + 0.01),
                               against_bad=ratio / 1.2,
                               against_bad_ci=(ratio / 1.2 - 0.01, ratio / 1.2 + 0.01), samples=100,
                               fixed=fixed)


def test_a_regression_back_at_the_good_level_at_the_head_is_fixed_and_never_published():
    records = night([], [alert(regression(3, 4)), alert(regression(6, 7, params="(1)"))],
                    "n1").records
    reported = [lifecycle.investigated(r, lifecycle.Outcome(r.bad_commit, evidence(
        1.2, (1.1, 1.3))), "n1") for r in records]
    fixed = lifecycle.fixed_at_head(reported[0], head(True), (COMMITS[4], COMMITS[8]), "n1")
    assert fixed.status == "fixed" and fixed.fixed_in == (COMMITS[4], COMMITS[8])
    assert f"fixed in {COMMITS[4][:12]}..{COMMITS[8][:12]}" in fixed.note
    assert "x1.000" in fixed.note  # what the head measured, against the good build
    # a culprit report lists only what is still regressed
    (group,) = lifecycle.group_by_culprit([fixed, reported[1]])
    assert group.alert_ids == (reported[1].id,)
    with pytest.raises(SpyreRegressError, match="fixed at the head"):
        lifecycle.fixed_at_head(reported[1], head(False, 1.2), (COMMITS[7], COMMITS[9]), "n1")
    with pytest.raises(SpyreRegressError, match="fixed at the head"):
        lifecycle.fixed_at_head(records[1], head(True), (COMMITS[7], COMMITS[9]), "n1")


def test_a_version_1_record_reads_without_a_fixed_range():
    record = night([], [alert(regression(3, 4))], "n1").records[0]
    data = {**json.loads(json.dumps(lifecycle.to_dict(record))), "version": 1}
    del data["fixed_in"]
    assert lifecycle.from_dict(data) == record and record.fixed_in is None
