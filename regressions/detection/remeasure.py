"""Which commits to measure again before a night decides: a pure plan within a budget.

Detection that is unsure asks for more data rather than a better guess, as Pinpoint adds
repeats while its verdict is "unknown" (catapult dashboard/pinpoint/models/job_state.py,
`_REPEAT_COUNT_INCREASE`). Five kinds of candidate earn samples, in this order:

1. *edge*: a change at the newest (or oldest) benchmarked commit, held by one commit: the
   commit again (a bad run shows as an excursion that does not repeat) and every commit of
   the stride window before it that was not benchmarked (a step inside the window then holds
   for two commits and is located exactly); and *awaiting*: a change its series' noise
   model found but too few commits hold yet (`detect.Candidate.awaiting`): those commits
   again, where the store keeps samples (where it keeps one value a commit, the night
   waits for the next commits: measuring again would replace the value, not add one);
2. *contradicted*: a change at a commit where an investigation did not reproduce it: both
   ends again, since a bad run there may have moved the change onto the wrong commit;
3. *window*: a sure change whose range still holds commits that were not benchmarked: those
   commits, so two regressions inside one stride window come apart before an alert merges
   them and one bisection blames one culprit for both;
4. *weak*: q within a factor of the false-discovery threshold, or a near miss: the commits
   around its split, so the estimate firms up or fades;
5. *ambiguous*: other splits nearly as likely as the best one: the commits between them.

The nightly hands the requests to `asv run --append-samples` (the extra samples land in the
results like any others) and runs detection again on the enlarged data. A series the runner
can move is never measured again at a commit before its machine's newest environment
change: tonight's hardware is not the one that measured it (`same_hardware`). A
deterministic series (instruction counts, numerical error, a clock without noise) is never
measured again: its repeat is the same number, and its change, located or not, is exact;
bisection finds its commit at the price of one build per step.

The budget is in seconds (`Costs`), not samples: a sample of a benchmark whose asv run sets
up a callgrind grid and one that takes a millisecond do not weigh the same. The plan stays
under `budget` seconds, whole candidates first by priority, and never grows a commit beyond
`MAX_RUNS` runs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

from regressions import metrics
from regressions.detection.detect import FDR, Candidate, Detection, Series, run_detection

# Re-measurement spends at most this fraction of the seconds the night spent measuring
# (by `Costs`' prices; in the simulations, where every sample costs the same, that is 25% of
# the base samples, the panel's target).
BUDGET_FRACTION = 0.25
# Builds the budget affords on top of its fraction: a run at a commit pays its build before
# its first sample, and the newest commit with its stride window (stride 3) is three runs;
# without them a night of four commits (25% of four builds) could not afford one edge.
RUNS_ALLOWED = 4
# A commit is measured at most this many runs in all (its first run included).
MAX_RUNS = 4
# A reported candidate is weak while its q is above FDR / WEAK_MARGIN; an unreported one
# while its q is below FDR * WEAK_MARGIN (or it is a near miss without a q).
WEAK_MARGIN = 20.0
# Commits re-measured around one split: the nearest to the best split first.
LOCATION_COMMITS = 8
# Rounds of plan, measure, detect in one night.
MAX_ROUNDS = 3
REASONS = ("edge", "awaiting", "contradicted", "window", "weak", "ambiguous")


@dataclass(frozen=True, kw_only=True)
class Request:
    """Measure `benchmark(params)` at `commit` once more, `samples` samples (one asv run)."""

    machine: str
    env: str
    benchmark: str
    params: str
    commit: str
    samples: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class Costs:
    """What measuring costs, in seconds: the unit of re-measurement's budget.

    A sample of `benchmark` costs `per_sample[benchmark]` (asv records each benchmark's
    duration in its result files: divided by the samples it took); one `asv run` at a commit
    costs `per_run` (the build and install asv records as `<build>`), and each setup_cache a
    run needs costs its recorded seconds once per commit (`setup_cache`: benchmark -> its
    cache key and seconds). A benchmark without a recorded duration costs `unknown_sample`.
    The defaults price every sample at one second and a run at nothing: the simulations,
    where a budget in seconds is then the budget in samples it always was.

    `wall_clock` says the prices are seconds of this machine's clock (asv's recorded
    durations). Then a round of re-measurement costs at least the time it took, and what a
    run took beyond its prices (asv's start-up: discovery, the forkserver, a process per
    benchmark, none of which asv records) becomes `startup`, added to each run the next
    rounds plan."""

    per_sample: Mapping[str, float] = field(default_factory=dict)
    per_run: float = 0.0
    setup_cache: Mapping[str, tuple[str, float]] = field(default_factory=dict)
    unknown_sample: float = 1.0
    wall_clock: bool = False
    startup: float = 0.0

    def sample(self, benchmark: str) -> float:
        return self.per_sample.get(benchmark, self.unknown_sample)

    def added(self, requests: Sequence[Request], paid: set) -> float:
        """Seconds `requests` add to a plan that already pays for what `paid` holds (the
        commits it runs at, the (commit, cache key) pairs it sets up); `paid` gains theirs."""
        seconds = 0.0
        for r in requests:
            seconds += r.samples * self.sample(r.benchmark)
            if r.commit not in paid:
                paid.add(r.commit)
                seconds += self.per_run + self.startup
            cache = self.setup_cache.get(r.benchmark)
            if cache is not None and (r.commit, cache[0]) not in paid:
                paid.add((r.commit, cache[0]))
                seconds += cache[1]
        return seconds

    def learned(self, requests: Sequence[Request], took: float) -> Costs:
        """These prices after a round of `requests` took `took` seconds: the start-up per
        run corrected by what the round cost beyond its price (never below zero)."""
        runs = len({r.commit for r in requests})
        if not self.wall_clock or not runs:
            return self
        beyond = took - self.added(requests, set())
        return replace(self, startup=max(0.0, self.startup + beyond / runs))

    def of_points(self, series: Sequence[Series], commits: Collection[str]) -> float:
        """Seconds the series' points at `commits` cost at these prices: the night's own
        benchmarking, which the budget is a fraction of."""
        return self.added(points(series, commits), set())


def points(series: Sequence[Series], commits: Collection[str]) -> list[Request]:
    """The series' points at `commits` as the requests that would have measured them."""
    wanted = set(commits)
    return [Request(machine=s.machine, env=s.env, benchmark=s.benchmark, params=s.params, commit=c,
                    samples=len(v), reason="base")
            for s in series for c, v in zip(s.commits, s.samples, strict=True)
            if c in wanted and v is not None]


