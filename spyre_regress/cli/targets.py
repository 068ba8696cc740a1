"""Arguments and set-up shared by the commands that measure inside commits."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from regressions import metrics
from regressions.probing import suite
from spyre_regress.cli import checks, common

if TYPE_CHECKING:  # numpy and scipy: imported once a command runs
    from regressions.investigation.model import Target


def add_range_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, type=Path, metavar="PATH",
                   help="checkout of the benchmarked project (with benchmarks/workloads.py)")
    p.add_argument("--good", required=True, metavar="REV", help="a commit without the problem")
    p.add_argument("--bad", required=True, metavar="REV", help="a later commit with it")
    p.add_argument("--work-dir", type=Path, metavar="DIR",
                   help="where checkouts and captures go (default: a temporary directory)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")


def add_workload_arguments(p: argparse.ArgumentParser,
                           choices: tuple[str, ...] = metrics.PROBE_METRICS) -> None:
    p.add_argument("--workload", required=True, metavar="NAME",
                   help="a workload of benchmarks/workloads.py, e.g. mlp")
    p.add_argument("--shape", required=True, type=common.sequence_length, metavar="SHAPE",
                   help=f"sequence length, 1 to {common.MAX_SEQ}, e.g. 127 or seq127")
    p.add_argument("--width", type=common.width, metavar="N",
                   help=f"model width, 1 to {common.MAX_WIDTH} (default: the workload's)")
    p.add_argument("--metric", choices=choices, default="device_time",
                   help="what regressed (default %(default)s)")
    p.add_argument("--stage", metavar="STAGE",
                   help="compile_time, compile_blocked, compile_children: the stage to time, "
                        "one of the compiler under test's (docs/reference/spyre_sim.md, "
                        "docs/reference/backends.md)")
    p.add_argument("--error", choices=metrics.ERRORS, default="rmse_ratio",
                   help="numerics: which error (default %(default)s)")


def range_and_target(args: argparse.Namespace) -> tuple[str, str, Target]:
    """(good sha, bad sha, target), every argument checked before anything slow runs."""
    good, bad = checks.commit_range(args.repo, args.good, args.bad)
    checks.workload(args.repo, args.workload)
    checks.stage(args.repo, args.stage)
    checks.writable_file(args.json, "--json")
    checks.writable_dir(args.work_dir, "--work-dir")
    return good, bad, target(args)


def target(args: argparse.Namespace) -> Target:
    """The probe target `--workload/--shape/--metric` name (no benchmark: probes only)."""
    from regressions.investigation.model import Target

    metric = metrics.by_name(args.metric)
    width = args.width
    if metric.width == "numerics_width" and width is None:
        width = suite.numerics_widths(args.repo).get(args.workload)
    return Target(benchmark="", params=(), workload=args.workload, seq=args.shape, width=width,
                  metric=metric.name, stage=args.stage,
                  error=args.error if metric.errors else None)


def investigator(args: argparse.Namespace, work: Path, results_dir: Path | None = None,
                 machine: str = "bisect"):
    """An `Investigator` on the repository's git history with probe subprocesses."""
    from regressions.investigation.investigator import (
        Investigator,  # torch: only once a command runs
    )
    from spyre_regress.prober import GitHistory, SubprocessProber

    prober = SubprocessProber(args.repo, work, results_dir, machine, progress=common.progress)
    return Investigator(GitHistory(args.repo), prober, common.progress)
