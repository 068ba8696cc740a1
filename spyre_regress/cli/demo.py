"""`spyre-regress demo`: the whole system on a history with known regressions."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyre_regress.cli import common


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "demo", "the whole system on a history with known regressions",
        "Build a scratch repository with injected regressions, run the nightly on it and "
        "leave the reports (README: quick start). The demo checks the tool on a known "
        "answer: exit 0 when it found exactly the regressions it planted "
        "(ground_truth.json), 1 when it found anything else or missed one.",
        example="spyre-regress demo --out spyre-regress-demo")
    p.add_argument("--out", type=Path, default=Path("spyre-regress-demo"), metavar="DIR",
                   help="output directory, must be new or empty (default %(default)s)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from spyre_regress import demo

    common.show_warnings()
    summary = demo.run(args.out, common.progress)
    out = Path(args.out).resolve()
    table = pd.DataFrame([{"culprit": r["commit"][:10], "stage": r["stage"], "kind": r["kind"],
                           "benchmark, culprit/parent": r["measured"],
                           "workaround": r["workaround"] or "-"}
                          for r in summary["regressions"]])
    print(table.to_string(index=False, line_width=100) if len(table)
          else "no regressions found")
    for r in summary["regressions"]:  # whole paths, one a line: they are copied
        print(f"report {r['commit'][:10]}: {Path(r['report']).relative_to(out)}")
    print(f"time by phase ({summary['seconds']['total']:.0f} s of the "
          f"{common.elapsed():.0f} s since the command started; "
          "summary.json \"seconds\"):")
    for phase in summary["seconds"]["phases"]:
        print(f"  {phase['seconds']:6.0f} s  {phase['phase']}")
    planted = len(summary["ground_truth"])
    print(f"{'as planted' if summary['as_planted'] else 'NOT as planted'}: "
          f"{len(summary['regressions'])} reported, {planted} planted (ground_truth.json); "
          f"summary: {Path(args.out) / 'summary.json'}")
    if summary.get("dashboard"):  # a file:// page may not read its own JSON: serve it
        print(f"dashboard (no network needed): python3 -m http.server -d "
              f"{Path(summary['dashboard']).parent}, then open http://127.0.0.1:8000/")
    return common.EXIT_OK if summary["as_planted"] else common.EXIT_REGRESSED
