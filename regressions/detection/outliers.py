"""One-commit excursions of a noisy series: transients inside it, and screened edge commits.

A commit whose level lies far outside the levels on *both* sides of it, while its
neighbours agree with each other, is a transient (a load spike, a bad run, a commit reverted
by the next one). Left in, it is a change point twice over, and the segmentation can move
an adjacent real step onto it (a one-value-per-commit throughput series with one commit 40%
low five commits before a real -12% step blamed the outlier's commit). So transients are
taken out before the change points are fitted, and reported apart.

At the two ends of a series a single commit cannot be told from a step: the newest commit of
a night is the one that matters most. An end commit that is an excursion is kept out of the
segmentation (so it cannot drag a split next to it onto its neighbour) and tested on its own
(`changepoints`). Everything here works on per-commit means (of log values for positive
data) and a robust scale; pure functions on arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

# The two ends of a series: the oldest commit and the newest (tonight's).
Edge = Literal["oldest", "newest"]

# Commits on each side whose median is the local level (a running median, as the asv
# step_detect's L1 fit is robust to a single outlier).
WINDOW = 3
# An excursion is this many robust standard deviations of a commit mean beyond both local
# levels. Normal noise passes 5 sd once in 3.5 million commits; heavy-tailed noise more often,
# and a false transient only drops one commit from the fit.
TRANSIENT_Z = 5.0
# Next to a step, an excursion beyond both levels must exceed this fraction of the step
# itself: a first commit that overshoots a step by a little belongs to the step, while a
# bad run of 1.5x right before a +20% step is an outlier (the month simulation plants it).
OVERSHOOT = 0.5
# An end commit this far from its neighbours is kept out of the segmentation and tested alone.
EDGE_SCREEN_Z = 4.0
# Fewer commits than this give no robust scale worth trusting: no transients are sought.
MIN_COMMITS = 5
# A noisy start holds at least this many wild moves (a transient makes two), each at least
# NOISY_START_Z robust standard deviations of a difference, and lies within the oldest
# quarter of the series. 3.5 rather than EDGE_SCREEN_Z: on pybamm-bench's noisiest series
# (commit scale 8%) the start's moves were 45-66% and 4 sd missed the first of them.
NOISY_START_MOVES = 3
NOISY_START_Z = 3.5
NOISY_START_SHARE = 0.25
# Samples this many robust standard deviations from their commit's median are a burst.
TRIM_Z = 5.0
TRIM_MIN_SAMPLES = 5
# 1.4826 MAD estimates a normal standard deviation (Rousseeuw & Croux 1993).
MAD_TO_SD = 1.4826


def trim_bursts(values: list[np.ndarray], positive: bool, *, z: float = TRIM_Z
                ) -> list[np.ndarray]:
    """Each re-measured commit's samples without a minority far from its own median.

    A commit measured again (asv --append-samples) holds several runs; when one of them was
    a bad run (a load spike, a glitch) a minority of its samples sits `z` robust standard
    deviations (pooled over the series' commits, of log values for positive data) from the
    commit's median. Those samples are dropped, unless that would drop half of the commit
    or more (then it is not a minority). Only commits with more samples than the series'
    usual count (the median), and at least TRIM_MIN_SAMPLES, are touched: a single run's
    own tail is the benchmark's noise, which the tests model. Normal noise reaches 5 sd once
    in 1.7 million samples.
    """
    usual = float(np.median([v.size for v in values])) if values else 0.0
    eligible = [i for i, v in enumerate(values)
                if v.size >= TRIM_MIN_SAMPLES and v.size > usual]
    if not eligible:
        return values
    scaled = {i: np.log(values[i]) if positive else values[i] for i in eligible}
    centred = {i: scaled[i] - np.median(scaled[i]) for i in eligible}
    scale = MAD_TO_SD * float(np.median(np.abs(np.concatenate(list(centred.values())))))
    if not scale > 0:
        return values
    out = list(values)
    for i in eligible:
        keep = np.abs(centred[i]) <= z * scale
        if 2 * int(keep.sum()) > keep.size and not keep.all():
            out[i] = values[i][keep]
    return out


def commit_scale(means: np.ndarray, standard_error: float | None = None) -> float:
    """Robust standard deviation of one commit mean around its local level.

    The spread of successive differences (a step moves one difference, a transient two, so
    the median absolute deviation ignores both), divided by sqrt(2) because a difference
    holds two means. Never below `standard_error`, the sample noise of one commit mean: a
    handful of differences can agree by chance.
    """
    floor = standard_error or 0.0
    if means.size < 3:
        return floor
    steps = np.diff(means)
    spread = MAD_TO_SD * float(np.median(np.abs(steps - np.median(steps)))) / np.sqrt(2)
    return max(spread, floor)


def transients(means: np.ndarray, scale: float, *, z: float = TRANSIENT_Z,
               window: int = WINDOW) -> list[int]:
    """Indexes of single-commit excursions inside the series (never its first or last commit).

    Commit i is one when its mean lies beyond both local levels (medians of up to `window`
    commits before and after it) by at least `z` scales, and by more than OVERSHOOT times
    the difference of the two levels: a commit between the levels of a step belongs to the
    step, and so does one that overshoots it a little. Two flagged neighbours are a
    two-commit excursion, which is a change and a change back, not a transient.
    """
    if means.size < MIN_COMMITS or not scale > 0:
        return []
    left, right = _local_medians(means, window)
    inner = slice(1, means.size - 1)
    low, high = np.minimum(left[inner], right[inner]), np.maximum(left[inner], right[inner])
    excess = np.maximum(means[inner] - high, low - means[inner])
    flagged = (np.flatnonzero((excess >= z * scale) & (excess > OVERSHOOT * (high - low)))
               + 1).tolist()
    chosen = set(flagged)
    return [i for i in flagged if i - 1 not in chosen and i + 1 not in chosen]


def _local_medians(values: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Per index i, the median of up to `window` values just before i and just after it
    (NaN where there are none): running medians of a whole series at once."""
    n = values.size
    left, right = np.full(n, np.nan), np.full(n, np.nan)
    for k in range(1, min(window, n)):  # the first and last indexes see fewer neighbours
        left[k] = np.median(values[:k])
        right[n - 1 - k] = np.median(values[n - k:])
    if n > window:
        full = np.median(np.lib.stride_tricks.sliding_window_view(values, window), axis=1)
        left[window:] = full[:n - window]
        right[:n - window] = full[1:]
    return left, right


def edge_excursion(means: np.ndarray, scale: float, which: Edge, *, z: float = EDGE_SCREEN_Z,
                   window: int = WINDOW) -> bool:
    """Whether the `which` ("oldest" or "newest") commit stands apart from its neighbours.

    It must differ by `z` scales from both the median of the `window` commits next to it and
    the adjacent commit alone: a step one commit earlier puts the adjacent commit at the new
    level too, and then the end commit belongs to the segmentation.
    """
    if means.size < 3 or not scale > 0:
        return False
    ordered = means if which == "oldest" else means[::-1]
    neighbours = ordered[1:1 + window]
    end = float(ordered[0])
    return (abs(end - float(np.median(neighbours))) >= z * scale
            and abs(end - float(ordered[1])) >= z * scale)


def noisy_start(means: np.ndarray, scale: float, *, z: float = NOISY_START_Z) -> int:
    """How many of the oldest commits form a noisy start (0: none), to be kept out of the
    segmentation like a screened end commit.

    A new benchmark, or a runner still settling, can open a series with a stretch of wild
    values: pybamm-bench's py3.8 series begin with 6 values at 4.16-6.63 s before 18 at
    4.15-4.21 s. Left in, the stretch shares the first segment and inflates the noise every
    later test of that segment reads (a x1.141 step: p 0.0022 with it, 3.8e-10 without).
    A move between two commits is wild when it exceeds `z` robust standard deviations of a
    difference of two means (`scale` is one mean's). The stretch is made of runs of
    adjacent wild moves, each starting within the first
    MIN_COMMITS moves; it holds at least NOISY_START_MOVES wild moves in runs of two or more
    (a transient is one such run of two; a real step is a run of one, so a step after a
    transient is no noisy start) and ends within the oldest NOISY_START_SHARE of the series.
    """
    if not scale > 0 or means.size < 2 * MIN_COMMITS:
        return 0
    wild = np.flatnonzero(np.abs(np.diff(means)) >= z * scale * np.sqrt(2)).tolist()
    runs: list[list[int]] = []
    for move in wild:
        if runs and move - runs[-1][-1] == 1:
            runs[-1].append(move)
        elif move < MIN_COMMITS:
            runs.append([move])
        else:
            break  # a run of its own, past the start
    count = sum(len(run) for run in runs if len(run) > 1)
    end = runs[-1][-1] + 1 if runs else 0  # the first commit after the stretch
    return end if count >= NOISY_START_MOVES and end <= NOISY_START_SHARE * means.size else 0


def local_level(means: np.ndarray, index: int, window: int = WINDOW) -> float:
    """The level just before `index` (the median of up to `window` means), else just after."""
    before = means[max(0, index - window):index]
    return float(np.median(before if before.size else means[index + 1:index + 1 + window]))


def positions_kept(n: int, dropped: Sequence[int]) -> list[int]:
    """0..n-1 without `dropped`, in order."""
    gone = set(dropped)
    return [i for i in range(n) if i not in gone]
