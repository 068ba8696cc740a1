"""`spyre-regress nightly`: benchmark new commits, detect, investigate and report."""

from __future__ import annotations

import argparse
import sys
import textwrap
from pathlib import Path

from regressions import git
from spyre_regress.cli import checks, common

CLOSED = ("withdrawn", "fixed", "invalid")  # lifecycle states nobody needs to see nightly
WIDTH = 100  # terminal columns the listing keeps to (report paths stay whole)


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "nightly", "benchmark new commits, detect, investigate, report",
        "asv on the branch's commits (every --stride-th and the newest), detect, then "
        "investigate and report each new alert once (docs/nightly.md). Exit 1 when a report "
        "was written tonight (a regression confirmed by its investigation), 0 otherwise.",
        example="spyre-regress nightly --repo . --stride 3 --reports reports-out")
    p.add_argument("--repo", required=True, type=Path, metavar="PATH",
                   help="checkout of the benchmarked project with its asv.conf.json and full "
                        "history")
    p.add_argument("--branch", default="main", metavar="NAME",
                   help="the branch whose first-parent commits are benchmarked (default "
                        "%(default)s)")
    p.add_argument("--stride", type=common.positive, default=1, metavar="N",
                   help="benchmark every N-th commit and the newest (default %(default)s)")
    p.add_argument("--since", type=common.ref, metavar="REV",
                   help="the oldest commit to benchmark (default: the branch's first)")
    p.add_argument("--bench", type=common.regex, metavar="REGEX", help="asv --bench selection")
    p.add_argument("--state", type=Path, metavar="DIR",
                   help="alert database, lock and scratch space (default REPO/.spyre-regress)")
    p.add_argument("--reports", type=Path, metavar="DIR",
                   help="report bundles (default STATE/reports)")
    p.add_argument("--machine", default="nightly", help="asv machine name")
    p.add_argument("--samples", type=common.positive, metavar="N",
                   help="samples per side behind an investigation's confirmation at the "
                        "culprit, and timed iterations per build in its report (default 100; "
                        "a compiler whose compile takes seconds may take fewer)")
    p.add_argument("--threshold", action="append", default=[], type=common.threshold,
                   metavar="REGEX=FRACTION", help="as for detect")
    scale = p.add_mutually_exclusive_group()
    scale.add_argument("--workers", type=common.positive_int, metavar="N",
                       help="run the night's benchmarks, re-measurement and probes on an "
                       "embedded Dask cluster of N worker processes on this host "
                       "(docs/scale-out.md); default: one process tree, serially")
    scale.add_argument("--scheduler", type=common.scheduler_address, metavar="tcp://HOST:PORT",
                       help="run them on the Dask cluster at this address instead")
    p.add_argument("--dashboard", action="store_true",
                   help="with --workers: serve the cluster's dashboard on localhost:8787")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from regressions.probing import suite
    from spyre_regress import nightly

    common.show_warnings()
    common.say_large_floors(args.threshold)
    git.check_repository(suite.history_repo(args.repo))
    state = args.state or args.repo / ".spyre-regress"
    checks.writable_dir(state, "--state")
    checks.writable_dir(args.reports or state / "reports", "--reports")
    options = nightly.NightlyOptions(repo=args.repo.resolve(), state_dir=state.resolve(),
                                     reports_dir=(args.reports or state / "reports").resolve(),
                                     branch=args.branch, stride=args.stride, bench=args.bench,
                                     machine=args.machine,
                                     floors=tuple(args.threshold), workers=args.workers,
                                     scheduler=args.scheduler, dashboard=args.dashboard,
                                     since=args.since,
                                     **({"samples": args.samples} if args.samples else {}))
    outcome = nightly.run(options, common.progress)
    for event in outcome.environment_events:  # the machine changed: never investigated
        print(f"environment alert {event.alert_id}: {event.note}")
    for event in outcome.events:
        print(textwrap.fill(f"alert {event.alert_id}: {event.before or '-'} -> {event.after}: "
                            f"{event.note}", WIDTH, subsequent_indent="    ",
                            break_long_words=False, break_on_hyphens=False))
    for done in outcome.published:
        print(f"culprit {done.culprit[:12]} (alert(s) {', '.join(map(str, done.alert_ids))}): "
              f"{done.bundle}")
    for record in outcome.records:
        if record.status not in CLOSED:
            state = record.status + (", provisional" if record.provisional else "")
            print(f"alert {record.id}: {record.kind} {record.good_commit[:10]}.."
                  f"{record.bad_commit[:10]} culprit {(record.culprit or '-')[:12]} [{state}]")
    for waiting in outcome.awaiting:  # not investigated until more commits confirm it
        print(f"awaiting more commits: {waiting.kind} {waiting.name[:70]} "
              f"x{waiting.ratio or 0:.3f} at {waiting.bad_commit[:10]}")
    print(textwrap.fill(f"{len(outcome.records)} alert record(s); {len(outcome.published)} "
                        f"report(s) written tonight; {len(outcome.environment_events)} new "
                        f"environment alert(s); {len(outcome.transients)} transient(s); "
                        f"{len(outcome.awaiting)} change(s) awaiting more commits "
                        "(`spyre-regress alerts` lists the alerts)", WIDTH))
    print(outcome.remeasurement_note)
    for failure in outcome.failures:
        print(f"spyre-regress: warning: {failure}", file=sys.stderr)
    return common.EXIT_REGRESSED if outcome.new_reports else common.EXIT_OK
