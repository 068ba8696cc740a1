"""An investigation's measurement as the lifecycle judges it: `Evidence` and `Outcome`.

The nightly's investigations (the whole `Investigator.investigate`) and the month simulation's
(`Investigator.locate` on synthetic builds) end the same way: the bisection and the
confirmation at the culprit become the record's `Evidence`, and `lifecycle.investigated`
decides `reported` or `not-reproduced` from it. `outcome_of` is that one step; `head_check`
asks, before a report goes out, whether the branch's head still shows the regression.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from regressions import metrics, stats
from regressions.bisection.commits import BisectResult, Measurement
from regressions.detection.alerts import Alert
from regressions.errors import SpyreRegressError
from regressions.investigation import model
from regressions.investigation.investigator import Located, NotReproduced
from regressions.records import lifecycle


def evidence_of(alert: Alert, bisection: BisectResult, parent: str | None,
                confirmation: model.Confirmation | None,
                floors: Sequence[tuple[str, float]] = ()) -> lifecycle.Evidence | None:
    """The investigation's own measurement, as the lifecycle judges it: the confirmation at
    the culprit, or, when bisection did not reproduce the change, the two ends' samples."""
    # detection reports worsenings only: a ratio below 1 is a higher-is-better series
    common: dict[str, Any] = dict(
        floor=metrics.floor_for(alert.probe.name, tuple(floors)),
        higher_is_better=alert.probe.ratio is not None and alert.probe.ratio < 1,
        alert_good=alert.good_commit, alert_bad=alert.bad_commit,
        members=tuple(sorted(s.key for s in lifecycle.symptoms_of(alert))))
    if bisection.kind == metrics.FAILURE:
        bad = bisection.culprit or bisection.bad
        return lifecycle.Evidence(good_commit=parent or bisection.good, bad_commit=bad, ratio=None,
                                  ci=None, pvalue=None,
                                  samples=(len(bisection.samples.get(bisection.good, ())), 0),
                                  failed=True, **common)
    if confirmation is not None and parent is not None and bisection.culprit is not None:
        return lifecycle.Evidence(good_commit=parent, bad_commit=bisection.culprit,
                                  ratio=confirmation.ratio,
                                  ci=confirmation.ci, pvalue=confirmation.pvalue,
                                  samples=(confirmation.good_n, confirmation.bad_n), **common)
    before, after = bisection.samples.get(bisection.good), bisection.samples.get(bisection.bad)
    if not before or not after:
        return None
    interval = stats.ratio_interval(before, after, confidence=model.REPORT_CONFIDENCE)
    exact = stats.is_constant(before) and stats.is_constant(after)
    pvalue = None if exact else stats.mann_whitney(before, after).pvalue
    return lifecycle.Evidence(good_commit=bisection.good, bad_commit=bisection.bad,
                              ratio=interval.ratio,
                              ci=(interval.low, interval.high), pvalue=pvalue,
                              samples=(len(before), len(after)),
                              **common)


def not_reproduced(alert: Alert, error: NotReproduced, parent: str | None,
                   floors: Sequence[tuple[str, float]] = ()) -> lifecycle.Outcome:
    """The lifecycle's outcome of an investigation that stopped short of a report: its
    measurement, and the finding that refuted it when the measurement alone would confirm."""
    evidence = evidence_of(alert, error.bisection, parent, error.confirmation, floors=floors)
    if error.refuted and evidence is not None:
        evidence = replace(evidence, refuted=str(error))
    return lifecycle.Outcome(error.bisection.culprit, evidence)


def outcome_of(alert: Alert, attempt: Callable[[], Located], parent_of: Callable[[str], str],
               floors: Sequence[tuple[str, float]] = ()) -> lifecycle.Outcome:
    """Run one investigation `attempt` and say what it found, as the lifecycle reads it.

    A regression that does not reproduce is an answer (with its measurement); any other
    problem the user can fix is an investigation that failed tonight (the record stays new
    and is tried again). `parent_of` names a culprit's parent for the evidence.
    """
    try:
        located = attempt()
    except NotReproduced as error:
        culprit = error.bisection.culprit
        return not_reproduced(alert, error, parent_of(culprit) if culprit else None, floors)
    except SpyreRegressError as error:
        return lifecycle.Outcome(None, None, str(error))
    return lifecycle.Outcome(located.culprit, evidence_of(
        alert, located.bisection, located.parent, located.confirmation, floors=floors))


def head_check(good: Sequence[float], bad: Sequence[float], at_head: Sequence[float],
               head: str, floor: float, higher_is_better: bool) -> lifecycle.HeadCheck:
    """Whether the branch's newest benchmarked commit still shows the regression: the probe's
    samples there against the investigation's good and bad builds (same machine, same
    night). Fixed when the head measures better than the bad build (its interval excluding
    the bad level) and no longer confirms the regression against the good one, as
    publication judges it (`lifecycle.publishable`)."""
    to_good = stats.ratio_interval(good, at_head, confidence=model.REPORT_CONFIDENCE)
    to_bad = stats.ratio_interval(bad, at_head, confidence=model.REPORT_CONFIDENCE)
    still = lifecycle.publishable(lifecycle.Evidence(
        good_commit="", bad_commit=head, ratio=to_good.ratio, ci=(to_good.low, to_good.high),
        pvalue=None, samples=(len(good), len(at_head)),
        floor=floor, higher_is_better=higher_is_better))
    better = to_bad.low > 1 if higher_is_better else to_bad.high < 1
    return lifecycle.HeadCheck(head=head, ratio=to_good.ratio, ci=(to_good.low, to_good.high),
                               against_bad=to_bad.ratio,
                               against_bad_ci=(to_bad.low, to_bad.high), samples=len(at_head),
                               fixed=better and not still)


def at_head(alert: Alert, located: Located, measure: Callable[[str, int], Measurement],
            head: str, floors: Sequence[tuple[str, float]] = ()) -> lifecycle.HeadCheck | None:
    """The head check of a located regression: `measure(commit, samples)` runs the probe
    once more, at `head`, as many samples as the confirmation had; None for a failure (no
    level to compare) or when the probe fails at the head."""
    if located.confirmation is None or located.culprit == head:
        return None
    samples = located.bisection.samples
    good, bad = samples.get(located.parent), samples.get(located.culprit)
    if not good or not bad:
        return None
    measured = measure(head, len(good))
    if measured.status != "ok" or not measured.samples:
        return None
    return head_check(good, bad, measured.samples, head,
                      floor=metrics.floor_for(alert.probe.name, tuple(floors)),
                      higher_is_better=alert.probe.ratio is not None and alert.probe.ratio < 1)
