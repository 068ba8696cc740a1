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


@dataclass(frozen=True)
class Measurement:
    commit: str
    status: Status  # failed: the benchmark raised; untestable: build, import or skip
    samples: tuple[float, ...] = ()
    deterministic: bool = False
    detail: str = ""
    tolerance: float = 1e-9  # deterministic values: the relative change that is still "same"


Measure = Callable[[str], Measurement]  # one more batch of samples for a commit


@dataclass(frozen=True)
class Step:
    commit: str
    n: int
    median: float | None
    reference: str  # which end it was compared with
    pvalue: float | None
    verdict: Verdict
    note: str = ""


@dataclass
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


class _Samples:
    """Samples gathered per commit, measured lazily in batches."""

    def __init__(self, measure: Measure) -> None:
        self.measure = measure
        self.by_commit: dict[str, Measurement] = {}

    def more(self, commit: str) -> Measurement:
        new = self.measure(commit)
        old = self.by_commit.get(commit)
        if old is not None and old.status == "ok" and new.status == "ok":
            new = Measurement(commit, "ok", old.samples + new.samples, new.deterministic,
                              tolerance=new.tolerance)
        self.by_commit[commit] = new
        return new

    def get(self, commit: str) -> Measurement:
        return self.by_commit.get(commit) or self.more(commit)


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _same_value(a: float, b: float, tolerance: float = RELATIVE_EPSILON) -> bool:
    scale = max(abs(a), abs(b), 1e-300)
    return abs(a - b) / scale <= max(tolerance, RELATIVE_EPSILON)


def _classify(samples: _Samples, commit: str, good: str, bad: str, magnitude: float,
              max_batches: int, log: list[Step]) -> str:
    """good / bad / skip / failed for one commit, adding batches while the verdict is unknown."""
    current = samples.get(commit)
    if current.status == "untestable":
        log.append(Step(commit, 0, None, "-", None, "skip", current.detail))
        return "skip"
    if current.status == "failed":
        bad_failed = samples.get(bad).status == "failed"
        log.append(Step(commit, 0, None, "bad" if bad_failed else "-", None,
                        "bad" if bad_failed else "failed", current.detail))
        return "bad" if bad_failed else "failed"
    good_m, bad_m = samples.get(good), samples.get(bad)
    if bad_m.status == "failed":  # a failure bisection: this commit runs, so it is good
        log.append(Step(commit, len(current.samples), _median(current.samples), "bad", None,
                        "good", "runs where the bad commit fails"))
        return "good"
    if current.deterministic:
        value = current.samples[0]
        verdict = "good" if _same_value(value, good_m.samples[0]) else \
            "bad" if _same_value(value, bad_m.samples[0]) else \
            ("bad" if abs(value - bad_m.samples[0]) < abs(value - good_m.samples[0]) else "good")
        log.append(Step(commit, 1, value, "exact", None, verdict))
        return verdict
    batches = 1
    while True:
        to_good = stats.compare(samples.get(good).samples, current.samples, magnitude=magnitude)
        to_bad = stats.compare(current.samples, samples.get(bad).samples, magnitude=magnitude)
        n = len(current.samples)
        median = _median(current.samples)
        # decide only when one end is "same" and the other "different": a lone "same" can
        # be a miss at low power, so anything else gets another batch
        if to_good.verdict == "same" and to_bad.verdict == "different":
            log.append(Step(commit, n, median, "good", to_good.pvalue, "good"))
            return "good"
        if to_bad.verdict == "same" and to_good.verdict == "different":
            log.append(Step(commit, n, median, "bad", to_bad.pvalue, "bad"))
            return "bad"
        # compare's own cap forces each verdict at low power; only a same/different pair
        # decides, so keep adding batches up to the hard stop
        if batches >= max_batches:
            # Out of budget: the nearer end (in log space) wins, and the log says so.
            good_median = _median(samples.get(good).samples)
            bad_median = _median(samples.get(bad).samples)
            nearer_bad = abs(math.log(median / bad_median)) < abs(math.log(median / good_median))
            verdict = "bad" if nearer_bad else "good"
            log.append(Step(commit, n, median, "nearest", min(to_good.pvalue, to_bad.pvalue),
                            verdict, "unknown at the sample cap: nearest end"))
            return verdict
        log.append(Step(commit, n, median, "both", min(to_good.pvalue, to_bad.pvalue),
                        "unknown", "adding a batch"))
        samples.more(commit)
        for end in (good, bad):  # keep the ends at least as well sampled
            if len(samples.get(end).samples) < len(samples.get(commit).samples):
                samples.more(end)
        current = samples.get(commit)
        batches += 1


