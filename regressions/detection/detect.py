"""A detection run: every series' change points become regressions, then alerts.

Per series, `changepoints.detect_changes` finds level shifts. Worsenings at least the
benchmark family's magnitude floor are candidates; the candidates of all noisy series in the
run form one Benjamini-Hochberg family, so the false discovery rate holds across the run, and
a candidate is reported only when its own interval excludes no change. A series that stops
running is a "failure". Then the run is read as a whole: a series whose "step" is what is
left of a one-commit excursion most of its kind returned from is part of that excursion, and
changes a machine shares across its runner-bound series are one environment alert
(`environment`), not regressions. Regressions of one kind whose commit ranges overlap become
one alert with a probe, its narrowest member. docs/detection.md has the method, the measured
quality and the JSON format.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

import numpy as np

from regressions import metrics, stats
from regressions.detection import changepoints, environment
from regressions.detection.changepoints import ALPHA, MIN_SIZE, Change, looks_deterministic
from regressions.detection.outliers import Edge
from regressions.detection.segmentation import ANCHOR_PVALUE

# False discovery rate across all series of one run (Benjamini & Hochberg 1995).
FDR = 0.05
# A reported change's p-value is at most this, however many discoveries the run's false
# discovery rate counts: Benjamini-Hochberg lets p-values up to k * FDR / m through once k
# tests are discoveries, and a store that rediscovers every old change (or, read the other
# way round, every real improvement) lets ever weaker ones in. 0.001 is Otava's default
# `max_pvalue` and what makes a change an anchor here (segmentation.ANCHOR_PVALUE).
REPORT_PVALUE = ANCHOR_PVALUE
# A near miss below the floor still counts as a candidate for more samples when its estimate
# reaches this fraction of the floor: a 1.5% step can measure 0.8% on ten samples.
NEAR_FLOOR = 0.5


@dataclass(frozen=True, kw_only=True)
class Series:
    """One benchmark/params history on one machine and env, in commit order.

    `samples[i]` holds the values measured at `commits[i]` (one value when asv recorded no
    samples) or None when the benchmark failed there. Skipped points are left out.
    `deterministic` is None when unknown; `detect_changes` then infers it. `keeps_samples`
    is False for a benchmark whose store keeps one value per commit (asv's `track_` and
    memory benchmarks): measuring it again at a commit replaces that value, so only a commit
    without a point gains from a re-measurement. `settings[i]` is the machine parameters the
    result file of `commits[i]` recorded (`environment.describe_settings`; "" or no tuple:
    unknown). `kind` is the metric kind its source declared (a table of results may);
    None: the benchmark's name decides (`metrics.metric_of`).
    """

    machine: str
    env: str
    benchmark: str
    params: str
    commits: tuple[str, ...]
    positions: tuple[int, ...]
    samples: tuple[tuple[float, ...] | None, ...]
    higher_is_better: bool = False
    deterministic: bool | None = None
    keeps_samples: bool = True
    settings: tuple[str, ...] = ()
    kind: str | None = None

    @property
    def name(self) -> str:
        return f"{self.benchmark}{self.params}"

    @property
    def metric(self) -> metrics.Metric:
        return metrics.metric_of(self.name, self.kind)


@dataclass(frozen=True, kw_only=True)
class Regression:
    """A confirmed worsening of one series between two adjacent measured commits."""

    machine: str
    env: str
    benchmark: str
    params: str
    kind: metrics.Kind
    good_commit: str
    bad_commit: str
    good_position: int
    bad_position: int
    ratio: float | None
    ci: tuple[float, float] | None
    p: float | None
    q: float | None
    baseline: float | None
    edge: Edge | None = None  # one commit holds the level: provisional

    @property
    def name(self) -> str:
        return f"{self.benchmark}{self.params}"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["ci"] = None if self.ci is None else [_number(x) for x in self.ci]
        for key in ("ratio", "p", "q", "baseline"):
            data[key] = _number(data[key])
        return data

    @classmethod
    def from_dict(cls, data: dict) -> Regression:
        ci = data.get("ci")
        values: dict[str, Any] = {f.name: data.get(f.name) for f in fields(cls)}
        values["ci"] = None if ci is None else (float(ci[0]), float(ci[1]))
        return cls(**values)


@dataclass(frozen=True, kw_only=True)
class Transient:
    """A single-commit excursion of one series (`changepoints.Transient`), at least the
    family floor in the bad direction: reported for a person to look at, never bisected."""

    machine: str
    env: str
    benchmark: str
    params: str
    kind: metrics.Kind
    commit: str
    position: int
    ratio: float  # the commit's level / the level just before it
    level: float


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A worsening one series was tested for, reported or not: what re-measurement planning
    (`remeasure.plan`) reads. `q` is None when the worsening is below the floor (kept because
    its estimate may grow with samples); `plausible` lists other possible bad commits, and
    `uncertain` the commits whose level the fit cannot tell, most uncertain first. An
    exact change of a deterministic series is a reported candidate with `p` and `q` None.
    `environment` marks one an environment alert explains: more samples of it on tonight's
    machine would mix two machines' levels. `awaiting` marks one that would be reported but
    whose new level too few commits hold yet (`changepoints.Change.awaiting`)."""

    series: Series
    good_commit: str
    bad_commit: str
    good_position: int
    bad_position: int
    ratio: float
    ci: tuple[float, float]
    p: float | None
    q: float | None
    worsening: float
    edge: Edge | None
    plausible: tuple[str, ...]
    reported: bool
    uncertain: tuple[str, ...] = ()
    environment: bool = False
    awaiting: bool = False


