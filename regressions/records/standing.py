"""Whether each alert of a detection run is still open at the newest commit, and what it costs.

A maintainer pointed at a store of hundreds of commits gets as many alerts, most of them long
since over. asv publish's own list (`regressions.json`) keeps only the regressions still
there at the newest commit of their graph; here each alert is marked **open** (a member's
series is still at the bad level at its newest measured commit) or **recovered** (every
member's series came back: where, and by which commit), or **awaiting** more commits (its
new level too few commits hold yet: `Detection.awaiting`). "Back at the good level" has one
meaning in the tool, the nightly lifecycle's `fixed` (`lifecycle.back_at`): the trailing run
of the series' levels nearer the good level than the bad one. The levels are the ones
detection fitted between the series' own level changes (`detect.Reading.steps`), so a noisy
newest point does not reopen or close an alert; a one-commit dip is a transient, no level.
Open alerts come first, the costliest first (`cost`): the largest worsening, then the most
confident, then the most series.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from regressions import metrics
from regressions.detection.alerts import Alert
from regressions.detection.detect import Reading, Regression, Series
from regressions.records.lifecycle import back_at

OPEN, RECOVERED, AWAITING = "open", "recovered", "awaiting"
Key = tuple[str, str, str, str, str]  # machine, env, benchmark, params, bad commit


@dataclass(frozen=True)
class Standing:
    """One regression at its series' newest commit: `recovered_in` = (last commit at the bad
    level, first back at the good one) with the second's position, None while it is open;
    `judged_by` says what its test read (`detect.SAMPLES`, `SUMMARY` or `EXACT`);
    `awaiting` marks one whose new level too few commits hold yet (`Detection.awaiting`)."""

    recovered_in: tuple[str, str] | None
    recovered_position: int | None
    judged_by: str
    awaiting: bool = False

    @property
    def status(self) -> str:
        if self.awaiting:
            return AWAITING
        return OPEN if self.recovered_in is None else RECOVERED


def key_of(r: Regression) -> Key:
    return r.machine, r.env, r.benchmark, r.params, r.bad_commit


def standings(regressions: Sequence[Regression], series: Sequence[Series],
              readings: Sequence[Reading]) -> dict[Key, Standing]:
    """Each regression's standing, from the series detection read (`readings[i]` belongs to
    `series[i]`, as `detect.run_detection` returns them)."""
    # by name, then the series holding the position: a key per point would be a tuple for
    # each of a large store's million points (+144 MB on 500 series x 1,700 commits)
    holding: dict[tuple[str, str, str, str], list[tuple[Series, Reading]]] = {}
    for s, reading in zip(series, readings, strict=True):
        holding.setdefault((s.machine, s.env, s.benchmark, s.params), []).append((s, reading))
    out = {}
    for r in regressions:
        found = next(((s, reading) for s, reading in holding.get(
            (r.machine, r.env, r.benchmark, r.params), ()) if _holds(s, r.bad_position)), None)
        if found is None:  # not a series of this run: nothing says it came back
            out[key_of(r)] = Standing(None, None, "")
            continue
        s, reading = found
        back = _failure_back(r, s) if r.kind == metrics.FAILURE else _level_back(r, reading)
        out[key_of(r)] = Standing(back[:2] if back else None, back[2] if back else None,
                                  reading.judged_by)
    return out


def _holds(s: Series, position: int) -> bool:
    """Whether `s` has a point at `position` (its positions are in order)."""
    at = bisect.bisect_left(s.positions, position)
    return at < len(s.positions) and s.positions[at] == position


def _level_back(r: Regression, reading: Reading) -> tuple[str, str, int] | None:
    """Where the series' fitted level came back nearer the level before `r` than the one
    after it, to stay: the step that brought it back; None while it has not."""
    at = next((k for k, step in enumerate(reading.steps)
               if step.bad_position == r.bad_position), None)
    if at is None:
        return None
    own, later = reading.steps[at], reading.steps[at + 1:]
    back = back_at([own.after, *(step.after for step in later)], own.before, own.after)
    if back is None:
        return None
    step = later[back - 1]
    return step.good_commit, step.bad_commit, step.bad_position


def _failure_back(r: Regression, s: Series) -> tuple[str, str, int] | None:
    """Where a benchmark that stopped running ran again, to stay (ran = 1, failed = 0)."""
    start = s.positions.index(r.bad_position)
    ran = [0.0 if v is None else 1.0 for v in s.samples[start:]]
    back = back_at(ran, 1.0, 0.0)
    if back is None:
        return None
    return s.commits[start + back - 1], s.commits[start + back], s.positions[start + back]


def alert_standing(alert: Alert, known: dict[Key, Standing]) -> Standing:
    """An alert is open while any member is; recovered when all are, at the last member's
    recovery. Its `judged_by` is its probe's."""
    members = [known.get(key_of(m), Standing(None, None, "")) for m in alert.members]
    probe = known.get(key_of(alert.probe), Standing(None, None, ""))
    if any(m.recovered_in is None for m in members):
        return Standing(None, None, probe.judged_by)
    last = max(members, key=lambda m: m.recovered_position or 0)
    return Standing(last.recovered_in, last.recovered_position, probe.judged_by)


def worsening(r: Regression) -> float:
    """How much worse `r` made its series, either direction alike (x2 slower and half the
    throughput are both 1.0); infinite for a benchmark that stopped running."""
    if r.ratio is None or not r.ratio > 0 or not math.isfinite(r.ratio):
        return math.inf
    return max(r.ratio, 1 / r.ratio) - 1


def cost(alert: Alert) -> tuple[float, float, int]:
    """What ranks alerts, largest first: the worst member's worsening, the confidence (the
    smallest q, or p where there is none; an exact change or a failure is certain), the
    number of series."""
    doubt = min((m.q if m.q is not None else m.p if m.p is not None else 0.0
                 for m in alert.members), default=1.0)
    return max(map(worsening, alert.members), default=0.0), 1 - doubt, len(alert.members)


def ranked(alerts: Sequence[Alert], known: dict[Key, Standing],
           awaiting: Sequence[Alert] = ()) -> list[tuple[Alert, Standing]]:
    """The alerts with their standing, open ones first, then those `awaiting` more commits,
    then recovered ones, each group costliest first."""
    marked = [(a, alert_standing(a, known)) for a in alerts] + [
        (a, replace(alert_standing(a, known), awaiting=True)) for a in awaiting]
    group = {OPEN: 0, AWAITING: 1, RECOVERED: 2}
    return sorted(marked, key=lambda m: (group[m[1].status], *(-x for x in cost(m[0]))))


def marks(alert: Alert, standing: Standing, known: dict[Key, Standing]) -> dict:
    """What the alerts JSON (version 5) adds to an alert and to each of its members:
    `status`, `recovered_in`, and what the series' test was `judged_by`."""
    def fields(mark: Standing) -> dict:
        return {"status": mark.status, "recovered_in": list(mark.recovered_in)
                if mark.recovered_in else None, "judged_by": mark.judged_by or None}

    return {**fields(standing), "members": [
        fields(known.get(key_of(m), Standing(None, None, ""))) for m in alert.members]}
