import math

import numpy as np
import pytest
import scipy.stats

from regressions import stats


def lognormal(seed, n, shift=0.0, sigma=0.03):
    return np.exp(np.random.default_rng(seed).normal(math.log1p(shift), sigma, n)).tolist()


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_mann_whitney_matches_scipy(alternative):
    before, after = lognormal(1, 12), lognormal(2, 9, shift=0.02)
    ours = stats.mann_whitney(before, after, alternative)
    ref = scipy.stats.mannwhitneyu(after, before, alternative=alternative)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-12)
    assert ours.statistic == ref.statistic


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_mann_whitney_with_a_small_side_matches_scipys_exact_test(alternative):
    # a split with two commits of one value each against many: the exact null distribution,
    # which detection keeps per pair of sizes instead of building it per test as scipy does
    rng = np.random.default_rng(5)
    for n_small, n_large in ((2, 40), (8, 300), (5, 5), (1, 9)):
        small, large = rng.normal(0.3, 1, n_small).tolist(), rng.normal(0, 1, n_large).tolist()
        for before, after in ((small, large), (large, small)):
            ours = stats.mann_whitney(before, after, alternative)
            ref = scipy.stats.mannwhitneyu(after, before, alternative=alternative,
                                           method="exact")
            assert ours.pvalue == pytest.approx(ref.pvalue, rel=1e-9, abs=1e-15)
            assert ours.statistic == ref.statistic


def test_mann_whitney_exact_small_case():
    # All three "after" values beat all three "before": 1 of C(6,3) = 20 orderings.
    assert stats.mann_whitney([1, 2, 3], [4, 5, 6], "greater").pvalue == pytest.approx(0.05)


def test_mann_whitney_all_tied_has_no_information():
    assert stats.mann_whitney([2.0] * 5, [2.0] * 5).pvalue == 1.0


def test_ratio_interval_is_welch_on_logs():
    before, after = lognormal(3, 10), lognormal(4, 7, shift=0.05)
    ours = stats.ratio_interval(before, after, confidence=0.99)
    welch = scipy.stats.ttest_ind(np.log(after), np.log(before), equal_var=False)
    low, high = welch.confidence_interval(0.99)
    assert ours.ratio == pytest.approx(math.exp(np.log(after).mean() - np.log(before).mean()))
    assert (ours.low, ours.high) == pytest.approx((math.exp(low), math.exp(high)), rel=1e-9)


def test_ratio_interval_additive_and_degenerate_cases():
    # A zero rules out logs: ratio of means, interval on the difference scaled by the base.
    additive = stats.ratio_interval([0.0, 2.0], [3.0, 5.0])
    assert additive.ratio == pytest.approx(4.0)
    assert additive.low < 4.0 < additive.high
    assert math.isnan(stats.ratio_interval([0.0, 0.0], [1.0, 2.0]).ratio)
    single = stats.ratio_interval([2.0], [3.0])
    assert tuple(single) == pytest.approx((1.5, 1.5, 1.5))


def test_bh_qvalues_match_scipy():
    p = [0.001, 0.2, 0.03, 0.04, 0.5, 0.0001, 0.03, 1.0]
    expected = scipy.stats.false_discovery_control(p, method="bh")
    assert stats.bh_qvalues(p) == pytest.approx(list(expected))
    assert stats.bh_qvalues([]) == []


def max_split_statistic(rng, reps, n_points, min_size):
    """Largest one-sided standardised mean shift over every split, for no-change series."""
    x = rng.normal(size=(reps, n_points))
    total = np.cumsum(x, axis=1)
    k = np.arange(min_size, n_points - min_size + 1)
    left = total[:, k - 1] / k
    right = (total[:, -1:] - total[:, k - 1]) / (n_points - k)
    return ((right - left) / np.sqrt(1 / k + 1 / (n_points - k))).max(axis=1)


@pytest.mark.parametrize("n_points", [12, 30, 80])
def test_scan_pvalue_agrees_with_monte_carlo(n_points):
    observed = max_split_statistic(np.random.default_rng(0), 40_000, n_points, 2)
    for z in (2.6, 3.0):
        simulated = float(np.mean(observed >= z))
        assert stats.scan_pvalue(z, n_points, 2) == pytest.approx(simulated, rel=0.1)


def test_scan_pvalue_bounds():
    assert stats.scan_pvalue(0.0, 30, 2) == 1.0
    assert stats.scan_pvalue(-1.0, 30, 2) == 1.0
    assert stats.scan_pvalue(math.inf, 30, 2) == 0.0
    assert stats.scan_pvalue(3.0, 3, 2) == 1.0  # no admissible split
    ps = [stats.scan_pvalue(z, 40, 2) for z in (2.0, 3.0, 4.0, 5.0)]
    assert ps == sorted(ps, reverse=True)
    # Never below the single-split p-value, and more splits cost more.
    assert stats.scan_pvalue(3.0, 40, 2) > scipy.stats.norm.sf(3.0)
    assert stats.scan_pvalue(3.0, 80, 2) > stats.scan_pvalue(3.0, 20, 2)


def test_samples_cap_is_the_power_formula():
    # The two-sample power formula: n = 23.4 (sigma/delta)^2 per side, 94.8 for a 1.5% shift
    # at 3% noise, rounded up.
    z = scipy.stats.norm.isf(0.005) + scipy.stats.norm.ppf(0.8)
    assert 2 * z**2 == pytest.approx(23.35, abs=0.01)
    assert stats.samples_cap(0.03, math.log1p(0.015)) == 95
    assert stats.samples_cap(0.03, math.log1p(0.04)) == 14
    assert stats.samples_cap(0.0, 0.01) == 1
    with pytest.raises(ValueError, match="delta"):
        stats.samples_cap(0.03, 0.0)


