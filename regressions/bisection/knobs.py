"""Knob bisection: inside the bad build, which compiler decision restores the metric?

The knob probe measures the metric at the build's defaults and under every other value of
every knob (`KNOBS`, a decision of one stage each), as CompilerBisector's `ConfigChange`
entries toggle Inductor's config. The best value is a local workaround when it recovers at
least `RESTORED` of the regression; then a second probe applies it to the first 0, 1, 2, ...
decisions only (`SCOPE_LIMITS`), which names the application that matters. Pure functions of
the probes' answers.
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


def restoring(answer: KnobsAnswer, good_metric: float) -> Restoring | None:
    """The best knob value, if it recovers at least `RESTORED` of the bad build's excess
    over `good_metric` (lower is better)."""
    spread = answer.baseline - good_metric
    if spread <= 0 or not answer.trials:
        return None
    best = max(answer.trials, key=lambda t: answer.baseline - t.metric)
    recovered = (answer.baseline - best.metric) / spread
    return Restoring(best, recovered) if recovered >= RESTORED else None


def decisive_application(scoped: KnobsAnswer, bad_metric: float, good_metric: float
                         ) -> str | None:
    """The application of the knob after which its value restores the metric: the decision
    logged at the smallest scope limit that recovers `RESTORED`."""
    spread = bad_metric - good_metric
    for entry in scoped.scoped:
        if entry.limit and (bad_metric - entry.metric) / spread >= RESTORED:
            if len(entry.applications) >= entry.limit:
                return entry.applications[entry.limit - 1]
            return None
    return None