def bisect_commits(commits: Sequence[str], measure: Measure, magnitude: float | None = None,
                   max_batches: int = MAX_BATCHES) -> BisectResult:
    """Find the first bad commit in `commits` (first-parent order, good first, bad last)."""
    if len(commits) < 2:
        raise ValueError("bisection needs a good and a bad commit")
    good, bad = commits[0], commits[-1]
    samples = _Samples(measure)
    steps: list[Step] = []
    result = BisectResult(None, good, bad, len(commits) - 1, 0, steps)
    good_m = samples.get(good)
    if good_m.status != "ok":
        raise SpyreRegressError(f"the good commit {good[:12]} does not measure ({good_m.status}: "
                         f"{good_m.detail}); pick a good commit where the benchmark runs")
    if good_m.deterministic and _bisect_exact(commits, samples, result):
        return result
    bad_m = samples.get(bad)
    if bad_m.status == "untestable":
        raise SpyreRegressError(f"the bad commit {bad[:12]} cannot be tested: {bad_m.detail}")
    if bad_m.status == "failed":
        result.kind = FAILURE
    elif not _reproduced(samples, good, bad, magnitude or DEFAULT_MAGNITUDE, max_batches,
                         steps):
        result.reproduced = False
        _keep_samples(result, samples)
        return result
    elif not good_m.deterministic:
        # the step as measured, from every sample gathered so far; never below the floor
        step = abs(_median(samples.get(bad).samples) / _median(samples.get(good).samples) - 1)
        magnitude = max(step, MIN_MAGNITUDE)
    low, high = 0, len(commits) - 1
    skipped: set[int] = set()
    while high - low > 1:
        middle = _pick_middle(low, high, skipped)
        if middle is None:
            break
        verdict = _classify(samples, commits[middle], good, bad,
                            magnitude or DEFAULT_MAGNITUDE, max_batches, steps)
        if verdict in ("skip", "failed"):
            skipped.add(middle)
        elif verdict == "good":
            low = middle
        else:
            high = middle
    remaining = list(commits[low + 1:high + 1])  # anything left between was skipped
    result.culprit = commits[high] if len(remaining) == 1 else None
    result.candidates = remaining if result.culprit is None else []
    _keep_samples(result, samples)
    return result


def _bisect_exact(commits: Sequence[str], samples: _Samples, result: BisectResult) -> bool:
    """Deterministic metrics: each commit measured once and compared with the good end only,
    so the bad end is measured only when the search reaches it. N commits after the good one
    leave N + 1 outcomes (one of them is first, or none differs): the good end plus
    ceil(log2(N + 1)) builds. False, with what was measured kept, when a benchmark fails:
    failures are bisected as their own signal by the general search."""
    reference = samples.get(commits[0])
    low, high = 0, len(commits)  # commits[high] would be the first differing commit
    skipped: set[int] = set()
    while high - low > 1:
        middle = _pick_middle(low, high, skipped)
        if middle is None:
            break
        commit, current = commits[middle], samples.get(commits[middle])
        if current.status == "failed":
            return False
        if current.status == "untestable":
            if middle == len(commits) - 1:
                raise SpyreRegressError(f"the bad commit {commit[:12]} cannot be tested: "
                                        f"{current.detail}")
            result.steps.append(Step(commit, 0, None, "-", None, "skip", current.detail))
            skipped.add(middle)
            continue
        same = _same_value(current.samples[0], reference.samples[0], reference.tolerance)
        result.steps.append(Step(commit, 1, current.samples[0], "exact", None,
                                 "good" if same else "bad", "compared with the good end"))
        low, high = (middle, high) if same else (low, middle)
    result.reproduced = high < len(commits)
    remaining = list(commits[low + 1:high + 1])
    result.culprit = commits[high] if result.reproduced and len(remaining) == 1 else None
    result.candidates = remaining if result.reproduced and result.culprit is None else []
    _keep_samples(result, samples)
    return True


def _keep_samples(result: BisectResult, samples: _Samples) -> None:
    result.commits_measured = len(samples.by_commit)
    result.samples = {c: m.samples for c, m in samples.by_commit.items() if m.status == "ok"}
    result.deterministic = any(m.deterministic for m in samples.by_commit.values())


def _reproduced(samples: _Samples, good: str, bad: str, magnitude: float, max_batches: int,
                steps: list[Step]) -> bool:
    good_m, bad_m = samples.get(good), samples.get(bad)
    if good_m.deterministic:
        different = not _same_value(good_m.samples[0], bad_m.samples[0])
        steps.append(Step(bad, 1, bad_m.samples[0], "exact", None,
                          "bad" if different else "same", "good vs bad"))
        return different
    for _ in range(max_batches):
        verdict = stats.compare(samples.get(good).samples, samples.get(bad).samples,
                                magnitude=magnitude)
        n = len(samples.get(bad).samples)
        steps.append(Step(bad, n, _median(samples.get(bad).samples), "good", verdict.pvalue,
                          {"different": "bad"}.get(verdict.verdict, verdict.verdict),
                          "good vs bad"))
        if verdict.verdict == "different":
            return True
        if verdict.verdict == "same" and n >= REPRODUCE_SAMPLES:
            return False  # the alert said otherwise: dismiss it only on plenty of samples
        samples.more(good)
        samples.more(bad)
    return False


def _pick_middle(low: int, high: int, skipped: set[int]) -> int | None:
    """The middle commit, or the nearest untried one when the middle was skipped."""
    middle = (low + high) // 2
    for offset in range(high - low):
        for candidate in (middle - offset, middle + offset):
            if low < candidate < high and candidate not in skipped:
                return candidate
    return None
