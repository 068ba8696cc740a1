"""`spyre-regress`: the command line. The only module that prints for the user and exits.

Exit codes: 0 success / nothing regressed, 1 regressions found, 2 usage or input error.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import sys
from pathlib import Path

import pandas as pd

from regressions import detect, git, results
from regressions.errors import SpyreRegressError

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spyre-regress",
        description="Regression benchmarking for the Spyre torch.compile backend.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_detect(sub)
    return parser


def _add_detect(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "detect", help="find regressions in asv results",
        description="Find confirmed regressions in asv results and group them into alerts "
                    "(method and JSON format: docs/detection.md). Exit 0: none; 1: alerts; "
                    "2: usage or input error.")
    p.add_argument("--results", required=True, type=Path, metavar="DIR",
                   help="asv results directory (`results_dir` in asv.conf.json)")
    p.add_argument("--repo", type=Path, metavar="PATH",
                   help="checkout of the benchmarked project: order commits by the "
                        "first-parent history of its HEAD (default: by commit date)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the alerts as JSON")
    p.add_argument("--machine", metavar="NAME", help="only this asv machine's results")
    p.add_argument("--threshold", action="append", default=[], type=_threshold,
                   metavar="REGEX=FRACTION",
                   help="smallest relative worsening to report for benchmarks whose "
                        "'benchmark(params)' name REGEX matches (re.search), e.g. "
                        "'compile\\.=0.1'; repeatable, first match wins, before the "
                        "built-in family floors")
    p.add_argument("--higher-is-better", action="append", default=[], type=_regex,
                   metavar="REGEX", help="series whose name REGEX matches are better when "
                   "higher (besides benchmarks declaring `higher_is_better = True`)")
    p.add_argument("--fdr", type=_rate, default=detect.FDR, metavar="Q",
                   help="false discovery rate across all series (default %(default)s)")
    p.set_defaults(handler=_run_detect)


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a rate in (0, 1], e.g. 0.05")
    return value


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {exc}") from None
    return text


def _threshold(text: str) -> tuple[str, float]:
    pattern, sep, fraction = text.rpartition("=")
    try:
        value = float(fraction)
    except ValueError:
        value = -1.0
    if not sep or not pattern or not value >= 0:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not REGEX=FRACTION with a fraction >= 0, e.g. 'compile\\.=0.1'")
    return _regex(pattern), value


def _run_detect(args: argparse.Namespace) -> int:
    _show_warnings()
    frame = results.load_results(args.results, repo=args.repo, machine=args.machine)
    series = results.series_from_frame(frame, higher_is_better=args.higher_is_better)
    found = detect.find_regressions(series, floors=args.threshold, fdr=args.fdr)
    alerts = detect.cluster_alerts(found)
    print(f"{len(series)} series over {frame['commit'].nunique()} commits on "
          f"{frame['machine'].nunique()} machine(s): {len(alerts)} alert(s)")
    for number, alert in enumerate(alerts, 1):
        probe = alert.probe
        commits = f"good {alert.good_commit[:8]} -> bad {alert.bad_commit[:8]}"
        if args.repo is not None:
            subject = git.commit_info(args.repo, alert.bad_commit).subject
            commits += f" ({subject})"
        print(f"\nalert {number}: {alert.kind}, {len(alert.members)} member(s), {commits}; "
              f"probe {probe.benchmark}{probe.params}")
        table = pd.DataFrame([{
            "benchmark": f"{r.benchmark}{r.params}", "machine": r.machine,
            "ratio": _fmt(r.ratio, ".3f"),
            "99% CI": "-" if r.ci is None else f"[{_fmt(r.ci[0], '.3f')}, {_fmt(r.ci[1], '.3f')}]",
            "p": _fmt(r.p, ".1e"), "q": _fmt(r.q, ".1e"),
        } for r in alert.members])
        print(table.to_string(index=False))
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(detect.alerts_to_json(alerts), indent=2) + "\n")
        except OSError as exc:
            raise SpyreRegressError(f"cannot write {args.json}: {exc.strerror}; pass a "
                                    "writable --json path") from None
    return EXIT_REGRESSED if alerts else EXIT_OK


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


class _StderrHandler(logging.Handler):
    """Warnings from the library as one `spyre-regress: warning: ...` line each."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"spyre-regress: {record.levelname.lower()}: {record.getMessage()}",
              file=sys.stderr)


def _show_warnings() -> None:
    logger = logging.getLogger("regressions")
    if not any(isinstance(h, _StderrHandler) for h in logger.handlers):
        logger.addHandler(_StderrHandler(logging.WARNING))


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except SpyreRegressError as exc:
        print(f"spyre-regress: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("spyre-regress: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
