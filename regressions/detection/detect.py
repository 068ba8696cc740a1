"""A detection run: every series' change points become regressions, then alerts.

Per series, `changepoints.detect_changes` finds level shifts. Worsenings at least the
benchmark family's magnitude floor are candidates; the candidates of all noisy series in the
run form one Benjamini-Hochberg family, so the false discovery rate holds across the run. A
series that stops running is a "failure". Regressions of one kind whose commit ranges overlap
become one alert with a probe, its narrowest member. docs/detection.md has the method, the
measured quality and the JSON format.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields

from regressions import metrics, stats
from regressions.detection import changepoints
from regressions.detection.changepoints import ALPHA, MIN_SIZE, Change, looks_deterministic
from regressions.detection.outliers import Edge

# False discovery rate across all series of one run (Benjamini & Hochberg 1995).
FDR = 0.05
# A near miss below the floor still counts as a candidate for more samples when its estimate
# reaches this fraction of the floor: a 1.5% step can measure 0.8% on ten samples.
NEAR_FLOOR = 0.5


@dataclass(frozen=True)
class Series:
    """One benchmark/params history on one machine and env, in commit order.

    `samples[i]` holds the values measured at `commits[i]` (one value when asv recorded no
    samples) or None when the benchmark failed there. Skipped points are left out.
    `deterministic` is None when unknown; `detect_changes` then infers it. `keeps_samples`
    is False for a benchmark whose store keeps one value per commit (asv's `track_` and
    memory benchmarks): measuring it again at a commit replaces that value, so only a commit
    without a point gains from a re-measurement.
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

    @property
    def name(self) -> str:
        return f"{self.benchmark}{self.params}"


@dataclass(frozen=True)
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
        return cls(**{f.name: data.get(f.name) for f in fields(cls) if f.name != "ci"},
                   ci=None if ci is None else (float(ci[0]), float(ci[1])))


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Candidate:
    """A worsening one series was tested for, reported or not: what re-measurement planning
    (`remeasure.plan`) reads. `q` is None when the worsening is below the floor (kept because
    its estimate may grow with samples); `plausible` lists other possible bad commits, and
    `uncertain` the commits whose level the fit cannot tell, most uncertain first. An
    exact change of a deterministic series is a reported candidate with `p` and `q` None."""

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


@dataclass(frozen=True)
class Detection:
    """One run: `regressions` (confirmed and provisional), every tested `candidates`, and the
    `transients` reported apart."""

    regressions: list[Regression]
    candidates: list[Candidate]
    transients: list[Transient]


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
    when p <= `alpha` and q <= `fdr`; an edge regression is provisional. Deterministic
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
    for s in series:
        found += _failures(s)
        analysed = _analyse(s, options, memo)
        floor = metrics.floor_for(s.name, tuple(floors))
        transients += [_transient(s, analysed.measured, t) for t in analysed.changes.transients
                       if _worse(t.level, t.level * t.ratio, s.higher_is_better) >= floor]
        if analysed.exact:
            for c in analysed.changes.changes:
                w = worsening(c, s.higher_is_better)
                if w > 0 and w >= floor:
                    found.append(_regression(s, analysed.measured, c, None))
                    candidates.append(_candidate(s, analysed.measured, c, None, True))
            continue
        tested += _tests(analysed, floor, family)
    qvalues = stats.bh_qvalues(family)
    for analysed, c, j, significant in tested:
        q = None if j is None else qvalues[j]
        reported = significant and q is not None and q <= fdr
        if reported:
            found.append(_regression(analysed.series, analysed.measured, c, q))
        candidates.append(_candidate(analysed.series, analysed.measured, c, q, reported))
    found.sort(key=lambda r: (r.bad_position, r.kind, r.benchmark, r.params))
    return Detection(found, candidates, transients)


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
        epsilon=metrics.metric_for(s.name).tolerance)
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
    measured = [i for i, v in enumerate(s.samples) if v is not None]
    declared = metrics.metric_for(s.name).deterministic  # the table knows, e.g. compile work
    exact = declared if declared is not None else s.deterministic \
        if s.deterministic is not None else looks_deterministic([s.samples[i] for i in measured])
    if not exact:  # an infinite value carries no level for a test; drop those points
        measured = [i for i in measured if all(map(math.isfinite, s.samples[i]))]
    if window is not None:
        measured = measured[-window:]
    return measured, [s.samples[i] for i in measured], exact


def _failures(s: Series) -> list[Regression]:
    """A benchmark that stops running is its own symptom, not a slowdown: one per ok->failed."""
    return [
        Regression(s.machine, s.env, s.benchmark, s.params, metrics.FAILURE, s.commits[i - 1],
                   s.commits[i], s.positions[i - 1], s.positions[i], None, None, None, None,
                   None)
        for i in range(1, len(s.samples))
        if s.samples[i] is None and s.samples[i - 1] is not None
    ]


def _regression(s: Series, measured: list[int], c: changepoints.Change,
                q: float | None) -> Regression:
    good, bad = measured[c.good_index], measured[c.index]
    return Regression(s.machine, s.env, s.benchmark, s.params, metrics.metric_for(s.name).name,
                      s.commits[good], s.commits[bad], s.positions[good], s.positions[bad],
                      c.ratio, c.ci, c.pvalue, q, c.before, c.edge)


def _candidate(s: Series, measured: list[int], c: changepoints.Change, q: float | None,
               reported: bool) -> Candidate:
    good, bad = measured[c.good_index], measured[c.index]
    return Candidate(s, s.commits[good], s.commits[bad], s.positions[good], s.positions[bad],
                     c.ratio, c.ci, c.pvalue, q, worsening(c, s.higher_is_better), c.edge,
                     tuple(s.commits[measured[j]] for j in c.plausible), reported,
                     tuple(s.commits[measured[j]] for j in c.uncertain))


def _transient(s: Series, measured: list[int], t: changepoints.Transient) -> Transient:
    at = measured[t.index]
    return Transient(s.machine, s.env, s.benchmark, s.params, metrics.metric_for(s.name).name,
                     s.commits[at], s.positions[at], t.ratio, t.level)
