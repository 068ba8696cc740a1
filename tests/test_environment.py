"""Environment alerts (regressions/detection/environment.py): a runner change is one alert
for the machine, not a regression per series; a real step at the same commit stays one; the
series the runner cannot move decide against it; recorded machine parameters name it."""

import math
from dataclasses import replace

import numpy as np
import pytest

from regressions.detection import detect, environment
from regressions.detection.alerts import cluster_alerts
from regressions.detection.environment import describe_settings

COMMITS = 30
SHIFT_AT = 20
# Five clock benchmarks (compile and host wall time: runner-bound) x six params each.
CLOCKS = ("bench_compile.CompileStage.time_stage", "bench_compile.CompileTotal.time_compile",
          "bench_execute.ExecuteHostTime.time_run", "bench_other.Load.time_load",
          "bench_other.Save.time_save")
DEVICE = "bench_execute.ExecuteDeviceTime.time_device"  # the simulator's clock


def samples(rng, factors, noise=0.02, n=10):
    """Per commit, `n` lognormal samples around the level `factors[commit]`."""
    return tuple(tuple(float(f * math.exp(x)) for x in rng.normal(0, noise, n))
                 for f in factors)


def make(benchmark, params, factors, rng, settings=()):
    commits = tuple(f"{i:040x}" for i in range(COMMITS))
    return detect.Series(machine="runner", env="env", benchmark=benchmark, params=params,
                         commits=commits, positions=tuple(range(COMMITS)),
                         samples=samples(rng, factors), settings=settings)


def levels(at=SHIFT_AT, factor=1.0):
    return [1.0 if i < at else factor for i in range(COMMITS)]


def suite(seed=0, shift=1.25, moved=0.8, device_factor=1.0, step=None, settings=()):
    """30 clock series, `moved` of them x`shift` (+-1% per series) from SHIFT_AT on; 10
    device-time series, x`device_factor` there; `step`: (series index, factor) of a real
    step at the same commit on top of the shift."""
    rng = np.random.default_rng(seed)
    out = []
    clocks = [(b, f"({p})") for b in CLOCKS for p in range(6)]
    shifted = set(rng.permutation(len(clocks))[:round(moved * len(clocks))].tolist())
    for i, (benchmark, params) in enumerate(clocks):
        factor = shift * math.exp(rng.normal(0, 0.01)) if i in shifted else 1.0
        if step is not None and step[0] == i:
            factor *= step[1]
        out.append(make(benchmark, params, levels(factor=factor), rng, settings=settings))
    out += [make(DEVICE, f"({p})", levels(factor=device_factor), rng, settings=settings)
            for p in range(10)]
    return out, sorted(shifted)


def test_a_runner_change_moving_most_clock_series_is_one_environment_alert():
    series, shifted = suite()
    found = detect.run_detection(series)
    assert found.regressions == [] and cluster_alerts(found.regressions) == []
    (alert,) = found.environment
    assert (alert.cause, alert.direction, alert.bad_position) == ("shared", "worse", SHIFT_AT)
    assert alert.detected == len(shifted) == 24 and alert.measured == 30
    # the level of every shifted series moved up, and by chance some of the other six
    assert 24 <= alert.moved <= 30 and alert.share >= 0.8
    assert alert.median_ratio == pytest.approx(1.25, rel=0.02)
    assert (alert.still_moved, alert.still_measured) == (0, 10)  # device time did not move
    assert len(alert.members) == 24  # the regressions it stands for
    assert not any(c.reported for c in found.candidates)
    assert all(c.environment for c in found.candidates if c.bad_position == SHIFT_AT)
    assert "pin the runner" in alert.describe() and "nothing recorded" in alert.describe()


