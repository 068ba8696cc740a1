"""Commit bisection on synthetic histories: noise, skips, failures, deterministic metrics."""

import json
import math

import pytest

from regressions.bisection.commits import BisectResult, Measurement, bisect_commits
from regressions.codec import from_json, to_json
from regressions.errors import SpyreRegressError
from regressions.groundtruth.bisection_histories import bisection_quality, step_history


def test_meets_the_quality_target_on_five_percent_steps():
    """The issue's target: >= 95% right over 40 seeded 32-commit histories, on average at
    most ceil(log2 32) + 2 = 7 commits measured; skipped commits never derail it."""
    clean = bisection_quality(40, 32, 0.05, 0.03, untestable=0)
    assert clean["right"] >= 0.95 and clean["mean_commits_measured"] <= 7
    skips = bisection_quality(40, 32, 0.05, 0.03, untestable=3)
    assert skips["bracketed"] >= 0.95


@pytest.mark.parametrize("seed", range(6))
def test_finds_a_ten_percent_step_under_three_percent_noise(seed):
    history = step_history(32, 5 + 4 * seed, 0.10, seed=seed)
    measure, _ = history.measure_factory(0.03, 10, seed)
    result = bisect_commits(history.commits, measure)
    assert result.culprit == history.culprit
    assert result.commits_measured <= 8
    assert result.steps and all(s.verdict in ("good", "bad", "unknown", "skip") for s in
                                result.steps)


def test_untestable_commits_are_skipped_not_blamed():
    history = step_history(16, 9, 0.10, untestable=4, seed=3)
    measure, _ = history.measure_factory(0.02, 10, 1)
    result = bisect_commits(history.commits, measure)
    skipped = {s.commit for s in result.steps if s.verdict == "skip"}
    assert skipped <= history.untestable
    assert result.culprit == history.culprit or (
        history.culprit in result.candidates
        and set(result.candidates) - {history.culprit} <= history.untestable)


@pytest.mark.parametrize("length", [2, 4, 9, 20])
def test_deterministic_metrics_take_one_measurement_per_commit(length):
    """Every position of the step, and no step: the good end plus ceil(log2(N + 1)) builds
    for N commits after it, the bad end measured only when the search reaches it; counts
    that wobble within the metric's tolerance (instruction counts, 0.5%) are the same."""
    commits = [f"{i:040d}" for i in range(length)]
    for first_bad in [*range(1, length), None]:
        calls: list = []

        def measure(commit, first_bad=first_bad, calls=calls):
            calls.append(commit)
            index = commits.index(commit)
            value = 1.04e6 if first_bad is not None and index >= first_bad else 1e6
            wobble = 1 + 0.001 * (-1) ** index  # 0.1% apart, within the tolerance
            return Measurement(commit=commit, status="ok", samples=(value * wobble,),
                               deterministic=True,
                               tolerance=0.005)

        result = bisect_commits(commits, measure)
        assert len(calls) == len(set(calls)) == result.commits_measured
        assert result.commits_measured <= 1 + math.ceil(math.log2(length))
        if first_bad is None:
            assert not result.reproduced and result.culprit is None
        else:
            assert result.reproduced and result.culprit == commits[first_bad]
            parent = commits[first_bad - 1]
            assert parent in result.samples and commits[first_bad] in result.samples


def test_a_deterministic_series_that_starts_failing_is_a_failure_bisection():
    commits = [f"{i:040d}" for i in range(10)]

    def measure(commit):
        if commits.index(commit) >= 6:
            return Measurement(commit=commit, status="failed", detail="RuntimeError")
        return Measurement(commit=commit, status="ok", samples=(1e6,), deterministic=True)

    result = bisect_commits(commits, measure)
    assert result.kind == "failure" and result.culprit == commits[6]


def test_a_benchmark_that_starts_failing_is_a_failure_bisection():
    history = step_history(12, 7, 0.0, seed=1)
    history.failing_from = 7
    measure, _ = history.measure_factory(0.02, 10, 2)
    result = bisect_commits(history.commits, measure)
    assert result.kind == "failure"
    assert result.culprit == history.commits[7]


def test_no_step_is_not_reproduced():
    history = step_history(10, 5, 0.0, seed=4)
    measure, _ = history.measure_factory(0.03, 10, 5)
    result = bisect_commits(history.commits, measure)
    assert not result.reproduced and result.culprit is None


def test_a_good_commit_that_cannot_be_measured_is_a_user_error():
    commits = ["a" * 40, "b" * 40]
    with pytest.raises(SpyreRegressError, match="good commit"):
        bisect_commits(commits,
                       lambda c: Measurement(commit=c, status="untestable", detail="no module"))


def test_result_json_carries_the_documented_fields():
    history = step_history(8, 3, 0.2, seed=2)
    measure, _ = history.measure_factory(0.01, 10, 3)
    result = bisect_commits(history.commits, measure)
    data = json.loads(json.dumps(to_json(result)))
    assert {"culprit", "commits_in_range", "commits_measured", "steps", "samples"} <= set(data)
    assert data["commits_in_range"] == 7
    assert set(data["samples"]) == {s["commit"] for s in data["steps"]} | {history.commits[0]}
    assert from_json(BisectResult, data) == result
