"""`spyre-regress minimize`: the smallest program that keeps the regression."""

from __future__ import annotations

import argparse
from pathlib import Path

from regressions import metrics
from regressions.records import files
from spyre_regress.cli import checks, common, targets

# Minimization keeps a cost that survives cutting the program down (metrics.Metric.minimizable)
MINIMIZABLE = tuple(m.name for m in metrics.METRICS if m.minimizable and m.probe)


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "minimize", "shrink the probe program, keeping the regression",
        "Delta debugging over the probe's ATen graph until removing any op removes the "
        f"regression; writes a standalone module. --metric: {' or '.join(MINIMIZABLE)} (a "
        "compile-time cost vanishes with the graph that pays it). Exit 0: written; 1: the "
        "full program shows no regression.",
        example="spyre-regress minimize --repo . --good HEAD~1 --bad HEAD --workload mlp --shape "
                "127 --out repro.py")
    targets.add_range_arguments(p)
    targets.add_workload_arguments(p, MINIMIZABLE)
    p.add_argument("--out", required=True, type=Path, metavar="FILE.py",
                   help="where the minimized program goes (a new or replaced file)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    good, bad, target = targets.range_and_target(args)
    checks.writable_file(args.out, "--out")
    from regressions.bisection import minimize

    with common.work_dir(args.work_dir) as work:
        investigator = targets.investigator(args, work)
        result = investigator.minimize(good, bad, target,
                                       investigator.prober.full_candidate(target))
    if result is None:
        print(f"nothing to minimize: the full program shows no {target.metric} regression")
        return common.EXIT_REGRESSED
    files.write_text(args.out, result.source)
    print(f"{result.ops_before} -> {result.ops_after} ops in {result.queries} queries; "
          f"bad/good noise-free {target.metric} ratio {result.ratio_before:.3f} on the "
          f"captured program -> {result.ratio_after:.3f} on the minimized one; wrote {args.out}")
    common.write_json(args.json, result, minimize.MINIMIZED_VERSION)
    return common.EXIT_OK