def test_a_real_step_at_the_runner_change_stays_a_regression():
    series, shifted = suite(step=(3, 1.5))
    assert 3 in shifted
    found = detect.run_detection(series)
    (alert,) = found.environment
    assert [r.name for r in found.regressions] == [series[3].name]
    assert found.regressions[0].ratio == pytest.approx(1.25 * 1.5, rel=0.03)
    assert len(alert.members) == 23
    # one unshifted series stepping by the shift's own size alone is the machine's too: the
    # residual test asks for more than the shift
    unshifted = next(i for i in range(30) if i not in shifted)
    found = detect.run_detection(suite(step=(unshifted, 1.25))[0])
    assert found.regressions == [] and len(found.environment[0].members) == 25


def test_when_the_series_the_runner_cannot_move_move_too_the_code_did_it():
    series, _ = suite(device_factor=1.25)
    found = detect.run_detection(series)
    assert found.environment == []
    assert len({r.name for r in found.regressions}) == 34  # 24 clocks and the 10 devices


def test_a_few_series_or_one_benchmark_moving_is_not_the_machine():
    found = detect.run_detection(suite(moved=0.2)[0])  # 6 of 30
    assert found.environment == [] and len(found.regressions) == 6
    rng = np.random.default_rng(5)
    one = [make(CLOCKS[0], f"({p})", levels(factor=1.25), rng) for p in range(12)]
    found = detect.run_detection(one)
    assert found.environment == [] and len(found.regressions) == 12


def test_a_faster_runner_is_an_environment_alert_with_no_regression_to_explain():
    found = detect.run_detection(suite(shift=0.8)[0])
    (alert,) = found.environment
    assert alert.direction == "better" and alert.members == () and found.regressions == []
    mirrored = detect.run_detection([replace(s, higher_is_better=True)
                                     for s in suite(shift=0.8)[0]])
    assert len(mirrored.environment[0].members) == 24
    assert not [r for r in mirrored.regressions if r.benchmark in CLOCKS]


def test_recorded_machine_parameters_that_change_name_the_change():
    old = describe_settings({"machine": "runner", "cpu": "Xeon 8272CL", "ram": "7GB"})
    new = describe_settings({"machine": "runner", "cpu": "EPYC 7763", "ram": "7GB"})
    settings = tuple(old if i < SHIFT_AT else new for i in range(COMMITS))
    # only a fifth of the series move: too few to be shared, but the files say what changed
    series, shifted = suite(moved=0.2, settings=settings)
    found = detect.run_detection(series)
    (alert,) = found.environment
    assert alert.cause == "recorded" and alert.changed == (("cpu", "Xeon 8272CL",
                                                            "EPYC 7763"),)
    assert found.regressions == [] and len(alert.members) == len(shifted) == 6
    assert "cpu 'Xeon 8272CL' -> 'EPYC 7763'" in alert.describe()


def test_recorded_changes_compare_each_environment_with_itself():
    a = {"env-a": {0: ("c0", "python=3.8"), 1: ("c1", "python=3.8\ncpu=x")},
         "env-b": {0: ("c0", "python=3.12"), 1: ("c1", "python=3.12\ncpu=x")}}
    changes = environment.recorded_changes({("m", env): v for env, v in a.items()})
    assert changes == {("m", "env-a", 1): (("cpu", "", "x"),),
                       ("m", "env-b", 1): (("cpu", "", "x"),)}


def test_every_reported_member_excludes_no_change_on_its_own():
    c = detect.Change(index=5, ratio=1.018, ci=(0.988, 1.049), pvalue=0.01, before=1.0, after=1.018)
    assert not detect.excludes_no_change(c)
    assert detect.excludes_no_change(detect.Change(index=5, ratio=1.018, ci=(1.006, 1.030),
                                                   pvalue=0.01, before=1.0, after=1.018))
    assert detect.excludes_no_change(detect.Change(index=5, ratio=0.9, ci=(0.85, 0.95), pvalue=0.01,
                                                   before=1.0, after=0.9))
    rng = np.random.default_rng(11)
    # 5% noise, 3 samples a commit, a 2% step: every member that is reported excludes 1
    series = [detect.Series(machine="m", env="e", benchmark="b.B.time_x", params=f"({i})",
                            commits=tuple(f"{c:040x}" for c in range(40)),
                            positions=tuple(range(40)),
                            samples=samples(rng, levels(25, 1.02) + [1.02] * 10, noise=0.05, n=3))
              for i in range(40)]
    for r in detect.run_detection(series).regressions:
        assert r.ci is not None and r.ci[0] > 1


