"""Statistics for detecting and bisecting regressions: pure functions on plain sequences.

Nothing here reads files, runs git or knows about pandas: every function takes sequences of
floats and returns a named result, so detection (`regressions.detection.detect`) and
bisection share one tested implementation of each test. The method is described in
docs/detection.md. Distributions come from `scipy.special`, the functions scipy.stats' own
distributions evaluate (`stdtrit` for t.ppf, `ndtr`/`ndtri` for the normal): importing
scipy.stats costs detection 47 MB and a second, and tests/test_stats.py checks the results
against scipy.stats.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Literal, NamedTuple

import numpy as np
from scipy import special

# Samples: a sequence of floats, or a numpy array of them (detection slices its arrays).
Values = Sequence[float] | np.ndarray

# Pinpoint's low threshold: p at or below it means DIFFERENT (catapult
# dashboard/pinpoint/models/compare/thresholds.py, LowThreshold()).
LOW_THRESHOLD = 0.01
# Pinpoint generates its high thresholds so that a real change of the expected size lands above
# them with probability 0.01 (thresholds_performance.py, P_VALUE "the approximate false negative
# rate"); we compute the same quantity from the normal approximation instead of a table.
MISS_RATE = 0.01
# The sample cap: 80% power at alpha = LOW_THRESHOLD gives n = 23.4 (sigma/delta)^2 per side
# (the normal-approximation sample size of a two-sample comparison, `samples_cap`).
CAP_POWER = 0.8
# asv reports 99% intervals (asv_runner statistics.compute_stats, ci_99_a/ci_99_b).
CI_CONFIDENCE = 0.99
# Two values closer than this (relative) are the same value: float noise, not a change.
EPSILON = 1e-9
MIN_DECISIVE = 20  # samples per side before the power cap may force "same" or "different"

Alternative = Literal["two-sided", "less", "greater"]
Verdict = Literal["same", "different", "unknown"]


class RankTest(NamedTuple):
    """A Mann-Whitney U test; `pvalue` is for the stated alternative."""

    statistic: float
    pvalue: float


class RatioInterval(NamedTuple):
    """`after / before` with a confidence interval `[low, high]`."""

    ratio: float
    low: float
    high: float


class Comparison(NamedTuple):
    """Pinpoint-style three-way verdict on two sample sets (see `compare`)."""

    verdict: Verdict
    pvalue: float
    ratio: float
    ci: tuple[float, float]
    low_threshold: float
    high_threshold: float
    samples_cap: int


def is_constant(values: Values, epsilon: float = EPSILON) -> bool:
    """True when every value equals the first within a relative `epsilon` (no spread at all)."""
    if len(values) == 0:
        return True
    lo, hi = min(values), max(values)
    if lo == hi:
        return True
    return math.isfinite(lo) and math.isfinite(hi) and hi - lo <= epsilon * max(abs(lo), abs(hi))


def mann_whitney(
    before: Values, after: Values, alternative: Alternative = "two-sided"
) -> RankTest:
    """Mann-Whitney U of `after` against `before`; "greater" asks whether `after` is larger.

    A rank test, because benchmark timings have outliers and skew that a t-test on raw values
    over-weights (asv `_stats.is_different`, Pinpoint `compare.py` both use it). When every
    value is tied the test has no information and the p-value is 1.
    """
    if len(before) == 0 or len(after) == 0:
        raise ValueError("mann_whitney: `before` and `after` must both be non-empty")
    x, y = np.asarray(after, dtype=float), np.asarray(before, dtype=float)
    if (len(before) > 8 and len(after) > 8) or np.unique(np.concatenate([x, y])).size < \
            x.size + y.size:  # scipy's "auto" is asymptotic here: the same formula
        return _mann_whitney_normal(x, y, alternative)
    return _mann_whitney_exact(x, y, alternative)


def _mann_whitney_exact(x: np.ndarray, y: np.ndarray, alternative: Alternative) -> RankTest:
    """scipy.stats.mannwhitneyu(x, y, alternative, method="exact") for samples without ties,
    its null distribution kept per pair of sizes (`_u_survival`): detection tests thousands
    of splits with a few commits on one side, and scipy builds it anew for each."""
    n1, n2 = x.size, y.size
    u1 = int(np.sum(np.searchsorted(np.sort(y), x)))  # pairs with x above y: no ties
    u2 = n1 * n2 - u1
    u = {"greater": u1, "less": u2}.get(alternative, max(u1, u2))
    pvalue = _u_survival(min(n1, n2), max(n1, n2))[u] * (2 if alternative == "two-sided" else 1)
    return RankTest(float(u1), min(max(float(pvalue), 0.0), 1.0))


@functools.lru_cache(maxsize=1024)
def _u_survival(m: int, n: int) -> np.ndarray:
    """P(U >= u) for u = 0..m*n under the null, for samples of m <= n values: the counts are
    the coefficients of the Gaussian binomial [m+n choose m]_q (Mann & Whitney 1947), built as
    prod_k (1 - q^(n+k)) / (1 - q^k), each step an exact polynomial division."""
    counts = np.zeros(m * n + 1)
    counts[0] = 1.0
    for k in range(1, m + 1):
        counts[n + k:] -= counts[:m * n + 1 - n - k].copy()  # times (1 - q^(n+k))
        for r in range(k):  # divided by (1 - q^k): running sums with stride k
            counts[r::k] = np.cumsum(counts[r::k])
    return np.cumsum(counts[::-1])[::-1] / counts.sum()


def _mann_whitney_normal(x: np.ndarray, y: np.ndarray, alternative: Alternative) -> RankTest:
    """scipy.stats.mannwhitneyu(x, y, alternative, method="asymptotic") without its dispatch
    overhead (detection calls it thousands of times a run): average ranks, the tie-corrected
    variance and the continuity correction of scipy's _mannwhitneyu.py."""
    n1, n2 = x.size, y.size
    _, inverse, counts = np.unique(np.concatenate([x, y]), return_inverse=True,
                                   return_counts=True)
    ranks = (np.cumsum(counts) - (counts - 1) / 2)[inverse]
    u1 = float(ranks[:n1].sum()) - n1 * (n1 + 1) / 2
    u2 = n1 * n2 - u1
    n = n1 + n2
    ties = float(np.sum(counts.astype(float) ** 3 - counts))
    spread = math.sqrt(n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1))))
    if spread == 0:
        return RankTest(u1, 1.0)
    u = {"greater": u1, "less": u2}.get(alternative, max(u1, u2))
    pvalue = float(special.ndtr(-(u - n1 * n2 / 2 - 0.5) / spread))
    if alternative == "two-sided":
        pvalue *= 2
    return RankTest(u1, min(max(pvalue, 0.0), 1.0))


