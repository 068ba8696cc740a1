"""A month of nightlies on a synthetic branch: the nightly's own night, scored.

Each night commits land (`month.Branch`) and `night.run_night` runs on them, exactly as the
nightly command runs it; this module supplies the synthetic side of its seams. The
generator stands in for asv and its results store (`SyntheticBench`), records are kept in
memory (`MemoryRecords`), and an alert is investigated by the real `Investigator.locate` -
commit bisection, then the confirmation at the culprit against its parent - with the
generator as its prober (`BranchInvestigations`); a report is noted, not written. What the
night leaves is scored against what was planted.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

from regressions import night
from regressions.bisection.commits import Measurement
from regressions.detection import detect, remeasure
from regressions.detection.alerts import Alert
from regressions.groundtruth.month import NOISE, Branch
from regressions.investigation import evidence, model
from regressions.investigation.investigator import Investigator, Located, Prober, parse_params
from regressions.investigation.model import Target
from regressions.records import asv_documents, environment_records, lifecycle
from regressions.records.results import asv_type_of

MACHINE, ENV = "month", "virtualenv-py3.11"


@dataclass(kw_only=True)
class NightLog:
    night: int
    benchmarked: int
    base_samples: int
    budget: float  # seconds at remeasure.Costs() prices: one a sample
    spent: float
    alerts: int
    investigated: int
    reported: list[str] = field(default_factory=list)  # culprits first reported tonight
    events: list[lifecycle.Event] = field(default_factory=list)


@dataclass(kw_only=True)
class Simulation:
    """Everything one simulated month produced."""

    branch: Branch
    nights: list[NightLog]
    records: list[lifecycle.AlertRecord]
    first_report: dict[tuple[str, str], int]  # (culprit, kind) -> night first reported
    report_nights: dict[str, int]  # culprit -> night its report first appeared
    blamed: list[tuple[int, str, str, frozenset[str]]]  # every alert: night, bad, kind, names
    investigation_runs: int = 0


class SyntheticBench:
    """The branch's generator as asv and its results store (`night.Bench`): a night's run
    measures every series at the commits it is given, re-measurement appends a run."""

    def __init__(self, branch: Branch) -> None:
        self.branch = branch
        self.data: list[dict[int, tuple[float, ...] | None]] = [{} for _ in branch.suite]
        self.index = {(s.benchmark, s.params): i for i, s in enumerate(branch.suite)}
        self.place = {sha: i for i, sha in enumerate(branch.commits)}

    def measured(self) -> set[str]:
        return {self.branch.commits[c] for points in self.data for c in points}

    def run(self, commits: Sequence[str]) -> None:
        for sha in commits:
            commit = self.place[sha]
            for s in range(len(self.branch.suite)):
                self.data[s][commit] = self.branch.measure(s, commit)

    def series(self) -> list[detect.Series]:
        out = []
        for s, spec in enumerate(self.branch.suite):
            points = sorted(self.data[s].items())
            if not points:
                continue
            out.append(detect.Series(
                machine=MACHINE, env=ENV, benchmark=spec.benchmark, params=spec.params,
                commits=tuple(self.branch.commits[c] for c, _ in points),
                positions=tuple(c for c, _ in points),
                samples=tuple(v for _, v in points), higher_is_better=spec.higher_is_better,
                keeps_samples=asv_documents.has_samples(asv_type_of(spec.benchmark))))
        return out

    def costs(self) -> remeasure.Costs:
        """Every simulated sample costs the same (one second, runs nothing): the budget in
        seconds is the budget in samples the published figures were measured under."""
        return remeasure.Costs()

    def measure_again(self, requests: Sequence[remeasure.Request]) -> list:
        """asv run --append-samples: the generator's next run, kept in the results."""
        out = []
        for r in requests:
            s, commit = self.index[r.benchmark, r.params], self.place[r.commit]
            samples = self.branch.measure(s, commit)
            old = self.data[s].get(commit)
            appends = asv_documents.has_samples(asv_type_of(r.benchmark))
            if samples is not None:
                # asv --append-samples: a timing benchmark's samples are added, a track_
                # value is replaced (asv/results.py, Results.add_result)
                self.data[s][commit] = (*(old or ()), *samples) if appends else samples
            elif commit not in self.data[s]:
                self.data[s][commit] = None
            out.append(samples if appends or old is None else ())
        return out


