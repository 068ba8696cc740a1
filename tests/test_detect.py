import json
import math
from dataclasses import replace

import numpy as np
import pytest
import ruptures

from regressions import metrics
from regressions.detection import changepoints, detect
from regressions.detection.alerts import (
    ALERTS_VERSION,
    alerts_from_json,
    alerts_to_json,
    cluster_alerts,
    param_size,
)
from regressions.detection.changepoints import detect_changes, looks_deterministic
from regressions.errors import SpyreRegressError
from regressions.groundtruth import synthetic


def noisy(levels, spread=0.01):
    """Three samples per commit around each level; a tiny drift keeps commits distinct."""
    return [[level * (1 + spread * d + 1e-4 * i) for d in (-1, 0, 1)]
            for i, level in enumerate(levels)]


def series(samples, name="execute.Work.time_run", params="", higher_is_better=False,
           deterministic=None):
    commits = tuple(f"{i:040x}" for i in range(len(samples)))
    return detect.Series(machine="m", env="env", benchmark=name, params=params, commits=commits,
                         positions=tuple(range(len(samples))),
                         samples=tuple(None if s is None else tuple(s) for s in samples),
                         higher_is_better=higher_is_better, deterministic=deterministic)


# --- change points of one series ---------------------------------------------------------

def test_one_step_exact_index():
    changes = detect_changes(noisy([1.0] * 8 + [1.2] * 8))
    assert [c.index for c in changes] == [8]
    (c,) = changes
    assert c.ratio == pytest.approx(1.2, rel=1e-3)
    assert c.ci[0] < c.ratio < c.ci[1]
    assert c.pvalue is not None and c.pvalue < 1e-6
    assert c.before == pytest.approx(1.0, rel=1e-2) and c.after == pytest.approx(1.2, rel=1e-2)


def test_step_up_and_back_exact_indexes():
    changes = detect_changes(noisy([1.0] * 6 + [1.3] * 6 + [1.0] * 6))
    assert [c.index for c in changes] == [6, 12]
    assert changes[0].ratio > 1 > changes[1].ratio


def test_no_change_in_noise():
    for seed in range(5):
        samples, _ = synthetic.step_series(seed=seed, steps=())
        assert detect_changes(samples) == []


def test_panel_series_finds_both_steps():
    samples, true = synthetic.step_series(seed=2)
    changes = detect_changes(samples)
    assert [c.index for c in changes] == true == [37, 50]
    assert [round(c.ratio, 3) for c in changes] == [1.038, 1.016]


def test_single_change_location_agrees_with_ruptures_binseg():
    # With equal samples per commit the residual sum of squares over samples is the within-
    # commit sum plus n times the l2 cost of the commit means: the same best split.
    rng = np.random.default_rng(7)
    for _ in range(10):
        n, at = 40, int(rng.integers(5, 35))
        samples, _ = synthetic.step_series(seed=int(rng.integers(1000)), n_commits=n,
                                           steps=((at, 0.08),))
        means = np.log(np.asarray(samples)).mean(axis=1)
        expected = ruptures.Binseg(model="l2", min_size=2, jump=1).fit(means).predict(n_bkps=1)[0]
        strongest = min(detect_changes(samples), key=lambda c: c.pvalue or 0.0)
        assert strongest.index == expected == at


def test_deterministic_series_compared_exactly():
    changes = detect_changes([[5.0]] * 3 + [[7.0]] * 3 + [[5.0]])
    assert [(c.index, c.pvalue) for c in changes] == [(3, None), (6, None)]
    assert changes[0].ratio == pytest.approx(1.4)
    assert changes[0].ci == (changes[0].ratio, changes[0].ratio)
    # Any difference beyond the epsilon is real, however small.
    tiny = detect_changes([[1.0, 1.0]] * 4 + [[1.0 + 1e-6, 1.0 + 1e-6]] * 4)
    assert [c.index for c in tiny] == [4]
    assert detect_changes([[1.0]] * 4 + [[1.0 + 1e-12]] * 4) == []


def test_deterministic_zero_and_infinite_values():
    (c,) = detect_changes([[0.0]] * 3 + [[0.5]] * 3)
    assert c.index == 3 and c.ratio == math.inf
    (c,) = detect_changes([[1.0]] * 3 + [[math.inf]] * 3)
    assert c.index == 3 and c.ratio == math.inf
    with pytest.raises(ValueError, match="finite"):
        detect_changes([[1.0, 1.1], [math.inf, 1.0], [1.0, 1.2], [1.1, 1.0]], deterministic=False)
    with pytest.raises(ValueError, match="NaN"):
        detect_changes([[1.0], [math.nan]])


