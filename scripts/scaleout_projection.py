"""Project a nightly's wall time against the number of workers, from measured units of work.

Reads the `units.json` a nightly on an executor writes into its state directory (every unit
of work it ran, with its seconds) and projects a night of `--commits` new commits on W
workers, one per benchmark host, for each W asked:

- benchmarking: every commit's units of the families that may share a host dealt out to the
  W workers at once (longest first, to the least loaded), then the wall-clock families' units,
  one per host at a time, the same way; each family's unit costs its measured mean;
- re-measurement: the measured night's re-measurement units, per commit, scaled to the
  commits, run the same two ways;
- investigations: held at what the measured night spent in probes (they depend on what
  regressed, not on how many commits landed), and with more than one worker divided by the
  measured bisection speed-up (`--probe-speedup`, rounds with one probe over rounds with
  several, from scripts/bisection_quality.py).

Environment builds are left out: each worker builds its asv environment once and keeps it.

    python scripts/scaleout_projection.py STATE/units.json --commits 30 --workers 1 2 4 8 32
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from pathlib import Path

UNIT = re.compile(r"^(?:(again|probe) )?(\S+) at (\w+)$")


def alone(unit: dict) -> bool:
    """Whether a unit held its host's clock slot (`alone`; `clock` in units.json version 2)."""
    return bool(unit.get("alone", unit.get("clock")))


def read_units(path: Path) -> list[dict]:
    document = json.loads(Path(path).read_text())
    if document.get("version") not in (1, 2):
        raise SystemExit(f"{path}: units format version {document.get('version')!r}, "
                         "expected 1 or 2")
    return document["units"]


def makespan(costs: list[float], workers: int) -> float:
    """Longest-first list scheduling of `costs` on `workers` machines."""
    loads = [0.0] * workers
    for cost in sorted(costs, reverse=True):
        loads[loads.index(min(loads))] += cost
    return max(loads, default=0.0)


def project(units: list[dict], commits: int, workers: int, probe_speedup: float) -> dict:
    measured_commits = {m.group(3) for u in units if (m := UNIT.match(u["name"]))
                        and m.group(1) is None}
    scale = commits / max(1, len(measured_commits))
    bench: dict[tuple[str, bool], list[float]] = {}
    again: list[tuple[float, bool]] = []
    probes = 0.0
    for u in units:
        m = UNIT.match(u["name"])
        if m is None:
            continue
        if m.group(1) == "probe":
            probes += u["seconds"]
        elif m.group(1) == "again":
            again.append((u["seconds"], alone(u)))
        else:
            bench.setdefault((m.group(2), alone(u)), []).append(u["seconds"])
    shared = [statistics.mean(v) for (_, clock), v in bench.items() if not clock] * commits
    clocked = [statistics.mean(v) for (_, clock), v in bench.items() if clock] * commits
    again_shared = [s for s, clock in again if not clock] * math.ceil(scale)
    again_clock = [s for s, clock in again if clock] * math.ceil(scale)
    benchmarking = makespan(shared, workers) + makespan(clocked, workers)
    remeasuring = makespan(again_shared, workers) + makespan(again_clock, workers)
    investigating = probes / (probe_speedup if workers > 1 else 1.0)
    return {"workers": workers, "benchmark": benchmarking, "remeasure": remeasuring,
            "investigate": investigating,
            "night": benchmarking + remeasuring + investigating}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("units", type=Path, help="a nightly's STATE/units.json")
    parser.add_argument("--commits", type=int, default=30, help="new commits a night")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8, 32])
    parser.add_argument("--probe-speedup", type=float, default=1.0,
                        help="bisection rounds with one probe / with several (measured)")
    args = parser.parse_args()
    units = read_units(args.units)
    print(f"from {len(units)} measured units ({args.units}); {args.commits} commits a night")
    print(f"{'workers':>7} {'benchmark':>10} {'re-measure':>11} {'investigate':>12} "
          f"{'night':>9}")
    for workers in args.workers:
        p = project(units, args.commits, workers, args.probe_speedup)
        print(f"{workers:7d} {p['benchmark'] / 60:9.1f}m {p['remeasure'] / 60:10.1f}m "
              f"{p['investigate'] / 60:11.1f}m {p['night'] / 60:8.1f}m")
    return 0


if __name__ == "__main__":
    sys.exit(main())
