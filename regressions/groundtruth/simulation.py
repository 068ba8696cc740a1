"""A month of nightlies on a synthetic branch: the same code the nightly runs, scored.

Each night commits land (`month.Branch`); the nightly benchmarks every stride-th new commit
and the newest, detects with re-measurement inside its budget
(`remeasure.detect_with_remeasurement`), clusters alerts, advances the alert records
(`lifecycle.advance`), investigates the new ones - `bisect_commits` with a measure
backed by the same generator, then the investigation's own measurement of the culprit
against its parent - and records what is reported (`lifecycle.investigated`,
`group_by_culprit`). Scoring compares the reports with what was planted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from regressions import metrics, stats
from regressions.bisection.commits import Measurement, bisect_commits
from regressions.detection import detect, remeasure
from regressions.errors import SpyreRegressError
from regressions.groundtruth.month import NOISE, Branch
from regressions.records import lifecycle

MACHINE, ENV = "month", "virtualenv-py3.11"
# The investigation's own measurement: as many samples per side as the report's timing
# (100 synchronized iterations, regressions.investigate.Investigator.timing).
CONFIRM_SAMPLES = 100


@dataclass
class NightLog:
    night: int
    benchmarked: int
    base_samples: int
    budget: int
    spent: int
    alerts: int
    investigated: int
    reported: list[str] = field(default_factory=list)  # culprits first reported tonight
    events: list[lifecycle.Event] = field(default_factory=list)


@dataclass
class Simulation:
    """Everything one simulated month produced."""

    branch: Branch
    nights: list[NightLog]
    records: list[lifecycle.AlertRecord]
    first_report: dict[tuple[str, str], int]  # (culprit, kind) -> night first reported
    report_nights: dict[str, int]  # culprit -> night its report first appeared
    blamed: list[tuple[int, str, str, frozenset[str]]]  # every alert: night, bad, kind, names
    investigation_runs: int = 0


class _Nightly:
    """The nightly's loop over one branch, with the branch's generator as asv."""

    def __init__(self, branch: Branch, budget_fraction: float, fdr: float,
                 window: int | None):
        self.branch = branch
        self.budget_fraction = budget_fraction
        self.fdr = fdr
        self.window = window
        self.data: list[dict[int, tuple[float, ...] | None]] = [{} for _ in branch.suite]
        self.index = {(s.benchmark, s.params): i for i, s in enumerate(branch.suite)}
        self.place = {sha: i for i, sha in enumerate(branch.commits)}
        self.records: list[lifecycle.AlertRecord] = []
        self.result = Simulation(branch, [], [], {}, {}, [])

    def run(self) -> Simulation:
        for night in range(len(self.branch.nights)):
            self.night(night)
        self.result.records = self.records
        return self.result

    def night(self, night: int) -> None:
        branch = self.branch
        marks = branch.benchmarked(night)
        base = 0
        for commit in marks:
            for s in range(len(branch.suite)):
                samples = branch.measure(s, commit)
                self.data[s][commit] = samples
                base += len(samples) if samples else 0
        history = branch.commits[:branch.nights[night][1] + 1]
        budget = remeasure.budget_for(base, self.budget_fraction)
        contradicted = {c for r in self.records if r.status == "not-reproduced"
                        for c in (r.good_commit, r.bad_commit)}
        found = remeasure.detect_with_remeasurement(
            self.series(), history, self.remeasure, budget=budget, fdr=self.fdr,
            window=self.window, contradicted=contradicted)
        alerts = detect.cluster_alerts(found.detection.regressions)
        label = f"night {night + 1}"
        place = {sha: i for i, sha in enumerate(history)}
        state = lifecycle.advance(self.records, alerts, place, label)
        self.records = state.records
        log = NightLog(night, len(marks), base, budget, found.spent, len(alerts), 0,
                       events=list(state.events))
        self.result.blamed += [(night, a.bad_commit, a.kind,
                                frozenset(f"{m.benchmark}{m.params}" for m in a.members))
                               for a in alerts]
        for alert_id in state.investigate:
            if alert_id not in state.alert_ids:
                continue  # left new by a failed investigation and not seen tonight
            alert = alerts[state.alert_ids.index(alert_id)]
            position = next(i for i, r in enumerate(self.records) if r.id == alert_id)
            outcome = self.investigate(alert, history)
            self.records[position] = lifecycle.investigated(self.records[position], outcome,
                                                            label)
            log.investigated += 1
        self.score_reports(night, log)
        self.result.nights.append(log)

    def series(self) -> list[detect.Series]:
        out = []
        for s, spec in enumerate(self.branch.suite):
            points = sorted(self.data[s].items())
            if not points:
                continue
            out.append(detect.Series(
                MACHINE, ENV, spec.benchmark, spec.params,
                tuple(self.branch.commits[c] for c, _ in points), tuple(c for c, _ in points),
                tuple(v for _, v in points), spec.higher_is_better,
                True if spec.family == "numerics" else None))
        return out

    def remeasure(self, requests: Sequence[remeasure.Request]) -> list:
        """asv run --append-samples: the generator's next run, kept in the results."""
        out = []
        for r in requests:
            s, commit = self.index[r.benchmark, r.params], self.place[r.commit]
            samples = self.branch.measure(s, commit)
            old = self.data[s].get(commit)
            if samples is not None:
                self.data[s][commit] = (*(old or ()), *samples)
            elif commit not in self.data[s]:
                self.data[s][commit] = None
            out.append(samples)
        return out

    def investigate(self, alert: detect.Alert, history: list[str]) -> lifecycle.Outcome:
        probe = alert.probe
        s = self.index[probe.benchmark, probe.params]
        deterministic = NOISE[self.branch.suite[s].family].sd == 0
        runs_before = sum(self.branch.runs.values())

        def measure(sha: str) -> Measurement:
            samples = self.branch.measure(s, self.place[sha])
            if samples is None:
                return Measurement(sha, "failed", detail="RuntimeError")
            return Measurement(sha, "ok", samples, deterministic)

        commits = history[self.place[alert.good_commit]:self.place[alert.bad_commit] + 1]
        magnitude = abs(probe.ratio - 1) if probe.ratio and math.isfinite(probe.ratio) \
            else None
        try:
            result = bisect_commits(commits, measure, magnitude or None)
        except SpyreRegressError as error:
            return lifecycle.Outcome(None, None, str(error))
        good = alert.good_commit
        if result.culprit is not None:
            good = history[self.place[result.culprit] - 1]
        evidence = self.confirm(alert, s, good, result.culprit or alert.bad_commit)
        self.result.investigation_runs += sum(self.branch.runs.values()) - runs_before
        return lifecycle.Outcome(result.culprit if result.reproduced else None, evidence)

    def confirm(self, alert: detect.Alert, s: int, good: str, bad: str) -> lifecycle.Evidence:
        """The investigation's own measurement of `bad` against `good` (fresh runs)."""
        spec = self.branch.suite[s]
        sides = []
        for sha in (good, bad):
            samples: list[float] = []
            while len(samples) < CONFIRM_SAMPLES:
                run = self.branch.measure(s, self.place[sha])
                if run is None:
                    break
                samples += run
                if NOISE[spec.family].sd == 0:
                    break
            sides.append(samples if run is not None else None)
        members = tuple(sorted(s.key for s in lifecycle.symptoms_of(alert)))
        common = dict(floor=metrics.floor_for(spec.name), higher_is_better=spec.higher_is_better,
                      alert_good=alert.good_commit, alert_bad=alert.bad_commit, members=members)
        if sides[0] is not None and sides[1] is None:
            return lifecycle.Evidence(good, bad, None, None, None, (len(sides[0]), 0),
                                      failed=True, **common)
        if sides[0] is None or sides[1] is None:
            return lifecycle.Evidence(good, bad, None, None, None, (0, 0), **common)
        interval = stats.ratio_interval(sides[0], sides[1])
        pvalue = None if NOISE[spec.family].sd == 0 else stats.mann_whitney(
            sides[0], sides[1]).pvalue
        return lifecycle.Evidence(good, bad, interval.ratio, (interval.low, interval.high),
                                  pvalue, (len(sides[0]), len(sides[1])), **common)

    def score_reports(self, night: int, log: NightLog) -> None:
        for record in self.records:
            if record.status in lifecycle.REPORTED and record.culprit is not None:
                key = (record.culprit, record.kind)
                self.result.first_report.setdefault(key, night)
        for report in lifecycle.group_by_culprit(self.records):
            if report.culprit not in self.result.report_nights:
                self.result.report_nights[report.culprit] = night
                log.reported.append(report.culprit)


