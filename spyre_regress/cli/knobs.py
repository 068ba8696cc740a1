"""`spyre-regress knobs`: the compiler knob that restores the metric at the bad commit."""

from __future__ import annotations

import argparse

from regressions import metrics
from spyre_regress.cli import common, targets

WORKAROUND_VERSION = 1


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "knobs", "find the compiler knob that restores the metric",
        "At the bad commit, toggle every Config decision and narrow the winner to one "
        "application (docs/bisection.md). Exit 0: a knob restores the metric; 1: none does.",
        example="spyre-regress knobs --repo . --good HEAD~1 --bad HEAD --workload mlp --shape 127")
    targets.add_range_arguments(p)
    targets.add_workload_arguments(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    good, bad, target = targets.range_and_target(args)
    from backends import interface
    from regressions.bisection.knobs import RESTORED  # after the checks: scipy, torch
    from regressions.investigation.investigator import measured_regression
    from reports.narrative import metric_value

    with common.work_dir(args.work_dir) as work:
        investigator = targets.investigator(args, work)
        report = investigator.stages(good, bad, target)
        regression = measured_regression(report, target)
        workaround = None if regression is None else investigator.knobs(
            bad, target, regression, report.width)
        words = interface.wording(investigator.prober.backend)
    if workaround is None:
        print(f"no knob recovers {RESTORED:.0%} of the {target.metric} regression at the "
              "bad build")
        return common.EXIT_REGRESSED

    def value(x: float) -> str:
        return metric_value(x, workaround.unit, target.measures, target.error, words=words)

    print(f"noise-free {metrics.by_name(target.metric).label} of "
          f"{workaround.program.describe()}: good build {value(workaround.metric_good)}, bad "
          f"build {value(workaround.metric_bad)}; the bad build with each other knob value:")
    for trial in workaround.trials:
        print(f"  {trial.knob}={trial.value!r}: {value(trial.metric)}")
    print(f"workaround: {words.knob_setting(workaround.knob, workaround.value)} recovers "
          f"{workaround.recovered:.0%}; decisive application: "
          f"{workaround.decisive_application}")
    common.write_json(args.json, workaround, WORKAROUND_VERSION)
    return common.EXIT_OK
