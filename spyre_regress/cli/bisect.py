"""`spyre-regress bisect`: the first bad commit for one benchmark series."""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from regressions import bisect, git, metrics, suite
from regressions.errors import SpyreRegressError
from regressions.investigation import Target
from spyre_regress.cli import common, targets


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "bisect", "find the first bad commit for one benchmark",
        "Binary search over first-parent history with sequential same/different/unknown "
        "verdicts (docs/bisection.md). Exit 0: culprit found; 1: not reproduced or no single "
        "culprit; 2: usage error.",
        "spyre-regress bisect --repo . --good v1 --bad HEAD --bench ExecuteDeviceTime "
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
    from regressions.investigate import parse_params

    with common.work_dir(args.work_dir) as work:
        benchmark, param_names = resolve_benchmark(args.repo, args.bench, work)
        params = parse_params(args.params)
        if len(params) != len(param_names):
            raise SpyreRegressError(f"{benchmark} takes parameters {list(param_names)}; pass "
                                    f"--params with {len(param_names)} value(s)")
        investigator = targets.investigator(args, work, args.results)
        metric = metrics.metric_for(benchmark).name
        target = Target(benchmark, params, "", 0, None, metric)
        good, bad = git.resolve(args.repo, args.good), git.resolve(args.repo, args.bad)
        result = investigator.bisect(good, bad, target)
    unit = metrics.metric_for(benchmark).unit
    table = pd.DataFrame([{"commit": s.commit[:10], "samples": s.n,
                           f"median ({unit})" if unit else "median": common.fmt(s.median, ".4g"),
                           "vs": s.reference, "p": common.fmt(s.pvalue, ".1e"),
                           "verdict": s.verdict, "note": s.note} for s in result.steps])
    print(table.to_string(index=False))
    print(f"{result.commits_in_range} commits in range; {result.commits_measured} measured "
          f"(the ends included); {len(result.steps)} verdicts")
    if result.culprit:
        info = git.commit_info(args.repo, result.culprit)
        print(f"culprit {info.sha[:12]} {info.subject}")
    elif not result.reproduced:
        print("the regression did not reproduce between --good and --bad")
    else:
        print(f"no single culprit: one of {[c[:12] for c in result.candidates]}")
    common.write_json(args.json, result, bisect.FORMAT_VERSION)
    return common.EXIT_OK if result.culprit else common.EXIT_REGRESSED


def resolve_benchmark(repo: Path, pattern: str, work: Path) -> tuple[str, tuple[str, ...]]:
    """The one benchmark of the repository's suite that `pattern` selects."""
    import re

    known = suite.discover(repo, work)
    found = {name: names for name, names in known.items() if re.search(pattern, name)}
    if len(found) != 1:
        listed = ", ".join(sorted(found)[:8]) or "none"
        hint = "" if found else f"; benchmarks: {', '.join(sorted(known)[:8])}, ..."
        raise SpyreRegressError(f"--bench {pattern!r} matches {len(found)} benchmarks "
                                f"({listed}); make it match exactly one{hint}")
    return next(iter(found.items()))
