"""Knob bisection: inside the bad build, which compiler decision restores the metric?

The knob probe measures the metric at the build's defaults and under every other value of
every knob (`KNOBS`, a decision of one stage each), as CompilerBisector's `ConfigChange`
entries toggle Inductor's config. The best value is a local workaround when it recovers at
least `RESTORED` of the regression; then a second probe applies it to the first 0, 1, 2, ...
decisions only (`SCOPE_LIMITS`), which names the application that matters. Pure functions of
the probes' answers.

The regression is the bad build's excess over the good one as a share of the bad level
(`Regression`), from the stage probe that measured both builds side by side; each knob probe
applies that share to the bad level it measures itself. On a wall clock the level moves from
one probe to the next with the machine's load, the ratio of two builds measured together does
not: against the good build's absolute time from an earlier probe, a knob that saves 15% of a
x4 compile-time regression counted as restoring it whenever the earlier probe ran while a
neighbour loaded the machine.
"""

from __future__ import annotations

from dataclasses import dataclass

from regressions.probing.protocol import KnobsAnswer, KnobTrialAnswer

RESTORED = 0.75  # a knob restores the metric when it recovers 75% of the regression
SCOPE_LIMITS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


@dataclass(frozen=True)
class Restoring:
    """The knob value that recovers most of the regression, and how much of it."""

    trial: KnobTrialAnswer
    recovered: float  # share of (bad - good) it takes back


@dataclass(frozen=True)
class Regression:
    """The good and the bad build's metric, measured side by side (lower is better)."""

    good: float
    bad: float

    @property
    def good_share(self) -> float:
        """The good level as a share of the bad one."""
        return self.good / self.bad

    def good_at(self, bad: float) -> float:
        """The good build's level in a probe that measured the bad build at `bad`."""
        return self.good_share * bad

    @property
    def restoring_share(self) -> float:
        """The share of the bad level below which a knob value recovers `RESTORED`."""
        return 1 - RESTORED * (1 - self.good_share)

    def recovered(self, bad: float, with_knob: float) -> float:
        """The share of the regression a knob takes back, `bad` and `with_knob` measured in
        one probe."""
        return (bad - with_knob) / (bad - self.good_at(bad))


def restoring(answer: KnobsAnswer, regression: Regression) -> Restoring | None:
    """The best knob value, if it recovers at least `RESTORED` of the regression."""
    if regression.bad <= regression.good or answer.baseline <= 0 or not answer.trials:
        return None
    best = min(answer.trials, key=lambda t: t.metric)
    recovered = regression.recovered(answer.baseline, best.metric)
    return Restoring(best, recovered) if recovered >= RESTORED else None


def decisive_application(scoped: KnobsAnswer, bad_metric: float, regression: Regression
                         ) -> str | None:
    """The application of the knob after which its value restores the metric: the decision
    logged at the smallest scope limit that recovers `RESTORED`. The bad level is the
    scoped probe's own limit-0 measurement (the knob applied nowhere) where it has one,
    else `bad_metric`."""
    unscoped = [entry.metric for entry in scoped.scoped if entry.limit == 0]
    bad = unscoped[0] if unscoped and unscoped[0] > 0 else bad_metric
    for entry in scoped.scoped:
        if entry.limit and regression.recovered(bad, entry.metric) >= RESTORED:
            if len(entry.applications) >= entry.limit:
                return entry.applications[entry.limit - 1]
            return None
    return None
