"""One night: benchmark, detect with re-measurement, advance the alerts, investigate, publish.

This is the sequence the nightly command runs and the month simulation scores, written once.
Everything with a side effect comes in through four seams, so the same night runs on asv, git
and SQLite (`spyre_regress.nightly`) and on a synthetic branch with an in-memory store
(`regressions.groundtruth.simulation`):

- `Bench`: where measurements come from and are kept (asv and its results store; a generator);
- `AlertRecords`: where alert records persist between nights (SQLite; a list);
- `Investigations`: how a new alert is investigated and a culprit's report published (the
  probes and the report bundle; the bisection on the generator);
- `now`: what the time is called in the records' notes.

Each record is saved as soon as it changes, so an interruption loses at most the step under
way; a record turns `reported` before its report is written, so a culprit whose report is
missing - never written, or no longer on disk - is published again on the next night from its
saved investigation (`unpublished`), and the night says so (`missing_reports`). Before a
report is written the probe is measured at tonight's newest commit too
(`_still_regressed_at_head`): a regression already reverted there is `fixed`, not published.
Environment alerts (the machine changed) are kept apart (`environment_records`) and never
investigated.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from regressions.detection import remeasure
from regressions.detection.alerts import Alert, cluster_alerts
from regressions.detection.detect import FDR, Regression, Series, Transient
from regressions.detection.environment import EnvironmentAlert
from regressions.errors import SpyreRegressError
from regressions.records import environment_records, lifecycle

Progress = Callable[[str], None]


class Bench(Protocol):
    """The benchmarks and their store."""

    def measured(self) -> set[str]: ...  # commits the store holds results for
    def run(self, commits: Sequence[str]) -> None: ...  # benchmark these (skip measured ones)
    def series(self) -> list[Series]: ...  # every series the store holds, in history order
    def measure_again(self, requests: Sequence[remeasure.Request]
                      ) -> Sequence[Sequence[float] | None]: ...  # the new samples per request
    def costs(self) -> remeasure.Costs: ...  # the seconds a sample, a run, a setup cost


class AlertRecords(Protocol):
    """The alert records kept across nights."""

    def records(self) -> list[lifecycle.AlertRecord]: ...
    def extras(self) -> dict[int, dict[str, str | None]]: ...  # id -> stage, report
    def save(self, records: Sequence[lifecycle.AlertRecord],
             extras: dict[int, dict] | None = None) -> None: ...
    def environment(self) -> list[environment_records.EnvironmentRecord]: ...
    def save_environment(self, records: Sequence[environment_records.EnvironmentRecord]
                         ) -> None: ...


class Publication(Protocol):
    """A culprit's report as written: which alerts it answers, the first divergent stage it
    names and where it lies (None where nothing is written, as in the simulation)."""

    @property
    def culprit(self) -> str: ...
    @property
    def alert_ids(self) -> tuple[int, ...]: ...
    @property
    def stage(self) -> str | None: ...
    @property
    def report(self) -> str | None: ...


P = TypeVar("P", bound=Publication, covariant=True)


class Investigations(Protocol[P]):
    """Investigating one alert, and publishing one culprit's report (as a `P`)."""

    def investigate(self, alert_id: int, alert: Alert) -> lifecycle.Outcome: ...
    # the probe of an alert investigated tonight at `head`, beside its good and bad builds
    def at_head(self, alert_id: int, head: str) -> lifecycle.HeadCheck | None: ...
    def publish(self, group: lifecycle.CulpritReport) -> P: ...
    def written(self, report: str) -> bool: ...  # a published report is still there, whole


@dataclass(frozen=True)
class Settings:
    """How a night decides: the re-measurement budget (a fraction of tonight's seconds) and
    its rounds (0: detect once, measure nothing again), detection's floors, false discovery
    rate and window."""

    budget: float = remeasure.BUDGET_FRACTION
    rounds: int = remeasure.MAX_ROUNDS
    floors: tuple[tuple[str, float], ...] = ()
    fdr: float = FDR
    window: int | None = None


