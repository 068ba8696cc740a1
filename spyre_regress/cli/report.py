"""`spyre-regress report`: investigate one alert and write its upstream bundle."""

from __future__ import annotations

import argparse
from pathlib import Path

from regressions import git
from regressions.detection.alerts import alerts_from_json
from regressions.errors import SpyreRegressError
from regressions.probing import suite
from regressions.records import files
from regressions.records.results_store import ResultsStore
from spyre_regress.cli import checks, common


def add(sub: argparse._SubParsersAction) -> None:
    p = common.add_parser(
        sub, "report", "investigate an alert and write its upstream bundle",
        "Bisect commit, stage and knob, minimize, time both builds and write report.md/html, "
        "reproducer and evidence (docs/reports.md). Or render a saved investigation. Exit 0: "
        "the bundle was written; 1: the alert does not reproduce (nothing is written).",
        example="spyre-regress report --repo . --alerts alerts.json --results .asv/results "
                "--out reports-out")
    p.add_argument("--repo", type=Path, metavar="PATH", help="the benchmarked checkout")
    p.add_argument("--alerts", type=Path, metavar="FILE", help="the file `detect --json` wrote")
    p.add_argument("--alert", type=int, default=1, metavar="N",
                   help="which alert of the file (1-based, default %(default)s)")
    p.add_argument("--results", type=Path, metavar="DIR", help="the asv results directory")
    p.add_argument("--investigation", type=Path, metavar="FILE",
                   help="render a saved model.json instead of investigating")
    p.add_argument("--work-dir", type=Path, metavar="DIR",
                   help="where checkouts and captures go (default: a temporary directory)")
    p.add_argument("--out", required=True, type=Path, metavar="DIR",
                   help="where the bundle (a folder and its .tar.gz) is written")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from regressions.investigation import model
    from regressions.investigation.investigator import Investigator, NotReproduced, alert_target
    from reports import scrub_investigation, write_bundle
    from spyre_regress.prober import GitHistory, SubprocessProber

    checks.writable_dir(args.out, "--out")
    checks.writable_dir(args.work_dir, "--work-dir")
    if args.investigation is not None:
        found = model.load(
            files.read_json(args.investigation, "investigation",
                            "pass the model.json that `nightly` or `report` "
                            "saved beside a bundle"),
            str(args.investigation))
    else:
        if args.repo is None or args.alerts is None or args.results is None:
            raise SpyreRegressError("pass --repo, --alerts and --results (or --investigation)")
        git.check_repository(suite.history_repo(args.repo))
        alerts = alerts_from_json(
            files.read_json(args.alerts, "alerts file",
                            "pass the file `spyre-regress detect --json` wrote"),
            str(args.alerts))
        if not 1 <= args.alert <= len(alerts):
            raise SpyreRegressError(f"--alert {args.alert}: {args.alerts} holds "
                                    f"{len(alerts)} alert(s); pass 1..{len(alerts)}")
        alert = alerts[args.alert - 1]
        target = alert_target(alert, ResultsStore(args.results).param_names(),
                              suite.numerics_widths(args.repo), suite.stage_width(args.repo))
        with common.work_dir(args.work_dir) as work:
            prober = SubprocessProber(args.repo, work, work / "probe-results",
                                      progress=common.progress)
            investigator = Investigator(GitHistory(args.repo), prober, common.progress)
            try:
                found = investigator.investigate(alert, target, args.out)
            except NotReproduced as answer:  # an answer, not a usage error
                print(f"alert {args.alert} of {args.alerts} does not reproduce: {answer}; no "
                      "bundle written")
                return common.EXIT_REGRESSED
            files.write_json(args.out / "model.json", scrub_investigation(found))
            bundle = write_bundle(found, args.out)
        print(f"wrote {bundle}")
        return common.EXIT_OK
    print(f"wrote {write_bundle(found, args.out)}")
    return common.EXIT_OK