def ratio_interval(
    before: Values, after: Values, confidence: float = CI_CONFIDENCE
) -> RatioInterval:
    """Effect size `after / before` with a Welch confidence interval.

    For positive values this is the ratio of geometric means with a Welch t interval on the
    log samples, as Kalibera & Jones (ISMM 2013) recommend for reporting time ratios: the
    interval is multiplicative, so it stays positive and symmetric in log space. Values that
    are zero or negative (an error metric can be 0) fall back to the ratio of arithmetic means
    with the Welch interval of the difference scaled by the mean before. A side with one value
    contributes no variance; with no variance on either side the interval has zero width.
    """
    a = np.asarray(before, dtype=float)
    b = np.asarray(after, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("ratio_interval: `before` and `after` must both be non-empty")
    positive = bool((a > 0).all() and (b > 0).all())
    if positive:
        a, b = np.log(a), np.log(b)
    diff = float(b.mean() - a.mean())
    va = float(a.var(ddof=1)) / a.size if a.size > 1 else 0.0
    vb = float(b.var(ddof=1)) / b.size if b.size > 1 else 0.0
    se = math.sqrt(va + vb)
    if se > 0:
        # Welch-Satterthwaite degrees of freedom; a side with one value adds no term.
        terms = [v * v / (n - 1) for v, n in ((va, a.size), (vb, b.size)) if n > 1 and v > 0]
        dof = (va + vb) ** 2 / sum(terms)
        half = float(special.stdtrit(dof, 0.5 + confidence / 2)) * se
    else:
        half = 0.0
    if positive:
        return RatioInterval(math.exp(diff), math.exp(diff - half), math.exp(diff + half))
    base = float(a.mean())
    if base == 0:
        return RatioInterval(math.nan, math.nan, math.nan)
    return RatioInterval(1 + diff / base, 1 + (diff - half) / base, 1 + (diff + half) / base)


def welch_pvalue(before: Values, after: Values,
                 alternative: Alternative = "two-sided") -> float | None:
    """The p-value of the test behind `ratio_interval`: Welch's t-test on the log samples
    (on the values themselves where one is not positive), `after` against `before`. A report
    quotes it beside that interval, so the two agree: two-sided p < 1 - confidence exactly
    when the interval excludes 1. None when the test is undefined (a side with fewer than
    two values, or no variance at all)."""
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if a.size < 2 or b.size < 2:
        return None
    if (a > 0).all() and (b > 0).all():
        a, b = np.log(a), np.log(b)
    va, vb = float(a.var(ddof=1)) / a.size, float(b.var(ddof=1)) / b.size
    if va + vb == 0:
        return None
    t = float(b.mean() - a.mean()) / math.sqrt(va + vb)
    dof = (va + vb) ** 2 / (va * va / (a.size - 1) + vb * vb / (b.size - 1))
    tail = {"two-sided": -abs(t), "greater": -t, "less": t}[alternative]
    p = float(special.stdtr(dof, tail)) * (2 if alternative == "two-sided" else 1)
    return None if math.isnan(p) else min(p, 1.0)


def bh_qvalues(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values), in input order.

    Rejecting every hypothesis with q <= Q controls the false discovery rate at Q for
    independent tests (Benjamini & Hochberg 1995, JRSS B 57(1):289-300).
    """
    p = np.asarray(pvalues, dtype=float)
    m = p.size
    if m == 0:
        return []
    order = np.argsort(p, kind="stable")
    scaled = p[order] * m / np.arange(1, m + 1)
    # q_(i) = min over j >= i of p_(j) m / j: a running minimum from the largest p down.
    running = np.minimum.accumulate(scaled[::-1])[::-1]
    q = np.empty(m)
    q[order] = np.minimum(running, 1.0)
    return [float(x) for x in q]


def _normal_pdf(x):
    return np.exp(-0.5 * np.square(x)) / math.sqrt(2 * math.pi)


def _siegmund_nu(x: np.ndarray) -> np.ndarray:
    # Overshoot correction for a discretely sampled boundary crossing, in the closed-form
    # approximation of Siegmund & Yakir (2007), The Statistics of Gene Mapping (Springer).
    half = x / 2
    cdf, pdf = special.ndtr(half), _normal_pdf(half)
    return (2 / x) * (cdf - 0.5) / (half * cdf + pdf)


def scan_pvalue(z: float, n_points: int, min_size: int) -> float:
    """One-sided p-value of the largest standardised two-sample statistic over split points.

    A change point is chosen where the before/after difference is largest, so the test at
    that split is optimistic. This returns P(max_k Z_k >= z) over every split k of `n_points`
    points with at least `min_size` on each side, for a series without a change: the
    Brownian-bridge approximation of James, James & Siegmund (1987, Biometrika 74(1):71-83)
    with Siegmund's discreteness correction. It agrees with Monte Carlo within 10% for 12 to
    80 points and p from 0.008 to 0.08 (tests/test_stats.py).
    """
    if not z > 0:
        return 1.0
    if math.isinf(z):
        return 0.0
    k = np.arange(min_size, n_points - min_size + 1, dtype=float)
    if k.size == 0:
        return 1.0
    # Time-changed to an Ornstein-Uhlenbeck process, split k advances the clock by spacing/2.
    spacing = n_points / (k * (n_points - k))
    rate = np.sum(spacing / 2 * _siegmund_nu(z * np.sqrt(spacing)))
    crossing = z * float(_normal_pdf(z)) * float(rate)
    return float(min(1.0, max(crossing, float(special.ndtr(-z)))))


def samples_cap(
    sigma: float, delta: float, alpha: float = LOW_THRESHOLD, power: float = CAP_POWER
) -> int:
    """Samples per side for `power` to detect a shift `delta` at two-sided `alpha`.

    n = 2 (z_{1-alpha/2} + z_{power})^2 (sigma/delta)^2, the normal-approximation sample size
    of a two-sample comparison, which is 23.4 (sigma/delta)^2 at the defaults (about 95 a side
    for 1.5% at 3% noise). `sigma` and `delta` share units: for timings,
    the sd of log samples and log(1 + relative change). Bisection stops adding repeats here.
    """
    if delta <= 0:
        raise ValueError(f"samples_cap: `delta` must be > 0, got {delta}")
    if sigma <= 0:
        return 1
    z_sum = float(-special.ndtri(alpha / 2) + special.ndtri(power))
    return max(2, math.ceil(2 * z_sum**2 * (sigma / delta) ** 2))


def high_threshold(
    n_before: int,
    n_after: int,
    effect: float,
    low_threshold: float = LOW_THRESHOLD,
    miss_rate: float = MISS_RATE,
) -> float:
    """Pinpoint's high threshold: above it, a change of size `effect` is unlikely.

    `effect` is the expected shift in standard deviations. A real shift of that size gives a
    two-sided p-value above the returned threshold with probability `miss_rate` (normal
    approximation of the statistic). The threshold falls as samples grow and never goes
    below `low_threshold`, so the verdict is decisive once the samples suffice.
    """
    if n_before < 1 or n_after < 1:
        return 1.0
    mean_z = effect / math.sqrt(1 / n_before + 1 / n_after)
    threshold = 2 * float(special.ndtr(-(mean_z + special.ndtri(miss_rate))))
    return float(min(1.0, max(low_threshold, threshold)))


def _spread(a: np.ndarray, b: np.ndarray) -> float:
    # Pinpoint normalises the expected magnitude by the larger IQR of the two samples
    # (compare.py); 1.349 IQR = 1 sd for normal data. Falls back to the pooled sd when the
    # IQRs are zero (heavily tied values).
    iqr = max(float(np.subtract(*np.percentile(x, [75, 25]))) for x in (a, b))
    if iqr > 0:
        return iqr / 1.349
    pooled = np.concatenate([a - a.mean(), b - b.mean()])
    return float(np.sqrt(np.sum(pooled**2) / max(pooled.size - 2, 1)))


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    pooled = np.concatenate([a - a.mean(), b - b.mean()])
    return float(np.sqrt(np.sum(pooled**2) / max(pooled.size - 2, 1)))


def compare(
    before: Sequence[float],
    after: Sequence[float],
    *,
    magnitude: float,
    low_threshold: float = LOW_THRESHOLD,
    miss_rate: float = MISS_RATE,
    power: float = CAP_POWER,
) -> Comparison:
    """Decide whether two commits' samples are the same, different, or not yet known.

    Pinpoint's sequential verdict (catapult compare.py): two-sided Mann-Whitney p <=
    `low_threshold` is "different"; p above the high threshold for a change of `magnitude`
    (relative, e.g. 0.04 for 4%) is "same"; in between is "unknown": add repeats and ask
    again. Once both sides hold `samples_cap` values (the power-formula cap) the high
    threshold drops to the low one, so the answer is never "unknown" at the cap. Samples
    without spread on both sides (a deterministic metric) are compared exactly.

    Args:
        before: samples at the known-good commit (positive, e.g. seconds).
        after: samples at the commit under test.
        magnitude: relative change worth finding, > 0; the detected regression's size.

    Returns:
        A `Comparison`; `ratio`/`ci` are `after / before` (geometric means, 99% Welch CI).
    """
    if magnitude <= 0:
        raise ValueError(f"compare: `magnitude` must be > 0, got {magnitude}")
    if len(before) == 0 or len(after) == 0:
        # Pinpoint returns UNKNOWN when a side has no values (every run failed).
        return Comparison("unknown", math.nan, math.nan, (math.nan, math.nan),
                          low_threshold=low_threshold, high_threshold=1.0, samples_cap=0)
    interval = ratio_interval(before, after)
    ci = (interval.low, interval.high)
    if is_constant(before) and is_constant(after):
        differs = not is_constant([before[0], after[0]])
        return Comparison("different" if differs else "same", 0.0 if differs else 1.0,
                          interval.ratio, ci, low_threshold=low_threshold,
                          high_threshold=low_threshold, samples_cap=1)
    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    if (a > 0).all() and (b > 0).all():
        a, b = np.log(a), np.log(b)
        delta = math.log1p(magnitude)
    else:  # an additive metric (values can be 0): the magnitude is relative to the level before
        delta = magnitude * (abs(float(a.mean())) or 1.0)
    # The larger of the IQR- and sd-based spreads, and never fewer than MIN_DECISIVE samples
    # before the cap forces a verdict: with 10 samples a side both estimates can be far too
    # small, and a forced "same" at p = 0.02 would end a bisection on the wrong side.
    sigma = max(_spread(a, b), _pooled_sd(a, b))
    cap = max(MIN_DECISIVE, samples_cap(sigma, delta, alpha=low_threshold, power=power))
    if min(a.size, b.size) >= cap:
        high = low_threshold
    else:
        effect = delta / sigma if sigma > 0 else math.inf
        high = high_threshold(a.size, b.size, effect, low_threshold, miss_rate=miss_rate)
    pvalue = mann_whitney(before, after).pvalue
    if pvalue <= low_threshold:
        verdict: Verdict = "different"
    elif pvalue > high:
        verdict = "same"
    else:
        verdict = "unknown"
    return Comparison(verdict, pvalue, interval.ratio, ci, low_threshold=low_threshold,
                      high_threshold=high, samples_cap=cap)


def asv_verdict(before: Sequence[float], after: Sequence[float], factor: float = 1.1) -> int:
    """What `asv continuous` prints for one row, decided by asv's own code: 1 for a "+" row
    (worse: the median rose by more than `factor` and asv's test calls the samples
    different), -1 for a "-" row (better), 0 for an unchanged one. The medians and stats are
    the ones asv stores (asv_runner `compute_stats`), the rule is asv's `_is_result_better`
    (Mann-Whitney p < 0.002 where the sample counts allow it, else 99% intervals that do not
    overlap). Lower is better, as for asv's time benchmarks."""
    from asv.commands.compare import _is_result_better
    from asv_runner.statistics import compute_stats

    value_before, stats_before = compute_stats(list(before), 1)
    value_after, stats_after = compute_stats(list(after), 1)
    kept_before, kept_after = (stats_before, list(before)), (stats_after, list(after))
    if _is_result_better(value_after, value_before, kept_after, kept_before, factor=factor):
        return -1
    if _is_result_better(value_before, value_after, kept_before, kept_after, factor=factor):
        return 1
    return 0