class MemoryRecords:
    """The alert records of a simulated month, kept in memory (`night.AlertRecords`)."""

    def __init__(self) -> None:
        self.kept: dict[int, lifecycle.AlertRecord] = {}
        self.extra: dict[int, dict] = {}
        self.machines: dict[int, environment_records.EnvironmentRecord] = {}

    def records(self) -> list[lifecycle.AlertRecord]:
        return [self.kept[i] for i in sorted(self.kept)]

    def extras(self) -> dict[int, dict]:
        return {i: dict(e) for i, e in self.extra.items()}

    def save(self, records: Sequence[lifecycle.AlertRecord],
             extras: dict[int, dict] | None = None) -> None:
        for record in records:
            self.kept[record.id] = record
            self.extra[record.id] = {**self.extra.get(record.id, {}),
                                     **(extras or {}).get(record.id, {})}

    def environment(self) -> list[environment_records.EnvironmentRecord]:
        return [self.machines[i] for i in sorted(self.machines)]

    def save_environment(self, records: Sequence[environment_records.EnvironmentRecord]
                         ) -> None:
        self.machines.update((r.id, r) for r in records)


class BranchHistory:
    """The branch's commits as the investigation's `History`."""

    def __init__(self, branch: Branch) -> None:
        self.commits = branch.commits
        self.place = {sha: i for i, sha in enumerate(branch.commits)}

    def resolve(self, ref: str) -> str:
        return ref

    def between(self, good: str, bad: str) -> list[str]:
        return self.commits[self.place[good]:self.place[bad] + 1]

    def parent(self, sha: str) -> str:
        return self.commits[self.place[sha] - 1]

    def describe(self, sha: str) -> model.CommitInfo:
        return model.CommitInfo(sha, f"commit {self.place[sha]}", "")


class GeneratorProber:
    """The one probe the locating part of an investigation needs, `bench`, served by the
    branch's generator: each call is one more run of the series at the commit."""

    def __init__(self, branch: Branch, series: int) -> None:
        self.branch, self.series = branch, series
        self.deterministic = NOISE[branch.suite[series].family].sd == 0
        self.place = {sha: i for i, sha in enumerate(branch.commits)}

    def bench(self, commit: str, target: Target, samples: int | None = None) -> Measurement:
        """One run of the series at `commit`, or as many runs as give `samples` samples."""
        measured: list[float] = []
        while True:
            run = self.branch.measure(self.series, self.place[commit])
            if run is None:
                return Measurement(commit=commit, status="failed", detail="RuntimeError")
            measured += run
            if self.deterministic or len(measured) >= (samples or 0):
                return Measurement(commit=commit, status="ok", samples=tuple(measured),
                                   deterministic=self.deterministic)


@dataclass(frozen=True)
class SimulatedReport:
    """A culprit's report in the simulation: nothing is written, the night is noted."""

    culprit: str
    alert_ids: tuple[int, ...]
    stage: str | None
    report: str


class BranchInvestigations:
    """Investigating an alert on the branch: the real `Investigator.locate` (commit bisection
    and the confirmation at the culprit) with the generator as its prober, judged by
    `evidence.outcome_of` as the nightly's investigations are."""

    def __init__(self, branch: Branch) -> None:
        self.branch, self.history = branch, BranchHistory(branch)
        self.index = {(s.benchmark, s.params): i for i, s in enumerate(branch.suite)}
        self.runs = 0  # generator runs spent investigating
        self.located: dict[int, tuple[Alert, GeneratorProber, Target, Located]] = {}

    def investigate(self, alert_id: int, alert: Alert) -> lifecycle.Outcome:
        probe = alert.probe
        s = self.index[probe.benchmark, probe.params]
        spec = self.branch.suite[s]
        target = Target(benchmark=spec.benchmark, params=parse_params(spec.params),
                        workload=spec.workload,
                        seq=spec.seq or 0, width=None, metric=probe.kind, stage=spec.stage)
        prober = GeneratorProber(self.branch, s)
        # locating measures with `bench` alone, the one probe the generator serves
        investigator = Investigator(self.history, cast(Prober, prober))

        def attempt() -> Located:
            located = investigator.locate(alert, target)
            self.located[alert_id] = (alert, prober, target, located)
            return located

        before = sum(self.branch.runs.values())
        outcome = evidence.outcome_of(alert, attempt, self.history.parent)
        self.runs += sum(self.branch.runs.values()) - before
        return outcome

    def at_head(self, alert_id: int, head: str) -> lifecycle.HeadCheck | None:
        """The located probe once more at the head: the generator's next runs there."""
        if alert_id not in self.located:
            return None
        alert, prober, target, located = self.located[alert_id]
        before = sum(self.branch.runs.values())
        check = evidence.at_head(alert, located, lambda commit, n: prober.bench(
            commit, target, n), head)
        self.runs += sum(self.branch.runs.values()) - before
        return check

    @property
    def night(self) -> int:
        """The night being run: its hardware measures everything measured tonight."""
        return self.branch.night

    @night.setter
    def night(self, number: int) -> None:
        self.branch.night = number

    def publish(self, group: lifecycle.CulpritReport) -> SimulatedReport:
        return SimulatedReport(group.culprit, group.alert_ids, None,
                               f"simulated, night {self.night + 1}")

    def written(self, report: str) -> bool:
        return True  # nothing is written, so nothing goes missing


