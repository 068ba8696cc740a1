"""Edges, transients and bursts: the newest and oldest commits, one-commit outliers."""

import math

import numpy as np
import pytest

from regressions.detection import changepoints, detect, outliers
from regressions.detection.alerts import cluster_alerts
from regressions.detection.changepoints import analyse_series
from regressions.detection.segmentation import NoiseModel
from regressions.groundtruth import synthetic


def series(samples, name="bench_execute.ExecuteDeviceTime.time_device", params="",
           higher_is_better=False, deterministic=None):
    commits = tuple(f"{i:040x}" for i in range(len(samples)))
    return detect.Series(machine="m", env="env", benchmark=name, params=params, commits=commits,
                         positions=tuple(range(len(samples))),
                         samples=tuple(None if s is None else tuple(s) for s in samples),
                         higher_is_better=higher_is_better, deterministic=deterministic)


def lognormal(levels, n, sd, seed):
    rng = np.random.default_rng(seed)
    return (np.asarray(levels)[:, None] * np.exp(rng.normal(0, sd, (len(levels), n)))).tolist()


def flat_panel(count, seed):
    return [series(synthetic.step_series(seed=seed + i, steps=())[0], params=f"({i})")
            for i in range(count)]


# --- one-commit outliers next to real steps ----------------------------------------------

def test_outlier_before_a_step_one_value_per_commit_higher_is_better():
    # The public series: one throughput value per commit, ~1% noise, one commit 40%
    # lower five commits before a real -12% step. The step's commit is blamed, the outlier is
    # a transient, and no regression names the outlier's commit.
    for seed in range(30):
        levels = np.full(40, 1000.0)
        levels[25:] *= 0.88
        levels[20] *= 0.6
        values = levels * np.exp(np.random.default_rng(seed).normal(0, 0.01, 40))
        found = detect.run_detection([series([[v] for v in values], "x.track_items",
                                             higher_is_better=True)])
        assert 25 in [r.bad_position for r in found.regressions], seed
        assert 20 not in [r.bad_position for r in found.regressions], seed
        (transient,) = found.transients
        assert (transient.position, round(transient.ratio, 1)) == (20, 0.6)


def test_outlier_before_a_step_with_samples_per_commit():
    for seed in range(20):
        levels = np.ones(40)
        levels[25:] *= 1.12
        levels[20] *= 1.4
        found = detect.run_detection([series(lognormal(levels, 20, 0.015, seed))])
        assert [r.bad_position for r in found.regressions] == [25], seed
        assert [t.position for t in found.transients] == [20]


def test_outlier_right_before_a_step_at_the_newest_commit():
    # A bad run of x1.5 on the commit just before a +20% step that lands in the newest
    # commit: the outlier must not become the step's first commit.
    for seed in range(10):
        levels = np.ones(30)
        levels[29] *= 1.2
        levels[28] *= 1.5
        found = detect.run_detection([series(lognormal(levels, 10, 0.025, seed))])
        (r,) = found.regressions
        assert (r.good_position, r.bad_position, r.edge) == (27, 29, "newest"), seed
        assert [t.position for t in found.transients] == [28]


def test_a_two_commit_excursion_is_a_change_and_back_not_a_transient():
    levels = np.ones(30)
    levels[12:14] *= 1.3
    changes = changepoints.detect_changes(lognormal(levels, 10, 0.01, 1))
    assert [c.index for c in changes] == [12, 14]


def test_deterministic_transient_and_edges_stay_exact():
    values = [[5.0]] * 4 + [[9.0]] + [[5.0]] * 4 + [[6.0]]
    analysis = analyse_series(values)
    assert [(c.index, c.pvalue, c.edge) for c in analysis.changes] == [(9, None, None)]
    assert [(t.index, t.ratio) for t in analysis.transients] == [(4, 1.8)]
    (r,) = detect.find_regressions([series(values, "numerics.E.track_err", deterministic=True)])
    assert (r.bad_position, r.p, r.q, r.edge) == (9, None, None, None)


# --- the newest and the oldest commit ----------------------------------------------------

