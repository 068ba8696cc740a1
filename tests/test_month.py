"""The month generator and a short simulated run of the nightly on it."""

import math

import numpy as np
import pytest

from regressions.groundtruth import month, planted, simulation


def test_the_suite_has_the_real_suite_shape():
    specs = month.suite()
    assert len(specs) == 266
    families = {f: sum(s.family == f for s in specs) for f in month.NOISE}
    assert families == {"device": 35, "host": 14, "compile": 126, "numerics": 84,
                        "throughput": 7}
    assert month.select(specs, month.DEVICE, workload="mlp", seq=(1, 128)) == (
        month.select(specs, month.DEVICE, workload="mlp", seq=1)
        + month.select(specs, month.DEVICE, workload="mlp", seq=128))
    assert len(month.select(specs, month.STAGE, stage="decompose")) == 14


def test_branch_levels_failures_outliers_and_noise():
    specs = month.suite()
    device = month.select(specs, month.DEVICE, workload="mlp", seq=128)[0]
    numerics = month.select(specs, month.NUMERICS[0], workload="mlp", seq=128,
                            stage="kernel")[0]
    events = [month.Event(label="step", kind="step", commit=5, targets=(device, numerics),
                          factor=1.2),
              month.Event(label="glitch", kind="outlier", commit=3, targets=(device,), factor=1.5),
              month.Event(label="fail", kind="breaks", commit=8, targets=(device,)),
              month.Event(label="drift", kind="drift", commit=2, targets=(numerics,), factor=1.21,
                          length=2)]
    branch = month.Branch(seed=1, suite=specs, commits=[str(i) for i in range(10)], nights=[(0, 9)],
                          events=events, stride=3)
    assert branch.level(device, 4) == pytest.approx(specs[device].level)
    assert branch.level(device, 5) == pytest.approx(1.2 * specs[device].level)
    assert branch.level(numerics, 2) == pytest.approx(1.1 * specs[numerics].level)
    assert branch.level(numerics, 6) == pytest.approx(1.21 * 1.2 * specs[numerics].level)
    first = np.asarray(branch.measure(device, 3))
    second = np.asarray(branch.measure(device, 3))
    assert first.size == 20 and np.exp(np.log(first / second).mean()) == pytest.approx(1.5,
                                                                                       rel=0.03)
    assert branch.measure(device, 8) is None
    assert branch.measure(numerics, 6) == (pytest.approx(1.452 * specs[numerics].level),)
    assert np.log(np.asarray(branch.measure(device, 0))).std() == pytest.approx(0.015, rel=0.4)
    # Seeded: the same call order gives the same samples.
    again = month.Branch(seed=1, suite=specs, commits=branch.commits, nights=[(0, 9)],
                         events=events, stride=3)
    assert again.measure(device, 3) == tuple(first)


def test_planted_placements():
    branch = planted.build_branch(planted.TRAINING, 5)
    events = {e.label: e for e in branch.events}
    newest = {last for _, last in branch.nights}
    assert events["decode x2"].commit in newest
    assert events["mlp +10%"].commit not in newest
    first, second = branch.benchmarked(0)[:2]
    assert first < events["embedding +8%"].commit <= second
    pair = events["attention +6%"].commit, events["attention +4%"].commit
    marks = branch.benchmarked(branch.night_of(pair[0]))
    assert pair[1] == pair[0] + 1 and any(a < pair[0] and pair[1] <= b
                                          for a, b in zip(marks, marks[1:], strict=False))
    for label in ("mlp glitch x1.4", "attention compile glitch x1.5"):
        assert events[label].commit not in newest
        assert events[label].commit in branch.benchmarked(branch.night_of(events[label].commit))
    assert events["decompose total +10%"].commit == events["decompose x1.5"].commit
    assert len(branch.commits) > 200


SHORT = planted.MonthConfig(name="short", places={
    "decode x2": "newest", "softmax +3%": "interior", "attention compile +20%": "newest",
    "fp16 accumulate x2": "interior", "embedding fails": "interior",
    "attention compile glitch x1.5": "outlier:attention compile +20%:1",
}, nights=9, initial_commits=12, commits_per_night=8.0)


@pytest.mark.slow  # over 4 s: out of the quick loop, still in CI
@pytest.mark.parametrize("seed", [0, 1])
def test_a_short_month_reports_every_planted_regression_the_night_it_lands(seed):
    sim = simulation.simulate(planted.build_branch(SHORT, seed))
    score = simulation.score(sim)
    assert [(p.label, p.latency) for p in score.planted] == [
        (p.label, 0) for p in sorted(score.planted, key=lambda p: p.commit)]
    assert {p.label for p in score.planted} == {
        "decode x2", "softmax +3%", "attention compile +20%", "fp16 accumulate x2",
        "embedding fails"}
    assert score.false_reports == [] and score.outlier_blames == 0
    assert score.over_budget_nights == 0 and score.spent <= score.budget
    assert math.isclose(score.budget, sum(n.budget for n in sim.nights))
    reported = [r for r in sim.records if r.status == "reported"]
    assert all(r.evidence is not None and r.culprit for r in reported)