def test_looks_deterministic():
    assert looks_deterministic([[2.0, 2.0], [2.0, 2.0], [3.0, 3.0]])  # no spread
    assert looks_deterministic([[1.0, 1.2], [1.2, 1.0], [1.3, 1.1]])  # seeded replay
    assert looks_deterministic([[4.0], [4.0], [4.0], [5.0]])  # track_ values
    assert not looks_deterministic([[4.0], [4.1], [3.9], [4.05]])  # measured once per commit
    samples, _ = synthetic.step_series(seed=1, steps=())
    assert not looks_deterministic(samples)


def test_noisy_series_without_samples():
    # time_ without --record-samples: one value per commit, a t-test on the commit values.
    rng = np.random.default_rng(3)
    values = [[v] for v in np.r_[np.ones(12), np.full(12, 1.3)] * np.exp(rng.normal(0, 0.02, 24))]
    changes = detect_changes(values)
    assert [c.index for c in changes] == [12]
    assert changes[0].pvalue is not None and changes[0].pvalue < 1e-4


def test_short_noisy_series_has_no_changes():
    assert detect_changes(noisy([1.0, 2.0, 1.0])) == []
    assert detect_changes([]) == []


def test_between_commit_noise_is_not_a_change():
    # Each commit's samples share an offset (run-to-run noise) the replicates cannot see;
    # commit-level scatter 3x the within-commit noise must not read as steps.
    rng = np.random.default_rng(11)
    alarms = 0
    for _ in range(40):
        offsets = rng.normal(0, 0.02, 60)
        samples = np.exp(offsets[:, None] + rng.normal(0, 0.02, (60, 10))).tolist()
        alarms += bool(detect_changes(samples))
    assert alarms <= 8  # about 10% expected (alpha, either direction); 40 of 40 unguarded


# --- a run: floors, direction, FDR, failures ----------------------------------------------

def test_worsening_reads_alike_in_both_directions():
    slower = changepoints.Change(index=1, ratio=1.25, ci=(1.25, 1.25), pvalue=None, before=1.0,
                                 after=1.25)
    assert detect.worsening(slower, higher_is_better=False) == pytest.approx(0.25)
    assert detect.worsening(slower, higher_is_better=True) < 0
    less = changepoints.Change(index=1, ratio=0.8, ci=(0.8, 0.8), pvalue=None, before=1.0,
                               after=0.8)
    assert detect.worsening(less, higher_is_better=True) == pytest.approx(0.25)
    assert detect.worsening(less, higher_is_better=False) < 0


def test_higher_is_better_series():
    drop = series([[100.0]] * 3 + [[80.0]] * 3, name="execute.track_items", higher_is_better=True)
    rise = series([[100.0]] * 3 + [[120.0]] * 3, name="execute.track_other",
                  higher_is_better=True)
    found = detect.find_regressions([drop, rise])
    assert [(r.benchmark, r.bad_position, r.ratio) for r in found] == [
        ("execute.track_items", 3, pytest.approx(0.8))]


def test_only_regressions_are_reported():
    faster = series(noisy([1.0] * 6 + [0.7] * 6))
    assert detect.find_regressions([faster]) == []
    slower = series(noisy([1.0] * 6 + [1.3] * 6))
    (r,) = detect.find_regressions([slower])
    assert (r.kind, r.good_commit, r.bad_commit) == ("time", f"{5:040x}", f"{6:040x}")
    assert r.p is not None and r.q is not None and r.p <= r.q <= detect.FDR


def test_failures_are_their_own_kind_and_skip_the_timing_series():
    samples = noisy([1.0] * 8)
    samples[4] = None  # fails at commit 4, runs again at 5
    (r,) = detect.find_regressions([series(samples)])
    assert (r.kind, r.good_position, r.bad_position) == ("failure", 3, 4)
    assert r.ratio is None and r.p is None
    # Failing from the first commit on is not a transition.
    assert detect.find_regressions([series([None, None] + noisy([1.0] * 4))]) == []