@dataclass(kw_only=True)
class NightResult(Generic[P]):
    """Everything one night did."""

    benchmarked: list[str]
    base_samples: int  # samples measured at tonight's new commits
    remeasurement: remeasure.Remeasured  # detection with re-measurement, and what it spent
    alerts: list[Alert]  # tonight's, after re-measurement
    records: list[lifecycle.AlertRecord]  # every record after tonight
    events: list[lifecycle.Event]
    investigated: list[int]  # record ids investigated tonight
    published: list[P]
    failures: list[str] = field(default_factory=list)
    environment: list[EnvironmentAlert] = field(default_factory=list)  # tonight's
    environment_events: list[lifecycle.Event] = field(default_factory=list)
    # seconds of `timer` each step took, in the order they ended: "benchmark",
    # "re-measure", "detect" (without re-measuring), "investigate alert N (kind)" each,
    # "check at head", "publish"
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def transients(self) -> list[Transient]:
        return list(self.remeasurement.detection.transients)

    @property
    def awaiting(self) -> list[Regression]:
        """Changes too few commits hold yet: never investigated; a later night, with more
        commits (or, where the store keeps samples, more samples), reports or drops each."""
        return list(self.remeasurement.detection.awaiting)


def run_night(commits: Sequence[str], history: Sequence[str], bench: Bench,
              store: AlertRecords, investigations: Investigations[P], now: Callable[[], str],
              settings: Settings = Settings(), progress: Progress = lambda _: None,
              timer: Callable[[], float] = time.monotonic) -> NightResult[P]:
    """Benchmark `commits`, then detect over every series on `history` (first-parent order,
    oldest first), re-measuring within the budget; advance the records, investigate the new
    alerts seen tonight and publish a report for each culprit that gained a reported alert
    (or whose report is missing). `now` names the time in the records' notes; `timer` times
    the benchmarking, whose prices are seconds of it when `Costs.wall_clock`."""
    before = bench.measured()
    phases = _Phases({}, timer)
    started = timer()
    bench.run(commits)
    took = phases.seconds["benchmark"] = timer() - started
    series = bench.series()
    base = sum(len(v) for s in series for c, v in zip(s.commits, s.samples, strict=True)
               if c not in before and v is not None)
    tonight = {c for s in series for c in s.commits} - before
    # asv records no start-up: tonight's run shows what it took beyond its prices, the first
    # estimate of what a re-measurement run will (a run of its own pays it again).
    costs = bench.costs().learned(remeasure.points(series, tonight), took)
    records = store.records()

    def measure_again(requests: Sequence[remeasure.Request]
                      ) -> Sequence[Sequence[float] | None]:
        with phases.of("re-measure"):
            return bench.measure_again(requests)

    found = remeasure.detect_with_remeasurement(
        series, history, measure_again,
        budget=remeasure.budget_for(costs.of_points(series, tonight), settings.budget,
                                    costs.per_run + costs.startup),
        rounds=settings.rounds, costs=costs, timer=timer, floors=settings.floors,
        fdr=settings.fdr, window=settings.window,
        contradicted={c for r in records if r.status == "not-reproduced"
                      for c in (r.good_commit, r.bad_commit)})
    phases.seconds["detect"] = timer() - started - took - phases.seconds.get("re-measure", 0.0)
    alerts = cluster_alerts(found.detection.regressions)
    environment_alerts = found.detection.environment
    progress(_detect_line(found, alerts, settings))
    place = {c: i for i, c in enumerate(history)}
    state = lifecycle.advance(records, alerts, place, now())
    store.save(state.records)
    kept, environment_events = environment_records.advance(
        store.environment(), environment_alerts, place, now())
    store.save_environment(kept)
    by_id = {r.id: r for r in state.records}
    todo = [i for i in state.investigate if i in state.alerts]
    failures = _investigate(todo, state.alerts, by_id, store, investigations=investigations,
                            now=now, progress=progress,
                            phases=phases)
    with phases.of("check at head"):
        fixed = _still_regressed_at_head(todo, state.alerts, by_id,
                                         commits[-1] if commits else history[-1],
                                         series=found.series,
                                         store=store, investigations=investigations, now=now,
                                         progress=progress)
    with phases.of("publish"):
        published, not_published = _publish(list(by_id.values()), set(todo), store,
                                            investigations, progress=progress)
    return NightResult(benchmarked=list(commits), base_samples=base, remeasurement=found,
                       alerts=alerts, records=store.records(),
                       events=[*state.events, *fixed], investigated=todo, published=published,
                       failures=[*failures, *not_published],
                       environment=list(environment_alerts),
                       environment_events=environment_events, phases=phases.seconds)


