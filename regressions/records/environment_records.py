"""Environment alerts across nights, kept apart from the alert records: never investigated.

Detection re-reads the whole history every night, so an environment change it found once
(`detection.environment.EnvironmentAlert`) comes back every night after. `advance` matches
tonight's environment alerts to the stored records - same machine and environment, commit
ranges (good, bad] that overlap on tonight's history - so the nightly lists a change of the
machine once, when it is new, with what to do about it, and keeps it. Nothing here reads or
writes storage; the nightly persists the records (`to_dict` / `from_dict`, versioned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from regressions.codec import RecordError, from_json
from regressions.errors import SpyreRegressError
from regressions.records.lifecycle import Event

if TYPE_CHECKING:  # types only: the records stay free of the statistics' imports
    from regressions.detection.environment import EnvironmentAlert

ENVIRONMENT_RECORD_VERSION = 1


@dataclass(frozen=True, kw_only=True)
class EnvironmentRecord:
    """One change of a machine as the nightly keeps it; `summary` is the alert's one line
    (what moved, what the result files recorded, what to do) when last seen."""

    id: int
    machine: str
    env: str
    good_commit: str
    bad_commit: str
    direction: str
    explained: int  # regressions it accounted for, when last seen
    summary: str
    first_seen: str = ""
    last_seen: str = ""


def advance(records: Sequence[EnvironmentRecord], alerts: Sequence[EnvironmentAlert],
            place: Mapping[str, int], night: str) -> tuple[list[EnvironmentRecord], list[Event]]:
    """Tonight's environment alerts applied to the stored records: a new change gets a
    record and an event; one seen before is updated, silently."""
    updated = list(records)
    events = []
    next_id = max((r.id for r in records), default=0) + 1
    for alert in alerts:
        i = next((i for i, r in enumerate(updated) if _same(r, alert, place)), None)
        if i is not None:
            updated[i] = replace(updated[i], good_commit=alert.good_commit,
                                 bad_commit=alert.bad_commit, explained=len(alert.members),
                                 summary=alert.describe(), last_seen=night)
            continue
        record = EnvironmentRecord(id=next_id, machine=alert.machine, env=alert.env,
                                   good_commit=alert.good_commit,
                                   bad_commit=alert.bad_commit, direction=alert.direction,
                                   explained=len(alert.members),
                                   summary=alert.describe(), first_seen=night, last_seen=night)
        next_id += 1
        updated.append(record)
        events.append(Event(record.id, "", "environment", f"found on {night}: "
                            f"{record.summary}"))
    return updated, events


def _same(record: EnvironmentRecord, alert: EnvironmentAlert, place: Mapping[str, int]) -> bool:
    if (record.machine, record.env) != (alert.machine, alert.env):
        return False
    commits = (record.good_commit, record.bad_commit, alert.good_commit, alert.bad_commit)
    if any(c not in place for c in commits):
        return record.bad_commit == alert.bad_commit
    good, bad, alert_good, alert_bad = (place[c] for c in commits)
    return min(bad, alert_bad) - max(good, alert_good) > 0


def to_dict(record: EnvironmentRecord) -> dict:
    """A JSON-ready form of `record` with a `version` field."""
    return {**asdict(record), "version": ENVIRONMENT_RECORD_VERSION}


def from_dict(data: Mapping) -> EnvironmentRecord:
    """Inverse of `to_dict`; refuses a version it does not know."""
    if data.get("version") != ENVIRONMENT_RECORD_VERSION:
        raise SpyreRegressError(f"environment record version {data.get('version')!r} is not "
                                f"{ENVIRONMENT_RECORD_VERSION}: upgrade spyre-regress to read "
                                "it")
    try:
        return from_json(EnvironmentRecord, {k: v for k, v in data.items() if k != "version"},
                         "environment record")
    except RecordError as error:
        raise SpyreRegressError(f"a stored environment record does not read: {error}") \
            from None
