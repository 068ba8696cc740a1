"""`spyre-regress demo`: the whole system on a history with known regressions."""

from __future__ import annotations

import argparse
from pathlib import Path

from spyre_regress.cli import common


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "demo", "the whole system on a history with known regressions",
        "Build a scratch repository with injected regressions, run the nightly on it and "
        "leave the reports (README: quick start).",
        "spyre-regress demo --out spyre-regress-demo")
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
                           "workaround": r["workaround"] or "-",
                           "report": str(Path(r["report"]).relative_to(out))}
                          for r in summary["regressions"]])
    print(table.to_string(index=False) if len(table) else "no regressions found")
    print(f"summary: {Path(args.out) / 'summary.json'}")
    if summary.get("dashboard"):
        print(f"dashboard: {summary['dashboard']} (or `asv preview` in {args.out}/repo)")
    return common.EXIT_OK if not summary["failures"] else common.EXIT_REGRESSED