def simulate(branch: Branch, *, budget_fraction: float = remeasure.BUDGET_FRACTION,
             fdr: float = detect.FDR, window: int | None = None) -> Simulation:
    """Run every night of `branch` through the nightly's detection, re-measurement,
    lifecycle and investigation code."""
    return _Nightly(branch, budget_fraction, fdr, window).run()


# --- scoring -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Planted:
    """One planted regression (a culprit commit and symptom kind) and when it was reported."""

    label: str
    symptom: str
    size: float  # relative worsening; failures count as infinite
    commit: int
    landed: int  # night index
    reported: int | None  # night index of its first report

    @property
    def latency(self) -> int | None:
        return None if self.reported is None else self.reported - self.landed


@dataclass(frozen=True)
class Score:
    planted: list[Planted]
    false_reports: list[tuple[int, int, str]]  # (night, commit, why)
    drift_reports: int
    outlier_blames: int  # alerts blaming a planted outlier's commit in a series it hit
    alerts: int  # distinct alert records
    statuses: dict[str, int]
    confirmed: int  # provisional records later confirmed
    spent: int
    budget: int
    over_budget_nights: int
    base_samples: int
    investigation_runs: int
    nights: int


def score(sim: Simulation) -> Score:
    """Compare what the simulated nightlies reported with what was planted."""
    branch = sim.branch
    planted: dict[tuple[int, str], Planted] = {}
    for e in branch.events:
        higher = branch.suite[e.targets[0]].higher_is_better
        worse = (1 / e.factor - 1) if higher else (e.factor - 1)
        if e.kind == "failure":
            worse = math.inf
        elif e.kind != "step" or worse <= 0:
            continue
        key = (e.commit, e.symptom)
        night = sim.first_report.get((branch.commits[e.commit], e.symptom))
        old = planted.get(key)
        if old is None or worse > old.size:
            planted[key] = Planted(old.label if old else e.label, e.symptom, worse, e.commit,
                                   branch.night_of(e.commit), night)
    culprits = {c for c, _ in planted}
    drift = {c for e in branch.events if e.kind == "drift"
             for c in range(e.commit, e.commit + e.length)}
    false, drifted = [], 0
    for sha, night in sorted(sim.report_nights.items(), key=lambda item: item[1]):
        commit = branch.commits.index(sha)
        if commit in culprits:
            continue
        if commit in drift:
            drifted += 1
        else:
            why = next((e.label for e in branch.events if e.commit == commit), "noise")
            false.append((night, commit, why))
    outliers = [(branch.commits[e.commit], e.symptom, {branch.suite[t].name for t in e.targets})
                for e in branch.events if e.kind == "outlier"]
    blames = len({(bad, kind) for _, bad, kind, names in sim.blamed
                  for commit, symptom, targets in outliers
                  if bad == commit and kind == symptom and names & targets})
    statuses: dict[str, int] = {}
    for r in sim.records:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    confirmed = sum(any(note.startswith("confirmed") for note in r.history) for r in sim.records)
    return Score(sorted(planted.values(), key=lambda p: p.commit), false, drifted, blames,
                 len(sim.records), statuses, confirmed,
                 sum(n.spent for n in sim.nights), sum(n.budget for n in sim.nights),
                 sum(n.spent > n.budget for n in sim.nights),
                 sum(n.base_samples for n in sim.nights), sim.investigation_runs,
                 len(sim.nights))
