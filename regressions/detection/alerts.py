"""Alerts: regressions of one kind whose commit ranges overlap, one per probable root cause.

`cluster_alerts` groups a detection run's regressions, as Perfherder groups alerts by push
and Chromium by revision range; the alert's probe is its narrowest member, which the
investigation measures. The JSON document `spyre-regress detect --json` writes is read back
here too, older versions migrated on the way in (docs/formats.md); since version 3 it lists
the run's environment alerts beside the regression alerts, since version 4 each alert and
member says whether it is open or recovered at its series' newest commit
(`records.standing`) and what its test read.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regressions import metrics
from regressions.detection.detect import Regression
from regressions.detection.environment import EnvironmentAlert
from regressions.errors import SpyreRegressError
from regressions.metrics import FAILURE, Kind

# 3: the environment alerts beside the alerts; 4: open or recovered; 5: the source read
# (`source`) and alerts awaiting more commits (status "awaiting")
ALERTS_VERSION = 5


@dataclass(frozen=True)
class Alert:
    """Regressions of one kind whose commit ranges overlap: probably one root cause."""

    kind: Kind
    good_commit: str
    bad_commit: str
    members: tuple[Regression, ...]
    probe: Regression

    def to_dict(self) -> dict:
        return {"good_commit": self.good_commit, "bad_commit": self.bad_commit,
                "kind": self.kind, "members": [m.to_dict() for m in self.members],
                "probe": {"benchmark": self.probe.benchmark, "params": self.probe.params,
                          "machine": self.probe.machine, "env": self.probe.env}}

    @classmethod
    def from_dict(cls, data: dict) -> Alert:
        members = tuple(Regression.from_dict(m) for m in data["members"])
        ident = data["probe"]
        probe = next((m for m in members if (m.benchmark, m.params) ==
                      (ident["benchmark"], ident["params"])), None)
        if probe is None:
            raise ValueError(f"the probe {ident['benchmark']}{ident['params']} is not a member")
        return cls(data["kind"], data["good_commit"], data["bad_commit"], members, probe=probe)

    @property
    def provisional(self) -> bool:
        """Every member is an edge regression: a later night confirms or withdraws it."""
        return all(m.edge is not None for m in self.members)


def cluster_alerts(regressions: Sequence[Regression]) -> list[Alert]:
    """Group regressions of one kind whose (good, bad] commit ranges overlap.

    One alert per probable root cause, as Perfherder groups alerts by push and Chromium by
    revision range. The alert's range is the intersection of its members' ranges; its probe
    is `probe_of` its members.
    """
    alerts = []
    for kind in sorted({r.kind for r in regressions}):
        groups: list[list[Regression]] = []
        for r in sorted((r for r in regressions if r.kind == kind),
                        key=lambda r: (r.bad_position, r.good_position)):
            # Sorted by bad end: a group's range ends at its first member's bad commit.
            if groups and r.good_position < groups[-1][0].bad_position:
                groups[-1].append(r)
            else:
                groups.append([r])
        for group in groups:
            members = tuple(sorted(group, key=lambda r: (r.benchmark, r.params, r.machine, r.env)))
            latest_good = max(group, key=lambda r: r.good_position)
            alerts.append(Alert(kind, latest_good.good_commit, group[0].bad_commit, members,
                                probe=probe_of(members)))
    return sorted(alerts, key=lambda a: (a.members[0].bad_position, a.kind))


# A member that moved less than this share of the alert's strongest move (in log ratio) is
# not its probe: a noise step that happened to land on the same commit (a full-suite night
# once grouped linear at seq 1, x1.014, with three series at seq 127 that moved x1.11-1.76,
# bisected the faint one and closed the alert as not reproduced; docs/nightly.md).
FAINT = 0.5


def _moved(r: Regression) -> float | None:
    """How far `r` moved, |log ratio|; None when its ratio is not a finite positive number
    (a failure, an error from zero)."""
    if r.ratio is None or not r.ratio > 0 or not math.isfinite(r.ratio):
        return None
    return abs(math.log(r.ratio))


def probe_of(members: Sequence[Regression]) -> Regression:
    """The member an alert's investigation measures: among those that moved at least `FAINT`
    of the strongest move (or whose move is not a finite ratio), the narrowest (`param_size`:
    the cheapest to bisect); among equally narrow ones, the one that moved most (a faint
    member makes a fragile bisection), then the cheaper one."""
    strongest = max((m for m in map(_moved, members) if m is not None), default=0.0)
    eligible = [r for r in members
                if (moved := _moved(r)) is None or moved >= FAINT * strongest]
    return min(eligible, key=lambda r: (
        param_size(r.params), -(_moved(r) or 0.0),
        math.inf if r.baseline is None else r.baseline))


def param_size(params: str) -> float:
    """Product of the numbers in an asv params string such as "(127, 'mlp')" (1 if none)."""
    try:
        numbers = list(_numbers(ast.literal_eval(params))) if params else []
    except (ValueError, SyntaxError, TypeError):
        # Whole numbers only: not the digits of "0x7f..." in a repr like "<object at 0x7f...>".
        numbers = [float(x) for x in re.findall(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])", params)]
    return float(math.prod(numbers))


def _numbers(value: object):
    if isinstance(value, bool):
        return
    if isinstance(value, int | float):
        yield abs(value)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _numbers(item)


def alerts_to_json(alerts: Sequence[Alert], environment: Sequence[EnvironmentAlert] = (),
                   marks: Sequence[Mapping[str, Any]] | None = None,
                   source: Mapping[str, str] | None = None) -> dict:
    """The versioned JSON document `spyre-regress detect --json` writes (docs/formats.md):
    what was read (`source`: {"results": DIR} or {"table": FILE}), the alerts to
    investigate, and the environment alerts that are never investigated. `marks[i]`
    (`records.standing.marks`) adds alert i's standing to it, and its `members` list, one
    dict per member, to its members."""
    documents = [a.to_dict() for a in alerts]
    for document, mark in zip(documents, marks or (), strict=False):
        extra = dict(mark)
        for member, more in zip(document["members"], extra.pop("members", ()), strict=True):
            member.update(more)
        document.update(extra)
    return {"version": ALERTS_VERSION, "source": dict(source or {}), "alerts": documents,
            "environment": [e.to_dict() for e in environment]}


def alerts_from_json(document: object, source: str) -> list[Alert]:
    """The alerts of a `detect --json` document, checked; `source` names it in errors
    (version 2 is version 3 without the environment alerts, which no reader needs; 3 is 4
    without the standing, which reading leaves out; 4 is 5 without `source`)."""
    if not isinstance(document, dict) or not isinstance(document.get("alerts"), list):
        raise SpyreRegressError(f"{source} is not an alerts file (no \"alerts\" list); pass "
                                "the file `spyre-regress detect --json` wrote")
    version = document.get("version")
    if version not in (1, 2, 3, 4, ALERTS_VERSION):
        raise SpyreRegressError(f"{source} has alerts format version {version!r}; this "
                                f"spyre-regress reads versions 1 to {ALERTS_VERSION}")
    try:
        return [alert_from_json(a, version) for a in document["alerts"]]
    except (KeyError, TypeError, ValueError) as error:
        raise SpyreRegressError(f"{source}: malformed alert ({type(error).__name__}: "
                                f"{error}); pass a file `spyre-regress detect --json` "
                                "wrote") from None


def alert_from_json(alert: dict, version: int | None = None) -> Alert:
    """One alert of a document of `version`, migrated to the current form. Alerts kept
    without a document version (the rows of alert stores before schema 3) are version 1
    when their members lack the positions version 2 added."""
    if version is None:
        version = 2 if "good_position" in (alert.get("members") or [{}])[0] else 1
    return Alert.from_dict(_update_to_2(alert) if version == 1 else alert)  # 2 -> 5: as is


def _update_to_2(alert: dict) -> dict:
    """Version 1 named the kinds after an older family table ("compile", a device-time
    "time") and left the members' positions out: the kind is read again from the probe's
    benchmark name, as the metric table reads it today."""
    kind = alert["kind"] if alert["kind"] == FAILURE else \
        metrics.metric_for(alert["probe"]["benchmark"]).name
    members = [{"good_commit": alert["good_commit"], "bad_commit": alert["bad_commit"],
                "good_position": 0, "bad_position": 1, "baseline": None, **m, "kind": kind}
               for m in alert["members"]]
    return {**alert, "kind": kind, "members": members}