def budget_for(base_seconds: float, fraction: float = BUDGET_FRACTION,
               per_run: float = 0.0) -> float:
    """Seconds of re-measurement allowed for a night whose benchmarking cost `base_seconds`:
    `fraction` of it, plus the fixed cost of `RUNS_ALLOWED` runs (`per_run` seconds each: a
    build and asv's start-up), so a night that benchmarked a few commits can still afford its
    edge."""
    return base_seconds * fraction + RUNS_ALLOWED * per_run


def plan(candidates: Sequence[Candidate], history: Sequence[str], budget: float, *,
         fdr: float = FDR, contradicted: Collection[str] = (),
         measurable: Callable[[Request], bool] = lambda _: True,
         costs: Costs = Costs()) -> list[Request]:
    """Requests for tonight's candidates, costing at most `budget` seconds in all.

    Args:
        candidates: `detect.run_detection(...).candidates` of the run.
        history: the branch's first-parent history, oldest first: which commits exist
            between two benchmarked ones. A series "benchmarked" a commit when it has a
            point there.
        budget: seconds allowed (`budget_for`), at `costs`' prices.
        fdr: the run's false-discovery rate, for what "near the threshold" means.
        contradicted: commits at which an investigation did not reproduce what detection
            saw (the good and bad commits of not-reproduced alerts): a candidate that still
            starts or ends there is measured there again, right after the edges, because a
            bad run can fool detection into blaming the wrong commit.
        measurable: whether a request can be served tonight (`same_hardware`); the others
            are left out before they are costed, so they take no budget from the rest.
        costs: the prices of samples, runs and setup caches.
    """
    order = _History(history)
    items = []
    for candidate in candidates:
        if candidate.p is None:  # an exact change: a deterministic series, never re-measured
            continue
        reason = classify(candidate, order, fdr)
        if {candidate.good_commit, candidate.bad_commit} & set(contradicted) and \
                reason not in ("edge", "awaiting"):
            reason = "contradicted"
        if reason is None:
            continue
        requests = [r for r in _requests(candidate, _commits(candidate, reason, order), reason)
                    if measurable(r)]
        if requests:
            # the series and commits break ties, so the plan does not depend on the order
            # the store lists its series in
            items.append((REASONS.index(reason), _urgency(candidate), candidate.series.name,
                          candidate.bad_commit, requests))
    chosen: list[Request] = []
    seen: set[tuple[str, str, str, str, str]] = set()
    bought: set = set()
    spent = 0.0
    for *_, requests in sorted(items, key=lambda item: item[:4]):
        fresh = [r for r in requests if _key(r) not in seen]
        trial = set(bought)
        cost = costs.added(fresh, trial)
        if fresh and spent + cost <= budget:
            chosen += fresh
            seen.update(_key(r) for r in fresh)
            bought, spent = trial, spent + cost
    return chosen