def test_magnitude_floors():
    three_percent = [[1.0]] * 3 + [[1.03]] * 3
    assert len(detect.find_regressions([series(three_percent)])) == 1  # default floor 1%
    assert detect.find_regressions([series(three_percent)], floors=[("Work", 0.05)]) == []
    # Family floors: compile time 5%, first user override wins over it.
    compile_series = series(three_percent, name="bench_compile.CompileTotal.time_compile")
    assert detect.find_regressions([compile_series]) == []
    assert len(detect.find_regressions([compile_series], floors=[("compile", 0.02)])) == 1


def test_metrics_table():
    kind = {name: metrics.metric_for(name).name for name in (
        "bench_compile.CompileStage.time_stage", "compile.ColdCompile.time_stage",
        "numerics.StageError.track_max_rel", "bench_execute.ExecuteDeviceTime.time_device",
        "bench_execute.ExecuteHostTime.time_run", "bench_execute.track_items_per_second",
        "mod.peakmem_run", "mod.time_anything")}
    assert list(kind.values()) == ["compile_time", "compile_time", "numerics", "device_time",
                                   "host_time", "track", "memory", "time"]
    assert metrics.floor_for("x.time_a(1)", (("time_a", 0.3), ("x", 0.1))) == 0.3
    assert metrics.numerics_error("n.NumericsStageError.track_max_abs_error") == "max_abs"
    assert metrics.numerics_error("n.NumericsStageError.track_rmse_vs_eager_fp16") == \
        "rmse_ratio_fp16"
    assert metrics.numerics_error(
        "n.NumericsStageErrorDLFloat16.track_rmse_vs_eager_dlfloat16") == "rmse_ratio"
    assert set(metrics.PROBE_METRICS) == {"device_time", "host_time", "compile_time",
                                          "compile_blocked", "compile_children",
                                          "compile_work", "numerics"}
    # the parts of a compile's wall time: each its own metric, probed as compile time is
    parts = {name: metrics.metric_for(name) for name in (
        "bench_compile.CompileTotal.time_compile_blocked",
        "bench_compile.CompileStage.time_stage_children_cpu",
        "bench_compile.CompileWithBuild.time_compile")}
    assert [(m.name, m.wait_part, m.probe) for m in parts.values()] == [
        ("compile_blocked", "blocked", "compile_time"),
        ("compile_children", "children_cpu", "compile_time"),
        ("compile_time", "cpu", "compile_time")]
    assert not any(m.counts_instructions or m.refuted_without_more_work or m.knob_baseline
                   for m in parts.values() if m.wait_part != "cpu")
    assert metrics.metric_for("bench_compile_work.CompileWork.track_instructions").name == \
        "compile_work"
    with pytest.raises(KeyError, match="unknown metric 'latency'"):
        metrics.by_name("latency")


def test_fdr_across_the_run():
    # One real 5% step among 60 no-change series: the run reports it and nothing else.
    stepped, _ = synthetic.step_series(seed=5, steps=((30, 0.05),))
    flat = [series(synthetic.step_series(seed=100 + i, steps=())[0], params=f"({i})")
            for i in range(60)]
    found = detect.find_regressions([series(stepped, params="(999)"), *flat])
    assert [(r.params, r.bad_position) for r in found] == [("(999)", 30)]
    # A stricter rate can only remove discoveries.
    assert detect.find_regressions([series(stepped)], fdr=1e-300) == []


def test_declared_deterministic_flag_is_used():
    # One value per commit that never repeats: noisy by inference, and two commits a side
    # cannot confirm anything (Mann-Whitney's smallest p is 1/6); exact if declared so.
    values = [[1.0], [1.001], [1.5], [1.501]]
    assert detect.find_regressions([series(values)]) == []
    (r,) = detect.find_regressions([series(values, deterministic=True)])
    assert r.bad_position == 2 and r.p is None


# --- alerts ------------------------------------------------------------------------------

def regression(benchmark, params, good, bad, kind="time", baseline=1.0):
    return detect.Regression(machine="m", env="env", benchmark=benchmark, params=params, kind=kind,
                             good_commit=f"c{good}", bad_commit=f"c{bad}",
                             good_position=good, bad_position=bad, ratio=1.1, ci=(1.05, 1.15),
                             p=1e-4, q=1e-3, baseline=baseline)


