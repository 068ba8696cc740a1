"""The life of an alert across nights: a pure state machine over plain records.

Each night detection yields alerts (`alerts.cluster_alerts`); `advance` matches them to the
stored records, creates records for new ones, confirms or withdraws provisional ones and
revives dismissed ones only on new data. The nightly investigates the records left `new`,
and `investigated` turns an investigation's outcome into `reported` (its own measurement
confirms the regression: `publishable`) or `not-reproduced` (with the evidence). Records
whose bisection names one culprit become one report (`group_by_culprit`), as Perfherder
groups alerts by push (mozilla/treeherder treeherder/perf/models.py,
PerformanceAlertSummary). Nothing here reads or writes storage: the nightly persists the
records (`to_dict` / `from_dict`).

Statuses and transitions:

    new --investigated, confirmed--> reported --triage--> acknowledged | fixed | invalid
    reported (tonight, not yet published) --the head measures the good level--> fixed
    new --investigated, not confirmed--> not-reproduced --new member or moved range--> new
    new --investigation failed--> new (tried again next night)
    any but invalid, while provisional --not detected again--> withdrawn
    acknowledged --triage--> fixed | invalid;  new | not-reproduced --triage--> invalid

`provisional` is separate from the status: an edge alert is investigated and reported the
night it appears; it turns confirmed when a later night finds its level held (the alert is
matched by a non-provisional one), and is withdrawn, with a note, when detection no longer
finds it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from regressions.codec import RecordError, from_json
from regressions.errors import SpyreRegressError
from regressions.metrics import Kind

if TYPE_CHECKING:  # types only: the records stay free of the statistics' imports
    from regressions.detection.alerts import Alert
    from regressions.detection.detect import Regression

ALERT_RECORD_VERSION = 2  # 2: `fixed_in`, the range a regression was fixed in
Status = Literal["new", "reported", "not-reproduced", "acknowledged", "fixed", "invalid",
                 "withdrawn"]
# What a person may set, from each status (the machine sets the others).
TRIAGE: dict[Status, tuple[Status, ...]] = {
    "new": ("invalid",),
    "reported": ("acknowledged", "fixed", "invalid"),
    "acknowledged": ("fixed", "invalid"),
    "not-reproduced": ("invalid",),
    "fixed": ("reported",),  # it came back
}
# A report stands for these statuses (a culprit with a published bundle).
REPORTED: tuple[Status, ...] = ("reported", "acknowledged", "fixed")


@dataclass(frozen=True, kw_only=True)
class Symptom:
    """One affected series of an alert: what a report lists."""

    kind: Kind
    benchmark: str
    params: str
    machine: str
    env: str
    ratio: float | None
    ci: tuple[float, float] | None

    @property
    def key(self) -> str:
        return series_key(self.machine, self.env, self.benchmark, self.params)


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The investigation's own measurement of an alert: `ratio` = bad/good with its interval,
    judged against the `floor` (relative worsening) in the metric's direction. `alert_good`,
    `alert_bad` and `members` record what the alert was when it was measured, which is what
    decides whether later data is new."""

    good_commit: str
    bad_commit: str
    ratio: float | None
    ci: tuple[float, float] | None
    pvalue: float | None
    samples: tuple[int, int]
    floor: float
    higher_is_better: bool = False
    alert_good: str = ""
    alert_bad: str = ""
    members: tuple[str, ...] = ()
    failed: bool = False  # the bad commit fails where the good one runs
    # a finding of the investigation that outweighs the ratio, e.g. a compile-time rise at a
    # culprit whose stages execute no more instructions: the machine's load, not the compiler
    refuted: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What investigating one alert found: the culprit (None when bisection named none),
    the evidence, or the error that stopped it."""

    culprit: str | None
    evidence: Evidence | None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class AlertRecord:
    """One alert as the nightly stores it."""

    id: int
    kind: Kind
    good_commit: str
    bad_commit: str
    symptoms: tuple[Symptom, ...]
    status: Status = "new"
    provisional: bool = False
    culprit: str | None = None
    evidence: Evidence | None = None
    note: str = ""
    first_seen: str = ""
    last_seen: str = ""
    history: tuple[str, ...] = field(default_factory=tuple)  # transition notes, oldest first
    # (last commit at the bad level, first back at the good one): fixed before its report
    fixed_in: tuple[str, str] | None = None

    @property
    def members(self) -> frozenset[str]:
        return frozenset(s.key for s in self.symptoms)


@dataclass(frozen=True, kw_only=True)
class HeadCheck:
    """The probe measured at the branch's newest benchmarked commit (`head`) beside the
    investigation's good and bad builds: `ratio` = head / good and `against_bad` = head /
    bad, each with its interval; `fixed` when the head is back at the good level (it
    measures better than the bad build and no longer confirms the regression against the
    good one)."""

    head: str
    ratio: float
    ci: tuple[float, float]
    against_bad: float
    against_bad_ci: tuple[float, float]
    samples: int
    fixed: bool

    def describe(self) -> str:
        return (f"{self.head[:12]} measures x{self.ratio:.3f} [{self.ci[0]:.3f}, "
                f"{self.ci[1]:.3f}] of the good build and x{self.against_bad:.3f} "
                f"[{self.against_bad_ci[0]:.3f}, {self.against_bad_ci[1]:.3f}] of the bad one "
                f"({self.samples} samples)")


@dataclass(frozen=True)
class Event:
    """One transition, for the night's log."""

    alert_id: int
    before: str
    after: str
    note: str


