"""Change points of one benchmark series: pure functions on per-commit sample lists.

A noisy series is read in three steps:

1. *Transients* (`outliers`): a single commit far outside the levels on both sides of it is
   taken out and reported apart; it is neither a change nor allowed to pull one onto itself.
2. *Interior*: a binary segmentation with a two-stage test per split (`segmentation`), at
   least `min_size` commits on each side of every change.
3. *Edges*: the newest commit (one commit after a change: tonight's regression) and the
   oldest are each tested against the level next to them, from the raw samples, with a
   commit-level noise model. Such a change is marked `edge`: one commit holds its level, so
   a later night confirms it or withdraws it.

A deterministic series needs no statistics: every difference between adjacent commits is
real, except a single commit that differs from two equal neighbours (a transient).
docs/detection.md gives the method and its measured quality.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import special

from regressions import stats
from regressions.detection import outliers
from regressions.detection.outliers import Edge
from regressions.detection.segmentation import (
    CONFIRM_COMMITS,
    NoiseModel,
    Segmenter,
    Split,
    shift_variance,
)

# Ceiling on a change's p-value, for splitting and for keeping it; docs/detection.md
# measures 0.05 and 0.02 on the detection panel.
ALPHA = 0.05
# A new level inside the series must hold for this many commits (asv step_detect
# `min_size=2`, asv PR #881): a one-commit excursion inside is a transient. The two ends are
# tested on their own (`edge`).
MIN_SIZE = 2
# Best splits and edge tests with alpha < p <= NEAR_ALPHA are near misses: not changes, but
# the re-measurement planner (`remeasure`) spends samples on them.
NEAR_ALPHA = 0.25
EDGES: tuple[Edge, ...] = ("oldest", "newest")
# Commits an edge test needs: the end commit and at least this many minus one beside it.
EDGE_MIN_COMMITS = 4
# asv reports 99% intervals (asv_runner statistics.compute_stats, ci_99_a/ci_99_b).
CI_CONFIDENCE = stats.CI_CONFIDENCE


@dataclass(frozen=True, kw_only=True)
class Change:
    """A level shift: `index` is the first point of the new level.

    `pvalue` is one-sided in the direction of the shift and corrected for the choice of the
    split; it is None for a deterministic series, where any difference is real. `before`
    and `after` are the levels (geometric means for positive data), `ratio` = after/before
    with a 99% confidence interval `ci`. `edge` is "newest" when only the last commit holds
    the new level, "oldest" when only the first commit holds the old one; such a change is
    provisional. `plausible` lists other first-new-level indexes almost as likely (an
    ambiguous location), most likely first. `previous` is the last point at the old level
    when a transient lies between it and `index` (default `index - 1`). `uncertain` lists the
    points whose level (old or new) the fit cannot tell, most uncertain first. `awaiting` is
    True for a change at the newest end that the series' noise model judged (too few values
    for ranks) and fewer than CONFIRM_COMMITS commits hold: it awaits more commits.
    """

    index: int
    ratio: float
    ci: tuple[float, float]
    pvalue: float | None
    before: float
    after: float
    edge: Edge | None = None
    plausible: tuple[int, ...] = ()
    previous: int | None = None
    uncertain: tuple[int, ...] = ()
    awaiting: bool = False

    @property
    def good_index(self) -> int:
        """The last point at the old level."""
        return self.index - 1 if self.previous is None else self.previous


@dataclass(frozen=True)
class Transient:
    """A single-commit excursion: the point at `index` measured `ratio` x the `level` just
    before it, while the points on both sides agree with each other."""

    index: int
    ratio: float
    level: float


@dataclass(frozen=True, kw_only=True)
class SeriesChanges:
    """Everything one series says: changes (p <= alpha, or exact), near misses (alpha < p
    <= near_alpha), transients, which edges were tested (each one hypothesis more), and
    each point's level (the mean of its log samples; of its samples when `positive` is
    False), which environment alerts compare across series."""

    changes: tuple[Change, ...]
    near: tuple[Change, ...] = ()
    transients: tuple[Transient, ...] = ()
    edge_tests: tuple[str, ...] = ()
    levels: np.ndarray | None = field(default=None, compare=False, repr=False)
    positive: bool = True


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


def detect_changes(points: Sequence[Sequence[float]], **options) -> list[Change]:
    """Change points inside one series, both directions, in order, transients left out.

    Each change is kept at p <= `alpha`. The ends are not tested unless `edges` is given:
    two more tests per series at the same level would triple its false changes; a detection
    run (`detect.run_detection`) tests them under its false-discovery-rate control instead.
    Options are those of `analyse_series`.
    """
    options.setdefault("edges", ())
    return list(analyse_series(points, **options).changes)


def analyse_series(
    points: Sequence[Sequence[float]],
    *,
    alpha: float = ALPHA,
    min_size: int = MIN_SIZE,
    deterministic: bool | None = None,
    epsilon: float = stats.EPSILON,
    edges: Sequence[Edge] = EDGES,
    near_alpha: float = NEAR_ALPHA,
) -> SeriesChanges:
    """Changes, near misses and transients of one series.

    Args:
        points: per commit in history order, the samples measured there (at least one;
            infinite values only in a deterministic series).
        alpha: ceiling on each change's p-value.
        min_size: fewest commits on each side of a change inside a noisy series.
        deterministic: skip the statistics (see `looks_deterministic`, used when None).
        epsilon: relative difference below which two values are equal.
        edges: which ends of a noisy series to test ("oldest", "newest"); leave "oldest" out
            when the series is a window cut from a longer history.
        near_alpha: ceiling on a near miss's p-value.
    """
    counts = np.fromiter(map(len, points), dtype=np.intp, count=len(points))
    flat = np.fromiter(itertools.chain.from_iterable(points), dtype=float,
                       count=int(counts.sum()))
    if not counts.size:
        return SeriesChanges(changes=())
    if (counts == 0).any() or np.isnan(flat).any():
        raise ValueError("detect_changes: every point needs at least one value, none NaN")
    if deterministic is None:
        deterministic = looks_deterministic(points, epsilon)
    if deterministic:
        medians = _medians(flat, counts)
        positive = bool((flat > 0).all())
        return replace(_exact_analysis(medians, epsilon), positive=positive,
                       levels=np.log(medians) if positive else np.asarray(medians))
    if not np.isfinite(flat).all():
        raise ValueError("detect_changes: a noisy series needs finite values")
    if counts.size < 2 * min_size:
        return SeriesChanges(changes=())
    return _NoisyAnalysis(flat, counts, min_size).run(alpha, near_alpha, tuple(edges))


def _medians(flat: np.ndarray, counts: np.ndarray) -> list[float]:
    """Each commit's median; one reshape when every commit has as many samples."""
    if (counts == counts[0]).all():
        return np.median(flat.reshape(counts.size, int(counts[0])), axis=1).tolist()
    return [float(np.median(v)) for v in np.split(flat, np.cumsum(counts)[:-1])]