def test_cluster_alerts_by_kind_and_overlapping_range():
    members = [
        regression("a.time_x", "(128, 'mlp')", 4, 5, baseline=2.0),
        regression("a.time_x", "(127, 'mlp')", 4, 5, baseline=3.0),
        regression("a.time_y", "", 3, 5),  # (3, 5] overlaps (4, 5]
        regression("a.time_x", "(1, 'mlp')", 4, 5, kind="numerics"),
        regression("a.time_x", "(16, 'mlp')", 7, 8),
    ]
    alerts = cluster_alerts(members)
    assert [(a.kind, a.good_commit, a.bad_commit, len(a.members)) for a in alerts] == [
        ("numerics", "c4", "c5", 1), ("time", "c4", "c5", 3), ("time", "c7", "c8", 1)]
    # The probe: the non-parametrised member has product 1, the smallest.
    assert alerts[1].probe.benchmark == "a.time_y"


def test_probe_prefers_small_shapes_then_small_baselines():
    members = [regression("b.time_x", "(128, 'mlp')", 1, 2, baseline=1.0),
               regression("b.time_x", "(127, 'mlp')", 1, 2, baseline=5.0),
               regression("b.time_z", "(127, 'mlp')", 1, 2, baseline=4.0)]
    (alert,) = cluster_alerts(members)
    assert (alert.probe.benchmark, alert.probe.params) == ("b.time_z", "(127, 'mlp')")


def test_a_faint_member_is_not_the_probe_however_narrow():
    """The full-suite night's device-time alert: three series at seq 127 moved x1.11-1.76 at
    the work-division commit, and linear at seq 1 moved x1.014 by noise; the probe is the
    strongest of the narrowest that moved at least half as far (in log ratio)."""
    def member(params, ratio):
        return replace(regression("e.time_device", params, 13, 14), ratio=ratio)

    members = [member("('attention', 127)", 1.110), member("('linear', 1)", 1.0136),
               member("('linear', 127)", 1.7596), member("('mlp', 127)", 1.7553)]
    (alert,) = cluster_alerts(members)
    assert alert.probe.params == "('linear', 127)"
    # beside attention alone (x1.110) the noise step is still under half its log ratio
    (weaker,) = cluster_alerts(members[:2])
    assert weaker.probe.params == "('attention', 127)"
    # members that moved alike: the narrowest, as before
    alike = [member("('linear', 1)", 1.10), member("('linear', 127)", 1.12)]
    assert cluster_alerts(alike)[0].probe.params == "('linear', 1)"
    # a member whose ratio is not finite (an error from zero) stays eligible
    infinite = member("('softmax', 1)", math.inf)
    assert cluster_alerts([*members, infinite])[0].probe.params == "('softmax', 1)"


def test_param_size():
    assert param_size("(127, 'mlp')") == 127
    assert param_size("((1024, 4096), 'fp16')") == 1024 * 4096
    assert param_size("") == 1
    assert param_size("(<function f at 0x1>, 8)") == 8 * 1  # not a literal: numbers
    assert param_size("(True, 3)") == 3


def test_alerts_to_json_and_back():
    (alert,) = cluster_alerts([regression("a.time_x", "(2)", 0, 1)])
    doc = alerts_to_json([alert])
    assert doc["version"] == ALERTS_VERSION == 5
    (entry,) = doc["alerts"]
    assert set(entry) == {"good_commit", "bad_commit", "kind", "members", "probe"}
    (member,) = entry["members"]
    assert {k: member[k] for k in ("benchmark", "params", "machine", "env", "ratio", "ci", "p",
                                   "q")} == {
        "benchmark": "a.time_x", "params": "(2)", "machine": "m", "env": "env", "ratio": 1.1,
        "ci": [1.05, 1.15], "p": 1e-4, "q": 1e-3}
    assert alerts_from_json(json.loads(json.dumps(doc)), "a.json") == [alert]
    infinite = detect.Regression(machine="m", env="e", benchmark="n.track_e", params="",
                                 kind="numerics", good_commit="a", bad_commit="b", good_position=0,
                                 bad_position=1,
                                 ratio=math.inf, ci=(math.inf, math.inf), p=None, q=None,
                                 baseline=0.0)
    member = alerts_to_json(cluster_alerts([infinite]))["alerts"][0]["members"][0]
    assert member["ratio"] is None and member["ci"] == [None, None] and member["p"] is None