def _called(label: str) -> Callable[[], str]:
    """The night's `now`: what the records' notes call the time, here the night's number."""
    return lambda: label


def simulate(branch: Branch, *, budget_fraction: float = remeasure.BUDGET_FRACTION,
             fdr: float = detect.FDR, window: int | None = None) -> Simulation:
    """Run every night of `branch` through the nightly's own night (`night.run_night`):
    detection, re-measurement, lifecycle, investigation and publication."""
    bench, store = SyntheticBench(branch), MemoryRecords()
    investigations = BranchInvestigations(branch)
    settings = night.Settings(budget=budget_fraction, fdr=fdr, window=window)
    result = Simulation(branch=branch, nights=[], records=[], first_report={}, report_nights={},
                        blamed=[])
    for number in range(len(branch.nights)):
        investigations.night = number
        marks = [branch.commits[c] for c in branch.benchmarked(number)]
        history = branch.commits[:branch.nights[number][1] + 1]
        tonight = night.run_night(marks, history, bench, store, investigations=investigations,
                                  now=_called(f"night {number + 1}"), settings=settings)
        result.nights.append(_log(number, tonight, result))
        result.blamed += [(number, a.bad_commit, a.kind,
                           frozenset(f"{m.benchmark}{m.params}" for m in a.members))
                          for a in tonight.alerts]
    result.records = store.records()
    result.investigation_runs = investigations.runs
    return result


def _log(number: int, tonight: night.NightResult, result: Simulation) -> NightLog:
    """The night's figures, and the first nights each culprit and symptom were reported."""
    found = tonight.remeasurement
    log = NightLog(night=number, benchmarked=len(tonight.benchmarked),
                   base_samples=tonight.base_samples, budget=found.budget,
                   spent=found.spent, alerts=len(tonight.alerts),
                   investigated=len(tonight.investigated),
                   events=list(tonight.events))
    for record in tonight.records:
        if record.status in lifecycle.REPORTED and record.culprit is not None and \
                record.fixed_in is None:
            result.first_report.setdefault((record.culprit, record.kind), number)
    for report in tonight.published:
        if report.culprit not in result.report_nights:
            result.report_nights[report.culprit] = number
            log.reported.append(report.culprit)
    return log


# --- scoring -----------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class Score:
    planted: list[Planted]
    false_reports: list[tuple[int, int, str]]  # (night, commit, why)
    drift_reports: int
    outlier_blames: int  # alerts blaming a planted outlier's commit in a series it hit
    alerts: int  # distinct alert records
    statuses: dict[str, int]
    confirmed: int  # provisional records later confirmed
    spent: float
    budget: float
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
        if e.kind == "breaks":
            worse = math.inf
        elif e.kind != "step" or worse <= 0:
            continue
        key = (e.commit, e.symptom)
        night = sim.first_report.get((branch.commits[e.commit], e.symptom))
        old = planted.get(key)
        if old is None or worse > old.size:
            planted[key] = Planted(label=old.label if old else e.label, symptom=e.symptom,
                                   size=worse, commit=e.commit,
                                   landed=branch.night_of(e.commit), reported=night)
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
    return Score(planted=sorted(planted.values(), key=lambda p: p.commit), false_reports=false,
                 drift_reports=drifted, outlier_blames=blames,
                 alerts=len(sim.records), statuses=statuses, confirmed=confirmed,
                 spent=sum(n.spent for n in sim.nights), budget=sum(n.budget for n in sim.nights),
                 over_budget_nights=sum(n.spent > n.budget for n in sim.nights),
                 base_samples=sum(n.base_samples for n in sim.nights),
                 investigation_runs=sim.investigation_runs,
                 nights=len(sim.nights))
