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
makes it list a regression that is none. For a series detect does not report, the line says
what detect tested there: the step's ratio, its p-value and its q-value in the run's false
discovery rate family, and how many measured points the series has before and after asv's
jump (one value per commit and a handful of points cap a rank test's p-value).

Without `--repo`, history is the order of the dates asv stored, which are author dates: on a
store of rebased commits they disagree with history. `--history site` reads history from the
site's own revision numbers instead (`revision_to_hash`: the order asv publish graphs and
judges in); results of commits the site has no revision for are left out, as asv's graphs
leave them out.

    python scripts/real_store_check.py --results STORE/results --machine NAME \\
        [--regressions SITE/regressions.json] [--wide 10]
    python scripts/real_store_check.py --results STORE/results --machine NAME \\
        --agreement SITE [--history site]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from regressions import metrics
from regressions.detection import changepoints, detect
from regressions.detection.alerts import Alert, cluster_alerts
from regressions.detection.detect import Candidate
from regressions.records import results, standing
from regressions.records.results_store import ResultsStore


def run(results_dir: Path, machine: str, mirrored: bool) -> tuple[detect.Detection, list]:
    frame = ResultsStore(results_dir, machine).frame()
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


def in_site_order(frame: Any, revision: dict[str, int]) -> Any:
    """The results with each commit's position its asv revision; commits without one (not on
    the branch the site graphs) left out."""
    frame = frame[frame["commit"].isin(list(revision))].reset_index(drop=True)
    frame["commit"] = frame["commit"].cat.remove_unused_categories()
    codes = frame["commit"].cat.codes.to_numpy()
    place = [revision[c] for c in frame["commit"].cat.categories]
    frame["position"] = [place[k] for k in codes.tolist()]
    return frame


def before_jump(commits: Sequence[str], entry: dict, revision: dict[str, int]) -> list[int]:
    """Indexes of `commits` before asv's jump: those ahead of its after-commit where the
    series has it, else those whose revision is older (or that have none)."""
    if entry["after_hash"] in commits:
        return list(range(list(commits).index(entry["after_hash"])))
    return [k for k, c in enumerate(commits) if revision.get(c, -1) < entry["after"]]


def untested(entry: dict, found: detect.Detection, revision: dict[str, int], mine: Any,
             series: Sequence[detect.Series]) -> str:
    """Why detect reports nothing for a series asv lists: the worsening it tested nearest
    asv's jump (ratio, p, q and why it fell short), and the measured points either side of
    the jump on the series that has points on both (the longest, when several do)."""
    def apart(c: Candidate) -> tuple[int, int]:  # revisions between the ranges; then width
        good, bad = revision.get(c.good_commit, -2), revision.get(c.bad_commit, -2)
        return (max(0, max(good, entry["before"]) - min(bad, entry["after"])),
                abs(bad - good))

    sides = []
    for s in series:
        if mine(s):
            measured = [c for c, v in zip(s.commits, s.samples, strict=True) if v is not None]
            after = len(measured) - len(before_jump(measured, entry, revision))
            sides.append((0 < after < len(measured), len(measured), len(measured) - after,
                          after))
    counts = ""
    if sides:
        _, _, before, after = max(sides)
        counts = f"; {before} point(s) before asv's jump, {after} from it"
    tried = sorted((c for c in found.candidates if mine(c.series) and c.worsening > 0),
                   key=apart)
    if not tried or apart(tried[0])[0] > 0:
        return "no worsening tested at asv's jump" + counts
    c = tried[0]
    floor = metrics.floor_for(c.series.name)
    if c.environment:
        reason = "an environment alert explains it"
    elif c.q is None:
        reason = f"below the floor ({c.worsening:.3f} < {floor})"
    elif c.p is not None and c.p > detect.ALPHA:
        reason = f"p above {detect.ALPHA}"
    elif not math.isnan(c.q) and c.q > detect.FDR:
        reason = f"q above {detect.FDR}"
    elif not detect.excludes_no_change(c):
        reason = f"its interval {c.ci[0]:.3f}-{c.ci[1]:.3f} holds no change"
    elif c.p is not None and c.p > detect.REPORT_PVALUE and \
            detect.one_value_per_commit(c.series):
        reason = (f"p above {detect.REPORT_PVALUE}, the ceiling of a series judged on one value "
                  "per commit")
    else:
        reason = "a one-commit excursion of its kind took it"
    p = "exact" if c.p is None else f"{c.p:.3g}"
    q = "-" if c.q is None else f"{c.q:.2g}"
    return f"x{c.ratio:.3f} at {c.bad_commit[:8]}, p {p}, q {q}: {reason}" + counts