def test_an_alerts_file_of_version_1_is_migrated_and_others_refused():
    old = {"version": 1, "alerts": [{
        "good_commit": "a", "bad_commit": "b", "kind": "compile",
        "members": [{"benchmark": "bench_compile.CompileTotal.time_compile",
                     "params": "('mlp', 127)", "machine": "m", "env": "e", "ratio": 1.2,
                     "ci": [1.1, 1.3], "p": 0.001, "q": 0.01}],
        "probe": {"benchmark": "bench_compile.CompileTotal.time_compile",
                  "params": "('mlp', 127)"}}]}
    (alert,) = alerts_from_json(old, "old.json")
    assert alert.kind == "compile_time" and alert.probe.ratio == 1.2
    with pytest.raises(SpyreRegressError, match="not an alerts file"):
        alerts_from_json({"version": 2, "regressions": []}, "summary.json")
    with pytest.raises(SpyreRegressError, match="format version 9"):
        alerts_from_json({"version": 9, "alerts": []}, "new.json")


# --- the ground-truth generators ---------------------------------------------------------

def test_step_series_and_panel():
    samples, true = synthetic.step_series(seed=0)
    assert true == [37, 50] and len(samples) == 60 and len(samples[0]) == 10
    levels = np.exp(np.log(np.asarray(samples)).mean(axis=1))
    assert levels[40:48].mean() / levels[:35].mean() == pytest.approx(1.04, abs=0.01)
    assert synthetic.step_panel(2, seed=3)[1][0] == synthetic.step_series(seed=4)[0]
    assert synthetic.step_panel(1, steps=())[0][1] == []


def test_precision_recall():
    assert synthetic.precision_recall([37, 50], [37, 51], margin=1) == (1.0, 1.0)
    assert synthetic.precision_recall([37, 50], [36, 52, 10], margin=1) == (pytest.approx(1 / 3),
                                                                             0.5)
    # One found point matches one true point only.
    assert synthetic.precision_recall([10, 11], [10], margin=1) == (1.0, 0.5)
    assert synthetic.precision_recall([], [], margin=1) == (1.0, 1.0)
    assert synthetic.precision_recall([], [5], margin=1) == (0.0, 1.0)


def excursion_series(name, params, factors, seed, noise):
    rng = np.random.default_rng(seed)
    commits = tuple(f"{i:040x}" for i in range(len(factors)))
    return detect.Series(machine="m", env="env", benchmark=name, params=params, commits=commits,
                         positions=tuple(range(len(factors))),
                         samples=tuple(tuple(float(f * np.exp(x)) for x in rng.normal(0, noise, 20))
                                       for f in factors))


def test_what_stays_of_an_excursion_most_series_returned_from_is_part_of_it():
    # The commit before the newest derated a model and the next commit reverted it: most
    # series jump x1.2 for that one commit; on one the excursion was +2% and the newest
    # commit sits 0.5% above the old level, so that series alone reads as a +1.25% step.
    name = "bench_execute.ExecuteDeviceTime.time_device"
    faint = excursion_series(name, "('rmsnorm', 1)", [1.0] * 28 + [1.02, 1.005], 3, noise=0.015)
    alone = detect.run_detection([faint])
    (step,) = alone.regressions
    assert step.bad_position == 28 and step.ratio == pytest.approx(1.0125, abs=0.003)
    assert step.ci is not None and step.ci[0] > 1  # confirmed alone: only the whole run tells
    spikes = [excursion_series(name, f"('mlp', {s})", [1.0] * 28 + [1.2, 1.0], s, noise=0.015)
              for s in range(1, 10)]
    found = detect.run_detection([faint, *spikes])
    assert found.regressions == []
    assert sorted((t.params, t.position) for t in found.transients)[0] == ("('mlp', 1)", 28)
    (kept,) = [t for t in found.transients if t.params == "('rmsnorm', 1)"]
    assert kept.position == 28 and kept.ratio == pytest.approx(1.02, abs=0.008)
    assert not any(c.reported for c in found.candidates)
    # a step that holds beyond its floor after the excursion is a step of its own
    held = excursion_series(name, "('rmsnorm', 1)", [1.0] * 28 + [1.03, 1.02], 3, noise=0.015)
    assert [r.params for r in detect.run_detection([held, *spikes]).regressions] == \
        ["('rmsnorm', 1)"]
