"""The investigation's measurement as the lifecycle reads it (regressions/investigation/
evidence.py): here, whether the branch's head still shows a located regression."""

import numpy as np

from regressions.investigation import evidence


def samples(level, seed, n=100, noise=0.015):
    return (level * np.exp(np.random.default_rng(seed).normal(0, noise, n))).tolist()


def test_a_head_back_at_the_good_level_is_fixed():
    good, bad = samples(1.0, 1), samples(1.2, 2)
    check = evidence.head_check(good, bad, samples(1.0, 3), "h" * 40, floor=0.01,
                                higher_is_better=False)
    assert check.fixed and abs(check.ratio - 1) < 0.01 and check.against_bad_ci[1] < 1
    assert check.samples == 100 and "of the good build" in check.describe()


def test_a_head_still_at_the_bad_level_or_halfway_is_not_fixed():
    good, bad = samples(1.0, 1), samples(1.2, 2)
    still = evidence.head_check(good, bad, samples(1.2, 4), "h" * 40, floor=0.01,
                                higher_is_better=False)
    assert not still.fixed and abs(still.against_bad - 1) < 0.01
    halfway = evidence.head_check(good, bad, samples(1.1, 5), "h" * 40, floor=0.01,
                                  higher_is_better=False)
    assert not halfway.fixed  # better than the bad build, still regressed against the good


def test_higher_is_better_reads_the_other_way():
    good, bad = samples(1000, 1), samples(800, 2)  # throughput fell
    assert evidence.head_check(good, bad, samples(1000, 6), "h" * 40, floor=0.01,
                               higher_is_better=True).fixed
    assert not evidence.head_check(good, bad, samples(800, 7), "h" * 40, floor=0.01,
                                   higher_is_better=True).fixed


def test_a_deterministic_value_is_compared_exactly():
    good, bad = [2.0] * 3, [4.0] * 3
    assert evidence.head_check(good, bad, [2.0] * 3, "h" * 40, floor=0.05,
                               higher_is_better=False).fixed
    assert not evidence.head_check(good, bad, [4.0] * 3, "h" * 40, floor=0.05,
                                   higher_is_better=False).fixed