def test_regression_in_the_newest_commit_is_found_the_night_it_lands():
    # The decode case: 20 samples a commit, x1.7 in the newest commit, no overlap;
    # it shares the run's FDR with 60 unchanged series and is the only regression.
    levels = np.ones(12)
    levels[-1] = 1.7
    run = [series(lognormal(levels, 20, 0.015, 3), params="(1, 'decode')"),
           *flat_panel(60, 500)]
    found = detect.run_detection(run)
    (r,) = found.regressions
    assert (r.params, r.good_position, r.bad_position, r.edge) == ("(1, 'decode')", 10, 11,
                                                                    "newest")
    assert r.ratio == pytest.approx(1.7, rel=0.02) and r.ci is not None and r.ci[0] > 1.6
    assert r.q is not None and r.q <= detect.FDR
    (alert,) = cluster_alerts(found.regressions)
    assert alert.provisional


# An Inductor night's compile clock (tests/e2e/test_inductor_nightly.py, one run in a full
# suite run beside the other worker), ms: the older three commits zig-zag by ~10%, the newest
# is a pass made quadratic.
INDUCTOR_COMPILE_MS = [
    [145.8, 152.3, 143.0, 128.3, 139.8, 139.7, 147.4, 131.9, 121.7, 118.4, 131.7, 128.8, 122.3,
     124.2, 123.0, 130.6, 133.4, 129.7, 129.8, 130.5],
    [148.0, 155.9, 138.6, 148.7, 148.0, 148.2, 141.9, 149.2, 161.1, 146.4, 146.8, 137.0, 138.7,
     140.9, 136.4, 143.3, 145.2, 148.4, 137.7, 130.1],
    [129.5, 147.5, 147.9, 136.7, 141.2, 138.4, 147.8, 137.9, 133.9, 124.1, 136.6, 144.4, 125.1,
     117.8, 116.8, 120.6, 122.0, 123.1, 139.9, 139.7],
    [244.6, 252.0, 251.7, 254.7, 244.5, 250.3, 244.9, 233.6, 242.5, 243.8, 264.1, 263.7, 253.7,
     252.8, 254.3, 264.9, 259.4, 256.7, 256.4, 261.8]]


def test_a_step_at_the_newest_of_four_commits_is_screened_by_the_others_spread():
    # Judged with the newest commit's own difference in the scale, the end was not screened,
    # its step inflated the noise model its edge test used (p 0.09), and the regression went
    # unreported.
    samples = [[v / 1000 for v in commit] for commit in INDUCTOR_COMPILE_MS]
    (r,) = detect.find_regressions([series(samples, "bench_compile.Compile.time_compile")])
    assert (r.good_position, r.bad_position, r.edge) == (2, 3, "newest")
    assert r.ratio == pytest.approx(1.85, rel=0.05)
    # the older three commits alone, the third again in the newest's place: nothing
    assert detect.find_regressions([series(samples[:3] + [samples[2]],
                                           "bench_compile.Compile.time_compile")]) == []


def test_change_between_the_first_two_commits():
    levels = np.full(15, 1.2)
    levels[0] = 1.0
    (r,) = detect.find_regressions([series(lognormal(levels, 20, 0.015, 4))])
    assert (r.good_position, r.bad_position, r.edge) == (0, 1, "oldest")
    assert r.ratio == pytest.approx(1.2, rel=0.02)
    # A window cut from a longer history has no oldest edge.
    assert detect.find_regressions([series(lognormal(levels, 20, 0.015, 4))], window=14) == []


def test_a_one_value_newest_commit_uses_the_t_test_alone():
    rng = np.random.default_rng(8)
    values = 100 * np.exp(rng.normal(0, 0.01, 20))
    values[-1] *= 0.88
    (r,) = detect.find_regressions([series([[v] for v in values], "x.track_items",
                                           higher_is_better=True)])
    assert (r.bad_position, r.edge) == (19, "newest")


def test_edges_of_unchanged_series_raise_no_alert():
    assert detect.find_regressions(flat_panel(150, 9000)) == []


def test_edge_test_pvalue_is_calibrated():
    # Under no change the one-sided edge p-value, in the direction the commit moved, may not
    # fall below t more often than 2t (both directions); the rank-test stage makes it a
    # little conservative.
    rng = np.random.default_rng(0)
    pvalues = []
    for _ in range(2000):
        x = rng.normal(0, 1, (15, 5))
        noise = NoiseModel(float(np.var(x[:-1], axis=1, ddof=1).mean()), 14 * 4, 0.0, 13)
        tested = changepoints.edge_test([x[-1]], list(x[:-1]), noise)
        assert tested is not None  # 14 reference commits of 5 samples: the test is defined
        pvalues.append(tested[0])
    for level in (0.01, 0.05, 0.2):
        assert 0.5 * level <= float(np.mean(np.asarray(pvalues) <= level)) <= 2.2 * level


