"""`spyre-regress stages`: the first compiler stage where two builds differ."""

from __future__ import annotations

import argparse

from spyre_regress.cli import common, targets


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "stages", "name the first compiler stage where two builds differ",
        "Compile the probe at both commits with stage capture and diff the canonical "
        "artifacts (docs/explanation/bisection.md). Exit 0: the report was printed.",
        example="spyre-regress stages --repo . --good HEAD~1 --bad HEAD --workload mlp --shape 127")
    targets.add_range_arguments(p)
    targets.add_workload_arguments(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    good, bad, target = targets.range_and_target(args)
    import pandas as pd  # after the checks

    from regressions.bisection import stages

    with common.work_dir(args.work_dir) as work:
        report = targets.investigator(args, work).stages(good, bad, target)
    figure = report.wait_part or "compile"  # a part of the compile's wall time, or its time
    table = pd.DataFrame([{"stage": d.stage, "artifact": "differs" if d.changed else "same",
                           "lines": d.diff_lines,
                           f"{figure} good ms": common.fmt(d.compile_s_good * 1e3, ".2f"),
                           f"{figure} bad ms": common.fmt(d.compile_s_bad * 1e3, ".2f"),
                           "ratio": common.fmt(d.compile_ratio, ".2f")} for d in report.stages])
    print(f"{report.workload} at seq {report.seq}, width {report.width}; compile times "
          f"{f'({report.wait_part}) ' if report.wait_part else ''}are medians of repeated "
          "cold compiles")
    print(table.to_string(index=False))
    for kernel in [k for k in report.kernels if k.delta_us][:10]:
        print(f"kernel {kernel.name}: {common.fmt(kernel.good_us, '.1f')} -> "
              f"{common.fmt(kernel.bad_us, '.1f')} us (noise-free device time per call)")
    print(f"first divergent stage: {report.first_divergent_stage or 'none'} "
          f"({report.basis or 'no artifact or stage time differs'}); first stage whose "
          f"executed output drifts: {report.numerics_first_divergent_stage or 'none'}")
    if report.diff:
        print(report.diff[:4000])
    common.write_json(args.json, report, stages.STAGE_REPORT_VERSION)
    return common.EXIT_OK
