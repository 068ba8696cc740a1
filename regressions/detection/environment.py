"""Environment alerts: the machine changed under the benchmarks, not the code.

GitHub-hosted runners change hardware between runs, and then every wall-clock series of the
machine moves at once: dozens of unrelated benchmarks "regress" (or improve) together at one
commit. Perfherder files such infrastructure changes apart from regressions; here one
*environment alert* for the commit replaces the regressions it explains. Three signs name one:

- *shared*: at one commit at least `ENV_MIN_SERIES` changes of series that can move with the
  runner (`metrics.moves_with_runner`: wall and CPU clocks, not a simulated clock, counts or
  seeded errors) go the same way, from at least `ENV_MIN_BENCHMARKS` benchmarks - a wide
  cluster - and the levels of at least `ENV_SHARE` of all the machine's runner-bound series
  measured there moved that way too (the sign of each one's step from the commit it measured
  before, significant or not: noise moves half of them either way), while at most
  `ENV_QUIET` of the series that cannot move with the runner changed at all (when they
  change, the code did it);
- *recorded*: the machine parameters asv records in every result file (`params`: cpu, ram,
  os, ...) differ from those of the commit before: every change of a runner-bound series at
  that commit is the machine's.

- *returned*: a wide cluster of runner-bound changes whose members (at least
  `ENV_RETURN_SHARE` of them) all change back together at one commit within
  `ENV_RETURN_WITHIN` commits, before or after: a runner that changed and changed back (a
  hosted runner pool alternating between hardware types), or a change reverted a few
  commits later. Neither leg stands at the head, and neither is a regression to bisect.

A member of a shared change that departs from the shift by more than its floor, beyond
`ENV_SPREAD_Z` times the spread of the moved series and with its own interval, is a
regression of its own and stays one. Pure functions; `detect.run_detection` calls `find` and
`explained`, and leaves the tests an environment alert answers out of its false-discovery
family.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import numpy as np

from regressions import git, metrics


class Regression(Protocol):
    """What an environment alert reads of a regression it explains (`detect.Regression`;
    detect imports this module, so the type is described here rather than imported)."""

    @property
    def ratio(self) -> float | None: ...

    @property
    def ci(self) -> tuple[float, float] | None: ...

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


# A wide cluster: this many detected changes one way at one commit, from this many benchmarks
# (asv functions): one benchmark's parameters moving together share their code too.
ENV_MIN_SERIES = 8
ENV_MIN_BENCHMARKS = 3
# ... and the levels of three quarters of the machine's runner-bound series measured there
# moved that way (by chance half do: with 30 series, 3/4 is 2.7 standard deviations out).
ENV_SHARE = 0.75
# At most this share of the series that cannot move with the runner move at that commit.
ENV_QUIET = 0.2
# A member departs from the shift when its log ratio lies this many robust standard
# deviations of the moved series' log ratios from their median (and beyond its floor).
ENV_SPREAD_Z = 4.0  # a normal tail: once in 16,000 series
# A wide cluster whose members change back together: this share of them, at one commit at
# most this many commits away (the store the issue read alternated within 2-8 commits).
ENV_RETURN_SHARE = 0.8
ENV_RETURN_WITHIN = 10
MAD_TO_SD = 1.4826  # 1.4826 MAD estimates a normal standard deviation (Rousseeuw & Croux 1993)
ADVICE = ("pin the runner (a self-hosted machine, or one runner image) or name each machine "
          "(`asv machine --machine NAME`), so that results of different hardware are never "
          "compared")

# Which way the series moved, in each one's own sense: a slower runner makes times higher and
# throughputs lower, both worse.
Direction = Literal["worse", "better"]
Cause = Literal["shared", "recorded", "returned"]


@dataclass(frozen=True, kw_only=True)
class Move:
    """One series' level change at one commit, either direction, any size: `ratio` is
    after / before in the worse sense (above 1 is worse; a higher-is-better series' ratio
    inverted)."""

    machine: str
    env: str
    benchmark: str
    name: str
    good_commit: str
    bad_commit: str
    good_position: int
    bad_position: int
    ratio: float
    runner: bool  # the series can move with the runner


@dataclass(frozen=True, kw_only=True)
class Levels:
    """One series as an environment alert reads it: its machine and environment, whether the
    runner can move it, and per measured position (sorted) its level (mean log sample,
    negated for a higher-is-better series so that up is worse; raw for series with values
    <= 0, which `local_ratio` leaves out)."""

    machine: str
    env: str
    runner: bool
    positions: np.ndarray
    levels: np.ndarray
    positive: bool = True


@dataclass(frozen=True, kw_only=True)
class EnvironmentAlert:
    """The machine changed between `good_commit` and `bad_commit`: the levels of `moved` of
    the `measured` runner-bound series moved `direction` (worse or better), `detected`
    of them with a change detected there, whose ratios have the median `median_ratio` and
    the robust spread `spread` (log units); `still_moved` of `still_measured` series that
    cannot move with the runner changed; `against` counts the changes the other way when they
    form a wide cluster too (hardware that speeds most benchmarks up and slows a family down:
    the machine's as well). `changed` lists the recorded parameters that differ
    (name, before, after); `members` the regressions it explains. Never bisected. Each
    environment of a machine (asv's `env_name`) has alerts of its own: environments may
    benchmark different commits, so one change of the machine shows at each one's first
    commit after it. The environments measured at the same commit ran in one job, on one
    runner, and are counted together (`envs`; the counts and ratios are the job's, `detected`
    and the range this environment's)."""

    machine: str
    env: str
    good_commit: str
    bad_commit: str
    good_position: int
    bad_position: int
    cause: Cause
    direction: Direction
    moved: int
    measured: int
    detected: int
    median_ratio: float
    spread: float
    still_moved: int = 0
    still_measured: int = 0
    against: int = 0
    changed: tuple[tuple[str, str, str], ...] = ()
    members: tuple[Regression, ...] = ()
    envs: tuple[str, ...] = ()  # the environments of the job counted with this one, if more
    back: str = ""  # `returned`: the commit at which the members change back together

    @property
    def share(self) -> float:
        return self.moved / self.measured if self.measured else 0.0

    def describe(self) -> str:
        """One line: what moved, what was recorded, and what to do."""
        recorded = "; recorded: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, a, b in
                                               self.changed) if self.changed else \
            "; nothing recorded in the result files changed"
        still = (f"; {self.still_moved} of {self.still_measured} series that cannot move with "
                 "the runner moved") if self.still_measured else ""
        job = (" (counted with " + ", ".join(e for e in self.envs if e != self.env)
               + ", measured in the same job)") if self.envs else ""
        back = (f"; they change back together at {git.abbreviated(self.back)} (the runner "
                "changed back, or the change was reverted: nothing stands at the head)"
                ) if self.back else ""
        return (f"{self.machine}/{self.env}{job}: {self.moved} of {self.measured} "
                f"runner-bound series ({self.share:.0%}) measure {self.direction} at "
                f"{git.abbreviated(self.bad_commit)} "
                f"({self.detected} with a detected change, median x{self.median_ratio:.3f}; "
                "above 1 is worse)"
                f"{back}{still}{recorded}; {len(self.members)} regression(s) explained; "
                f"{ADVICE}")

    def to_dict(self) -> dict:
        return {"machine": self.machine, "env": self.env, "good_commit": self.good_commit,
                "bad_commit": self.bad_commit, "good_position": self.good_position,
                "bad_position": self.bad_position, "cause": self.cause,
                "direction": self.direction, "moved": self.moved, "measured": self.measured,
                "detected": self.detected, "share": self.share,
                "median_ratio": self.median_ratio, "spread": self.spread,
                "still_moved": self.still_moved, "still_measured": self.still_measured,
                "against": self.against,
                "changed": [list(c) for c in self.changed], "envs": list(self.envs),
                "back": self.back,
                "members": [m.to_dict() for m in self.members]}


def find(moves: Sequence[Move], levels: Sequence[Levels],
         settings: Mapping[tuple[str, str], Mapping[int, tuple[str, str]]] | None = None
         ) -> list[EnvironmentAlert]:
    """The environment alerts of one run: shared moves, wide clusters that change back
    together, and recorded parameter changes that coincide with a move. `levels`: every
    series of the run; `settings`: (machine, env) -> position -> (commit, the recorded
    machine parameters as `describe_settings` writes them), for the commits whose files
    recorded any."""
    by_place: dict[tuple[str, int], list[Move]] = defaultdict(list)
    for move in moves:
        by_place[move.machine, move.bad_position].append(move)
    by_env: dict[tuple[str, str], list[Levels]] = defaultdict(list)
    for series in levels:
        by_env[series.machine, series.env].append(series)
    changes = recorded_changes(settings or {})
    returns = _Returns(moves)
    alerts = []
    for (machine, position), pooled in sorted(by_place.items()):
        # The environments a machine measured one commit in ran in one job, on one runner: a
        # change of the runner shows in all of them at once, and is counted across them.
        envs = tuple(sorted({m.env for m in pooled}))
        measured = [s for env in envs for s in by_env[machine, env]]
        local = [r for r in (local_ratio(s, position) for s in measured if s.runner)
                 if r is not None]
        still = sum(_measured_at(s, position) for s in measured if not s.runner)
        runner_pool = [m for m in pooled if m.runner]
        shared = _shared(runner_pool, pooled, local, still) or returns.alert(
            runner_pool, pooled, local, still)
        for env in envs:
            runner = [m for m in pooled if m.env == env and m.runner]
            changed = changes.get((machine, env, position), ())
            if not runner:
                continue
            if shared is not None:
                alerts.append(replace(_in_env(shared, runner), changed=changed,
                                      envs=envs if len(envs) > 1 else ()))
            elif changed:
                here = [m for m in pooled if m.env == env]
                env_local = [r for r in (local_ratio(s, position) for s in by_env[machine, env]
                                         if s.runner) if r is not None]
                alerts.append(_alert(runner, "recorded", _majority(runner), env_local,
                                     still_moved=sum(not m.runner for m in here),
                                     still_measured=sum(_measured_at(s, position) for s in
                                                        by_env[machine, env] if not s.runner),
                                     changed=changed))
    return alerts


class _Returns:
    """Which wide clusters change back together: every series' changes by position."""

    def __init__(self, moves: Sequence[Move]):
        self.by_series: dict[tuple[str, str, str], list[Move]] = defaultdict(list)
        for m in moves:
            if m.runner:
                self.by_series[m.machine, m.env, m.name].append(m)

    def partner(self, moved: Sequence[Move]) -> str | None:
        """The commit near the cluster at which most of its members change the other way;
        None when no commit gathers `ENV_RETURN_SHARE` of them."""
        count: dict[tuple[int, str], int] = defaultdict(int)
        for m in moved:
            places = {(o.bad_position, o.bad_commit)
                      for o in self.by_series[m.machine, m.env, m.name]
                      if (o.ratio > 1) != (m.ratio > 1)
                      and 0 < abs(o.bad_position - m.bad_position) <= ENV_RETURN_WITHIN}
            for place in places:
                count[place] += 1
        if not count:
            return None
        (_, commit), hits = max(count.items(), key=lambda item: (item[1], -item[0][0]))
        return commit if hits >= ENV_RETURN_SHARE * len(moved) else None

    def alert(self, runner: list[Move], here: list[Move], local: list[float],
              still_measured: int) -> EnvironmentAlert | None:
        """A wide cluster that changes back together: the machine's excursion (or a change
        reverted a few commits on); its direction's members are what it explains. As for a
        shared change, when the series the runner cannot move moved too, the code did it."""
        still_moved = sum(not m.runner for m in here)
        if still_measured and still_moved > ENV_QUIET * still_measured:
            return None
        for direction, moved in _by_direction(runner).items():
            if len(moved) < ENV_MIN_SERIES or len({m.benchmark for m in moved}) < \
                    ENV_MIN_BENCHMARKS:
                continue
            back = self.partner(moved)
            if back is not None:
                return replace(_alert(moved, "returned", direction, local, still_moved=still_moved,
                                      still_measured=still_measured, changed=()), back=back)
        return None


def _in_env(shared: EnvironmentAlert, runner: Sequence[Move]) -> EnvironmentAlert:
    """A change of the machine found across the environments of one job, as one of them
    reports it: its range and its own detected changes; shares and ratios of the job."""
    mine = [m for m in runner if (m.ratio > 1) == (shared.direction == "worse")] or list(runner)
    latest = max(mine, key=lambda m: m.good_position)
    return replace(shared, env=mine[0].env, good_commit=latest.good_commit,
                   good_position=latest.good_position, detected=len(mine))


def _wide(runner: Sequence[Move]) -> bool:
    """Whether the changes at one commit are a wide cluster in either direction."""
    return any(len(moved) >= ENV_MIN_SERIES and len({m.benchmark for m in moved})
               >= ENV_MIN_BENCHMARKS for moved in _by_direction(runner).values())


def _by_direction(moves: Sequence[Move]) -> dict[Direction, list[Move]]:
    return {"worse": [m for m in moves if m.ratio > 1],
            "better": [m for m in moves if m.ratio < 1]}


def _majority(moves: Sequence[Move]) -> Direction:
    return "worse" if 2 * sum(m.ratio > 1 for m in moves) >= len(moves) else "better"


def _measured_at(s: Levels, position: int) -> bool:
    """Whether the series has a point at `position` and one before it."""
    i = int(np.searchsorted(s.positions, position))
    return 0 < i < s.positions.size and bool(s.positions[i] == position)


def local_ratio(s: Levels, position: int) -> float | None:
    """The series' level at `position` over its level at the commit it measured before; None
    when it has no point there or none before, or has values <= 0. One commit a side: a
    wider window would carry a step a commit or two away into the share of this one."""
    if not s.positive or not _measured_at(s, position):
        return None
    i = int(np.searchsorted(s.positions, position))
    return math.exp(float(s.levels[i]) - float(s.levels[i - 1]))


def _agree(local: Sequence[float], direction: Direction) -> int:
    return sum(r > 1 if direction == "worse" else r < 1 for r in local)


def _shared(runner: list[Move], here: list[Move], local: list[float],
            still_measured: int) -> EnvironmentAlert | None:
    """A wide cluster whose direction most runner-bound series share and the others do
    not."""
    for direction, moved in _by_direction(runner).items():
        if len(moved) < ENV_MIN_SERIES or len({m.benchmark for m in moved}) < \
                ENV_MIN_BENCHMARKS or not local or _agree(local, direction) < \
                ENV_SHARE * len(local):
            continue
        still_moved = sum(not m.runner for m in here)
        if still_measured and still_moved > ENV_QUIET * still_measured:
            return None  # the series the runner cannot move moved too: the code did it
        other = _by_direction(runner)["better" if direction == "worse" else "worse"]
        return replace(_alert(moved, "shared", direction, local, still_moved=still_moved,
                              still_measured=still_measured,
                              changed=()), against=len(other) if _wide(other) else 0)
    return None


def _alert(moved: list[Move], cause: Cause, direction: Direction,
           local: list[float], still_moved: int, still_measured: int,
           changed: tuple[tuple[str, str, str], ...]) -> EnvironmentAlert:
    logs = [math.log(m.ratio) for m in moved if m.ratio > 0 and math.isfinite(m.ratio)]
    centre = statistics.median(logs) if logs else 0.0
    spread = MAD_TO_SD * statistics.median(abs(x - centre) for x in logs) if logs else 0.0
    latest = max(moved, key=lambda m: m.good_position)
    return EnvironmentAlert(machine=moved[0].machine, env=moved[0].env,
                            good_commit=latest.good_commit, bad_commit=moved[0].bad_commit,
                            good_position=latest.good_position,
                            bad_position=moved[0].bad_position, cause=cause,
                            direction=direction, moved=_agree(local, direction),
                            measured=len(local), detected=len(moved),
                            median_ratio=math.exp(centre), spread=spread,
                            still_moved=still_moved, still_measured=still_measured,
                            changed=changed)


def recorded_changes(settings: Mapping[tuple[str, str], Mapping[int, tuple[str, str]]]
                     ) -> dict[tuple[str, str, int], tuple[tuple[str, str, str], ...]]:
    """(machine, env, position) -> the parameters that differ from those of the commit
    before, each environment's files compared among themselves (they record different
    pythons)."""
    out = {}
    for (machine, env), by_position in settings.items():
        previous: dict[str, str] | None = None
        for position in sorted(by_position):
            current = parse_settings(by_position[position][1])
            if previous is not None and current != previous:
                out[machine, env, position] = tuple(
                    (key, previous.get(key, ""), current.get(key, ""))
                    for key in sorted(previous.keys() | current.keys())
                    if previous.get(key) != current.get(key))
            previous = current
    return out


def describe_settings(params: Mapping[str, object]) -> str:
    """A canonical text of a result file's machine parameters (the machine's name left out:
    a series is of one machine already): what `parse_settings` reads back."""
    return "\n".join(f"{key}={params[key]}" for key in sorted(params) if key != "machine")


def parse_settings(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def explained(r: Regression, alert: EnvironmentAlert,
              floors: Sequence[tuple[str, float]] = ()) -> bool:
    """Whether the machine's change accounts for the regression: always for a recorded
    change, and for one of a wide cluster against the shift; for a shared one otherwise
    unless, divided by the shift, the regression still reaches its floor with an interval
    excluding no change, beyond the moved series' spread."""
    if alert.cause == "recorded" or r.ratio is None or r.ci is None or not r.ratio > 0:
        return True
    if alert.against and alert.direction == "better":
        return True  # a wide cluster of worsenings against a faster machine: its own too
    higher_is_better = r.ratio < 1  # detection reports worsenings only
    worse = 1 / r.ratio if higher_is_better else r.ratio
    nearest = 1 / r.ci[1] if higher_is_better else r.ci[0]  # the interval's end nearest 1
    shift = alert.median_ratio
    if abs(math.log(worse / shift)) <= ENV_SPREAD_Z * alert.spread:
        return True
    floor = metrics.floor_for(r.name, tuple(floors), r.kind)
    return not (worse / shift - 1 >= floor and nearest / shift > 1)
