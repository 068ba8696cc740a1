"""Change points of one benchmark series: pure functions on per-commit sample lists.

A noisy series goes through two stages, as Chromium, Mozilla and MongoDB run them
(research/detection.md section 9), inside a binary segmentation (Vostrikova 1981):

1. *Change point*: on the per-commit summaries (mean of log samples), the split with the
   largest standardised before/after shift, its noise predicted by the within-commit
   replicates; its p-value is corrected for having picked the best of all splits
   (`stats.scan_pvalue`, James, James & Siegmund 1987).
2. *Confirmation*: a one-sided Mann-Whitney U test of the raw samples on either side.

A segment splits when both p-values are <= `alpha`; the larger one is the change's p-value.
Surviving changes are re-tested against their final neighbours and the weakest dropped until
all pass (the merge step of Otava; Fleming et al., ICPE 2023, arXiv 2301.03034). A
deterministic series needs no statistics: every difference between adjacent commits is real.
docs/detection.md gives the method and its measured quality.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from regressions import stats

# Ceiling on a change's p-value, for splitting and for keeping it; docs/detection.md
# measures 0.05 and 0.02 on the detection panel.
ALPHA = 0.05
# A change is reported with a p-value from the segment between its *anchors*: neighbouring
# changes at least this certain. Weaker neighbours were fitted to the same noise: between
# two of them a random bump looks like a step, and its p-value comes out too small.
ANCHOR_PVALUE = 0.001
# A new level must hold for this many commits (asv step_detect `min_size=2`, asv PR #881):
# a one-commit excursion is indistinguishable from an outlier.
MIN_SIZE = 2
# Scatter of commit means beyond the within-commit noise is tested at this level.
BETWEEN_COMMIT_PVALUE = 0.01


@dataclass(frozen=True)
class Change:
    """A level shift: `index` is the first point of the new level.

    `pvalue` is one-sided in the direction of the shift and corrected for the choice of the
    split; it is None for a deterministic series, where any difference is real. `before`
    and `after` are the levels (geometric means for positive data), `ratio` = after/before
    with a 99% confidence interval `ci`.
    """

    index: int
    ratio: float
    ci: tuple[float, float]
    pvalue: float | None
    before: float
    after: float


def looks_deterministic(points: Sequence[Sequence[float]], epsilon: float = stats.EPSILON) -> bool:
    """Whether repeated measurement reproduces values exactly, so any change is real.

    True when every commit with several samples has no spread (noise-free simulated time),
    or when at least half of the adjacent commits measured identical samples (track_ values,
    seeded noise). Measured timings never repeat to 1e-9, so noisy series fail both tests.
    """
    replicated = [p for p in points if len(p) > 1]
    if replicated and all(stats.is_constant(p, epsilon) for p in replicated):
        return True
    pairs = list(zip(points, points[1:], strict=False))
    same = sum(
        len(a) == len(b) and all(stats.is_constant([x, y], epsilon)
                                 for x, y in zip(sorted(a), sorted(b), strict=True))
        for a, b in pairs
    )
    return 2 * same >= len(pairs)


def detect_changes(
    points: Sequence[Sequence[float]],
    *,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    deterministic: bool | None = None,
    epsilon: float = stats.EPSILON,
) -> list[Change]:
    """Change points of one series, both directions, in order.

    Args:
        points: per commit in history order, the samples measured there (at least one;
            infinite values only in a deterministic series).
        alpha: ceiling on each change's p-value.
        min_size: fewest commits on each side of a change in a noisy series.
        deterministic: skip the statistics (see `looks_deterministic`, used when None).
        epsilon: relative difference below which two values are equal.
    """
    values = [np.asarray(p, dtype=float) for p in points]
    if any(v.size == 0 or np.isnan(v).any() for v in values):
        raise ValueError("detect_changes: every point needs at least one value, none NaN")
    if deterministic is None:
        deterministic = looks_deterministic(points, epsilon)
    if deterministic:
        return _exact_changes([float(np.median(v)) for v in values], epsilon)
    if not all(np.isfinite(v).all() for v in values):
        raise ValueError("detect_changes: a noisy series needs finite values")
    if len(values) < 2 * min_size:
        return []
    return _Segmenter(values, min_size).changes(alpha)


def _exact_changes(levels: Sequence[float], epsilon: float) -> list[Change]:
    changes = []
    for i in range(1, len(levels)):
        before, after = levels[i - 1], levels[i]
        if not stats.is_constant([before, after], epsilon):
            ratio = after / before if before else math.copysign(math.inf, after - before)
            changes.append(Change(i, ratio, (ratio, ratio), None, before, after))
    return changes


class _Segmenter:
    """Binary segmentation of one noisy series; cumulative sums give O(1) segment statistics."""

    def __init__(self, values: list[np.ndarray], min_size: int):
        self.values = values
        self.min_size = min_size
        self.positive = all(bool((v > 0).all()) for v in values)
        scaled = [np.log(v) for v in values] if self.positive else values
        center = float(np.mean(np.concatenate(scaled)))  # for precise sums of squares
        sums = [(v.size, float(np.sum(v - center)), float(np.sum((v - center) ** 2)))
                for v in scaled]
        self.count, self.total, self.squares = (
            np.concatenate([[0.0], np.cumsum(column)]) for column in zip(*sums, strict=True)
        )
        self.means = np.array([float(v.mean()) - center for v in scaled])
        # Pooled within-commit variance of one sample: immune to level shifts.
        self.within_dof = sum(v.size - 1 for v in scaled)
        self.noise = (sum(float(np.sum((v - v.mean()) ** 2)) for v in scaled) / self.within_dof
                      if self.within_dof else None)

    def changes(self, alpha: float) -> list[Change]:
        splits = self._segment(alpha)
        for _ in range(3):  # once the noise is right there are fewer splits: re-estimate
            between = self._between_commit_noise(splits)
            if between is None:
                break
            self.noise = between
            splits = self._segment(alpha)
        n = len(self.values)
        bounds = [0, *splits, n]
        anchors = [s for i, s in enumerate(splits)
                   if self._test(bounds[i], bounds[i + 2])[0] <= ANCHOR_PVALUE]
        pvalues = {}
        for split in splits:
            lo = max([0] + [a for a in anchors if a < split])
            hi = min([n] + [a for a in anchors if a > split])
            pvalues[split] = self._test(lo, hi, split)[0]
        kept = [s for s in splits if pvalues[s] <= alpha]
        bounds = [0, *kept, n]
        return [self._change(*bounds[i:i + 3], pvalues[s]) for i, s in enumerate(kept)]

    def _segment(self, alpha: float) -> list[int]:
        n = len(self.values)
        splits: list[int] = []
        pending = [(0, n)]
        while pending:
            lo, hi = pending.pop()
            if hi - lo < 2 * self.min_size:
                continue
            pvalue, split = self._test(lo, hi)
            if pvalue <= alpha:
                splits.append(split)
                pending += [(lo, split), (split, hi)]
        splits.sort()
        while splits:  # merge: re-test against final neighbours, drop the weakest
            bounds = [0, *splits, n]
            pvalues = [self._test(bounds[i], bounds[i + 2])[0] for i in range(len(splits))]
            weakest = int(np.argmax(pvalues))
            if pvalues[weakest] <= alpha:
                break
            del splits[weakest]
        return splits

    def _between_commit_noise(self, splits: list[int]) -> float | None:
        """Per-sample variance implied by the scatter of commit means, when that scatter is
        significantly larger than the within-commit noise predicts; else None.

        Noise between runs (code layout, machine state) moves all samples of a commit
        together, so replicates understate the noise of a commit's mean. A one-way ANOVA
        F-test of commits nested in the segments detects it.
        """
        if self.noise is None:
            return None
        counts = np.diff(self.count)
        bounds = [0, *splits, len(self.values)]
        squares, dof = 0.0, 0
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            squares += float(np.sum(counts[lo:hi] * (self.means[lo:hi] - self._level(lo, hi)) ** 2))
            dof += hi - lo - 1
        if dof < 2:
            return None
        between = squares / dof
        excess = between / self.noise if self.noise > 0 else math.inf
        if sps.f.sf(excess, dof, self.within_dof) >= BETWEEN_COMMIT_PVALUE:
            return None
        # Segments fitted with too small a noise absorb part of the scatter; the robust scale
        # of successive differences (1.4826 MAD, halved: a difference of two means) does not.
        steps = np.diff(self.means)
        spread = (1.4826 * float(np.median(np.abs(steps - np.median(steps))))) ** 2 / 2
        return max(between, spread * float(np.median(counts)), self.noise)

    def _scan(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Every admissible split k of [lo, hi) and the residual sum of squares of a shift at k."""
        k = np.arange(lo + self.min_size, hi - self.min_size + 1)
        n_left, n_right = self.count[k] - self.count[lo], self.count[hi] - self.count[k]
        s_left, s_right = self.total[k] - self.total[lo], self.total[hi] - self.total[k]
        sse = (self.squares[hi] - self.squares[lo]) - s_left**2 / n_left - s_right**2 / n_right
        return k, sse

    def _test(self, lo: int, hi: int, split: int | None = None) -> tuple[float, int]:
        """p-value of a change in [lo, hi) at `split` (default: the maximum-likelihood split),
        and the split.

        Stage 1 standardises the shift of the commit summaries by the predicted noise and
        corrects it for the scan over [lo, hi); stage 2 is the rank test on the raw samples.
        """
        k, sse = self._scan(lo, hi)
        j = int(np.argmin(sse)) if split is None else split - (lo + self.min_size)
        split = int(k[j])
        shift = self._level(split, hi) - self._level(lo, split)
        if shift == 0:
            return 1.0, split
        n_left = float(self.count[split] - self.count[lo])
        n_right = float(self.count[hi] - self.count[split])
        if self.noise is not None:
            z = abs(shift) / math.sqrt(max(self.noise, 1e-300) * (1 / n_left + 1 / n_right))
        else:  # one value per commit: a pooled t-test on the commit values
            dof = n_left + n_right - 2
            t = abs(shift) / math.sqrt(max(float(sse[j]) / dof, 1e-300)
                                       * (1 / n_left + 1 / n_right))
            z = float(sps.norm.isf(sps.t.sf(t, dof)))
        side = "greater" if shift > 0 else "less"
        confirm = stats.mann_whitney(np.concatenate(self.values[lo:split]),
                                     np.concatenate(self.values[split:hi]), side).pvalue
        return max(stats.scan_pvalue(z, hi - lo, self.min_size), confirm), split

    def _level(self, lo: int, hi: int) -> float:
        return float(self.total[hi] - self.total[lo]) / float(self.count[hi] - self.count[lo])

    def _change(self, lo: int, split: int, hi: int, pvalue: float) -> Change:
        before = np.concatenate(self.values[lo:split])
        after = np.concatenate(self.values[split:hi])
        interval = stats.ratio_interval(before, after)
        if self.positive:
            levels = float(np.exp(np.log(before).mean())), float(np.exp(np.log(after).mean()))
        else:
            levels = float(before.mean()), float(after.mean())
        return Change(split, interval.ratio, (interval.low, interval.high), pvalue, *levels)