def _detect_line(found: remeasure.Remeasured, alerts: Sequence[Alert],
                 settings: Settings) -> str:
    """What detection found tonight, and what re-measuring it cost."""
    detection = found.detection
    return (f"detect: {len(found.series)} series, {len(alerts)} alert(s), "
            f"{len(detection.environment)} environment alert(s), "
            f"{len(detection.transients)} transient(s), "
            f"{len(detection.awaiting)} awaiting more commits; "
            + (remeasurement_line(found) if settings.rounds else "no re-measurement"))


@dataclass(frozen=True)
class _Phases:
    """Adds the seconds of `timer` a step takes to `seconds` under its name."""

    seconds: dict[str, float]
    timer: Callable[[], float]

    @contextlib.contextmanager
    def of(self, name: str) -> Iterator[None]:
        started = self.timer()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + self.timer() - started


def remeasurement_line(found: remeasure.Remeasured) -> str:
    """What re-measurement spent, in samples and in the seconds its budget counts."""
    startup = f" (asv's start-up {found.startup:.0f} s a run)" if found.startup else ""
    return (f"re-measured {found.samples} extra samples in {len(found.requests)} request(s), "
            f"~{found.spent:.0f} s of a {found.budget:.0f} s budget{startup}")


def _investigate(todo: Sequence[int], alerts: Mapping[int, Alert],
                 records: dict[int, lifecycle.AlertRecord], store: AlertRecords,
                 investigations: Investigations[Any], now: Callable[[], str],
                 progress: Progress, phases: _Phases) -> list[str]:
    """Investigate tonight's new alerts (`alerts` by record id) in order, saving each record
    of `records` (by id) as it changes, each timed into `phases`; what failed, one line
    each."""
    failures = []
    for number, alert_id in enumerate(todo, 1):
        alert = alerts[alert_id]
        progress(f"alert {alert_id} ({number} of {len(todo)}): investigating {alert.kind} "
                 f"regression {alert.good_commit[:8]}..{alert.bad_commit[:8]}"
                 + (" (provisional)" if alert.provisional else ""))
        with phases.of(f"investigate alert {alert_id} ({alert.kind})"):
            outcome = investigations.investigate(alert_id, alert)
        records[alert_id] = lifecycle.investigated(records[alert_id], outcome, now())
        store.save([records[alert_id]])
        progress(f"alert {alert_id}: {records[alert_id].status}: {records[alert_id].note}")
        if outcome.error:
            failures.append(f"alert {alert_id}: {outcome.error}")
    return failures


def _still_regressed_at_head(todo: Sequence[int], alerts: Mapping[int, Alert],
                             records: dict[int, lifecycle.AlertRecord], head: str,
                             series: Sequence[Series], store: AlertRecords,
                             investigations: Investigations[Any], now: Callable[[], str],
                             progress: Progress) -> list[lifecycle.Event]:
    """Tonight's reported alerts whose probe is back at the good level at the head become
    `fixed` (with the range the series shows the fix in) before any report is written."""
    events = []
    for alert_id in todo:
        record = records[alert_id]
        if record.status != "reported" or record.culprit == head:
            continue
        check = investigations.at_head(alert_id, head)
        if check is None or not check.fixed:
            continue
        records[alert_id] = lifecycle.fixed_at_head(
            record, check, fixed_range(series, alerts[alert_id].probe, head), now())
        store.save([records[alert_id]])
        progress(f"alert {alert_id}: fixed: {records[alert_id].note}")
        events.append(lifecycle.Event(alert_id, "reported", "fixed", records[alert_id].note))
    return events