def test_the_environments_of_one_job_are_counted_together():
    """Two environments benchmarked in one job (one runner): each moved too few series for a
    wide cluster alone, together they are one; each environment has its alert and members."""
    series, shifted = suite(moved=1.0)
    clocks = [s for s in series if s.benchmark in CLOCKS][:12]  # two benchmarks, six params
    split = [replace(s, env="py3.8" if i % 2 else "py3.9") for i, s in enumerate(clocks)]
    alone = detect.run_detection([s for s in split if s.env == "py3.8"])
    assert alone.environment == [] and len(alone.regressions) == 6  # 6 < ENV_MIN_SERIES
    third = [replace(s, env="py3.8") for s in series if s.benchmark == CLOCKS[2]][:2]
    found = detect.run_detection(split + third)  # py3.9 alone: 6 series of two benchmarks
    assert found.regressions == []
    assert sorted(a.env for a in found.environment) == ["py3.8", "py3.9"]
    assert all(a.envs == ("py3.8", "py3.9") and a.measured == 14 for a in found.environment)
    assert sorted(len(a.members) for a in found.environment) == [6, 8]
    assert "counted with py3.9, measured in the same job" in next(
        a for a in found.environment if a.env == "py3.8").describe()


def excursion_suite(seed=0, moved=12, back_at=SHIFT_AT + 3, device_factor=1.0):
    """30 clock series, `moved` of them x1.25 from SHIFT_AT until `back_at` (then as before);
    10 device-time series, x`device_factor` over the same commits."""
    rng = np.random.default_rng(seed)
    clocks = [(b, f"({p})") for b in CLOCKS for p in range(6)]
    chosen = set(rng.permutation(len(clocks))[:moved].tolist())
    window = [1.0 if SHIFT_AT <= i < back_at else 0.0 for i in range(COMMITS)]
    out = [make(b, p, [1.0 + 0.25 * w * (i in chosen) for w in window], rng)
           for i, (b, p) in enumerate(clocks)]
    out += [make(DEVICE, f"({p})", [1.0 + (device_factor - 1) * w for w in window], rng)
            for p in range(10)]
    return out, chosen


def test_a_wide_change_that_changes_back_together_is_the_machines_excursion():
    series, chosen = excursion_suite()
    found = detect.run_detection(series)
    assert found.regressions == []
    # both legs: worse at the change (its 12 regressions explained), better at the return
    alert, back = found.environment
    assert (alert.cause, alert.direction, alert.bad_position) == ("returned", "worse", SHIFT_AT)
    assert (back.direction, back.bad_position) == ("better", SHIFT_AT + 3)
    assert alert.share < environment.ENV_SHARE  # not a shared change: 12 of 30 moved
    assert alert.back == series[0].commits[SHIFT_AT + 3] and len(alert.members) == 12
    assert back.members == ()
    assert f"change back together at {alert.back[:8]}" in alert.describe()
    # the same change that stays is 12 regressions; one the device clock shares is the code's
    staying = detect.run_detection(excursion_suite(back_at=COMMITS)[0])
    assert staying.environment == [] and len(staying.regressions) == 12
    code = detect.run_detection(excursion_suite(device_factor=1.25)[0])
    # (a three-commit excursion at 2% noise: a series or two may read it otherwise)
    assert code.environment == [] and sum(r.benchmark == DEVICE for r in code.regressions) >= 8
    assert sum(r.benchmark != DEVICE for r in code.regressions) >= 10