@dataclass(frozen=True)
class Night:
    """`advance`'s answer: every record after tonight, the ids to investigate, the events,
    and tonight's alerts by the id of their record (in tonight's order)."""

    records: list[AlertRecord]
    investigate: list[int]
    events: list[Event]
    alerts: dict[int, Alert]


@dataclass(frozen=True)
class CulpritReport:
    """Alerts whose bisection named one culprit: one report listing every symptom."""

    culprit: str
    alert_ids: tuple[int, ...]
    kinds: tuple[str, ...]
    symptoms: tuple[Symptom, ...]


def series_key(machine: str, env: str, benchmark: str, params: str) -> str:
    return f"{machine}/{env}/{benchmark}{params}"


def symptoms_of(alert: Alert) -> tuple[Symptom, ...]:
    return tuple(_symptom(m) for m in alert.members)


def _symptom(r: Regression) -> Symptom:
    return Symptom(kind=r.kind, benchmark=r.benchmark, params=r.params, machine=r.machine,
                   env=r.env, ratio=r.ratio, ci=r.ci)


# --- matching tonight's alerts to stored records -----------------------------------------

def match(records: Sequence[AlertRecord], alerts: Sequence[Alert],
          place: Mapping[str, int]) -> list[tuple[int, int]]:
    """Pairs (record index, alert index): the same regression seen again.

    A record and an alert match when they have the same kind, share at least one series, and
    their commit ranges (good, bad] overlap on the current history (`place`: commit ->
    position in first-parent order). That holds when the range narrows as commits in it
    are measured, and when a provisional alert's range moves inside or next to its stride
    window. Withdrawn records never match (a regression that comes back is new). Pairs are
    chosen greedily: most shared series, then the largest overlap, then the oldest record;
    each record and each alert is used once.
    """
    scored = []
    for i, record in enumerate(records):
        if record.status == "withdrawn":
            continue
        stored = _span(record.good_commit, record.bad_commit, place)
        for j, alert in enumerate(alerts):
            tonight = _span(alert.good_commit, alert.bad_commit, place)
            if record.kind != alert.kind or stored is None or tonight is None:
                continue
            shared = len(record.members & {s.key for s in symptoms_of(alert)})
            overlap = min(stored[1], tonight[1]) - max(stored[0], tonight[0])
            if shared and overlap > 0:
                scored.append(((-shared, -overlap, record.id), i, j))
    pairs, used_records, used_alerts = [], set(), set()
    for _, i, j in sorted(scored):
        if i not in used_records and j not in used_alerts:
            pairs.append((i, j))
            used_records.add(i)
            used_alerts.add(j)
    return sorted(pairs, key=lambda pair: pair[1])


