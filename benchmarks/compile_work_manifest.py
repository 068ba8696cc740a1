"""What compile work's parent and child hand each other, and how the parent reads it back.

The parent (`compile_work.py`) writes one request per share (`write_request`); the child
(`compile_work_child.py`, under valgrind) counts the share and writes a manifest: one label
per callgrind dump, in dump order, with what failed and how long each phase took. The parent
then reads callgrind's dumps (`parse_dump`, `dump_totals`), joins the processes' manifests
(`merged`) and pairs labels with totals (`paired`). Both sides load this file by path: they
run as copies in a suite's folder or beside a probe, where no package holds them, and the
child runs as a script with `-P`; so it imports the standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

COMPILE_WORK_VERSION = 2  # 2: the grid dealt into shares, one valgrind process each

Point = tuple[str, int, "int | None"]


class CompileWorkError(RuntimeError):
    """The measuring process failed as a whole (valgrind, torch or the interpreter)."""


def write_request(path: Path, share: Sequence[Point], *, config: Mapping[str, Any] | None,
                  stages: Sequence[str] | None, instrument: str, preload: Sequence[str],
                  backend: str | None, workloads: Path) -> None:
    """One share's request: its points, the compiler's settings, the stages to count, how
    to instrument, the modules to import first, the backend module and the catalogue (both
    by path)."""
    path.write_text(json.dumps({
        "version": COMPILE_WORK_VERSION, "points": share, "config": dict(config or {}),
        "stages": list(stages) if stages else None, "instrument": instrument,
        "preload": list(preload), "backend": backend, "workloads": str(workloads)}))


def parse_dump(text: str) -> int:
    """The instruction total of one callgrind dump (its `summary:`, else `totals:` line)."""
    totals = None
    for line in text.splitlines():
        if line.startswith("summary:"):
            return int(line.split()[1])
        if line.startswith("totals:"):
            totals = int(line.split()[1])
    if totals is None:
        raise CompileWorkError("callgrind dump has neither a summary: nor a totals: line")
    return totals


def dump_totals(dumps: Path, manifest: Mapping[str, Any]) -> dict[int, list[int]]:
    """Each share's dump totals in dump order: `<dumps>.<pid>.1`, `.2`, ... (callgrind's
    numbering of explicit dumps; `<dumps>.<pid>` alone is the empty dump at exit)."""
    totals = {}
    for share in manifest.get("shares", []):
        pid = share["pid"]
        found: list[int] = []
        while (path := Path(f"{dumps}.{pid}.{len(found) + 1}")).exists():
            found.append(parse_dump(path.read_text()))
        totals[pid] = found
    return totals


def merged(manifests: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The manifests of a grid's processes as one: their shares in order; the first
    process's stages and check; what any of them found missing."""
    first = manifests[0]
    return {**first, "shares": [share for m in manifests for share in m.get("shares", [])],
            "missing": next((m["missing"] for m in manifests if m.get("missing")), None),
            "running_on_valgrind": min((m.get("running_on_valgrind", 1) for m in manifests),
                                       default=1)}


def paired(manifest: Mapping[str, Any], totals: Mapping[int, Sequence[int]]
           ) -> tuple[dict[Point, dict[str, int]], dict[Point, str], dict[str, Any]]:
    """Each share's labels (one per dump, in dump order) paired with its dumps' totals:
    instructions per stage of each point, the points that failed and why, and each share's
    phases in seconds."""
    counts: dict[Point, dict[str, int]] = {}
    errors: dict[Point, str] = {}
    for share in manifest.get("shares", []):
        labels, dumped = share["labels"], totals.get(share["pid"], ())
        if len(labels) != len(dumped):
            raise CompileWorkError(f"{len(labels)} measured stages but {len(dumped)} callgrind "
                                   "dumps: was the child really running under callgrind?")
        for (workload, seq, width, stage, error), total in zip(labels, dumped, strict=True):
            point = (workload, seq, width)
            if error is None:  # a stage run in several slices is dumped once per slice
                stage_counts = counts.setdefault(point, {})
                stage_counts[stage] = stage_counts.get(stage, 0) + total
            else:
                errors[point] = f"{stage}: {error}"
        for workload, seq, width, error in share.get("failed_points", []):
            errors[workload, seq, width] = error
    for point in errors:  # a point that failed somewhere reports no partial pipeline
        counts.pop(point, None)
    phases = {"shares": [{k: round(v, 1) for k, v in share.get("seconds", {}).items()}
                         for share in manifest.get("shares", [])]}
    return counts, errors, phases
