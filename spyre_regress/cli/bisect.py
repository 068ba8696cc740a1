"""`spyre-regress bisect`: the first bad commit for one benchmark series."""

from __future__ import annotations

import argparse
from pathlib import Path

from regressions import git, metrics
from regressions.probing import suite
from spyre_regress.cli import checks, common, targets


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "bisect", "find the first bad commit for one benchmark",
        "Binary search over first-parent history with sequential same/different/unknown "
        "verdicts (docs/bisection.md). Exit 0: culprit found; 1: not reproduced or no single "
        "culprit; 2: usage error.",
        example="spyre-regress bisect --repo . --good v1 --bad HEAD --bench ExecuteDeviceTime "
                "--params \"('mlp', 127)\"")
    targets.add_range_arguments(p)
    p.add_argument("--bench", required=True, type=common.regex, metavar="REGEX",
                   help="selects exactly one benchmark of the repository's suite")
    p.add_argument("--params", default="", metavar="PARAMS",
                   help="the parameter combination as detect prints it, e.g. \"('mlp', 127)\"; "
                        "required when the benchmark has parameters")
    p.add_argument("--results", type=Path, metavar="DIR",
                   help="a results directory to record the probes' measurements in (asv's "
                        "format; keep it apart from asv's own results)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    good, bad = checks.commit_range(args.repo, args.good, args.bad)
    checks.writable_file(args.json, "--json")
    checks.writable_dir(args.work_dir, "--work-dir")
    checks.writable_dir(args.results, "--results")
    import pandas as pd  # after the checks: pandas, scipy

    from regressions.bisection.commits import BISECTION_VERSION
    from regressions.investigation.investigator import parse_params
    from regressions.investigation.model import Target
    from reports.narrative import quantity

    given = parse_params(args.params)
    with common.work_dir(args.work_dir) as work:
        found = checks.benchmark(suite.discover(args.repo, work), args.bench)
        params = checks.params(found, given, args.params)
        investigator = targets.investigator(args, work, args.results)
        metric = metrics.metric_for(found.name)
        target = Target(benchmark=found.name, params=params, workload="", seq=0, width=None,
                        metric=metric.name)
        result = investigator.bisect(good, bad, target)
    table = pd.DataFrame([{"commit": s.commit[:10], "samples": s.n,
                           "median": quantity(s.median, metric.unit, metric.display),
                           "vs": s.reference, "p": common.fmt(s.pvalue, ".1e"),
                           "verdict": s.verdict, "note": s.note} for s in result.steps])
    print(f"{target.label}: {metric.label} per commit (median of its samples)")
    print(table.to_string(index=False))
    print(f"{result.commits_in_range} commits in range; {result.commits_measured} measured "
          f"(the ends included); {len(result.steps)} verdicts")
    if result.culprit:
        info = git.commit_info(suite.history_repo(args.repo), result.culprit)
        print(f"culprit {info.sha[:12]} {info.subject}")
    elif not result.reproduced:
        print("the regression did not reproduce between --good and --bad")
    else:
        print(f"no single culprit: one of {[c[:12] for c in result.candidates]}")
    common.write_json(args.json, result, BISECTION_VERSION)
    return common.EXIT_OK if result.culprit else common.EXIT_REGRESSED