def _span(good: str, bad: str, place: Mapping[str, int]) -> tuple[int, int] | None:
    if good not in place or bad not in place:
        return None
    return place[good], place[bad]


# --- one night ---------------------------------------------------------------------------

def advance(records: Sequence[AlertRecord], alerts: Sequence[Alert], place: Mapping[str, int],
            night: str) -> Night:
    """Tonight's alerts applied to the stored records (see the module docstring).

    Args:
        records: every stored record.
        alerts: tonight's alerts, from detection after re-measurement.
        place: commit -> position in tonight's first-parent history.
        night: a label for tonight (a date), kept in `first_seen`/`last_seen` and notes.
    """
    pairs = dict((j, i) for i, j in match(records, alerts, place))
    updated = list(records)
    events: list[Event] = []
    by_id: dict[int, Alert] = {}
    next_id = max((r.id for r in records), default=0) + 1
    for j, alert in enumerate(alerts):
        if j in pairs:
            record, event = _seen(updated[pairs[j]], alert, place, night)
            updated[pairs[j]] = record
            events += [event] if event else []
        else:
            record = AlertRecord(id=next_id, kind=alert.kind, good_commit=alert.good_commit,
                                 bad_commit=alert.bad_commit,
                                 symptoms=symptoms_of(alert), provisional=alert.provisional,
                                 first_seen=night, last_seen=night)
            next_id += 1
            updated.append(record)
            events.append(Event(record.id, "", "new", f"found on {night}"
                                + (" (provisional: one commit holds the level)"
                                   if alert.provisional else "")))
        by_id[record.id] = alert
    matched = set(pairs.values())
    for i, record in enumerate(records):
        if i not in matched and record.provisional and record.status not in ("withdrawn",
                                                                             "invalid"):
            updated[i], event = _withdrawn(record, place, night)
            events.append(event)
    investigate = [r.id for r in updated if r.status == "new"]
    return Night(updated, investigate, events, by_id)


def _seen(record: AlertRecord, alert: Alert, place: Mapping[str, int],
          night: str) -> tuple[AlertRecord, Event | None]:
    """A stored record matched again: new range and symptoms, confirmation, revival."""
    changed = replace(record, good_commit=alert.good_commit, bad_commit=alert.bad_commit,
                      symptoms=symptoms_of(alert), last_seen=night)
    if record.provisional and not alert.provisional:
        note = f"confirmed on {night}: the new level held after {alert.bad_commit[:12]}"
        return _note(replace(changed, provisional=False), note), Event(
            record.id, record.status, record.status, note)
    if record.status == "not-reproduced":
        reason = revival(record, alert, place)
        if reason:
            note = f"revived on {night}: {reason}"
            return _note(replace(changed, status="new"), note), Event(
                record.id, "not-reproduced", "new", note)
    return changed, None


def revival(record: AlertRecord, alert: Alert, place: Mapping[str, int]) -> str | None:
    """Why a not-reproduced record deserves another investigation, or None.

    Only new data revives it: a series that was not a member when it was measured (a new
    symptom), or a bad commit outside the range (good, bad] the investigation measured (the
    change moved). More samples at the same range, or the range narrowing inside it, do not:
    the measurement already compared both ends of that range.
    """
    evidence = record.evidence
    if evidence is None:
        return None
    joined = sorted({s.key for s in symptoms_of(alert)} - set(evidence.members))
    if joined:
        return f"{len(joined)} new affected series ({joined[0]})"
    measured = _span(evidence.alert_good, evidence.alert_bad, place)
    bad = place.get(alert.bad_commit)
    if measured is not None and bad is not None and not measured[0] < bad <= measured[1]:
        return (f"the bad commit moved to {alert.bad_commit[:12]}, outside the measured "
                f"{evidence.alert_good[:12]}..{evidence.alert_bad[:12]}")
    return None