def _exact_analysis(levels: Sequence[float], epsilon: float) -> SeriesChanges:
    same = [stats.is_constant([a, b], epsilon) for a, b in zip(levels, levels[1:], strict=False)]
    blips = [i for i in range(1, len(levels) - 1)
             if not same[i - 1] and stats.is_constant([levels[i - 1], levels[i + 1]], epsilon)]
    skip = {j for i in blips for j in (i, i + 1)}
    changes = []
    for i in range(1, len(levels)):
        if not same[i - 1] and i not in skip:
            ratio = _exact_ratio(levels[i - 1], levels[i])
            changes.append(Change(index=i, ratio=ratio, ci=(ratio, ratio), pvalue=None,
                                  before=levels[i - 1], after=levels[i]))
    found = [Transient(i, _exact_ratio(levels[i - 1], levels[i]), levels[i - 1]) for i in blips]
    return SeriesChanges(changes=tuple(changes), near=(), transients=tuple(found))


def _exact_ratio(before: float, after: float) -> float:
    return after / before if before else math.copysign(math.inf, after - before)


class _NoisyAnalysis:
    """Transients out, end commits screened, interior segmented, edges tested. The samples
    are one array, commit after commit (`counts` per commit): a series of 1,700 commits is
    read with a few array operations, not 1,700 small ones."""

    def __init__(self, flat: np.ndarray, counts: np.ndarray, min_size: int):
        self.positive = bool((flat > 0).all())
        if counts.max() >= outliers.TRIM_MIN_SAMPLES and counts.max() > np.median(counts):
            trimmed = outliers.trim_bursts(np.split(flat, np.cumsum(counts)[:-1]),
                                           self.positive)
            flat = np.concatenate(trimmed)
            counts = np.array([v.size for v in trimmed])
        self.flat, self.counts, self.min_size = flat, counts, min_size
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        self.logs = np.log(flat) if self.positive else flat
        self.means = np.add.reduceat(self.logs, self.starts) / counts
        dof = int(np.sum(counts - 1))
        within = float(np.sum((self.logs - np.repeat(self.means, counts)) ** 2)) / dof \
            if dof else None
        self.error = math.sqrt(within / float(np.median(counts))) if within else None
        self.scale = outliers.commit_scale(self.means, self.error)

    def values(self, i: int) -> np.ndarray:
        """Commit i's samples."""
        return self.flat[self.starts[i]:self.starts[i] + self.counts[i]]

    def scaled(self, i: int) -> np.ndarray:
        """Commit i's samples as the tests read them (logs for positive data)."""
        return self.logs[self.starts[i]:self.starts[i] + self.counts[i]]

    def subset(self, commits: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """The samples of `commits` (in order) as one array, and their counts."""
        chosen = np.zeros(self.counts.size, dtype=bool)
        chosen[list(commits)] = True
        return self.flat[np.repeat(chosen, self.counts)], self.counts[chosen]

    def run(self, alpha: float, near_alpha: float, edges: tuple[Edge, ...]) -> SeriesChanges:
        start = outliers.noisy_start(self.means, self.scale)  # its excursions are its noise
        blips = [i for i in outliers.transients(self.means, self.scale) if i >= start]
        kept = outliers.positions_kept(self.counts.size, blips)
        tested = tuple(w for w in edges if not (start and w == "oldest")) \
            if len(kept) - start >= EDGE_MIN_COMMITS else ()
        screened = {w for w in tested
                    if outliers.edge_excursion(self.means[kept], self._edge_scale(kept, w), w)}
        lo = start or (1 if "oldest" in screened else 0)  # kept[:start] is the start itself
        hi = len(kept) - (1 if "newest" in screened else 0)
        interior = kept[lo:hi]
        segmenter = Segmenter(*self.subset(interior), self.min_size, self.positive)
        found, near = segmenter.changes(alpha, near_alpha, open_end=hi == len(kept))
        noise = segmenter.noise_model()
        changes = [self._interior(s, interior, noise) for s in found]
        misses = [self._interior(s, interior, noise) for s in near]
        splits = [lo + s for s in segmenter.splits]  # as positions in `kept`
        for which in tested:
            change = self._edge(which, kept, lo, hi, splits=splits, noise=noise)
            if change is None or change.pvalue is None:  # an end's test always has one
                continue
            if change.pvalue <= alpha:
                changes.append(change)
            elif change.pvalue <= near_alpha:
                misses.append(change)
        transients = tuple(self._transient(i) for i in blips)
        return SeriesChanges(changes=tuple(sorted(changes, key=lambda c: c.index)),
                             near=tuple(sorted(misses, key=lambda c: c.index)),
                             transients=transients, edge_tests=tested,
                             levels=self.means, positive=self.positive)

    def _interior(self, split: Split, interior: list[int], noise: NoiseModel) -> Change:
        before, before_counts = self.subset(interior[split.lo:split.index])
        after, after_counts = self.subset(interior[split.index:split.hi])
        interval = stats.ratio_interval(before, after)
        ci = (interval.low, interval.high)
        if split.borrow:  # a short side: the interval from the series' noise model
            borrowed = self._model_interval(before, after, (before_counts, after_counts), noise)
            ci = borrowed if borrowed is not None else ci
        levels = _levels(before, after, self.positive)
        awaiting = split.by_model and split.hi == len(interior) and \
            split.hi - split.index < CONFIRM_COMMITS  # by_model: the interior ends the series
        return Change(index=interior[split.index], ratio=interval.ratio, ci=ci,
                      pvalue=split.pvalue, before=levels[0], after=levels[1],
                      plausible=tuple(interior[j] for j in split.plausible),
                      previous=interior[split.index - 1],
                      uncertain=tuple(interior[j] for j in split.uncertain), awaiting=awaiting)

    def _model_interval(self, before: np.ndarray, after: np.ndarray,
                        counts: tuple[np.ndarray, np.ndarray], noise: NoiseModel
                        ) -> tuple[float, float] | None:
        """The ratio's CI_CONFIDENCE interval with the variance the series' noise model gives
        the difference of the two levels (`segmentation.shift_variance`): a change beside a
        two-value segment is not left with one degree of freedom. None when the model has
        no variance to give."""
        variance, dof = shift_variance(*counts, noise)
        if not variance > 0 or not dof > 0:
            return None
        scaled_before = np.log(before) if self.positive else before
        scaled_after = np.log(after) if self.positive else after
        difference = float(scaled_after.mean() - scaled_before.mean())
        half = float(special.stdtrit(dof, 0.5 + CI_CONFIDENCE / 2)) * math.sqrt(variance)
        return self._ratio(float(scaled_before.mean()), difference, half)[1]

    def _edge_scale(self, kept: list[int], which: Edge) -> float:
        """The commit scale the newest commit is screened with: that of the commits before
        it, without it. With a handful of commits a step at the end is one of three or four
        successive differences and sets their spread itself: four commits at 132, 145, 134
        and 253 ms (a compile clock, the newest commit a pass made quadratic) had a scale of
        0.18 in logs with the end and 0.09 without, and only the second screens the end, so
        that the noise model its test uses is not inflated by the change under test.

        The oldest commit keeps the whole series' scale: tonight's regression is at the
        newest end, and on short noisy series (docs/detection.md) screening both ends this
        way doubled the false edge alarms for no gain that matters."""
        means = self.means[kept]
        return outliers.commit_scale(means[:-1], self.error) if which == "newest" \
            else self.scale

    def _edge(self, which: Edge, kept: list[int], lo: int, hi: int, splits: list[int],
              noise: NoiseModel) -> Change | None:
        """The end commit against the segment next to it (in `kept` positions)."""
        if which == "newest":
            end = len(kept) - 1
            reference = kept[max([lo, *splits]):min(hi, end)]
        else:
            end = 0
            reference = kept[max(lo, 1):min([hi, *splits])]
        if not reference:
            return None
        raw, counts = self.subset(reference)
        scaled = np.log(raw) if self.positive else raw
        tested = _edge_stats(self.scaled(kept[end]), scaled, counts, noise,
                             raw_end=self.values(kept[end]), raw_reference=raw)
        if tested is None:
            return None
        pvalue, difference, half = tested
        base = float(np.mean(scaled))
        if which == "newest":
            before, after, previous, index = base, base + difference, kept[-2], kept[-1]
        else:  # the old level is the end commit's: the change is into the reference
            before, after, previous, index = base + difference, base, kept[0], kept[1]
            difference = -difference
        ratio, ci = self._ratio(before, difference, half)
        levels = (math.exp(before), math.exp(after)) if self.positive else (before, after)
        return Change(index=index, ratio=ratio, ci=ci, pvalue=pvalue, before=levels[0],
                      after=levels[1], edge=which, previous=previous)

    def _ratio(self, before: float, difference: float, half: float):
        if self.positive:
            return math.exp(difference), (math.exp(difference - half), math.exp(difference + half))
        if before == 0:
            return math.nan, (math.nan, math.nan)
        return 1 + difference / before, (1 + (difference - half) / before,
                                         1 + (difference + half) / before)

    def _transient(self, index: int) -> Transient:
        level = outliers.local_level(self.means, index)
        if self.positive:
            return Transient(index, math.exp(self.means[index] - level), math.exp(level))
        return Transient(index, _exact_ratio(level, float(self.means[index])), level)


def edge_test(end: list[np.ndarray], reference: list[np.ndarray], noise: NoiseModel,
              raw: tuple[list[np.ndarray], list[np.ndarray]] | None = None,
              confidence: float = CI_CONFIDENCE) -> tuple[float, float, float] | None:
    """One-sided p-value that the `end` commit's level differs from the `reference` commits'
    level in the direction it moved, the difference (end - reference) and the half-width of
    its `confidence` interval; None when the noise cannot be estimated.

    Stage 1 is a t statistic whose variance counts both the samples (`noise.within` / n) and
    the offset every commit draws (`noise.between`, the ANOVA estimate): a single commit is
    exactly what a commit-level offset moves, so replicates alone would overstate it.
    Satterthwaite's degrees of freedom combine the two estimates. Stage 2, when the end commit
    has several samples, is the one-sided Mann-Whitney test of the raw samples (`raw`, else
    the arrays given); the p-value is the larger of the two.
    """
    raw_end, raw_reference = raw if raw is not None else (end, reference)
    return _edge_stats(np.concatenate(end), np.concatenate(reference),
                       np.array([r.size for r in reference]), noise,
                       raw_end=np.concatenate(raw_end), raw_reference=np.concatenate(raw_reference),
                       confidence=confidence)


def _edge_stats(ends: np.ndarray, refs: np.ndarray, counts: np.ndarray, noise: NoiseModel,
                raw_end: np.ndarray, raw_reference: np.ndarray,
                confidence: float = CI_CONFIDENCE) -> tuple[float, float, float] | None:
    """`edge_test` on the end commit's samples and the reference commits' samples, each as
    one array (`counts`: samples per reference commit)."""
    difference = float(ends.mean() - refs.mean())
    variance, dof = shift_variance(np.array([ends.size]), counts, noise)
    if not variance > 0 or not dof > 0:
        return None
    t = abs(difference) / math.sqrt(variance)
    pvalue = float(special.stdtr(dof, -t))  # the t distribution's survival function
    side: stats.Alternative = "greater" if difference > 0 else "less"
    if ends.size > 1:
        pvalue = max(pvalue, stats.mann_whitney(raw_reference, raw_end, side).pvalue)
    half = float(special.stdtrit(dof, 0.5 + confidence / 2)) * math.sqrt(variance)
    return pvalue, difference, half


def _levels(before: np.ndarray, after: np.ndarray, positive: bool) -> tuple[float, float]:
    if positive:
        return float(np.exp(np.log(before).mean())), float(np.exp(np.log(after).mean()))
    return float(before.mean()), float(after.mean())
