"""`spyre-regress detect`: confirmed regressions in asv results, grouped into alerts."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from regressions import git
from regressions.detection.alerts import Alert, alerts_to_json, cluster_alerts
from regressions.errors import SpyreRegressError
from regressions.records import files
from spyre_regress.cli import checks, common

if TYPE_CHECKING:  # scipy and pandas: imported once the command runs
    import pandas as pd

    from regressions.detection.detect import Regression
    from regressions.records.standing import Standing



def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "detect", "find regressions in asv results or a table of results",
        "Find confirmed regressions in asv results (any format asv reads; older files are "
        "migrated in memory, never rewritten) or in a table of results (CSV or Parquet, "
        "long rows or wide rows with --mapping) and group them into alerts, each marked open "
        "(still regressed at its series' newest commit), awaiting more commits (a new level "
        "too few commits hold yet) or recovered, open ones first, the costliest first; "
        "changes a machine shares across its series are environment alerts instead (method, "
        "table layouts and JSON format: docs/detection.md). Exit 0: none; 1: alerts; 2: "
        "usage or input error.",
        example="spyre-regress detect --results .asv/results --repo . --json alerts.json")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--results", type=Path, metavar="DIR",
                        help="asv results directory (`results_dir` in asv.conf.json)")
    source.add_argument("--table", type=Path, metavar="FILE",
                        help="a table of results, .csv or .parquet: long rows (benchmark, "
                        "value, commit/order/date, ...) or wide rows read through --mapping")
    p.add_argument("--mapping", type=Path, metavar="FILE", help="with --table: a JSON column "
                   "mapping saying which column is what (wide rows: one value per column)")
    p.add_argument("--repo", type=Path, metavar="PATH",
                   help="checkout of the benchmarked project: order commits by the "
                        "first-parent history of its HEAD (default: by commit date, or a "
                        "table's order)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the alerts (the "
                   "file `report --alerts` reads)")
    p.add_argument("--machine", metavar="NAME", help="only this asv machine's results")
    p.add_argument("--threshold", action="append", default=[], type=common.threshold,
                   metavar="REGEX=FRACTION",
                   help="smallest relative worsening to report for series whose "
                        "'benchmark(params)' name REGEX matches (re.search), e.g. "
                        "'compile\\.=0.1'; repeatable, first match wins, before the "
                        "built-in metric floors")
    p.add_argument("--higher-is-better", action="append", default=[], type=common.regex,
                   metavar="REGEX", help="series whose name REGEX matches are better when "
                   "higher (besides benchmarks declaring `higher_is_better = True`)")
    p.add_argument("--open", action="store_true", help="only the alerts still open at their "
                   "series' newest commit (text and --json)")
    p.add_argument("--verbose", action="store_true", help="list every result file or row "
                   "left out (by default one warning line counts them)")
    p.add_argument("--fdr", type=common.rate, metavar="Q",
                   help="false discovery rate across all series (default: "
                        "regressions.detection.detect.FDR, 0.05)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from regressions.detection import detect
    from regressions.probing import suite
    from regressions.records import results, standing

    checks.writable_file(args.json, "--json")
    if args.mapping is not None and args.table is None:
        raise SpyreRegressError("--mapping reads a table; pass it with --table FILE")
    common.say_large_floors(args.threshold)
    common.show_warnings(verbose=args.verbose)
    history = None if args.repo is None else suite.history_repo(args.repo)
    frame = _frame(args, history)
    series = results.series_from_frame(frame, higher_is_better=args.higher_is_better)
    commits, machines = frame["commit"].nunique(), frame["machine"].nunique()
    del frame  # the series hold what detection reads: a large store's table goes now
    found = detect.run_detection(series, floors=args.threshold,
                                 fdr=detect.FDR if args.fdr is None else args.fdr)
    known = standing.standings([*found.regressions, *found.awaiting], series, found.readings)
    known.update({key: replace(known[key], awaiting=True)
                  for key in map(standing.key_of, found.awaiting)})
    marked = standing.ranked(cluster_alerts(found.regressions), known,
                             cluster_alerts(found.awaiting))
    tally = Counter(m.status for _, m in marked)
    print(f"{len(series)} series over {commits} commits on {machines} machine(s): "
          f"{len(marked)} alert(s) ({tally[standing.OPEN]} open, "
          + (f"{tally[standing.AWAITING]} awaiting more commits, "
             if tally[standing.AWAITING] else "")
          + f"{tally[standing.RECOVERED]} recovered), "
          f"{len(found.environment)} environment alert(s)")
    if args.open:
        marked = [(a, m) for a, m in marked if m.status != standing.RECOVERED]
    for number, change in enumerate(found.environment, 1):
        print(f"\nenvironment alert {number} ({change.cause}), good "
              f"{git.abbreviated(change.good_commit)} -> bad {git.abbreviated(change.bad_commit)}: "
              f"{change.describe()}")
    for number, (alert, mark) in enumerate(marked, 1):
        print_alert(number, alert, mark, known, repo=history)
    if args.json is not None:
        source = {"results": str(args.results)} if args.table is None else \
            {"table": str(args.table)}
        document = alerts_to_json([a for a, _ in marked], found.environment,
                                  [standing.marks(a, m, known) for a, m in marked], source)
        try:
            files.write_text(args.json, json.dumps(document, indent=2) + "\n")
        except OSError as exc:
            raise SpyreRegressError(f"cannot write {args.json}: {exc.strerror}; pass a "
                                    "writable --json path") from None
    return common.EXIT_REGRESSED if marked or found.environment else common.EXIT_OK


def _frame(args: argparse.Namespace, history: Path | None) -> pd.DataFrame:
    """What `--results` or `--table` holds, one row per point (records/results_store.py,
    records/tables.py); `history` orders its commits."""
    from regressions.records import tables
    from regressions.records.results_store import ResultsStore

    if args.table is None:
        return ResultsStore(args.results, args.machine, history).frame()
    mapping = None if args.mapping is None else tables.read_mapping(args.mapping)
    frame = tables.load_table(args.table, mapping=mapping, repo=history)
    if args.machine is not None:
        found = sorted(set(frame["machine"]))
        if args.machine not in found:
            raise SpyreRegressError(f"no rows for machine {args.machine!r} in {args.table}; "
                                    f"machines found: {', '.join(found)}")
        frame = frame[frame["machine"] == args.machine].reset_index(drop=True)
    return frame


def print_alert(number: int, alert: Alert, mark: Standing, known: dict, repo: Path | None
                ) -> None:
    """One alert: its standing first (open, or where it recovered), then its members."""
    commits = f"good {git.abbreviated(alert.good_commit)} -> bad " \
        f"{git.abbreviated(alert.bad_commit)}"
    if repo is not None:
        commits += f" ({git.commit_info(repo, alert.bad_commit).subject})"
    status = "AWAITING MORE COMMITS (its new level is held by too few commits to confirm; "\
        "a later commit reports it or withdraws it)" if mark.awaiting else \
        "OPEN" if mark.recovered_in is None else (
            f"recovered at {git.abbreviated(mark.recovered_in[1])} (back after "
            f"{git.abbreviated(mark.recovered_in[0])})")
    print(f"\nalert {number}: {status}; {alert.kind}, {len(alert.members)} member(s), "
          f"{commits}; probe {alert.probe.name}; judged by {mark.judged_by or 'unknown'}")
    places = {f"{r.machine}/{r.env}" for r in alert.members}
    if len(places) == 1:  # said once, so the table fits a terminal
        print(f"machine/env: {places.pop()}")
    print(members_table(alert, len(places) > 1, known).to_string(index=False))


def members_table(alert: Alert, places: bool = True, known: dict | None = None
                  ) -> pd.DataFrame:
    import pandas as pd

    from regressions.records.standing import key_of

    def status(r: Regression) -> str:
        mark = (known or {}).get(key_of(r))
        return "-" if mark is None else mark.status if mark.recovered_in is None else \
            f"back at {git.abbreviated(mark.recovered_in[1])}"

    return pd.DataFrame([{
        "benchmark": r.name, **({"machine/env": f"{r.machine}/{r.env}"} if places else {}),
        "ratio": common.fmt(r.ratio, ".3f"),
        "99% CI": "-" if r.ci is None else
        f"[{common.fmt(r.ci[0], '.3f')}, {common.fmt(r.ci[1], '.3f')}]",
        "p": common.fmt(r.p, ".1e"), "q": common.fmt(r.q, ".1e"),
        **({"now": status(r)} if known is not None else {}),
    } for r in alert.members])
