"""Knob bisection's judgement (regressions/bisection/knobs.py): what counts as a workaround."""

import pytest

from regressions.bisection import knobs
from regressions.probing.protocol import KnobsAnswer, KnobTrialAnswer, ScopedAnswer

X4 = knobs.Regression(good=1.0, bad=4.0)  # the stage probe: the bad build x4 the good one


def answer(baseline: float, **trials: float) -> KnobsAnswer:
    return KnobsAnswer("ok", baseline, tuple(
        KnobTrialAnswer(name, "decompose", False, metric) for name, metric in trials.items()))


def test_a_knob_that_takes_the_bad_build_back_to_the_good_level_restores_it():
    found = knobs.restoring(answer(4.0, cse=3.4, fusion=1.2), X4)
    assert found is not None and found.trial.knob == "fusion"
    assert found.recovered == pytest.approx(2.8 / 3.0)


def test_a_small_saving_does_not_restore_a_regression_measured_at_another_load():
    # the knob probe ran on a machine twice as loaded as the stage probe's: the bad build
    # measures 8, and a knob that saves 15% of it recovers 20% of the regression, not the
    # 99% that comparing with the stage probe's absolute good time (1.0) would say
    found = knobs.restoring(answer(8.0, cse=6.8), X4)
    assert found is None
    assert X4.recovered(8.0, 6.8) == pytest.approx(0.2)


def test_at_the_same_level_the_ratio_and_the_absolute_reading_agree():
    deterministic = knobs.Regression(good=10.0, bad=25.0)
    assert deterministic.recovered(25.0, 13.0) == pytest.approx((25.0 - 13.0) / (25.0 - 10.0))


def test_no_regression_means_no_workaround():
    assert knobs.restoring(answer(4.0, cse=1.0), knobs.Regression(4.0, 4.0)) is None
    assert knobs.restoring(answer(4.0), X4) is None


def test_the_decisive_application_is_judged_against_the_scoped_probes_own_level():
    scoped = KnobsAnswer("ok", 0.0, (), (
        ScopedAnswer(0, 8.0, ()),
        ScopedAnswer(1, 7.0, ("decision cse#1",)),
        ScopedAnswer(2, 2.4, ("decision cse#1", "decision cse#2")),
    ))
    # at the scoped probe's level (8.0), limit 1 recovers 1/6 and limit 2 recovers 93%;
    # measured against the knob probe's bad level (4.0), limit 1 would already pass
    assert knobs.decisive_application(scoped, 4.0, X4) == "decision cse#2"