def test_commit_level_offsets_count_in_the_edge_test():
    # Every commit draws an offset 3x its samples' standard error. Counting only the
    # replicates, 125 of 200 newest commits test as changed at p <= 0.05; the edge test,
    # which estimates the offsets, about what alpha allows in either direction (10%).
    rng = np.random.default_rng(5)
    alarms = naive = 0
    for _ in range(200):
        x = rng.normal(0, 0.01, 30)[:, None] + rng.normal(0, 0.015, (30, 20))
        alarms += any(c.edge == "newest" for c in analyse_series(np.exp(x).tolist()).changes)
        replicates_only = NoiseModel(0.015**2, 29 * 19, 0.0, 0)
        tested = changepoints.edge_test([x[-1]], list(x[:-1]), replicates_only)
        assert tested is not None
        naive += tested[0] <= 0.05
    assert naive >= 100 and alarms <= 30


# --- what detection exposes for re-measurement -------------------------------------------

def test_candidates_carry_near_misses_plausible_and_uncertain_commits():
    samples, _ = synthetic.step_series(seed=3, steps=((30, 0.02),))
    found = detect.run_detection([series(samples)])
    (candidate,) = [c for c in found.candidates if abs(c.bad_position - 30) <= 3]
    assert candidate.p is not None and candidate.q is not None
    assert candidate.uncertain and all(c in candidate.series.commits
                                       for c in candidate.uncertain)
    assert candidate.bad_commit not in candidate.plausible


def test_a_bad_run_in_a_re_measured_commit_is_trimmed():
    rng = np.random.default_rng(2)
    values = [np.exp(rng.normal(0, 0.02, 10)) for _ in range(8)]
    values[3] = np.exp(rng.normal(0, 0.02, 30))
    values[3][:10] *= 1.6  # the first of three runs was slowed
    trimmed = outliers.trim_bursts(values, positive=True)
    assert [v.size for v in trimmed] == [10, 10, 10, 20, 10, 10, 10, 10]
    values[3][10:15] *= 1.6  # half the commit: not a minority, kept
    assert outliers.trim_bursts(values, positive=True)[3].size == 30
    values[5][:3] *= 1.6  # one run's own tail is the benchmark's noise: kept
    assert outliers.trim_bursts(values, positive=True)[5].size == 10
    one_each = [np.array([1.0]), np.array([5.0])]
    assert outliers.trim_bursts(one_each, positive=True) == one_each


def test_a_spiked_run_appended_to_good_runs_no_longer_moves_the_commit():
    levels = np.ones(20)
    base = lognormal(levels, 10, 0.02, 6)
    spiked = [list(s) for s in base]
    spiked[-1] = [x * 1.5 for x in spiked[-1]]  # the night's whole run was slowed
    assert any(c.edge == "newest" for c in analyse_series(spiked).changes)
    rng = np.random.default_rng(7)
    spiked[-1] += np.exp(rng.normal(0, 0.02, 20)).tolist()  # two clean runs more
    assert not any(c.edge for c in analyse_series(spiked).changes)


def test_edge_change_ratio_and_interval():
    levels = np.ones(10)
    levels[-1] = 1.25
    (c,) = [c for c in analyse_series(lognormal(levels, 20, 0.01, 1)).changes if c.edge]
    assert c.ratio == pytest.approx(1.25, rel=0.01)
    assert c.ci[0] < c.ratio < c.ci[1]
    assert math.isclose(c.after / c.before, c.ratio, rel_tol=1e-9)


# --- short segments, a noisy start (docs/detection.md, "Short segments") ------------------

# pybamm-bench's py3.12 series of `TimeSolveSEI` around PyBaMM #4020: 5 values, then 4 at
# a new level, one value per commit (no overlap, x1.28)
SEI = [0.41879, 0.42196, 0.41795, 0.42263, 0.42152, 0.5395, 0.53717, 0.538, 0.53828]


def one_value(values):
    return [(v,) for v in values]