def test_high_threshold_falls_with_samples_to_the_low_threshold():
    thresholds = [stats.high_threshold(n, n, effect=1.0) for n in (2, 5, 10, 20, 40, 80)]
    assert thresholds == sorted(thresholds, reverse=True)
    assert thresholds[0] == 1.0
    assert thresholds[-1] == stats.LOW_THRESHOLD
    # Pinpoint's table for a 1.0-IQR effect ends at n = 35 (catapult dashboard/pinpoint/
    # models/compare/thresholds_performance.py); with
    # a 1% miss rate the normal approximation crosses 0.01 near n = 26 for 1.349 sd.
    crossing = next(n for n in range(2, 100) if stats.high_threshold(n, n, 1.349) <= 0.0100001)
    assert 20 <= crossing <= 35


def test_compare_verdicts():
    verdicts = [stats.compare(lognormal(s, 40), lognormal(s + 1000, 40), magnitude=0.04).verdict
                for s in range(50)]
    # 40 samples exceed the cap for 4% at 3% noise: no "unknown", about 1% "different".
    assert verdicts.count("same") >= 47 and "unknown" not in verdicts
    different = stats.compare(lognormal(7, 20), lognormal(8, 20, shift=0.10), magnitude=0.04)
    assert different.verdict == "different"
    assert different.ratio == pytest.approx(1.10, abs=0.02)
    assert different.ci[0] < different.ratio < different.ci[1]
    assert different.pvalue <= stats.LOW_THRESHOLD
    few = stats.compare(lognormal(9, 3), lognormal(10, 3, shift=0.04), magnitude=0.04)
    assert few.verdict == "unknown"
    logs = np.log(lognormal(9, 3)), np.log(lognormal(10, 3, 0.04))
    spread = max(stats._spread(*logs), stats._pooled_sd(*logs))
    assert few.samples_cap == max(stats.MIN_DECISIVE,
                                  stats.samples_cap(spread, math.log1p(0.04)))


def test_compare_is_decisive_at_the_cap():
    for seed in range(20):
        a, b = lognormal(seed, 60), lognormal(seed + 100, 60, shift=0.02)
        result = stats.compare(a, b, magnitude=0.04)
        assert result.samples_cap <= 60
        assert result.high_threshold == stats.LOW_THRESHOLD
        assert result.verdict in ("same", "different")


def test_compare_deterministic_and_empty():
    assert stats.compare([2.0] * 3, [2.0] * 4, magnitude=0.01).verdict == "same"
    exact = stats.compare([2.0] * 3, [2.2] * 3, magnitude=0.5)
    assert (exact.verdict, exact.pvalue, exact.ratio) == ("different", 0.0, pytest.approx(1.1))
    assert stats.compare([0.0], [1e-3], magnitude=0.5).verdict == "different"
    empty = stats.compare([], [1.0, 2.0], magnitude=0.1)
    assert empty.verdict == "unknown" and math.isnan(empty.pvalue)
    with pytest.raises(ValueError, match="magnitude"):
        stats.compare([1.0], [1.0], magnitude=0)


def test_is_constant():
    assert stats.is_constant([1.0, 1.0 + 1e-12])
    assert not stats.is_constant([1.0, 1.001])
    assert stats.is_constant([math.inf, math.inf])
    assert not stats.is_constant([1.0, math.inf])
    assert stats.is_constant([0.0, 0.0])
    assert not stats.is_constant([0.0, 1e-300])


def test_the_welch_p_agrees_with_the_interval_it_is_quoted_beside():
    """A report states a ratio's 95% interval and a p: both from one test, so p < 0.05
    exactly when the interval excludes 1 (a Mann-Whitney p beside a Welch interval once read
    x0.997, interval including 1, p = 0.0049)."""
    rng = np.random.default_rng(7)
    agree = 0
    for shift in np.linspace(-0.02, 0.02, 41):
        good = rng.lognormal(0.0, 0.02, 100)
        bad = rng.lognormal(shift, 0.02, 100)
        low, high = stats.ratio_interval(good, bad, confidence=0.95)[1:]
        p = stats.welch_pvalue(good, bad)
        assert p is not None and (p < 0.05) == (not low <= 1 <= high), (shift, p, low, high)
        one_sided = stats.welch_pvalue(good, bad, "greater")
        assert one_sided is not None and (one_sided < 0.025) == (low > 1)
        agree += p < 0.05
    assert 5 < agree < 41  # both sides of the threshold were exercised
    assert stats.welch_pvalue([1.0], [2.0, 3.0]) is None
    assert stats.welch_pvalue([1.0, 1.0], [1.0, 1.0]) is None


@pytest.mark.parametrize("alternative", ["two-sided", "greater", "less"])
def test_the_welch_p_matches_scipys_welch_test_on_the_logs(alternative):
    good, bad = lognormal(3, 15), lognormal(4, 11, shift=0.01, sigma=0.05)
    ref = scipy.stats.ttest_ind(np.log(bad), np.log(good), equal_var=False,
                                alternative=alternative)
    assert stats.welch_pvalue(good, bad, alternative) == pytest.approx(ref.pvalue, rel=1e-9)
