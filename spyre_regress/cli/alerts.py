"""`spyre-regress alerts`: list and triage the nightly's alerts."""

from __future__ import annotations

import argparse
from pathlib import Path

from regressions import store
from regressions.errors import SpyreRegressError
from spyre_regress.cli import common

WIDTH = 100


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "alerts", "list or triage the nightly's alerts",
        "List the alerts the nightly stored, or set one's status.",
        "spyre-regress alerts --state .spyre-regress --set 3 acknowledged")
    p.add_argument("--state", required=True, type=Path, metavar="DIR",
                   help="the nightly's --state directory")
    p.add_argument("--set", nargs=2, metavar=("ID", "STATUS"),
                   help=f"set an alert's status: one of {', '.join(store.ALERT_STATES)}")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    path = args.state / "alerts.sqlite"
    if not path.is_file():
        raise SpyreRegressError(f"{path} does not exist; run `spyre-regress nightly` first or "
                                "pass its --state directory")
    database = store.AlertStore(path)
    try:
        if args.set:
            if not args.set[0].isdigit():
                raise SpyreRegressError(f"alert id must be a number, not {args.set[0]!r}")
            database.update(int(args.set[0]), status=args.set[1])
        rows = database.rows()
    finally:
        database.close()
    if not rows:
        print("no alerts")
    for row in rows:
        print(fit(f"{row['id']:>3} {row['status']:<14} {row['kind']:<12} "
                  f"{(row['good'] or '')[:8]}..{(row['bad'] or '')[:8]} "
                  f"culprit {(row['culprit'] or '-')[:10]:<10} stage {row['stage'] or '-'}"))
        for extra in ("report", "note"):
            if row.get(extra):
                print(fit(f"    {extra}: {row[extra]}"))
    return common.EXIT_OK


def fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 3] + "..."
