"""`spyre-regress detect`: confirmed regressions in asv results, grouped into alerts."""

from __future__ import annotations

import argparse
import json
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
        sub, "detect", "find regressions in asv results",
        "Find confirmed regressions in asv results (any format asv reads; older files are "
        "migrated in memory, never rewritten) and group them into alerts, each marked open "
        "(still regressed at its series' newest commit) or recovered, open ones first, the "
        "costliest first; changes a machine shares across its series are environment alerts "
        "instead (method and JSON format: docs/detection.md). Exit 0: none; 1: alerts; 2: "
        "usage or input error.",
        example="spyre-regress detect --results .asv/results --repo . --json alerts.json")
    p.add_argument("--results", required=True, type=Path, metavar="DIR",
                   help="asv results directory (`results_dir` in asv.conf.json)")
    p.add_argument("--repo", type=Path, metavar="PATH",
                   help="checkout of the benchmarked project: order commits by the "
                        "first-parent history of its HEAD (default: by commit date)")
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
    from regressions.records.results_store import ResultsStore

    checks.writable_file(args.json, "--json")
    common.say_large_floors(args.threshold)
    common.show_warnings(verbose=args.verbose)
    history = None if args.repo is None else suite.history_repo(args.repo)
    frame = ResultsStore(args.results, args.machine, history).frame()
    series = results.series_from_frame(frame, higher_is_better=args.higher_is_better)
    commits, machines = frame["commit"].nunique(), frame["machine"].nunique()
    del frame  # the series hold what detection reads: a large store's table goes now
    found = detect.run_detection(series, floors=args.threshold,
                                 fdr=detect.FDR if args.fdr is None else args.fdr)
    known = standing.standings(found.regressions, series, found.readings)
    marked = standing.ranked(cluster_alerts(found.regressions), known)
    still = sum(m.recovered_in is None for _, m in marked)
    print(f"{len(series)} series over {commits} commits on {machines} machine(s): "
          f"{len(marked)} alert(s) ({still} open, {len(marked) - still} recovered), "
          f"{len(found.environment)} environment alert(s)")
    if args.open:
        marked = [(a, m) for a, m in marked if m.recovered_in is None]
    for number, change in enumerate(found.environment, 1):
        print(f"\nenvironment alert {number} ({change.cause}), good "
              f"{change.good_commit[:8]} -> bad {change.bad_commit[:8]}: {change.describe()}")
    for number, (alert, mark) in enumerate(marked, 1):
        print_alert(number, alert, mark, known, repo=history)
    if args.json is not None:
        document = alerts_to_json([a for a, _ in marked], found.environment,
                                  [standing.marks(a, m, known) for a, m in marked])
        try:
            files.write_text(args.json, json.dumps(document, indent=2) + "\n")
        except OSError as exc:
            raise SpyreRegressError(f"cannot write {args.json}: {exc.strerror}; pass a "
                                    "writable --json path") from None
    return common.EXIT_REGRESSED if marked or found.environment else common.EXIT_OK


def print_alert(number: int, alert: Alert, mark: Standing, known: dict, repo: Path | None
                ) -> None:
    """One alert: its standing first (open, or where it recovered), then its members."""
    commits = f"good {alert.good_commit[:8]} -> bad {alert.bad_commit[:8]}"
    if repo is not None:
        commits += f" ({git.commit_info(repo, alert.bad_commit).subject})"
    status = "OPEN" if mark.recovered_in is None else (
        f"recovered at {mark.recovered_in[1][:8]} (back after {mark.recovered_in[0][:8]})")
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
        return "-" if mark is None else "open" if mark.recovered_in is None else \
            f"back at {mark.recovered_in[1][:8]}"

    return pd.DataFrame([{
        "benchmark": r.name, **({"machine/env": f"{r.machine}/{r.env}"} if places else {}),
        "ratio": common.fmt(r.ratio, ".3f"),
        "99% CI": "-" if r.ci is None else
        f"[{common.fmt(r.ci[0], '.3f')}, {common.fmt(r.ci[1], '.3f')}]",
        "p": common.fmt(r.p, ".1e"), "q": common.fmt(r.q, ".1e"),
        **({"now": status(r)} if known is not None else {}),
    } for r in alert.members])