def test_a_clean_5_4_step_is_judged_with_the_series_noise_not_the_rank_floor():
    (change,) = analyse_series(one_value(SEI)).changes
    assert (change.index, round(change.ratio, 2), change.awaiting) == (5, 1.28, False)
    # ranks alone: p >= 1/126
    assert change.pvalue is not None and change.pvalue < 1e-8 < 1 / math.comb(9, 4)
    assert 1.26 < change.ci[0] < change.ci[1] < 1.30


def test_two_commits_at_the_new_level_await_a_third():
    (change,) = analyse_series(one_value(SEI[:7])).changes
    assert (change.index, change.awaiting) == (5, True)
    assert not analyse_series(one_value(SEI[:8])).changes[0].awaiting
    found = detect.run_detection([series(one_value(SEI[:7]), name="suite.TimeSEI.time_solve")])
    assert found.regressions == [] and [r.bad_position for r in found.awaiting] == [5]
    assert [c.bad_position for c in found.candidates if c.awaiting] == [5]
    found = detect.run_detection([series(one_value(SEI[:8]), name="suite.TimeSEI.time_solve")])
    assert [r.bad_position for r in found.regressions] == [5] and found.awaiting == []


def test_a_level_of_two_commits_before_the_step_is_left_to_ranks():
    # the two oldest values are a benchmark's first runs, not a level the model may trust
    values = [0.46, 0.461, *SEI[5:], 0.5381, 0.5379, 0.5383]
    (change,) = analyse_series(one_value(values)).changes
    assert change.index == 2 and change.pvalue is not None
    assert change.pvalue >= 1 / math.comb(9, 2)


def noisy_start_series(step_at=24, seed=1):
    """pybamm-bench's py3.8 `TimeSolveLossActiveMaterial` shape: 6 wild values (4.2-6.7 s),
    18 calm ones at 4.15-4.21 s, then 61 at x1.14."""
    rng = np.random.default_rng(seed)
    start = [5.50, 6.56, 5.95, 5.89, 4.17, 6.66]
    calm = 4.18 * np.exp(rng.normal(0, 0.004, step_at - len(start)))
    after = 4.76 * np.exp(rng.normal(0, 0.004, 85 - step_at))
    return [*start, *calm.tolist(), *after.tolist()]


def test_a_noisy_start_is_screened_and_no_longer_weakens_the_step_after_it():
    values = noisy_start_series()
    means = np.log(values)
    assert outliers.noisy_start(means, outliers.commit_scale(means)) == 6
    changes = analyse_series(one_value(values)).changes
    assert [(c.index, round(c.ratio, 2)) for c in changes] == [(24, 1.14)]
    assert changes[0].pvalue is not None and changes[0].pvalue < 1e-9
    # the same calm series without a noisy start: nothing is screened
    calm = np.log(values[6:])
    assert outliers.noisy_start(calm, outliers.commit_scale(calm)) == 0


def test_a_real_step_and_one_transient_are_no_noisy_start():
    rng = np.random.default_rng(3)
    values = np.exp(rng.normal(0, 0.01, 40))
    values[2] *= 1.5  # a transient: two wild moves
    values[5:] *= 1.3  # a step: one
    means = np.log(values)
    assert outliers.noisy_start(means, outliers.commit_scale(means)) == 0


def test_a_change_beside_a_two_value_staircase_step_borrows_the_series_noise():
    # django-asv windows `FormClean`: 36.5-37.9 us, then 38.37 and 42.14, then 48.5-53.6
    rng = np.random.default_rng(0)
    values = [33.2, *rng.uniform(36.5, 37.9, 11), 38.37, 42.14, *rng.uniform(48.5, 53.6, 17)]
    changes = analyse_series(one_value(values)).changes
    steps = [c for c in changes if c.index in (12, 14)]
    assert [c.index for c in steps] == [12, 14]
    assert all(detect.excludes_no_change(c) for c in steps)
    assert steps[1].ci[1] < 1.5  # a two-value Welch interval reached x19


def test_a_two_commit_excursion_keeps_its_own_interval():
    # one CI job on another runner: two commits up, then back
    rng = np.random.default_rng(5)
    values = [*rng.uniform(0.99, 1.01, 15), 1.2, 1.21, *rng.uniform(0.99, 1.01, 15)]
    changes = analyse_series(one_value(values)).changes
    assert not any(detect.excludes_no_change(c) for c in changes)
