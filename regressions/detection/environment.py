"""Environment alerts: the machine changed under the benchmarks, not the code.

GitHub-hosted runners change hardware between runs, and then every wall-clock series of the
machine moves at once: dozens of unrelated benchmarks "regress" (or improve) together at one
commit. Perfherder files such infrastructure changes apart from regressions; here one
*environment alert* for the commit replaces the regressions it explains. Two signs name one:

- *shared*: at one commit at least `ENV_SHARE` of the machine's series that can move with the
  runner (`metrics.moves_with_runner`: wall and CPU clocks, not a simulated clock, counts or
  seeded errors) move the same way, across at least `ENV_MIN_BENCHMARKS` benchmarks, while at
  most `ENV_QUIET` of the series that cannot move with the runner move at all (when they move,
  the code did it);
- *recorded*: the machine parameters asv records in every result file (`params`: cpu, ram,
  os, ...) differ from those of the commit before: every change of a runner-bound series at
  that commit is the machine's.

A member of a shared change that departs from the shift by more than its floor, beyond
`ENV_SPREAD_Z` times the spread of the moved series and with its own interval, is a
regression of its own and stays one. Pure functions; `detect.run_detection` calls `find` and
`explained`, and leaves the tests an environment alert answers out of its false-discovery
family.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from regressions import metrics

if TYPE_CHECKING:  # detect imports this module
    from regressions.detection.detect import Regression

# At least half of a machine's runner-bound series measured at a commit move the same way.
ENV_SHARE = 0.5
# ... and at least this many of them, from at least this many benchmarks (asv functions): one
# benchmark's parameters moving together share their code, not only the machine.
ENV_MIN_SERIES = 8
ENV_MIN_BENCHMARKS = 3
# At most this share of the series that cannot move with the runner move at that commit.
ENV_QUIET = 0.2
# A member departs from the shift when its log ratio lies this many robust standard
# deviations of the moved series' log ratios from their median (and beyond its floor).
ENV_SPREAD_Z = 4.0  # a normal tail: once in 16,000 series
MAD_TO_SD = 1.4826  # 1.4826 MAD estimates a normal standard deviation (Rousseeuw & Croux 1993)
ADVICE = ("pin the runner (a self-hosted machine, or one runner image) or name each machine "
          "(`asv machine --machine NAME`), so that results of different hardware are never "
          "compared")

Direction = Literal["higher", "lower"]
Cause = Literal["shared", "recorded"]


@dataclass(frozen=True)
class Move:
    """One series' level change at one commit, either direction, any size."""

    machine: str
    benchmark: str
    name: str
    good_commit: str
    bad_commit: str
    good_position: int
    bad_position: int
    ratio: float
    runner: bool  # the series can move with the runner


@dataclass(frozen=True)
class Presence:
    """How many series of a machine were measured at a commit and at an earlier one: the
    denominators of the shares, for runner-bound series and for the others."""

    runner: Mapping[str, Counter]  # machine -> position -> series
    other: Mapping[str, Counter]


@dataclass(frozen=True)
class EnvironmentAlert:
    """The machine changed between `good_commit` and `bad_commit`: `moved` of the `measured`
    runner-bound series moved `direction` (values higher or lower), median ratio
    `median_ratio`; `still_moved` of `still_measured` series that cannot move with the runner
    moved. `changed` lists the recorded parameters that differ (name, before, after);
    `members` the regressions it explains. Never bisected."""

    machine: str
    good_commit: str
    bad_commit: str
    good_position: int
    bad_position: int
    cause: Cause
    direction: Direction
    moved: int
    measured: int
    median_ratio: float
    spread: float
    still_moved: int = 0
    still_measured: int = 0
    changed: tuple[tuple[str, str, str], ...] = ()
    members: tuple[Regression, ...] = ()

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
        return (f"{self.machine}: {self.moved} of {self.measured} runner-bound series "
                f"({self.share:.0%}) measure {self.direction} at {self.bad_commit[:8]}, median "
                f"x{self.median_ratio:.3f}{still}{recorded}; {len(self.members)} regression(s) "
                f"explained; {ADVICE}")

    def to_dict(self) -> dict:
        return {"machine": self.machine, "good_commit": self.good_commit,
                "bad_commit": self.bad_commit, "good_position": self.good_position,
                "bad_position": self.bad_position, "cause": self.cause,
                "direction": self.direction, "moved": self.moved, "measured": self.measured,
                "share": self.share, "median_ratio": self.median_ratio, "spread": self.spread,
                "still_moved": self.still_moved, "still_measured": self.still_measured,
                "changed": [list(c) for c in self.changed],
                "members": [m.to_dict() for m in self.members]}


def presence_counts(rows: Sequence[tuple[str, bool, Sequence[int]]]) -> Presence:
    """Per machine and position, the series measured there and before: `rows` holds each
    series' machine, whether it can move with the runner, and its measured positions."""
    runner: dict[str, Counter] = defaultdict(Counter)
    other: dict[str, Counter] = defaultdict(Counter)
    for machine, moves, positions in rows:
        (runner if moves else other)[machine].update(positions[1:])
    return Presence(runner, other)