def _withdrawn(record: AlertRecord, place: Mapping[str, int], night: str
               ) -> tuple[AlertRecord, Event]:
    later = (max(place.values()) - place[record.bad_commit]) if record.bad_commit in place \
        else 0
    why = (f"{later} commit(s) landed after {record.bad_commit[:12]} and its level did not "
           "hold" if later else f"measured again, {record.bad_commit[:12]} no longer differs")
    note = f"withdrawn on {night}: detection no longer finds it ({why})"
    return _note(replace(record, status="withdrawn"), note), Event(
        record.id, record.status, "withdrawn", note)


def _note(record: AlertRecord, note: str) -> AlertRecord:
    return replace(record, note=note, history=(*record.history, note))


# --- investigation -----------------------------------------------------------------------

def publishable(evidence: Evidence | None) -> bool:
    """Whether the investigation's own measurement confirms the regression.

    The worsening of its ratio (in the metric's direction) must reach the floor, and its
    interval must exclude 1 on the bad side. A deterministic measurement has a zero-width
    interval, so only the floor decides. A failure is confirmed by the bad commit failing
    where the good one runs.
    """
    if evidence is not None and evidence.failed:
        return True
    if evidence is None or evidence.ratio is None or evidence.ci is None or evidence.refuted:
        return False
    higher = evidence.higher_is_better
    point = _worsening(evidence.ratio, higher)
    nearest = _worsening(evidence.ci[1] if higher else evidence.ci[0], higher)
    if math.isnan(point) or math.isnan(nearest):
        return False
    return point >= evidence.floor and nearest > 0


def _worsening(ratio: float, higher_is_better: bool) -> float:
    if not higher_is_better:
        return ratio - 1
    return math.inf if ratio == 0 else 1 / ratio - 1


def investigated(record: AlertRecord, outcome: Outcome, night: str) -> AlertRecord:
    """The record after its investigation: `reported` when a culprit is named and the
    measurement confirms the regression, `not-reproduced` (with the evidence) otherwise;
    an investigation that failed leaves it `new`, to be tried again."""
    if record.status != "new":
        raise SpyreRegressError(f"alert {record.id} is {record.status}, not new: only new "
                                "alerts are investigated")
    if outcome.error is not None:
        return _note(record, f"investigation failed on {night}: {outcome.error}")
    if outcome.culprit is not None and outcome.evidence is not None \
            and publishable(outcome.evidence):
        return _note(replace(record, status="reported", culprit=outcome.culprit,
                             evidence=outcome.evidence),
                     f"reported on {night}: culprit {outcome.culprit[:12]}"
                     f" ({describe(outcome.evidence)})")
    why = describe(outcome.evidence) if outcome.evidence else "no measurement"
    if outcome.culprit is None and outcome.evidence is not None and publishable(
            outcome.evidence):
        why += "; bisection named no single culprit"
    return _note(replace(record, status="not-reproduced", culprit=outcome.culprit,
                         evidence=outcome.evidence),
                 f"not reproduced on {night}: {why}")


def fixed_at_head(record: AlertRecord, check: HeadCheck, fixed_in: tuple[str, str],
                  night: str) -> AlertRecord:
    """A regression reported tonight whose probe is back at the good level at the head: it
    was fixed (reverted) in `fixed_in` before its report went out, which it never does."""
    if record.status != "reported" or not check.fixed:
        raise SpyreRegressError(f"alert {record.id} is {record.status}; only a reported alert "
                                "whose head measures the good level is fixed at the head")
    return _note(replace(record, status="fixed", fixed_in=fixed_in),
                 f"fixed before its report on {night}: the head {check.describe()}; fixed in "
                 f"{fixed_in[0][:12]}..{fixed_in[1][:12]}")


