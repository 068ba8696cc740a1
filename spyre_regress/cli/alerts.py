"""`spyre-regress alerts`: list and triage the nightly's alerts."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from regressions.errors import SpyreRegressError
from regressions.records import alert_store, files, lifecycle
from regressions.records.lifecycle import TRIAGE
from spyre_regress.cli import common

WIDTH = 100


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "alerts", "list or triage the nightly's alerts",
        "List the alerts the nightly stored, or set one's status.",
        example="spyre-regress alerts --state .spyre-regress --set 3 acknowledged")
    p.add_argument("--state", required=True, type=Path, metavar="DIR",
                   help="the nightly's --state directory")
    p.add_argument("--set", nargs=2, metavar=("ID", "STATUS"),
                   help="set an alert's status by hand: " + "; ".join(
                       f"{before} -> {' | '.join(after)}" for before, after in TRIAGE.items()))
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    path = args.state / "alerts.sqlite"
    if not path.is_file():
        raise SpyreRegressError(f"{path} does not exist; run `spyre-regress nightly` first or "
                                "pass its --state directory")
    database = alert_store.AlertStore(path)
    try:
        records = database.records()
        if args.set:
            if not args.set[0].isdigit():
                raise SpyreRegressError(f"alert id must be a number, not {args.set[0]!r}")
            chosen = next((r for r in records if r.id == int(args.set[0])), None)
            if chosen is None:
                raise SpyreRegressError(f"there is no alert {args.set[0]}; `spyre-regress "
                                        "alerts --state DIR` lists them")
            database.save([lifecycle.triage(chosen, args.set[1])])
            records = database.records()
        extras = database.extras()
        machine_changes = database.environment()
    finally:
        database.close()
    print_records(records, extras)
    print_environment(machine_changes)
    transients = args.state / "transients.json"
    if transients.is_file():
        print_transients(files.read_json(transients, "transients file").get("transients", []))
    return common.EXIT_OK


def print_records(records, extras: dict) -> None:
    if not records:
        print("no alerts")
    for r in records:
        extra = extras.get(r.id, {})
        state = r.status + (" provisional" if r.provisional else "")
        print(fit(f"{r.id:>3} {state:<26} {r.kind:<12} {r.good_commit[:8]}..{r.bad_commit[:8]}"
                  f" culprit {(r.culprit or '-')[:10]:<10} stage {extra.get('stage') or '-'}"))
        print(fit(f"    {len(r.symptoms)} series: "
                  + ", ".join(f"{s.benchmark.rsplit('.', 1)[-1]}{s.params}"
                              for s in r.symptoms)))
        if extra.get("report"):
            print(f"    report: {extra['report']}")  # whole, however long: it is copied
        if r.note:
            print(textwrap.fill(f"note: {r.note}", WIDTH, initial_indent="    ",
                                subsequent_indent="      ", break_on_hyphens=False,
                                break_long_words=False))


def print_environment(changes: list) -> None:
    """Changes of the machine under the benchmarks: never investigated, listed for a person
    with what to do (the summary's last clause)."""
    if changes:
        print(f"environment alerts (the machine changed, not the code): {len(changes)}")
    for e in changes:
        print(fit(f"  E{e.id:<3} {e.machine}/{e.env} {e.good_commit[:8]}..{e.bad_commit[:8]} "
                  f"{e.direction}, {e.explained} regression(s) explained, first seen "
                  f"{e.first_seen or '-'}"))
        print(textwrap.fill(e.summary, WIDTH, initial_indent="      ",
                            subsequent_indent="      ", break_on_hyphens=False,
                            break_long_words=False))


def print_transients(transients: list) -> None:
    """One-commit excursions detection set apart: never alerts, listed for a person."""
    if transients:
        print(f"transients (one-commit excursions, not regressions): {len(transients)}")
    for t in transients:
        print(fit(f"    {t['commit'][:8]} {t['kind']:<12} x{t['ratio']:.3f} "
                  f"{t['benchmark'].rsplit('.', 1)[-1]}{t['params']}"))


def fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 3] + "..."