def find(moves: Sequence[Move], presence: Presence,
         settings: Mapping[tuple[str, str], Mapping[int, tuple[str, str]]] | None = None
         ) -> list[EnvironmentAlert]:
    """The environment alerts of one run: shared moves, and recorded parameter changes that
    coincide with a move. `settings`: (machine, env) -> position -> (commit, the recorded
    machine parameters as `describe_settings` writes them), for the commits whose files
    recorded any."""
    by_place: dict[tuple[str, int], list[Move]] = defaultdict(list)
    for move in moves:
        by_place[move.machine, move.bad_position].append(move)
    changes = recorded_changes(settings or {})
    alerts = []
    for (machine, position), here in sorted(by_place.items()):
        runner = [m for m in here if m.runner]
        if not runner:
            continue
        changed = changes.get((machine, position), ())
        alert = _shared(machine, runner, here, presence, changed) or (
            _recorded(machine, runner, here, presence, changed) if changed else None)
        if alert is not None:
            alerts.append(alert)
    return alerts


def _shared(machine: str, runner: list[Move], here: list[Move], presence: Presence,
            changed: tuple[tuple[str, str, str], ...]) -> EnvironmentAlert | None:
    """A shift that most runner-bound series share and the others do not."""
    position = runner[0].bad_position
    measured = presence.runner.get(machine, Counter())[position]
    for direction in ("higher", "lower"):
        moved = [m for m in runner if (m.ratio > 1) == (direction == "higher")]
        benchmarks = {m.benchmark for m in moved}
        if len(moved) < ENV_MIN_SERIES or len(benchmarks) < ENV_MIN_BENCHMARKS or \
                not measured or len(moved) < ENV_SHARE * measured:
            continue
        still_measured = presence.other.get(machine, Counter())[position]
        still_moved = sum(not m.runner for m in here)
        if still_measured and still_moved > ENV_QUIET * still_measured:
            return None  # the series the runner cannot move moved too: the code did it
        return _alert(machine, moved, "shared", direction, measured, still_moved,
                      still_measured, changed)
    return None


def _recorded(machine: str, runner: list[Move], here: list[Move], presence: Presence,
              changed: tuple[tuple[str, str, str], ...]) -> EnvironmentAlert:
    """A recorded change of the machine: every runner-bound move at it is the machine's."""
    position = runner[0].bad_position
    higher = sum(m.ratio > 1 for m in runner)
    direction: Direction = "higher" if 2 * higher >= len(runner) else "lower"
    return _alert(machine, runner, "recorded", direction,
                  presence.runner.get(machine, Counter())[position],
                  sum(not m.runner for m in here),
                  presence.other.get(machine, Counter())[position], changed)


def _alert(machine: str, moved: list[Move], cause: Cause, direction: Direction, measured: int,
           still_moved: int, still_measured: int, changed: tuple[tuple[str, str, str], ...]
           ) -> EnvironmentAlert:
    logs = [math.log(m.ratio) for m in moved if m.ratio > 0 and math.isfinite(m.ratio)]
    centre = statistics.median(logs) if logs else 0.0
    spread = MAD_TO_SD * statistics.median(abs(x - centre) for x in logs) if logs else 0.0
    latest = max(moved, key=lambda m: m.good_position)
    return EnvironmentAlert(machine, latest.good_commit, moved[0].bad_commit,
                            latest.good_position, moved[0].bad_position, cause, direction,
                            len(moved), max(measured, len(moved)), math.exp(centre), spread,
                            still_moved, still_measured, changed)


def recorded_changes(settings: Mapping[tuple[str, str], Mapping[int, tuple[str, str]]]
                     ) -> dict[tuple[str, int], tuple[tuple[str, str, str], ...]]:
    """(machine, position) -> the parameters that differ from those of the commit before,
    in any environment of the machine (each environment's files compared among themselves:
    they record different pythons)."""
    out: dict[tuple[str, int], dict[tuple[str, str, str], None]] = defaultdict(dict)
    for (machine, _), by_position in settings.items():
        previous: dict[str, str] | None = None
        for position in sorted(by_position):
            current = parse_settings(by_position[position][1])
            if previous is not None and current != previous:
                out[machine, position].update(dict.fromkeys(
                    (key, previous.get(key, ""), current.get(key, ""))
                    for key in sorted(previous.keys() | current.keys())
                    if previous.get(key) != current.get(key)))
            previous = current
    return {place: tuple(changes) for place, changes in out.items()}


def describe_settings(params: Mapping[str, object]) -> str:
    """A canonical text of a result file's machine parameters (the machine's name left out:
    a series is of one machine already): what `parse_settings` reads back."""
    return "\n".join(f"{key}={params[key]}" for key in sorted(params) if key != "machine")


def parse_settings(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def explained(r: Regression, alert: EnvironmentAlert,
              floors: Sequence[tuple[str, float]] = ()) -> bool:
    """Whether the machine's change accounts for the regression: always for a recorded
    change; for a shared one unless, divided by the shift, the regression still reaches its
    floor with an interval excluding no change, beyond the moved series' spread."""
    if alert.cause == "recorded" or r.ratio is None or r.ci is None or not r.ratio > 0:
        return True
    shift = alert.median_ratio
    residual = math.log(r.ratio / shift)
    if abs(residual) <= ENV_SPREAD_Z * alert.spread:
        return True
    floor = metrics.floor_for(r.name, tuple(floors))
    higher_is_better = r.ratio < 1  # detection reports worsenings only
    if higher_is_better:
        return not (shift / r.ratio - 1 >= floor and r.ci[1] / shift < 1)
    return not (r.ratio / shift - 1 >= floor and r.ci[0] / shift > 1)