def back_at(levels: Sequence[float], good: float, bad: float) -> int | None:
    """Where a series is back at its good level to stay: the index of the first of the
    trailing `levels` nearer `good` than `bad`; None when the newest level is nearer `bad`
    (still regressed) or there are none.

    The one meaning of a regression that was fixed: the nightly's `fixed_range` finds where
    the series shows a fix with it, and `detect` marks an alert recovered (rather than open)
    with it. Trailing, because a series that came back and regressed again is not fixed.
    """
    k = len(levels)
    while k > 0 and abs(levels[k - 1] - good) < abs(levels[k - 1] - bad):
        k -= 1
    return k if k < len(levels) else None


def describe(evidence: Evidence) -> str:
    if evidence.failed:
        return f"{evidence.bad_commit[:12]} fails where {evidence.good_commit[:12]} runs"
    if evidence.ratio is None or evidence.ci is None:
        return "no ratio measured"
    p = "" if evidence.pvalue is None else f", p = {evidence.pvalue:.2g}"
    return (f"x{evidence.ratio:.3f} [{evidence.ci[0]:.3f}, {evidence.ci[1]:.3f}] "
            f"{evidence.good_commit[:12]}->{evidence.bad_commit[:12]}, "
            f"{evidence.samples[0]}+{evidence.samples[1]} samples{p}, floor {evidence.floor:.0%}"
            + (f"; but {evidence.refuted}" if evidence.refuted else ""))


def triage(record: AlertRecord, status: str, note: str = "") -> AlertRecord:
    """A person's decision; only the transitions in TRIAGE are allowed."""
    if status not in TRIAGE.get(record.status, ()):
        allowed = list(TRIAGE.get(record.status, ()))
        raise SpyreRegressError(f"alert {record.id} is {record.status}: it can become "
                                f"{allowed or 'nothing by hand'}, not {status!r}")
    return _note(replace(record, status=status),
                 f"{record.status} -> {status}" + (f": {note}" if note else ""))


# --- reports -----------------------------------------------------------------------------

def group_by_culprit(records: Sequence[AlertRecord]) -> list[CulpritReport]:
    """One report per culprit commit, listing the symptoms of every reported alert it caused
    (device time, compile time, numerics ...), oldest alert first."""
    groups: dict[str, list[AlertRecord]] = {}
    for record in sorted(records, key=lambda r: r.id):
        if record.status in REPORTED and record.culprit is not None and record.fixed_in is None:
            groups.setdefault(record.culprit, []).append(record)
    return [CulpritReport(culprit, tuple(r.id for r in group),
                          tuple(dict.fromkeys(r.kind for r in group)),
                          tuple(s for r in group for s in r.symptoms))
            for culprit, group in groups.items()]


# --- storage form ------------------------------------------------------------------------

def to_dict(record: AlertRecord) -> dict:
    """A JSON-ready form of `record` with a `version` field."""
    data = asdict(record)
    data["version"] = ALERT_RECORD_VERSION
    return data


def from_dict(data: Mapping) -> AlertRecord:
    """Inverse of `to_dict`; refuses a version it does not know. Version 1 had no
    `fixed_in`: its records read with none."""
    if data.get("version") not in (1, ALERT_RECORD_VERSION):
        raise SpyreRegressError(f"alert record version {data.get('version')!r} is not "
                                f"{ALERT_RECORD_VERSION}: upgrade spyre-regress to read it")
    try:
        return from_json(AlertRecord, {k: v for k, v in data.items() if k != "version"},
                         "alert record")
    except RecordError as error:
        raise SpyreRegressError(f"a stored alert record does not read: {error}") from None
