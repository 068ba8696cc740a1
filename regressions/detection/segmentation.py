"""Binary segmentation of one noisy series (Vostrikova 1981), the interior of `changepoints`.

Each candidate split goes through two stages, as Chromium, Mozilla and MongoDB run them:

1. *Change point*: on the per-commit summaries (mean of log samples), the split with the
   largest standardised before/after shift, its noise predicted by the within-commit
   replicates; its p-value is corrected for having picked the best of all splits
   (`stats.scan_pvalue`, James, James & Siegmund 1987).
2. *Confirmation*: a one-sided Mann-Whitney U test of the raw samples on either side.

A segment splits when both p-values are <= `alpha`; the larger one is the change's p-value.
Surviving changes are re-tested against their final neighbours and the weakest dropped until
all pass (the merge step of Otava; Fleming et al., ICPE 2023, arXiv 2301.03034). Cumulative
sums give every segment statistic in O(1).

With few values on one side the rank test cannot confirm anything: 5 values before a step and
4 after give it p >= 1/126 however large the step. There, a clean step (the rank test at its
floor: no overlap) is judged with the series' own noise model instead, estimated once from
all of the series around its fitted levels (`model_test`), and an interval beside a short
segment borrows that model too, unless the segment is an excursion (a change and a change
back, what one job on another runner looks like).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import special

from regressions import stats

# A change is reported with a p-value from the segment between its *anchors*: neighbouring
# changes at least this certain. Weaker neighbours were fitted to the same noise: between
# two of them a random bump looks like a step, and its p-value comes out too small.
ANCHOR_PVALUE = 0.001
# Scatter of commit means beyond the within-commit noise is tested at this level.
BETWEEN_COMMIT_PVALUE = 0.01
# Another split is a plausible location of a change when its likelihood is at least this
# fraction of the best split's (Gaussian likelihood of the two-level fit): with a flat prior
# the best split then holds at most 95% of the posterior mass.
PLAUSIBLE_LIKELIHOOD = 0.05
# A commit's level is uncertain when P(new level) P(old level) reaches this (5% either way).
UNCERTAIN_LEVEL = 0.0475
# The rank test confirms a split only where it can reach this p-value: its smallest one-sided
# p is 1 / C(n, k) for k values of n on the smaller side (5 and 4: 1/126). Where that floor is
# higher and the rank test is at it, the series' noise model judges the step (`model_test`).
RANK_RESOLUTION = ANCHOR_PVALUE
# A side with fewer values than this is short: the interval of a change beside it borrows the
# series' noise model (a Welch interval from 2 values has one degree of freedom).
SHORT_VALUES = 4
# A new level at the newest end judged by the noise model must hold for this many commits
# before it is reported; with fewer it is awaiting more commits. Hosted-runner stores measure
# two commits per CI job at that job's runner's level (django-asv, docs/detection.md): two
# commits at a new level may be one job.
CONFIRM_COMMITS = 3


@dataclass(frozen=True, kw_only=True)
class Split:
    """A change found inside the segmented points: `index` is the first point of the new
    level, `lo`/`hi` bound the segment its levels and interval come from."""

    index: int
    lo: int
    hi: int
    pvalue: float
    plausible: tuple[int, ...]
    uncertain: tuple[int, ...] = ()
    by_model: bool = False  # confirmed by the series' noise model, not by ranks
    borrow: bool = False  # a side is short (and no excursion): its interval borrows the model


@dataclass(frozen=True)
class NoiseModel:
    """Variance of one sample within a commit and of a commit's offset between commits
    (log units for positive data), with the degrees of freedom each was estimated with.
    `within` is None for one value per commit: then `between` is all of a value's noise."""

    within: float | None
    within_dof: int
    between: float
    between_dof: int


def shift_variance(before: np.ndarray, after: np.ndarray, noise: NoiseModel
                   ) -> tuple[float, float]:
    """Variance of the difference of two levels under `noise`, and its Satterthwaite degrees
    of freedom (0 when the model has none). Each level is the mean of its commits' samples
    (`before`, `after`: samples per commit): its variance counts the samples (within / n) and
    the offset each commit draws (between, weighted by the commit's share of the level)."""
    parts = [(noise.between * sum(float(np.sum(c.astype(float) ** 2)) / float(c.sum()) ** 2
                                  for c in (before, after)), noise.between_dof)]
    if noise.within is not None:
        parts.append((noise.within * (1 / float(before.sum()) + 1 / float(after.sum())),
                      noise.within_dof))
    variance = sum(v for v, _ in parts)
    terms = sum(v * v / dof for v, dof in parts if v > 0 and dof > 0)
    return variance, (variance**2 / terms if terms > 0 else 0.0)