# What a series' test read (`Reading.judged_by`): every sample of each commit, one value per
# commit (asv keeps the median and its statistics without --record-samples, and format 1
# often kept no samples), or exact values (a deterministic series: any change is real).
SAMPLES, SUMMARY, EXACT = "samples", "summary statistics", "exact values"


@dataclass(frozen=True)
class Step:
    """One change of a series' level, either direction: `before` and `after` are the levels
    either side (`changepoints.Change`), between `good_commit` and `bad_commit`."""

    good_commit: str
    bad_commit: str
    bad_position: int
    before: float
    after: float


@dataclass(frozen=True)
class Reading:
    """How detection read one series: what its test was judged by (`SAMPLES`, `SUMMARY` or
    `EXACT`: how far to trust a p-value) and every level change it found, in order: what
    says whether a regression is still there at the series' newest commit."""

    judged_by: str
    steps: tuple[Step, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Detection:
    """One run: `regressions` (confirmed and provisional), every tested `candidates`, the
    `transients` and the `environment` alerts reported apart; `readings[i]` is how the
    run read `series[i]` (empty for a Detection built by hand). `awaiting` holds what would
    be regressions but for the commits their new level still needs: listed, never
    investigated, until a later commit confirms them."""

    regressions: list[Regression]
    candidates: list[Candidate]
    transients: list[Transient]
    environment: list[environment.EnvironmentAlert] = field(default_factory=list)
    readings: list[Reading] = field(default_factory=list)
    awaiting: list[Regression] = field(default_factory=list)


def _number(x: float | None) -> float | None:
    """JSON has no inf or NaN: those are written as null."""
    return x if x is not None and math.isfinite(x) else None


def worsening(change: Change, higher_is_better: bool) -> float:
    """Relative change in the bad direction (> 0 is worse): +0.25 is 25% slower, or 20% less
    throughput for a higher-is-better metric (1/0.8 - 1), so either direction reads alike."""
    return _worse(change.before, change.after, higher_is_better)


def _worse(before: float, after: float, higher_is_better: bool) -> float:
    diff = before - after if higher_is_better else after - before
    base = abs(after if higher_is_better else before)
    if diff == 0:
        return 0.0
    return diff / base if base else math.copysign(math.inf, diff)


def find_regressions(series: Sequence[Series], **options) -> list[Regression]:
    """Confirmed regressions and new failures of every series in one run
    (`run_detection(...).regressions`; options are the same)."""
    return run_detection(series, **options).regressions


def run_detection(
    series: Sequence[Series],
    *,
    floors: Sequence[tuple[str, float]] = (),
    fdr: float = FDR,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    edges: Sequence[Edge] = changepoints.EDGES,
    window: int | None = None,
    memo: dict | None = None,
) -> Detection:
    """Regressions, every tested candidate and the transients of one run.

    A candidate is a worsening at least the family floor (`floors` overrides: regex ->
    fraction, first match wins), inside a series or at one of its `edges`. Every test of a
    noisy series joins one Benjamini-Hochberg family: its interior candidates (or p = 1 when
    it has none) and each tested edge (p = 1 when that edge has no candidate), so an edge
    costs the same false-discovery control as any other change. A candidate is a regression
    when p <= REPORT_PVALUE and q <= `fdr`; an edge regression is provisional. Deterministic
    changes and failures are observations, not tests: they skip the FDR step. `window` keeps
    each series' newest `window` measured points (then only the newest edge is tested where
    the window cut history off). `memo` (a dict the caller keeps) reuses the analysis of a
    series object seen before with the same options: re-measurement rounds change few series.
    """
    options = (alpha, min_size, tuple(edges), window)
    found: list[Regression] = []
    family: list[float] = []
    tested: list[tuple[_Analysed, changepoints.Change, int | None, bool]] = []
    transients: list[Transient] = []
    candidates: list[Candidate] = []
    runs: list[_Analysed] = []
    for s in series:
        found += _failures(s)
        analysed = _analyse(s, options, memo)
        runs.append(analysed)
        floor = metrics.floor_for(s.name, tuple(floors), s.kind)
        transients += [_transient(s, analysed.measured, t) for t in analysed.changes.transients
                       if _worse(t.level, t.level * t.ratio, s.higher_is_better) >= floor]
        if analysed.exact:
            for c in analysed.changes.changes:
                w = worsening(c, s.higher_is_better)
                if w > 0 and w >= floor:
                    found.append(_regression(s, analysed.measured, c, None))
                    candidates.append(_candidate(s, analysed.measured, c, None, reported=True))
            continue
        tested += _tests(analysed, floor, family)
    alerts = environment.find(_moves(runs), _levels(runs), _settings(runs))
    explained = _explained(tested, alerts, floors)
    qvalues = _qvalues(family, {j for (_, _, j, _), alert in zip(tested, explained,
                                                                strict=True) if alert})
    noisy, awaiting, members, judged = _judged(tested, explained, qvalues, fdr)
    candidates += judged
    kept, returned = _apart_from_excursions(noisy, transients, floors)
    dropped = {_key(r) for r, _ in returned}
    candidates = [replace(c, reported=False) if _key(c) in dropped else c for c in candidates]
    found += kept
    found.sort(key=lambda r: (r.bad_position, r.kind, r.benchmark, r.params))
    return Detection(regressions=found, candidates=candidates,
                     transients=transients + [t for _, t in returned],
                     environment=[replace(a, members=tuple(members.get(id(a), ())))
                                  for a in alerts],
                     readings=[_reading(a) for a in runs], awaiting=awaiting)


def _judged(tested: Sequence[tuple[_Analysed, changepoints.Change, int | None, bool]],
            explained: Sequence[environment.EnvironmentAlert | None], qvalues: Sequence[float],
            fdr: float) -> tuple[list[tuple[Regression, _Analysed, changepoints.Change]],
                                 list[Regression], dict[int, list[Regression]], list[Candidate]]:
    """Each tested candidate judged: the regressions (with what they came from), those
    awaiting more commits, the members each environment alert explains (by its id), and
    every candidate. A regression is confirmed on its own interval and passes the run's
    false discovery rate; judged on one value per commit, it also has p <= REPORT_PVALUE,
    however many discoveries the run counts."""
    noisy: list[tuple[Regression, _Analysed, changepoints.Change]] = []
    awaiting: list[Regression] = []
    members: dict[int, list[Regression]] = {}
    candidates = []
    for (analysed, c, j, significant), alert in zip(tested, explained, strict=True):
        s, measured = analysed.series, analysed.measured
        q = None if j is None or alert is not None else qvalues[j]
        confirmed = significant and excludes_no_change(c)
        if alert is not None and confirmed:  # what would have been a regression
            members.setdefault(id(alert), []).append(_regression(s, measured, c, None))
        below_ceiling = c.pvalue is not None and (
            c.pvalue <= REPORT_PVALUE or not one_value_per_commit(s, measured))
        reported = confirmed and alert is None and q is not None and q <= fdr and below_ceiling
        if reported and c.awaiting:
            awaiting.append(_regression(s, measured, c, q))
        elif reported:
            noisy.append((_regression(s, measured, c, q), analysed, c))
        candidates.append(_candidate(s, measured, c, q, reported=reported and not c.awaiting,
                                     environment=alert is not None,
                                     awaiting=reported and c.awaiting))
    return noisy, awaiting, members, candidates


def one_value_per_commit(s: Series, points: Sequence[int] | None = None) -> bool:
    """Whether the series' test reads one value per commit (`SUMMARY`): none of its
    `points` (default: every commit) holds several samples. Such a series is reported only
    with p <= REPORT_PVALUE."""
    chosen = s.samples if points is None else [s.samples[i] for i in points]
    return all(len(samples or ()) <= 1 for samples in chosen)


def _reading(analysed: _Analysed) -> Reading:
    """What `Reading` keeps of one analysed series: a few steps, never its points."""
    s, measured = analysed.series, analysed.measured
    judged = EXACT if analysed.exact else SAMPLES if any(
        len(s.samples[i] or ()) > 1 for i in measured) else SUMMARY
    return Reading(judged, tuple(
        Step(s.commits[measured[c.good_index]], s.commits[measured[c.index]],
             s.positions[measured[c.index]], c.before, after=c.after)
        for c in analysed.changes.changes))


def _explained(tested: Sequence[tuple[_Analysed, changepoints.Change, int | None, bool]],
               alerts: Sequence[environment.EnvironmentAlert],
               floors: Sequence[tuple[str, float]]) -> list[environment.EnvironmentAlert | None]:
    """Per tested candidate, the environment alert that explains it (None: none does).
    Only a runner-bound series' change can be the machine's."""
    at = {(a.machine, a.env, a.bad_position): a for a in alerts}
    out: list[environment.EnvironmentAlert | None] = []
    for analysed, c, _, _ in tested:
        s = analysed.series
        alert = at.get((s.machine, s.env, s.positions[analysed.measured[c.index]]))
        out.append(alert if alert is not None and _runner(analysed) and environment.explained(
            _regression(s, analysed.measured, c, None), alert, floors) else None)
    return out


def _qvalues(family: Sequence[float], apart: set[int | None]) -> list[float]:
    """Benjamini-Hochberg q-values of the family without the tests an environment alert
    answers (a machine's change is no hypothesis about the code: left in, its hundreds of
    discoveries would let more false ones through); NaN for those left out."""
    kept = [j for j in range(len(family)) if j not in apart]
    q = stats.bh_qvalues([family[j] for j in kept])
    out = [math.nan] * len(family)
    for j, value in zip(kept, q, strict=True):
        out[j] = value
    return out


def excludes_no_change(c: changepoints.Change | Candidate) -> bool:
    """Whether the change's own interval leaves no change out: both ends on the side of 1
    its estimate lies on (a member whose interval holds 1 is not confirmed on its own)."""
    return all((bound - 1) * (c.ratio - 1) > 0 for bound in c.ci)


def _key(item: Regression | Candidate) -> tuple[str, str, str, str]:
    s = item.series if isinstance(item, Candidate) else item
    return s.machine, s.env, s.name, item.bad_commit


def _apart_from_excursions(noisy: list[tuple[Regression, _Analysed, changepoints.Change]],
                           transients: Sequence[Transient], floors: Sequence[tuple[str, float]]
                           ) -> tuple[list[Regression], list[tuple[Regression, Transient]]]:
    """The regressions that are steps of their own, and those that are what is left of a
    one-commit excursion, each with the transient it is part of.

    When most series of one kind that moved at a commit are transients there (the commit was
    reverted before the next one benchmarked), a series of that kind whose level after the
    commit stays within its floor of the level before it took part in the same excursion:
    its "step" is the excursion averaged with noise, not a change of its own.
    """
    spikes = Counter((t.machine, t.kind, t.commit) for t in transients)
    steps = Counter((r.machine, r.kind, r.bad_commit) for r, _, _ in noisy)
    kept, returned = [], []
    for r, analysed, c in noisy:
        place = (r.machine, r.kind, r.bad_commit)
        lasting = _lasting(analysed, c)
        floor = metrics.floor_for(r.name, tuple(floors), r.kind)
        if spikes[place] > steps[place] and lasting is not None and \
                _worse(c.before, lasting, analysed.series.higher_is_better) < floor:
            at = analysed.measured[c.index]
            samples = analysed.series.samples[at]
            assert samples is not None, "a measured point has samples"
            level = float(np.exp(np.mean(np.log(samples)))) if c.before > 0 \
                else float(np.mean(samples))
            returned.append((r, Transient(machine=r.machine, env=r.env, benchmark=r.benchmark,
                                          params=r.params, kind=r.kind,
                                          commit=r.bad_commit, position=r.bad_position,
                                          ratio=level / c.before if c.before else math.inf,
                                          level=c.before)))
        else:
            kept.append(r)
    return kept, returned


def _lasting(analysed: _Analysed, c: changepoints.Change) -> float | None:
    """The series' level after the change's first commit, up to its next change (a change
    right after that commit is the return, not the end); None when no commit follows: what
    stays of the change once its first commit is left out."""
    following = [d.index for d in analysed.changes.changes if d.index > c.index + 1]
    after = analysed.measured[c.index + 1:min(following, default=len(analysed.measured))]
    if not after:
        return None
    values = np.concatenate([analysed.series.samples[i] for i in after])
    return float(np.exp(np.mean(np.log(values)))) if c.before > 0 and (values > 0).all() \
        else float(values.mean())


def _runner(analysed: _Analysed) -> bool:
    return not analysed.exact and metrics.moves_with_runner(analysed.series.name,
                                                           analysed.series.kind)


def _moves(runs: Sequence[_Analysed]) -> list[environment.Move]:
    """Every change of every series, either direction and any size: what an environment
    alert counts."""
    out = []
    for a in runs:
        s, runner = a.series, _runner(a)
        for c in a.changes.changes:
            good, bad = a.measured[c.good_index], a.measured[c.index]
            out.append(environment.Move(machine=s.machine, env=s.env, benchmark=s.benchmark,
                                        name=s.name, good_commit=s.commits[good],
                                        bad_commit=s.commits[bad], good_position=s.positions[good],
                                        bad_position=s.positions[bad],
                                        ratio=1 / c.ratio if s.higher_is_better and c.ratio
                                              else c.ratio, runner=runner))
    return out


def _levels(runs: Sequence[_Analysed]) -> list[environment.Levels]:
    """Every series' level per measured commit, for the shares an environment alert counts
    (short series without levels left out)."""
    return [environment.Levels(machine=a.series.machine, env=a.series.env, runner=_runner(a),
                               positions=np.array([a.series.positions[i] for i in a.measured]),
                               levels=-a.changes.levels if a.series.higher_is_better
                                      else a.changes.levels, positive=a.changes.positive)
            for a in runs if a.changes.levels is not None
            and a.changes.levels.size == len(a.measured)]


def _settings(runs: Sequence[_Analysed]) -> dict[tuple[str, str], dict[int, tuple[str, str]]]:
    """(machine, env) -> position -> (commit, recorded machine parameters), from every series
    that knows them."""
    out: dict[tuple[str, str], dict[int, tuple[str, str]]] = {}
    for a in runs:
        s = a.series
        if not s.settings:
            continue
        known = out.setdefault((s.machine, s.env), {})
        for position, commit, text in zip(s.positions, s.commits, s.settings, strict=True):
            if text and position not in known:
                known[position] = (commit, text)
    return out


@dataclass(frozen=True)
class _Analysed:
    """One series read by `changepoints.analyse_series`: which points it used."""

    series: Series
    measured: list[int]
    exact: bool
    changes: changepoints.SeriesChanges


def _analyse(s: Series, options: tuple, memo: dict | None) -> _Analysed:
    key = (id(s), options)
    if memo is not None and key in memo and memo[key].series is s:
        return memo[key]
    alpha, min_size, edges, window = options
    measured, points, exact = _points(s, window)
    cut = window is not None and len(measured) < sum(v is not None for v in s.samples)
    changes = changepoints.analyse_series(
        points, alpha=alpha, min_size=min_size, deterministic=exact,
        edges=[e for e in edges if not (cut and e == "oldest")],
        epsilon=s.metric.tolerance)
    analysed = _Analysed(s, measured, exact, changes)
    if memo is not None:
        memo[key] = analysed
    return analysed


def _tests(analysed: _Analysed, floor: float, family: list[float]
           ) -> list[tuple[_Analysed, changepoints.Change, int | None, bool]]:
    """A noisy series' candidates, each with its index in the FDR `family` (appended here;
    None for a near miss below the floor) and whether its own p passed `alpha`; p = 1 for
    the interior and each tested edge without a candidate."""
    s, changes = analysed.series, analysed.changes
    out: list[tuple[_Analysed, changepoints.Change, int | None, bool]] = []
    covered: set[str | None] = set()
    for c in (*changes.changes, *changes.near):
        w = worsening(c, s.higher_is_better)
        if w > 0 and w >= floor:
            assert c.pvalue is not None, "a tested change has its p-value"
            out.append((analysed, c, len(family), c in changes.changes))
            family.append(c.pvalue)
            covered.add(c.edge)
        elif w > 0 and w >= floor * NEAR_FLOOR:
            out.append((analysed, c, None, False))
    family += [1.0] * sum(e not in covered for e in (None, *changes.edge_tests))
    return out


def _points(s: Series, window: int | None) -> tuple[list[int], list[tuple[float, ...]], bool]:
    """Indexes of the measured points (newest `window` of them), their samples, and whether
    the series is deterministic."""
    points = {i: v for i, v in enumerate(s.samples) if v is not None}
    measured = list(points)
    declared = s.metric.deterministic  # the metric table knows, e.g. compile work
    exact = declared if declared is not None else s.deterministic \
        if s.deterministic is not None else looks_deterministic([points[i] for i in measured])
    if not exact:  # an infinite value carries no level for a test; drop those points
        measured = [i for i in measured if all(map(math.isfinite, points[i]))]
    if window is not None:
        measured = measured[-window:]
    return measured, [points[i] for i in measured], exact


def _failures(s: Series) -> list[Regression]:
    """A benchmark that stops running is its own symptom, not a slowdown: one per ok->failed."""
    return [
        Regression(machine=s.machine, env=s.env, benchmark=s.benchmark, params=s.params,
                   kind=metrics.FAILURE, good_commit=s.commits[i - 1],
                   bad_commit=s.commits[i], good_position=s.positions[i - 1],
                   bad_position=s.positions[i], ratio=None, ci=None, p=None, q=None,
                   baseline=None)
        for i in range(1, len(s.samples))
        if s.samples[i] is None and s.samples[i - 1] is not None
    ]


def _regression(s: Series, measured: list[int], c: changepoints.Change,
                q: float | None) -> Regression:
    good, bad = measured[c.good_index], measured[c.index]
    return Regression(machine=s.machine, env=s.env, benchmark=s.benchmark, params=s.params,
                      kind=s.metric.name,
                      good_commit=s.commits[good], bad_commit=s.commits[bad],
                      good_position=s.positions[good], bad_position=s.positions[bad],
                      ratio=c.ratio, ci=c.ci, p=c.pvalue, q=q, baseline=c.before, edge=c.edge)


def _candidate(s: Series, measured: list[int], c: changepoints.Change, q: float | None,
               reported: bool, environment: bool = False, awaiting: bool = False
               ) -> Candidate:
    good, bad = measured[c.good_index], measured[c.index]
    return Candidate(series=s, good_commit=s.commits[good], bad_commit=s.commits[bad],
                     good_position=s.positions[good], bad_position=s.positions[bad],
                     ratio=c.ratio, ci=c.ci, p=c.pvalue, q=q,
                     worsening=worsening(c, s.higher_is_better), edge=c.edge,
                     plausible=tuple(s.commits[measured[j]] for j in c.plausible),
                     reported=reported,
                     uncertain=tuple(s.commits[measured[j]] for j in c.uncertain),
                     environment=environment, awaiting=awaiting)


def _transient(s: Series, measured: list[int], t: changepoints.Transient) -> Transient:
    at = measured[t.index]
    return Transient(machine=s.machine, env=s.env, benchmark=s.benchmark, params=s.params,
                     kind=s.metric.name,
                     commit=s.commits[at], position=s.positions[at], ratio=t.ratio, level=t.level)