def fixed_range(series: Sequence[Series], probe: Regression, head: str) -> tuple[str, str]:
    """Where the probe's series shows the fix: the commit before the trailing run of points
    after the regression whose level is nearer the good level than the bad one
    (`lifecycle.back_at`, the meaning `detect`'s "recovered" has too), and the run's first
    commit (the newest commit the series measured and the head when it says no more)."""
    s = next((s for s in series if (s.machine, s.env, s.benchmark, s.params) ==
              (probe.machine, probe.env, probe.benchmark, probe.params)), None)
    if s is None or probe.bad_commit not in s.commits or probe.good_commit not in s.commits:
        return probe.bad_commit, head
    points = [(c, v) for c, v in zip(s.commits, s.samples, strict=True) if v is not None]
    commits = [c for c, _ in points]
    good, bad = (statistics.median(points[commits.index(c)][1])
                 for c in (probe.good_commit, probe.bad_commit))
    last = commits.index(probe.bad_commit)
    back = lifecycle.back_at([statistics.median(v) for _, v in points[last + 1:]], good, bad)
    if back is None:
        return commits[-1], head
    return commits[last + back], commits[last + 1 + back]


def unpublished(records: Sequence[lifecycle.AlertRecord], extras: dict[int, dict],
                investigated: set[int], written: Callable[[str], bool] = lambda _: True
                ) -> list[lifecycle.CulpritReport]:
    """The culprit reports to write tonight: every culprit that gained a reported alert
    tonight, and every culprit with a reported alert whose report was never written (a run
    interrupted between the two, or a report that failed) or is no longer `written`."""
    status = {r.id: r.status for r in records}

    def due(alert_id: int) -> bool:
        return status[alert_id] == "reported" and (
            alert_id in investigated or bool(missing_reports([alert_id], extras, written)))

    return [group for group in lifecycle.group_by_culprit(records)
            if any(due(i) for i in group.alert_ids)]


def missing_reports(alert_ids: Sequence[int], extras: dict[int, dict],
                    written: Callable[[str], bool]) -> dict[int, str]:
    """Per alert whose report is missing: why, as the night says it."""
    missing = {}
    for alert_id in alert_ids:
        report = (extras.get(alert_id) or {}).get("report")
        if not report:
            missing[alert_id] = "its report was never written (an earlier run stopped first)"
        elif not written(report):
            missing[alert_id] = f"its report {report} is not on disk"
    return missing


def _publish(records: list[lifecycle.AlertRecord], investigated: set[int],
             store: AlertRecords, investigations: Investigations[P], progress: Progress
             ) -> tuple[list[P], list[str]]:
    """Each culprit report due tonight (`unpublished`), written and its records saved; the
    reports written, and one line for each that could not be."""
    published: list[P] = []
    failures: list[str] = []
    extras = store.extras()
    for group in unpublished(records, extras, investigated, investigations.written):
        earlier = [i for i in group.alert_ids if i not in investigated]
        for alert_id, why in missing_reports(earlier, extras, investigations.written).items():
            progress(f"alert {alert_id} (reported, culprit {group.culprit[:12]}): {why}; "
                     "writing it from the saved investigation")
        try:
            done = investigations.publish(group)
        except SpyreRegressError as error:
            failures.append(f"culprit {group.culprit[:12]}: {error}")
            continue
        store.save([r for r in records if r.id in group.alert_ids],
                   {i: {"stage": done.stage, "report": done.report} for i in group.alert_ids})
        published.append(done)
    return published, failures