def model_test(shift: float, before: np.ndarray, after: np.ndarray, noise: NoiseModel
               ) -> float | None:
    """One-sided p-value of a `shift` between two levels under the series' noise model (a
    t test with the model's degrees of freedom); None when the model cannot judge it."""
    variance, dof = shift_variance(before, after, noise)
    if not variance > 0 or not dof > 0:
        return None
    return float(special.stdtr(dof, -abs(shift) / math.sqrt(variance)))


class Segmenter:
    """Binary segmentation of per-commit samples (no transients, no screened end commits:
    `changepoints` removes those first), given as one array, commit after commit, and the
    number of samples of each commit."""

    def __init__(self, flat: np.ndarray, counts: np.ndarray, min_size: int,
                 positive: bool | None = None):
        self.n = int(counts.size)
        self.min_size = min_size
        self.positive = bool((flat > 0).all()) if positive is None else positive
        self.flat = flat  # the raw samples, commit after commit
        logs = np.log(flat) if self.positive else flat
        centred = logs - float(logs.mean())  # for precise sums of squares
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        sums = np.add.reduceat(centred, starts)
        self.count, self.total, self.squares = (
            np.concatenate([[0.0], np.cumsum(column)])
            for column in (counts.astype(float), sums,
                           np.add.reduceat(centred * centred, starts)))
        self.means = sums / counts
        # Pooled within-commit variance of one sample: immune to level shifts.
        self.within_dof = int(np.sum(counts - 1))
        residual = centred - np.repeat(self.means, counts)
        self.within = float(np.sum(residual**2)) / self.within_dof if self.within_dof else None
        self.noise = self.within
        self.splits: list[int] = []
        self.open_end = True

    def changes(self, alpha: float, near_alpha: float, open_end: bool = True
                ) -> tuple[list[Split], list[Split]]:
        """The changes with p <= `alpha`, and each final segment's best split when its p lies
        in (`alpha`, `near_alpha`]: a near miss, worth more samples but not a change.
        `open_end` says the last point is the series' newest (no screened commit after it),
        so the last segment is a level still growing."""
        self.open_end = open_end
        splits = self._segment(alpha)
        for _ in range(3):  # once the noise is right there are fewer splits: re-estimate
            between = self._between_commit_noise(splits)
            if between is None:
                break
            self.noise = between
            splits = self._segment(alpha)
        n = self.n
        bounds = [0, *splits, n]
        anchors = [s for i, s in enumerate(splits) if self._anchor(bounds[i], bounds[i + 2])]
        # the series' noise, once, around the levels its sure changes bound: splits fitted to
        # noise would take it for levels and leave too little
        model = self._noise_around(anchors)
        pvalues, by_model = {}, {}
        for split in splits:
            lo = max([0] + [a for a in anchors if a < split])
            hi = min([n] + [a for a in anchors if a > split])
            pvalues[split], by_model[split] = self._final_test(lo, hi, split, model)
        self.splits = [s for s in splits if pvalues[s] <= alpha]
        bounds = [0, *self.splits, n]
        found = [replace(self._located(bounds[i], s, bounds[i + 2], pvalues[s]),
                         by_model=by_model[s], borrow=self._borrows(bounds, i + 1, by_model[s]))
                 for i, s in enumerate(self.splits)]
        near = []
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            if hi - lo >= 2 * self.min_size:
                pvalue, split = self._test(lo, hi)
                if alpha < pvalue <= near_alpha:
                    near.append(self._located(lo, split, hi, pvalue))
        return found, near

    def noise_model(self) -> NoiseModel:
        """Within- and between-commit variance around the final segments' levels.

        The between-commit part is the one-way ANOVA estimate (mean square between commits
        minus the within mean square, per sample of a commit), kept even when it is not
        significant: one commit alone is exactly what a commit-level offset moves.
        """
        return self._noise_around(self.splits)

    def _noise_around(self, splits: list[int]) -> NoiseModel:
        """`noise_model` around the segments `splits` bound."""
        bounds = [0, *splits, self.n]
        counts = np.diff(self.count)
        squares, dof = 0.0, 0
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            squares += float(np.sum(counts[lo:hi] * (self.means[lo:hi] - self._level(lo, hi))
                                    ** 2))
            dof += hi - lo - 1
        between_squares = squares / dof if dof else 0.0
        if self.within is None:
            return NoiseModel(None, 0, between_squares, dof)
        per_commit = max(0.0, (between_squares - self.within) / float(np.mean(counts)))
        return NoiseModel(self.within, self.within_dof, per_commit, dof)

    def _segment(self, alpha: float) -> list[int]:
        n = self.n
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
        bounds = [0, *splits, self.n]
        squares, dof = 0.0, 0
        for lo, hi in zip(bounds, bounds[1:], strict=False):
            squares += float(np.sum(counts[lo:hi] * (self.means[lo:hi] - self._level(lo, hi)) ** 2))
            dof += hi - lo - 1
        if dof < 2:
            return None
        between = squares / dof
        excess = between / self.noise if self.noise > 0 else math.inf
        if special.fdtrc(dof, self.within_dof, excess) >= BETWEEN_COMMIT_PVALUE:  # F's sf
            return None
        # Segments fitted with too small a noise absorb part of the scatter; the robust scale
        # of successive differences (1.4826 MAD, halved: a difference of two means) does not.
        steps = np.diff(self.means)
        spread = (1.4826 * float(np.median(np.abs(steps - np.median(steps))))) ** 2 / 2
        return max(between, spread * float(np.median(counts)), self.noise)

    def _final_test(self, lo: int, hi: int, split: int, model: NoiseModel
                    ) -> tuple[float, bool]:
        """A change's p-value between its anchors, and whether the noise model judged it.

        Where the rank test cannot resolve RANK_RESOLUTION (its floor, 1 / C(n, k), is above
        it) and sits at its floor (no overlap: as certain as it can be), its place is taken
        by the t test of the shift under the series' noise model (`model_test`), whose
        degrees of freedom come from the whole series, not from the few values beside it.
        Both levels must hold for CONFIRM_COMMITS commits, the new one unless it is the
        newest (then the change awaits more commits): a level of two commits is what one CI
        job on another runner, or a benchmark's first runs, look like.
        """
        scan, confirm, _ = self._stages(lo, hi, split)
        left = int(self.count[split] - self.count[lo])
        floor = 1 / math.comb(int(self.count[hi] - self.count[lo]), left)
        held = split - lo >= CONFIRM_COMMITS and (
            hi - split >= CONFIRM_COMMITS or hi == self.n and self.open_end)
        if floor <= RANK_RESOLUTION or confirm > 2 * floor or not held:
            return max(scan, confirm), False
        counts = np.diff(self.count).astype(int)
        judged = model_test(self._level(split, hi) - self._level(lo, split), counts[lo:split],
                            counts[split:hi], model)
        if judged is None:
            return max(scan, confirm), False
        return max(scan, judged), True

    def _borrows(self, bounds: list[int], i: int, by_model: bool) -> bool:
        """Whether the change at bounds[i] has a short side (fewer than SHORT_VALUES values)
        that is a step of a staircase (between two changes the same way), or the newest
        segment of a change the noise model judged (a new level still growing, on a series
        too short for ranks). A short segment the series leaves the way it came (up, then
        down) is what one CI job on another runner looks like, and a short oldest segment
        what a benchmark's first runs look like: both keep their own interval."""
        def step(j: int) -> float:  # the shift of the change at bounds[j]
            return self._level(bounds[j], bounds[j + 1]) - self._level(bounds[j - 1], bounds[j])

        for side, beyond in ((i - 1, i - 1), (i, i + 1)):  # a side, the change past it
            if self.count[bounds[side + 1]] - self.count[bounds[side]] >= SHORT_VALUES:
                continue
            newest = beyond == len(bounds) - 1 and self.open_end and by_model
            if newest or 0 < beyond < len(bounds) - 1 and step(beyond) * step(i) > 0:
                return True
        return False

    def _scan(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Every admissible split k of [lo, hi) and the residual sum of squares of a shift at k."""
        k = np.arange(lo + self.min_size, hi - self.min_size + 1)
        n_left, n_right = self.count[k] - self.count[lo], self.count[hi] - self.count[k]
        s_left, s_right = self.total[k] - self.total[lo], self.total[hi] - self.total[k]
        sse = (self.squares[hi] - self.squares[lo]) - s_left**2 / n_left - s_right**2 / n_right
        return k, sse

    def _anchor(self, lo: int, hi: int) -> bool:
        """Whether the best split of [lo, hi) is certain enough to bound its neighbours' tests.

        Both stages must reach ANCHOR_PVALUE, except that the rank test cannot when few values
        lie on one side: its smallest one-sided p-value is 1 / C(n, k) (2 of 26 values:
        1/325) however large the step. Within twice that floor it is as certain as it can be.
        """
        scan, confirm, split = self._stages(lo, hi)
        left = int(self.count[split] - self.count[lo])
        smallest = 1 / math.comb(int(self.count[hi] - self.count[lo]), left)
        return scan <= ANCHOR_PVALUE and confirm <= max(ANCHOR_PVALUE, 2 * smallest)

    def _test(self, lo: int, hi: int, split: int | None = None) -> tuple[float, int]:
        """p-value of a change in [lo, hi) at `split` (default: the maximum-likelihood split),
        and the split: the larger of the two stages' p-values (`_stages`)."""
        scan, confirm, split = self._stages(lo, hi, split)
        return max(scan, confirm), split

    def _stages(self, lo: int, hi: int, split: int | None = None) -> tuple[float, float, int]:
        """Both stages' p-values of a change in [lo, hi) at `split` (default: the
        maximum-likelihood split), and the split.

        Stage 1 standardises the shift of the commit summaries by the predicted noise and
        corrects it for the scan over [lo, hi); stage 2 is the rank test on the raw samples.
        """
        k, sse = self._scan(lo, hi)
        j = int(np.argmin(sse)) if split is None else split - (lo + self.min_size)
        split = int(k[j])
        shift = self._level(split, hi) - self._level(lo, split)
        if shift == 0:
            return 1.0, 1.0, split
        n_left = float(self.count[split] - self.count[lo])
        n_right = float(self.count[hi] - self.count[split])
        if self.noise is not None:
            z = abs(shift) / math.sqrt(max(self.noise, 1e-300) * (1 / n_left + 1 / n_right))
        else:  # one value per commit: a pooled t-test on the commit values
            dof = n_left + n_right - 2
            t = abs(shift) / math.sqrt(max(float(sse[j]) / dof, 1e-300)
                                       * (1 / n_left + 1 / n_right))
            z = -float(special.ndtri(special.stdtr(dof, -t)))  # the same tail as a z
        side: stats.Alternative = "greater" if shift > 0 else "less"
        starts = self.count.astype(int)
        confirm = stats.mann_whitney(self.flat[starts[lo]:starts[split]],
                                     self.flat[starts[split]:starts[hi]], side).pvalue
        return stats.scan_pvalue(z, hi - lo, self.min_size), confirm, split

    def _located(self, lo: int, split: int, hi: int, pvalue: float) -> Split:
        """A split with its plausible alternatives and the commits whose level is uncertain.

        With a flat prior over the splits of [lo, hi), the posterior of each split is its
        Gaussian likelihood (residual sums of squares, fitted noise) normalised. Plausible
        splits reach PLAUSIBLE_LIKELIHOOD of the best one, most likely first. A commit j is
        uncertain when P(split <= j) P(split > j) >= UNCERTAIN_LEVEL (it may be at either
        level); the most uncertain first: the commits where more samples locate the change.
        """
        k, sse = self._scan(lo, hi)
        best = float(sse[k == split][0])
        noise = self.noise
        if noise is None:  # one value per commit: the residual variance of the best fit
            dof = float(self.count[hi] - self.count[lo]) - 2
            noise = best / dof if dof > 0 else 0.0
        if not noise > 0:
            return Split(index=split, lo=lo, hi=hi, pvalue=pvalue, plausible=())
        loglik = -(sse - best) / (2 * noise)
        order = np.argsort(-loglik, kind="stable")
        likely = order[(loglik[order] >= math.log(PLAUSIBLE_LIKELIHOOD)) & (k[order] != split)]
        plausible = tuple(k[likely].tolist())
        mass = np.exp(loglik - loglik.max())
        mass /= mass.sum()
        new_level = np.cumsum(mass)  # P(split <= k): commit k is at the new level
        doubt = new_level * (1 - new_level)
        ranked = np.argsort(-doubt, kind="stable")
        uncertain = tuple(k[ranked[doubt[ranked] >= UNCERTAIN_LEVEL]].tolist())
        return Split(index=split, lo=lo, hi=hi, pvalue=pvalue, plausible=plausible,
                     uncertain=uncertain)

    def _level(self, lo: int, hi: int) -> float:
        return float(self.total[hi] - self.total[lo]) / float(self.count[hi] - self.count[lo])
