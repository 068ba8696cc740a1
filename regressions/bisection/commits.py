"""Commit bisection with sequential three-way verdicts (Pinpoint-style), pure of side effects.

The search walks first-parent history between a good and a bad commit. Each probed commit is
classified against both ends: `stats.compare` says same / different / unknown; on unknown, more
samples are added in batches up to a cap from the power formula (as Chromium's Pinpoint does:
catapult dashboard/pinpoint/models/compare/compare.py, thresholds.py). Deterministic metrics
need one measurement per commit. Commits that cannot be built or imported are skipped, as `git
bisect skip` does; a benchmark that raises is a failure signal of its own, never a slowdown.
Measuring is injected (`measure`), so the same search runs on real commits and on the synthetic
histories of scripts/bisection_quality.py.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from regressions import stats
from regressions.errors import SpyreRegressError
from regressions.metrics import FAILURE

BISECTION_VERSION = 2  # the JSON `spyre-regress bisect --json` writes
Status = Literal["ok", "failed", "untestable"]
# good/bad: which end the commit sides with; same: good vs bad do not differ; skip:
# untestable; failed: it raised where the bad end runs; unknown: another batch is needed
Verdict = Literal["good", "bad", "same", "skip", "failed", "unknown"]
RELATIVE_EPSILON = 1e-9  # deterministic metrics: any larger relative change is real
MAX_BATCHES = 6  # hard stop per commit when the power cap is larger
DEFAULT_MAGNITUDE = 0.05  # expected step when the caller gives none (e.g. no alert ratio)
MIN_MAGNITUDE = 0.01  # smallest step the verdicts are sized for
REPRODUCE_SAMPLES = 40  # samples per side before "not reproduced" is believed


@dataclass(frozen=True, kw_only=True)
class Measurement:
    commit: str
    status: Status  # failed: the benchmark raised; untestable: build, import or skip
    samples: tuple[float, ...] = ()
    deterministic: bool = False
    detail: str = ""
    tolerance: float = 1e-9  # deterministic values: the relative change that is still "same"


Measure = Callable[[str], Measurement]  # one more batch of samples for a commit
# one more batch for each of several commits, measured at once
MeasureMany = Callable[[Sequence[str]], Sequence[Measurement]]


@dataclass(frozen=True, kw_only=True)
class Step:
    commit: str
    n: int
    median: float | None
    reference: str  # which end it was compared with
    pvalue: float | None
    verdict: Verdict
    note: str = ""


@dataclass(kw_only=True)
class BisectResult:
    culprit: str | None
    good: str
    bad: str
    commits_in_range: int
    commits_measured: int
    steps: list[Step] = field(default_factory=list)
    reproduced: bool = True
    candidates: list[str] = field(default_factory=list)  # when skips leave several
    kind: Literal["performance", "failure"] = "performance"
    # every sample measured, per commit: the evidence behind each verdict
    samples: dict[str, tuple[float, ...]] = field(default_factory=dict)
    deterministic: bool = False
    rounds: int = 0  # waves of measurement: with several probes, commits measured at once


class _Samples:
    """Samples gathered per commit, measured lazily in batches; `many` measures several
    commits at once (concurrent probes), each wave counted in `rounds`."""

    def __init__(self, measure: Measure, many: MeasureMany | None = None) -> None:
        self.measure = measure
        self.many = many or (lambda commits: [measure(c) for c in commits])
        self.by_commit: dict[str, Measurement] = {}
        self.sizes: dict[str, int] = {}
        self.rounds = 0

    def more(self, *commits: str) -> None:
        """One more batch for each of `commits`, in one wave."""
        if not commits:
            return
        self.rounds += 1
        for commit, new in zip(commits, self.many(list(commits)), strict=True):
            self.sizes.setdefault(commit, len(new.samples))
            old = self.by_commit.get(commit)
            if old is not None and old.status == "ok" and new.status == "ok":
                new = Measurement(commit=commit, status="ok", samples=old.samples + new.samples,
                                  deterministic=new.deterministic,
                                  tolerance=new.tolerance)
            self.by_commit[commit] = new

    def get(self, commit: str) -> Measurement:
        if commit not in self.by_commit:
            self.more(commit)
        return self.by_commit[commit]

    def batch(self, commit: str) -> int:
        """How many samples one measurement of `commit` gives (its first batch's size)."""
        return self.sizes.get(commit, 0)

    def first(self, commits: Sequence[str]) -> None:
        """The first batch of each of `commits` not measured yet, in one wave."""
        self.more(*(c for c in dict.fromkeys(commits) if c not in self.by_commit))


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _same_value(a: float, b: float, tolerance: float = RELATIVE_EPSILON) -> bool:
    scale = max(abs(a), abs(b), 1e-300)
    return abs(a - b) / scale <= max(tolerance, RELATIVE_EPSILON)


def _settled(samples: _Samples, commit: str, good: str, bad: str) -> Step | None:
    """The verdict that needs no statistics, as a logged step: skip (untestable), failed,
    the side of a failure, or an exact comparison; None when samples must be compared."""
    current = samples.get(commit)
    if current.status == "untestable":
        return Step(commit=commit, n=0, median=None, reference="-", pvalue=None, verdict="skip",
                    note=current.detail)
    bad_failed = samples.get(bad).status == "failed"
    if current.status == "failed":
        return Step(commit=commit, n=0, median=None, reference="bad" if bad_failed else "-",
                    pvalue=None,
                    verdict="bad" if bad_failed else "failed", note=current.detail)
    if bad_failed:  # a failure bisection: this commit runs, so it is good
        return Step(commit=commit, n=len(current.samples), median=_median(current.samples),
                    reference="bad", pvalue=None,
                    verdict="good", note="runs where the bad commit fails")
    if current.deterministic:
        value, good_m, bad_m = current.samples[0], samples.get(good), samples.get(bad)
        verdict: Verdict = "good" if _same_value(value, good_m.samples[0]) else \
            "bad" if _same_value(value, bad_m.samples[0]) else \
            ("bad" if abs(value - bad_m.samples[0]) < abs(value - good_m.samples[0]) else "good")
        return Step(commit=commit, n=1, median=value, reference="exact", pvalue=None,
                    verdict=verdict)
    return None


def _compared(samples: _Samples, commit: str, good: str, bad: str, magnitude: float,
              batches: int, max_batches: int, log: list[Step]) -> str | None:
    """good / bad from the samples so far, the nearer end at the cap, or None (another
    batch): only a same/different pair decides, as a lone "same" can be a miss at low
    power."""
    current = samples.get(commit)
    to_good = stats.compare(samples.get(good).samples, current.samples, magnitude=magnitude)
    to_bad = stats.compare(current.samples, samples.get(bad).samples, magnitude=magnitude)
    n, median = len(current.samples), _median(current.samples)
    if to_good.verdict == "same" and to_bad.verdict == "different":
        log.append(Step(commit=commit, n=n, median=median, reference="good", pvalue=to_good.pvalue,
                        verdict="good"))
        return "good"
    if to_bad.verdict == "same" and to_good.verdict == "different":
        log.append(Step(commit=commit, n=n, median=median, reference="bad", pvalue=to_bad.pvalue,
                        verdict="bad"))
        return "bad"
    if batches >= max_batches:
        # Out of budget: the nearer end (in log space) wins, and the log says so.
        good_median = _median(samples.get(good).samples)
        bad_median = _median(samples.get(bad).samples)
        assert median is not None and good_median is not None and bad_median is not None
        nearer_bad = abs(math.log(median / bad_median)) < abs(math.log(median / good_median))
        verdict: Verdict = "bad" if nearer_bad else "good"
        log.append(Step(commit=commit, n=n, median=median, reference="nearest",
                        pvalue=min(to_good.pvalue, to_bad.pvalue),
                        verdict=verdict, note="unknown at the sample cap: nearest end"))
        return verdict
    log.append(Step(commit=commit, n=n, median=median, reference="both",
                    pvalue=min(to_good.pvalue, to_bad.pvalue),
                    verdict="unknown", note="adding a batch"))
    return None


def _classify(samples: _Samples, points: Sequence[str], good: str, bad: str, magnitude: float,
              max_batches: int, log: list[Step]) -> dict[str, str]:
    """good / bad / skip / failed for each of `points`, measured together: one wave for
    their first batches, then, while some are unknown, one wave for another batch of each of
    those and one for the ends that have fewer samples than them."""
    samples.first(points)
    verdicts: dict[str, str] = {}
    for commit in points:
        settled = _settled(samples, commit, good, bad)
        if settled is not None:
            log.append(settled)
            verdicts[commit] = settled.verdict
    pending, batches = [c for c in points if c not in verdicts], 1
    while pending:
        unknown = []
        for commit in pending:
            verdict = _compared(samples, commit, good, bad, magnitude=magnitude, batches=batches,
                                max_batches=max_batches,
                                log=log)
            if verdict is None:
                unknown.append(commit)
            else:
                verdicts[commit] = verdict
        # another batch of each unknown point, and of each end that would then have fewer
        # samples than one of them (the ends at least as well sampled), in one wave
        most = max((len(samples.get(c).samples) + samples.batch(c) for c in unknown),
                   default=0)
        samples.more(*unknown, *(end for end in (good, bad)
                                 if unknown and len(samples.get(end).samples) < most))
        pending, batches = unknown, batches + 1
    return verdicts


def pick_points(low: int, high: int, skipped: set[int], probes: int) -> list[int]:
    """Up to `probes` untried commits strictly between `low` and `high`, splitting the range
    into `probes` + 1 parts (with one probe: the middle, or the nearest untried one)."""
    chosen: list[int] = []
    for k in range(1, probes + 1):
        middle = low + (high - low) * k // (probes + 1)
        for offset in range(high - low):
            found = next((c for c in (middle - offset, middle + offset)
                          if low < c < high and c not in skipped and c not in chosen), None)
            if found is not None:
                chosen.append(found)
                break
    return sorted(chosen)


def narrowed(low: int, high: int, verdicts: dict[int, str]) -> tuple[int, int]:
    """The range after a round: the first bad point ends it, the last good one before that
    starts it (a history that regressed once is good, then bad)."""
    bads = [i for i, v in verdicts.items() if v == "bad"]
    high = min(bads, default=high)
    low = max([low, *(i for i, v in verdicts.items() if v == "good" and i < high)])
    return low, high


def bisect_commits(commits: Sequence[str], measure: Measure, magnitude: float | None = None,
                   max_batches: int = MAX_BATCHES, probes: int = 1,
                   measure_many: MeasureMany | None = None) -> BisectResult:
    """Find the first bad commit in `commits` (first-parent order, good first, bad last).

    With `probes` > 1, each round measures that many commits at once (`measure_many`, e.g.
    probes on several workers), splitting the range into `probes` + 1 parts, so a range of N
    commits takes about ceil(log_{probes+1} N) rounds; each commit's verdict is the same
    sequential same/different/unknown test as with one probe.
    """
    if len(commits) < 2:
        raise ValueError("bisection needs a good and a bad commit")
    good, bad = commits[0], commits[-1]
    samples = _Samples(measure, measure_many)
    steps: list[Step] = []
    result = BisectResult(culprit=None, good=good, bad=bad, commits_in_range=len(commits) - 1,
                          commits_measured=0, steps=steps)
    # one probe: the good end alone first (a deterministic metric may never need the bad
    # end); several: both ends in the first round
    samples.first([good] if probes == 1 else [good, bad])
    good_m = samples.get(good)
    if good_m.status != "ok":
        raise SpyreRegressError(f"the good commit {good[:12]} does not measure ({good_m.status}: "
                         f"{good_m.detail}); pick a good commit where the benchmark runs")
    if good_m.deterministic and _bisect_exact(commits, samples, result, probes):
        return result
    bad_m = samples.get(bad)
    if bad_m.status == "untestable":
        raise SpyreRegressError(f"the bad commit {bad[:12]} cannot be tested: {bad_m.detail}")
    if bad_m.status == "failed":
        result.kind = FAILURE
    elif not _reproduced(samples, good, bad, magnitude or DEFAULT_MAGNITUDE,
                         max_batches=max_batches,
                         steps=steps):
        result.reproduced = False
        _keep_samples(result, samples)
        return result
    elif not good_m.deterministic:
        # the step as measured, from every sample gathered so far; never below the floor
        bad_median, good_median = (_median(samples.get(c).samples) for c in (bad, good))
        assert bad_median is not None and good_median is not None  # both ends measured
        step = abs(bad_median / good_median - 1)
        magnitude = max(step, MIN_MAGNITUDE)
    low, high = 0, len(commits) - 1
    skipped: set[int] = set()
    while high - low > 1:
        points = pick_points(low, high, skipped, probes)
        if not points:
            break
        verdicts = _classify(samples, [commits[i] for i in points], good, bad,
                             magnitude=magnitude or DEFAULT_MAGNITUDE, max_batches=max_batches,
                             log=steps)
        by_index = {i: verdicts[commits[i]] for i in points}
        skipped |= {i for i, v in by_index.items() if v in ("skip", "failed")}
        low, high = narrowed(low, high, by_index)
    remaining = list(commits[low + 1:high + 1])  # anything left between was skipped
    result.culprit = commits[high] if len(remaining) == 1 else None
    result.candidates = remaining if result.culprit is None else []
    _keep_samples(result, samples)
    return result


def _bisect_exact(commits: Sequence[str], samples: _Samples, result: BisectResult,
                  probes: int) -> bool:
    """Deterministic metrics: each commit measured once and compared with the good end only,
    so the bad end is measured only when the search reaches it. N commits after the good one
    leave N + 1 outcomes (one of them is first, or none differs): the good end plus
    ceil(log2(N + 1)) builds with one probe. False, with what was measured kept, when a
    benchmark fails: failures are bisected as their own signal by the general search."""
    reference = samples.get(commits[0])
    low, high = 0, len(commits)  # commits[high] would be the first differing commit
    skipped: set[int] = set()
    while high - low > 1:
        points = pick_points(low, high, skipped, probes)
        if not points:
            break
        samples.first([commits[i] for i in points])
        verdicts = {}
        for middle in points:
            commit, current = commits[middle], samples.get(commits[middle])
            if current.status == "failed":
                return False
            if current.status == "untestable":
                if middle == len(commits) - 1:
                    raise SpyreRegressError(f"the bad commit {commit[:12]} cannot be tested: "
                                            f"{current.detail}")
                result.steps.append(Step(commit=commit, n=0, median=None, reference="-",
                                         pvalue=None, verdict="skip", note=current.detail))
                skipped.add(middle)
                continue
            same = _same_value(current.samples[0], reference.samples[0], reference.tolerance)
            result.steps.append(Step(commit=commit, n=1, median=current.samples[0],
                                     reference="exact", pvalue=None,
                                     verdict="good" if same else "bad",
                                     note="compared with the good end"))
            verdicts[middle] = "good" if same else "bad"
        low, high = narrowed(low, high, verdicts)
    result.reproduced = high < len(commits)
    remaining = list(commits[low + 1:high + 1])
    result.culprit = commits[high] if result.reproduced and len(remaining) == 1 else None
    result.candidates = remaining if result.reproduced and result.culprit is None else []
    _keep_samples(result, samples)
    return True


def _keep_samples(result: BisectResult, samples: _Samples) -> None:
    result.commits_measured = len(samples.by_commit)
    result.rounds = samples.rounds
    result.samples = {c: m.samples for c, m in samples.by_commit.items() if m.status == "ok"}
    result.deterministic = any(m.deterministic for m in samples.by_commit.values())


def _reproduced(samples: _Samples, good: str, bad: str, magnitude: float, max_batches: int,
                steps: list[Step]) -> bool:
    good_m, bad_m = samples.get(good), samples.get(bad)
    if good_m.deterministic:
        different = not _same_value(good_m.samples[0], bad_m.samples[0])
        steps.append(Step(commit=bad, n=1, median=bad_m.samples[0], reference="exact", pvalue=None,
                          verdict="bad" if different else "same", note="good vs bad"))
        return different
    for _ in range(max_batches):
        verdict = stats.compare(samples.get(good).samples, samples.get(bad).samples,
                                magnitude=magnitude)
        n = len(samples.get(bad).samples)
        side: Verdict = "bad" if verdict.verdict == "different" else verdict.verdict
        steps.append(Step(commit=bad, n=n, median=_median(samples.get(bad).samples),
                          reference="good", pvalue=verdict.pvalue,
                          verdict=side, note="good vs bad"))
        if verdict.verdict == "different":
            return True
        if verdict.verdict == "same" and n >= REPRODUCE_SAMPLES:
            return False  # the alert said otherwise: dismiss it only on plenty of samples
        samples.more(good, bad)
    return False
