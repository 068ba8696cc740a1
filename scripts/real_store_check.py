"""Held-out check of detection on a real asv results store: as is, and read the other way.

Noise and machine changes raise as many "regressions" when every series is read the other
way round (`--higher-is-better '.'`: improvements become regressions) as when read as is;
code regressions do not. So this runs detection both ways on each machine of a store and
prints the two regression-alert counts, the wide alerts (many members: dozens of unrelated
benchmarks moving together at one commit is what a machine change looks like), and the
environment alerts that took such clusters apart. With `--regressions`, asv publish's own
list of open regressions (`regressions.json` of the published site) is set beside: for each,
whether detection reports the series, explains it by an environment alert, or neither.

With `--agreement SITE` (the published site: its `regressions.json` and `index.json`, whose
`revision_to_hash` names asv's revisions) detection runs once, as is, and each regression
asv lists is set against detect's alerts: `agree` when detect has an open regression on the
same series whose range (good, bad] overlaps asv's newest jump (before, after], else why not
(recovered, another range, an environment alert, a one-commit excursion, not significant).
asv's list compares the newest value against the best ever seen after it (asv's
`step_detect.detect_regressions`, called by `plugins/regressions.py`;
https://github.com/airspeedvelocity/asv), so a dip of a commit or two to a better level
makes it list a regression that is none.

    python scripts/real_store_check.py --results STORE/results --machine NAME \\
        [--regressions SITE/regressions.json] [--wide 10]
    python scripts/real_store_check.py --results STORE/results --machine NAME \\
        --agreement SITE
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from regressions.detection import detect
from regressions.detection.alerts import Alert, cluster_alerts
from regressions.detection.detect import Regression
from regressions.records import results, standing


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


def site_entries(site: Path, machine: str) -> tuple[list[dict], dict[str, int]]:
    """asv publish's open regressions of `machine` (name, python, newest jump as hashes and
    values), and each commit's asv revision."""
    to_hash = json.loads((site / "index.json").read_text())["revision_to_hash"]
    revision = {sha: int(rev) for rev, sha in to_hash.items()}
    out = []
    for entry in json.loads((site / "regressions.json").read_text())["regressions"]:
        found = re.search(r"machine-([^/]+)", entry[1])
        if not found or found.group(1) != machine:
            continue
        before, after, old, new = entry[6][-1]
        out.append({"name": entry[0], "python": (entry[2] or {}).get("python"),
                    "before": -1 if before is None else before, "after": after,
                    "ratio": new / old if old else float("inf"),
                    "after_hash": to_hash.get(str(after), "?")})
    return out, revision


def agreement(entry: dict, found: detect.Detection, known: dict[standing.Key, standing.Standing],
              revision: dict[str, int]) -> tuple[str, str]:
    """(verdict, why) for one regression asv lists, against detect's alerts."""
    def mine(r: Any) -> bool:  # a regression, an environment alert's member, a transient
        return f"{r.benchmark}{r.params}" == entry["name"] and (
            entry["python"] is None or f"py{entry['python']}" in r.env)

    def overlaps(r: Regression) -> bool:
        good, bad = revision.get(r.good_commit, -2), revision.get(r.bad_commit, -2)
        return min(bad, entry["after"]) - max(good, entry["before"]) > 0

    ours = [r for r in found.regressions if mine(r)]
    for r in ours:
        if overlaps(r):
            mark = known[standing.key_of(r)]
            if mark.recovered_in is None:
                return "agree", f"open, x{r.ratio or 0:.2f} at {r.bad_commit[:8]}"
            return "recovered", (f"detect's regression here came back at "
                                 f"{mark.recovered_in[1][:8]}")
    if ours:
        return "other range", "detect: " + ", ".join(
            f"{r.bad_commit[:8]} ({known[standing.key_of(r)].status})" for r in ours)
    if any(mine(m) for e in found.environment for m in e.members):
        return "environment", "the step is a machine change detect explains"
    dips = [t for t in found.transients if mine(t)]
    if dips:
        return "one-commit dip", (f"a one-commit excursion x{dips[-1].ratio:.2f} at "
                                  f"{dips[-1].commit[:8]}: no lasting level")
    return "not reported", "no significant lasting step past the floor"


def agreement_table(results_dir: Path, machine: str, site: Path) -> None:
    """detect once, as is; one line per regression asv lists, then the counts."""
    frame = results.load_results(results_dir, machine=machine)
    series = results.series_from_frame(frame)
    del frame
    found = detect.run_detection(series)
    known = standing.standings(found.regressions, series, found.readings)
    marked = standing.ranked(cluster_alerts(found.regressions), known)
    still = sum(m.recovered_in is None for _, m in marked)
    entries, revision = site_entries(site, machine)
    print(f"{machine}: {len(series)} series; detect: {len(marked)} alert(s), {still} open; "
          f"asv publish lists {len(entries)}")
    tally: defaultdict[str, int] = defaultdict(int)
    for entry in entries:
        verdict, why = agreement(entry, found, known, revision)
        tally[verdict] += 1
        print(f"  x{entry['ratio']:.2f} {entry['name'][:90]} (py{entry['python']}) at "
              f"{entry['after_hash'][:8]}: {verdict}: {why}")
    print("  " + ", ".join(f"{k} {n}" for k, n in sorted(tally.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, required=True)
    parser.add_argument("--machine", action="append", required=True)
    parser.add_argument("--regressions", type=Path, help="asv publish's regressions.json")
    parser.add_argument("--wide", type=int, default=10, help="members that make an alert wide")
    parser.add_argument("--agreement", type=Path, metavar="SITE", help="asv publish's site "
                        "(regressions.json, index.json): agreement with its list only")
    args = parser.parse_args()
    if args.agreement is not None:
        for machine in args.machine:
            agreement_table(args.results, machine, args.agreement)
        return
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
