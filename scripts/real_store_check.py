"""Held-out check of detection on a real asv results store: as is, and read the other way.

Noise and machine changes raise as many "regressions" when every series is read the other
way round (`--higher-is-better '.'`: improvements become regressions) as when read as is;
code regressions do not. So this runs detection both ways on each machine of a store and
prints the two regression-alert counts, the wide alerts (many members: dozens of unrelated
benchmarks moving together at one commit is what a machine change looks like), and the
environment alerts that took such clusters apart. With `--regressions`, asv publish's own
list of open regressions (`regressions.json` of the published site) is set beside: for each,
whether detection reports the series, explains it by an environment alert, or neither.

    python scripts/real_store_check.py --results STORE/results --machine NAME \\
        [--regressions SITE/regressions.json] [--wide 10]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path

from regressions.detection import detect
from regressions.detection.alerts import Alert, cluster_alerts
from regressions.records import results


def run(results_dir: Path, machine: str, mirrored: bool) -> tuple[detect.Detection, list]:
    frame = results.load_results(results_dir, machine=machine)
    series = results.series_from_frame(frame, higher_is_better=(".",) if mirrored else ())
    found = detect.run_detection(series)
    return found, cluster_alerts(found.regressions)


def wide(alert: Alert) -> str:
    ratios = [m.ratio for m in alert.members if m.ratio]
    median = f"median x{statistics.median(ratios):.3f}" if ratios else "failures"
    return (f"{alert.kind} {alert.good_commit[:8]}..{alert.bad_commit[:8]}: "
            f"{len(alert.members)} members from "
            f"{len({m.benchmark for m in alert.members})} benchmarks, {median}")


def published(path: Path | None, machine: str) -> list[tuple[str, float]]:
    """asv publish's open regressions of `machine`: (benchmark(params), new / old)."""
    if path is None:
        return []
    out = []
    for entry in json.loads(path.read_text())["regressions"]:
        name, graph, new, old = entry[0], entry[1], entry[4], entry[5]
        found = re.search(r"machine-([^/]+)", graph)
        if found and found.group(1) == machine:
            out.append((name, new / old if old else float("inf")))
    return out


def verdict(name: str, found: detect.Detection) -> str:
    """What detection made of one series asv publish lists."""
    mine = [r for r in found.regressions if r.name == name]
    if mine:
        return "regression at " + ", ".join(r.bad_commit[:8] for r in mine)
    explained = [a for a in found.environment if any(m.name == name for m in a.members)]
    if explained:
        return "environment alert at " + ", ".join(a.bad_commit[:8] for a in explained)
    return "not reported"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--machine", action="append", required=True)
    parser.add_argument("--regressions", type=Path, help="asv publish's regressions.json")
    parser.add_argument("--wide", type=int, default=10, help="members that make an alert wide")
    args = parser.parse_args()
    for machine in args.machine:
        outcome = {}
        for mirrored in (False, True):
            found, alerts = run(args.results, machine, mirrored)
            outcome[mirrored] = (found, alerts)
            label = "mirrored (--higher-is-better '.')" if mirrored else "as is"
            print(f"{machine}, {label}: {len(alerts)} regression alert(s), "
                  f"{sum(len(a.members) >= args.wide for a in alerts)} with >= {args.wide} "
                  f"members; {len(found.environment)} environment alert(s) explaining "
                  f"{sum(len(e.members) for e in found.environment)} regression(s)")
            for alert in alerts:
                if len(alert.members) >= args.wide:
                    print(f"  wide: {wide(alert)}")
            kinds: defaultdict[tuple[str, str], int] = defaultdict(int)
            for e in found.environment:
                kinds[e.cause, e.direction] += 1
            print("  environment alerts by cause and direction: "
                  + (", ".join(f"{c}/{d} {n}" for (c, d), n in sorted(kinds.items())) or "none"))
        listed = published(args.regressions, machine)
        if args.regressions is not None:
            print(f"  asv publish lists {len(listed)} open regression(s) for {machine}:")
            for name, ratio in listed:
                print(f"    x{ratio:.2f} {name[:110]}: {verdict(name, outcome[False][0])}")


if __name__ == "__main__":
    main()