def dip_before(entry: dict, series: Sequence[detect.Series], revision: dict[str, int],
               mine: Any) -> tuple[str, float] | None:
    """(commit, ratio) when the series' last measured point before asv's jump is a one-commit
    excursion to a better level (`changepoints.analyse_series`, as detection reads the
    series): the best value asv judges the newest one against is that point."""
    for s in series:
        if not mine(s):
            continue
        kept = [(c, v) for c, v in zip(s.commits, s.samples, strict=True)
                if v is not None and all(map(math.isfinite, v))]
        before = before_jump([c for c, _ in kept], entry, revision)
        if not before or len(before) == len(kept):
            continue
        metric = metrics.metric_for(s.name)
        declared = metric.deterministic if metric.deterministic is not None else s.deterministic
        read = changepoints.analyse_series([v for _, v in kept], deterministic=declared,
                                           epsilon=metric.tolerance)
        for t in read.transients:
            better = t.ratio > 1 if s.higher_is_better else t.ratio < 1
            if t.index == before[-1] and better:
                return kept[t.index][0], t.ratio
    return None


def agreement(entry: dict, found: detect.Detection, known: dict[standing.Key, standing.Standing],
              revision: dict[str, int], series: Sequence[detect.Series] = ()
              ) -> tuple[str, str]:
    """(verdict, why) for one regression asv lists, against detect's alerts: the first of
    agree or recovered (a regression of detect's whose range meets asv's newest jump), an
    environment alert there, a one-commit dip just before the jump, regressions of detect's
    elsewhere on the series, else not reported (with what detect tested at the jump)."""
    def mine(r: Any) -> bool:  # a regression, an environment alert's member, a series
        return f"{r.benchmark}{r.params}" == entry["name"] and (
            entry["python"] is None or f"py{entry['python']}" in r.env)

    def overlaps(r: Any) -> bool:  # a regression of detect's or an environment member
        good, bad = revision.get(r.good_commit, -2), revision.get(r.bad_commit, -2)
        return min(bad, entry["after"]) - max(good, entry["before"]) > 0

    ours = [r for r in found.regressions if mine(r) and r.kind != metrics.FAILURE]
    for r in ours:
        if overlaps(r):
            mark = known[standing.key_of(r)]
            if mark.recovered_in is None:
                return "agree", f"open, x{r.ratio or 0:.2f} at {r.bad_commit[:8]}"
            return "recovered", (f"detect's regression here came back at "
                                 f"{mark.recovered_in[1][:8]}")
    for e in found.environment:
        members: Sequence[Any] = e.members  # detect's regressions, as the alert explains them
        for m in members:
            if mine(m) and overlaps(m):
                return "environment", (f"x{m.ratio or 0:.2f} at {m.bad_commit[:8]}, a machine "
                                       f"change detect explains")
    dip = dip_before(entry, series, revision, mine)
    if dip is not None:
        return "one-commit dip", (f"the point before asv's jump, {dip[0][:8]}, is a one-commit "
                                  f"excursion x{dip[1]:.2f} to a better level")
    if ours:
        return "other range", "detect: " + ", ".join(
            f"{r.bad_commit[:8]} ({known[standing.key_of(r)].status})" for r in ours) + \
            "; at asv's jump: " + untested(entry, found, revision, mine, series=series)
    return "not reported", untested(entry, found, revision, mine, series=series)


def agreement_table(results_dir: Path, machine: str, site: Path, history: str = "dates",
                    repo: Path | None = None) -> None:
    """detect once, as is; one line per regression asv lists, then the counts."""
    entries, revision = site_entries(site, machine)
    frame = ResultsStore(results_dir, machine, repo).frame()
    if history == "site":
        frame = in_site_order(frame, revision)
    series = results.series_from_frame(frame)
    commits = frame["commit"].nunique()
    del frame
    found = detect.run_detection(series)
    known = standing.standings(found.regressions, series, found.readings)
    marked = standing.ranked(cluster_alerts(found.regressions), known)
    still = sum(m.recovered_in is None for _, m in marked)
    print(f"{machine}: {len(series)} series; detect: {len(marked)} alert(s), {still} open; "
          f"asv publish lists {len(entries)}; {commits} commits in the order of "
          f"{'the site' if history == 'site' else '--repo' if repo else 'the stored dates'}")
    tally: defaultdict[str, int] = defaultdict(int)
    for entry in entries:
        verdict, why = agreement(entry, found, known, revision, series=series)
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
    parser.add_argument("--history", choices=("dates", "site"), default="dates",
                        help="with --agreement: commit order from asv's stored dates (or "
                        "--repo), or from the site's revision numbers")
    parser.add_argument("--repo", type=Path, help="with --agreement: history is the "
                        "first-parent chain of HEAD in this repository")
    args = parser.parse_args()
    if args.agreement is not None:
        for machine in args.machine:
            agreement_table(args.results, machine, args.agreement, args.history, repo=args.repo)
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
