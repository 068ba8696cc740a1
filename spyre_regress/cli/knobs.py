"""`spyre-regress knobs`: the compiler knob that restores the metric at the bad commit."""

from __future__ import annotations

import argparse

from regressions import git
from spyre_regress.cli import common, targets

FORMAT_VERSION = 1


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "knobs", "find the compiler knob that restores the metric",
        "At the bad commit, toggle every Config decision and narrow the winner to one "
        "application (docs/bisection.md). Exit 0: a knob restores the metric; 1: none does.",
        "spyre-regress knobs --repo . --good HEAD~1 --bad HEAD --workload mlp --shape 127")
    targets.add_range_arguments(p)
    targets.add_workload_arguments(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from regressions.investigate import good_metric

    target = targets.target(args)
    with common.work_dir(args.work_dir) as work:
        investigator = targets.investigator(args, work)
        good, bad = git.resolve(args.repo, args.good), git.resolve(args.repo, args.bad)
        report = investigator.stages(good, bad, target)
        baseline = good_metric(report, target)
        workaround = None if baseline is None else investigator.knobs(bad, target, baseline,
                                                                      report.width)
    if workaround is None:
        print(f"no knob restores the {target.metric} of the bad build to within "
              "25% of the good build's")
        return common.EXIT_REGRESSED
    unit = workaround.unit
    print(f"{workaround.program.describe()}, {target.metric} in {unit or 'its unit'}: "
          f"good {workaround.metric_good:.6g}, bad {workaround.metric_bad:.6g}")
    for trial in workaround.trials:
        print(f"  {trial.knob}={trial.value!r}: {trial.metric:.6g} {unit}")
    print(f"workaround: Config({workaround.knob}={workaround.value!r}) recovers "
          f"{workaround.recovered:.0%}; decisive application: "
          f"{workaround.decisive_application}")
    common.write_json(args.json, workaround, FORMAT_VERSION)
    return common.EXIT_OK