class _History:
    """The first-parent history with each commit's place in it."""

    def __init__(self, commits: Sequence[str]):
        self.commits = list(commits)
        self.place = {commit: i for i, commit in enumerate(self.commits)}

    def between(self, candidate: Candidate, first: str, last: str) -> list[str]:
        """Commits strictly between `first` and `last` where the series has no point."""
        if first not in self.place or last not in self.place:
            return []
        known = set(candidate.series.commits)
        inside = self.commits[self.place[first] + 1:self.place[last]]
        return [c for c in inside if c not in known]

    def unbenchmarked(self, candidate: Candidate) -> list[str]:
        return self.between(candidate, candidate.good_commit, candidate.bad_commit)


def classify(candidate: Candidate, history: _History, fdr: float = FDR) -> str | None:
    """Why `candidate` deserves more samples (one of REASONS), or None."""
    if candidate.p is None:  # an exact change: a deterministic series' samples never help
        return None
    if candidate.edge is not None and (candidate.reported or _weak(candidate, fdr)):
        return "edge"
    if candidate.awaiting:
        return "awaiting"
    if _weak(candidate, fdr):
        return "weak"
    if not candidate.reported:
        return None
    if candidate.plausible:
        return "ambiguous"
    return "window" if history.unbenchmarked(candidate) else None


def _weak(candidate: Candidate, fdr: float) -> bool:
    if candidate.q is None:
        return True  # a near miss below the floor, kept because its estimate may grow
    if candidate.reported:
        return candidate.q > fdr / WEAK_MARGIN
    return candidate.q <= fdr * WEAK_MARGIN / 2


def _commits(candidate: Candidate, reason: str, history: _History) -> list[str]:
    """The commits to measure for `candidate`, nearest to its bad commit first."""
    window = history.unbenchmarked(candidate)
    if reason == "window":
        return window
    if reason == "awaiting":  # the commits that hold the new level, newest first
        s = candidate.series
        held = s.commits[s.commits.index(candidate.bad_commit):]
        return [*reversed(held), *window]
    if reason == "contradicted":
        return [candidate.bad_commit, candidate.good_commit, *window]
    if reason == "edge":
        if candidate.edge == "newest":
            return [candidate.bad_commit, *reversed(window)]
        start = history.place.get(candidate.good_commit, 0)
        known = set(candidate.series.commits)
        before = [c for c in history.commits[max(0, start - len(window) - 1):start]
                  if c not in known]
        return [candidate.good_commit, *window, *reversed(before)]
    around = list(candidate.uncertain) or [candidate.good_commit, candidate.bad_commit]
    return around[:LOCATION_COMMITS] + window


def _requests(candidate: Candidate, commits: Sequence[str], reason: str) -> list[Request]:
    """One run per commit, the series' usual samples per run, skipping full commits (and,
    for a series whose store keeps one value per commit, every commit it has a point at)."""
    s = candidate.series
    counts = {c: len(v) for c, v in zip(s.commits, s.samples, strict=True) if v is not None}
    usual = sorted(counts.values())[len(counts) // 2] if counts else 1
    most = MAX_RUNS * usual if s.keeps_samples else usual
    wanted = dict.fromkeys(commits)
    return [Request(machine=s.machine, env=s.env, benchmark=s.benchmark, params=s.params,
                    commit=commit, samples=usual, reason=reason)
            for commit in wanted if counts.get(commit, 0) + usual <= most]


def _urgency(candidate: Candidate) -> float:
    """Sort key inside a reason: the most certain first, so a sure change gets located before
    noise gets samples; a near miss without a q comes after every q."""
    if candidate.p is None:
        return 0.0
    return candidate.q if candidate.q is not None else 1.0 + candidate.p


def _key(request: Request) -> tuple[str, str, str, str, str]:
    return request.machine, request.env, request.benchmark, request.params, request.commit


# Serves a round of requests: per request the new samples, or None when the benchmark failed.
Measure = Callable[[Sequence[Request]], Sequence[Sequence[float] | None]]


@dataclass(frozen=True, kw_only=True)
class Remeasured:
    """A night's detection after re-measurement: the final `detection` on the enlarged
    `series`, every request served, the seconds they cost (at the plan's prices, or the time
    they took where prices are of the wall clock and that was more), the budget in seconds,
    and the start-up per run the rounds showed (`Costs.startup`)."""

    detection: Detection
    series: list[Series]
    requests: list[Request]
    spent: float
    budget: float
    startup: float = 0.0

    @property
    def samples(self) -> int:
        """The extra samples the requests asked for."""
        return sum(r.samples for r in self.requests)


def detect_with_remeasurement(series: Sequence[Series], history: Sequence[str],
                              measure: Measure, *, budget: float, rounds: int = MAX_ROUNDS,
                              contradicted: Collection[str] = (), costs: Costs = Costs(),
                              timer: Callable[[], float] = time.monotonic,
                              **options) -> Remeasured:
    """Detect, plan, measure, detect again, for up to `rounds` rounds within `budget`
    seconds at `costs`' prices; with prices of the wall clock (`Costs.wall_clock`) a round
    spends what it took when that is more, the next rounds price the start-up it showed, and
    each plans against what is left divided by the largest overrun (took / priced) seen so
    far, so estimates that run long do not carry the night past its budget.

    `measure` is injected (asv `--append-samples` in the nightly, a generator in the
    simulations), so one loop serves both; `contradicted` goes to `plan`, `options` to
    `detect.run_detection`.
    """
    current = list(series)
    memo: dict = {}  # a round re-analyses only the series it measured again
    detection = run_detection(current, memo=memo, **options)
    served: list[Request] = []
    spent = 0.0
    overrun = 1.0  # the most a round took over its price tonight, as a ratio (the timer's)
    for round_ in range(rounds):
        # Each round may spend its share of what is left, so the candidates still unsure
        # after a round (the real ones, mostly) find samples in the next. A new round is a
        # new asv run at each commit: it pays its runs and setup caches again. Prices of the
        # clock are estimates: a round plans as if it will overrun as much as one did.
        left = (budget - spent) / overrun
        share = math.floor(left / (rounds - round_))
        fdr = options.get("fdr", FDR)
        measurable = same_hardware(detection, history)
        requests = plan(detection.candidates, history, share, fdr=fdr,
                        contradicted=contradicted, measurable=measurable, costs=costs) or plan(
            detection.candidates, history, left, fdr=fdr,
            contradicted=contradicted, measurable=measurable, costs=costs)  # one item above
        if not requests:
            break
        started = timer()
        current = append_samples(current, requests, measure(requests), history)
        took = timer() - started
        served += requests
        priced = costs.added(requests, set())
        spent += max(priced, took) if costs.wall_clock else priced
        if costs.wall_clock and priced > 0:
            overrun = max(overrun, took / priced)
        costs = costs.learned(requests, took)
        detection = run_detection(current, memo=memo, **options)
    return Remeasured(detection=detection, series=current, requests=served, spent=spent,
                      budget=budget, startup=costs.startup)


def same_hardware(detection: Detection, history: Sequence[str]) -> Callable[[Request], bool]:
    """Whether a request measures on the hardware that measured its commit: not for a series
    the runner can move at a commit before its machine's newest environment change (its
    samples there came from the machine before it)."""
    place = {commit: i for i, commit in enumerate(history)}
    newest: dict[tuple[str, str], int] = {}
    for alert in detection.environment:
        key = (alert.machine, alert.env)
        newest[key] = max(newest.get(key, -1), alert.bad_position)

    def measurable(r: Request) -> bool:
        return not ((r.machine, r.env) in newest
                    and place.get(r.commit, -1) < newest[r.machine, r.env]
                    and metrics.moves_with_runner(f"{r.benchmark}{r.params}"))
    return measurable


def append_samples(series: Sequence[Series], requests: Sequence[Request],
                   results: Sequence[Sequence[float] | None],
                   history: Sequence[str]) -> list[Series]:
    """The series with each request's samples appended at its commit, as asv
    `--append-samples` merges them; a commit the series had no point at is inserted at its
    place in `history` (None when the benchmark failed there)."""
    place = {commit: i for i, commit in enumerate(history)}
    extra: dict[tuple[str, str, str, str], dict[str, list[float] | None]] = {}
    for request, result in zip(requests, results, strict=True):
        key = (request.machine, request.env, request.benchmark, request.params)
        bucket = extra.setdefault(key, {})
        if result is None:
            bucket.setdefault(request.commit, None)
        else:
            bucket[request.commit] = [*(bucket.get(request.commit) or []), *result]
    out = []
    for s in series:
        more = extra.get((s.machine, s.env, s.benchmark, s.params))
        out.append(s if not more else _merged(s, more, place))
    return out


def _merged(s: Series, more: dict[str, list[float] | None], place: dict[str, int]) -> Series:
    points = {c: (p, v) for c, p, v in zip(s.commits, s.positions, s.samples, strict=True)}
    for commit, samples in more.items():
        position, old = points.get(commit, (place.get(commit), None))
        if position is None:
            continue  # not on this history: nothing to place it by
        if old is not None and samples is not None:
            points[commit] = (position, (*old, *samples))
        elif commit not in points:
            points[commit] = (position, None if samples is None else tuple(samples))
    ordered = sorted(points.items(), key=lambda item: item[1][0])
    return replace(s, commits=tuple(c for c, _ in ordered),
                   positions=tuple(p for _, (p, _) in ordered),
                   samples=tuple(v for _, (_, v) in ordered))
