"""`spyre-regress`: the command line. The only module that prints for the user and exits.

Exit codes: 0 success / nothing regressed, 1 regressions found, 2 usage or input error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

from regressions import demo, detect, git, investigate, nightly, results, store
from regressions.errors import SpyreRegressError

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="spyre-regress",
        description="Regression benchmarking for the Spyre torch.compile backend.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_demo(sub)
    _add_nightly(sub)
    _add_detect(sub)
    _add_bisect(sub)
    _add_stages(sub)
    _add_knobs(sub)
    _add_minimize(sub)
    _add_report(sub)
    _add_alerts(sub)
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


# --- investigation commands ------------------------------------------------------------------

_STARTED = [time.monotonic()]


def _progress(message: str) -> None:
    """Progress on stderr, with the time since the command started."""
    print(f"[{time.monotonic() - _STARTED[0]:7.1f}s] {message}", file=sys.stderr, flush=True)


def _add_target_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--repo", required=True, type=Path, metavar="PATH",
                   help="checkout of the benchmarked project (with benchmarks/workloads.py)")
    p.add_argument("--good", required=True, metavar="REV", help="a commit without the problem")
    p.add_argument("--bad", required=True, metavar="REV", help="a later commit with it")
    p.add_argument("--work-dir", type=Path, metavar="DIR",
                   help="where checkouts and captures go (default: a temporary directory)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write the result as JSON")


def _add_workload_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workload", required=True, metavar="NAME",
                   help="a workload of benchmarks/workloads.py, e.g. mlp")
    p.add_argument("--shape", required=True, type=_sequence_length, metavar="SHAPE",
                   help="sequence length, e.g. 127 or seq127")
    p.add_argument("--width", type=int, metavar="N", help="model width (default: the "
                   "workload's)")
    p.add_argument("--metric", choices=("device_time", "numerics", "compile_time"),
                   default="device_time", help="what regressed (default %(default)s)")
    p.add_argument("--stage", choices=STAGES, help="compile_time: the stage to time")
    p.add_argument("--error", choices=("max_abs", "max_rel", "rmse_ratio"),
                   default="rmse_ratio", help="numerics: which error (default %(default)s)")


STAGES = ("dynamo", "decompose", "lower", "layout", "kernel", "sdsc", "backend", "runtime")


def _sequence_length(text: str) -> int:
    digits = text[3:] if text.startswith("seq") else text
    if not digits.isdigit() or int(digits) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a sequence length, e.g. 127")
    return int(digits)


@contextlib.contextmanager
def _work_dir(path: Path | None):
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="spyre-regress-") as scratch:
        yield Path(scratch)


def _target(args: argparse.Namespace) -> investigate.Target:
    return investigate.Target("", (), args.workload, args.shape, args.width, args.metric,
                              args.stage, args.error if args.metric == "numerics" else None)


def _write(path: Path | None, document: dict) -> None:
    if path is not None:
        store.write_json(path, document)
        print(f"wrote {path}")


def _add_bisect(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bisect", help="find the first bad commit for one benchmark",
                       description="Binary search over first-parent history with sequential "
                       "same/different/unknown verdicts (docs/bisection.md). Exit 0: culprit "
                       "found; 1: not reproduced or no single culprit; 2: usage error.")
    _add_target_arguments(p)
    p.add_argument("--bench", required=True, type=_regex, metavar="REGEX",
                   help="selects exactly one benchmark of the repository's suite")
    p.add_argument("--params", default="", metavar="PARAMS",
                   help="the parameter combination as detect prints it, e.g. \"('mlp', 127)\"")
    p.add_argument("--results", type=Path, metavar="DIR",
                   help="asv results directory to record the measurements in")
    p.set_defaults(handler=_run_bisect)


def _run_bisect(args: argparse.Namespace) -> int:
    benchmark, param_names = _resolve_benchmark(args.repo, args.bench)
    params = investigate.parse_params(args.params)
    if len(params) != len(param_names):
        raise SpyreRegressError(f"{benchmark} takes parameters {list(param_names)}; pass "
                                f"--params with {len(param_names)} value(s)")
    with _work_dir(args.work_dir) as work:
        investigator = investigate.Investigator(args.repo, work, args.results, "bisect",
                                                _progress)
        target = investigate.Target(benchmark, params, "", 0, None, "device_time")
        result = investigator.bisect(git.resolve(args.repo, args.good),
                                     git.resolve(args.repo, args.bad), target)
    table = pd.DataFrame([{"commit": s.commit[:10], "n": s.n,
                           "median": _fmt(s.median, ".4g"), "vs": s.reference,
                           "p": _fmt(s.pvalue, ".1e"), "verdict": s.verdict, "note": s.note}
                          for s in result.steps])
    print(table.to_string(index=False))
    print(f"commits in range {result.commits_in_range}, measured {result.commits_measured}")
    if result.culprit:
        info = git.commit_info(args.repo, result.culprit)
        print(f"culprit {info.sha[:12]} {info.subject}")
    elif not result.reproduced:
        print("the regression did not reproduce between --good and --bad")
    else:
        print(f"no single culprit: one of {[c[:12] for c in result.candidates]}")
    _write(args.json, result.to_dict())
    return EXIT_OK if result.culprit else EXIT_REGRESSED


def _resolve_benchmark(repo: Path, pattern: str) -> tuple[str, tuple[str, ...]]:
    from asv_runner.discovery import disc_benchmarks

    suite = Path(repo) / "benchmarks"
    found = {b.name: tuple(b.param_names) for b in disc_benchmarks(str(suite))
             if re.search(pattern, b.name)}
    if len(found) != 1:
        listed = ", ".join(sorted(found)[:8]) or "none"
        raise SpyreRegressError(f"--bench {pattern!r} matches {len(found)} benchmarks "
                                f"({listed}); make it match exactly one")
    return next(iter(found.items()))


def _add_stages(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stages", help="name the first compiler stage where two builds differ",
                       description="Compile the probe at both commits with stage capture and "
                       "diff the canonical artifacts (docs/bisection.md).")
    _add_target_arguments(p)
    _add_workload_arguments(p)
    p.set_defaults(handler=_run_stages)


def _run_stages(args: argparse.Namespace) -> int:
    with _work_dir(args.work_dir) as work:
        investigator = investigate.Investigator(args.repo, work, progress=_progress)
        report = investigator.stages(git.resolve(args.repo, args.good),
                                     git.resolve(args.repo, args.bad), _target(args))
    table = pd.DataFrame([{"stage": d.stage, "artifact": "differs" if d.changed else "same",
                           "lines": d.diff_lines, "compile good s": _fmt(d.compile_s_good, ".4f"),
                           "compile bad s": _fmt(d.compile_s_bad, ".4f"),
                           "ratio": _fmt(d.compile_ratio, ".2f")} for d in report.stages])
    print(table.to_string(index=False))
    changed = [k for k in report.kernels if k.delta_us]
    for kernel in changed[:10]:
        print(f"kernel {kernel.name}: {_fmt(kernel.good_us, '.1f')} -> "
              f"{_fmt(kernel.bad_us, '.1f')} us")
    print(f"first divergent stage: {report.first_divergent_stage} ({report.basis}); "
          f"numerics first diverge at: {report.numerics_first_divergent_stage}")
    if report.diff:
        print(report.diff[:4000])
    _write(args.json, report.to_dict())
    return EXIT_OK


def _add_knobs(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("knobs", help="find the compiler knob that restores the metric",
                       description="At the bad commit, toggle every Config decision and "
                       "narrow the winner to one application (docs/bisection.md).")
    _add_target_arguments(p)
    _add_workload_arguments(p)
    p.set_defaults(handler=_run_knobs)


def _run_knobs(args: argparse.Namespace) -> int:
    with _work_dir(args.work_dir) as work:
        investigator = investigate.Investigator(args.repo, work, progress=_progress)
        good, bad = git.resolve(args.repo, args.good), git.resolve(args.repo, args.bad)
        target = _target(args)
        report = investigator.stages(good, bad, target)
        workaround = investigator.knobs(bad, target, investigate.good_metric(report, target))
    if not workaround:
        print("no regression to work around at this metric")
        return EXIT_REGRESSED
    for trial in workaround["trials"]:
        print(f"{trial['knob']}={trial['value']!r}: {trial['metric']:.6g}")
    if workaround.get("knob"):
        print(f"workaround: Config({workaround['knob']}={workaround['value']!r}) recovers "
              f"{workaround['recovered']:.0%}; decisive application: "
              f"{workaround['decisive_application']}")
    else:
        print("no single knob restores the metric")
    _write(args.json, workaround)
    return EXIT_OK if workaround.get("knob") else EXIT_REGRESSED


def _add_minimize(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("minimize", help="shrink the probe program, keeping the regression",
                       description="Delta debugging over the probe's ATen graph until removing "
                       "any op removes the regression; writes a standalone module.")
    _add_target_arguments(p)
    _add_workload_arguments(p)
    p.add_argument("--out", required=True, type=Path, metavar="FILE.py")
    p.set_defaults(handler=_run_minimize)


def _run_minimize(args: argparse.Namespace) -> int:
    with _work_dir(args.work_dir) as work:
        investigator = investigate.Investigator(args.repo, work, progress=_progress)
        target = _target(args)
        result = investigator.minimize(git.resolve(args.repo, args.good),
                                       git.resolve(args.repo, args.bad), target,
                                       investigator.full_candidate(target))
    if result is None:
        print("nothing to minimize: the full program shows no regression at this metric")
        return EXIT_REGRESSED
    store.write_text(args.out, result.source)
    print(f"{result.ops_before} -> {result.ops_after} ops in {result.queries} queries "
          f"(ratio {result.ratio_before:.3f} -> {result.ratio_after:.3f}); wrote {args.out}")
    _write(args.json, result.to_dict())
    return EXIT_OK


def _add_report(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="investigate an alert and write its upstream bundle",
                       description="Bisect commit, stage and knob, minimize, time both builds "
                       "and write report.md/html, reproducer and evidence (docs/reports.md).")
    p.add_argument("--repo", type=Path, metavar="PATH", help="the benchmarked checkout")
    p.add_argument("--alerts", type=Path, metavar="FILE", help="detect --json output")
    p.add_argument("--alert", type=int, default=1, metavar="N", help="which alert (1-based)")
    p.add_argument("--results", type=Path, metavar="DIR", help="the asv results directory")
    p.add_argument("--investigation", type=Path, metavar="FILE",
                   help="render a saved investigation instead of investigating")
    p.add_argument("--work-dir", type=Path, metavar="DIR")
    p.add_argument("--out", required=True, type=Path, metavar="DIR")
    p.set_defaults(handler=_run_report)


def _run_report(args: argparse.Namespace) -> int:
    from reports import write_bundle

    if args.investigation is not None:
        document = store.read_json(args.investigation, "investigation")
    else:
        if args.repo is None or args.alerts is None or args.results is None:
            raise SpyreRegressError("pass --repo, --alerts and --results (or --investigation)")
        alerts = store.read_json(args.alerts, "alerts file").get("alerts", [])
        if not 1 <= args.alert <= len(alerts):
            raise SpyreRegressError(f"--alert {args.alert}: the file has {len(alerts)} alerts")
        with _work_dir(args.work_dir) as work:
            investigator = investigate.Investigator(args.repo, work, args.results,
                                                    progress=_progress)
            document = investigate.investigate(
                investigator, alerts[args.alert - 1], nightly.param_names(args.results),
                nightly.numerics_widths(args.repo), args.out)
        store.write_json(args.out / "investigation.json", document)
    bundle = write_bundle(document, args.out)
    print(f"wrote {bundle}")
    return EXIT_OK


def _add_nightly(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("nightly", help="benchmark new commits, detect, investigate, report",
                       description="asv on the branch's commits (every --stride-th), detect, "
                       "then investigate and report each new alert once (docs/nightly.md).")
    p.add_argument("--repo", required=True, type=Path, metavar="PATH")
    p.add_argument("--branch", default="main")
    p.add_argument("--stride", type=int, default=1, metavar="N",
                   help="benchmark every N-th commit and the newest (default %(default)s)")
    p.add_argument("--bench", type=_regex, metavar="REGEX", help="asv --bench selection")
    p.add_argument("--state", type=Path, metavar="DIR",
                   help="alert database, lock and scratch space (default REPO/.spyre-regress)")
    p.add_argument("--reports", type=Path, metavar="DIR",
                   help="report bundles (default STATE/reports)")
    p.add_argument("--machine", default="nightly", help="asv machine name")
    p.add_argument("--threshold", action="append", default=[], type=_threshold,
                   metavar="REGEX=FRACTION", help="as for detect")
    p.set_defaults(handler=_run_nightly)


def _run_nightly(args: argparse.Namespace) -> int:
    _show_warnings()
    state = args.state or args.repo / ".spyre-regress"
    options = nightly.NightlyOptions(args.repo.resolve(), state.resolve(),
                                     (args.reports or state / "reports").resolve(),
                                     args.branch, args.stride, args.bench, args.machine,
                                     floors=tuple(args.threshold))
    run = nightly.run(options, _progress)
    _print_alerts(run.alerts)
    for failure in run.failures:
        print(f"spyre-regress: warning: {failure}", file=sys.stderr)
    return EXIT_REGRESSED if any(a.get("new") for a in run.alerts) else EXIT_OK


def _print_alerts(alerts: list[dict]) -> None:
    for alert in alerts:
        print(f"alert {alert.get('id')}: {alert['kind']} {alert['good_commit'][:8]}.."
              f"{alert['bad_commit'][:8]} ({len(alert['members'])} benchmark(s)) "
              f"[{alert.get('status')}]")


def _add_alerts(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("alerts", help="list or triage the nightly's alerts")
    p.add_argument("--state", required=True, type=Path, metavar="DIR")
    p.add_argument("--set", nargs=2, metavar=("ID", "STATUS"),
                   help=f"set an alert's status: one of {', '.join(store.ALERT_STATES)}")
    p.set_defaults(handler=_run_alerts)


def _run_alerts(args: argparse.Namespace) -> int:
    path = args.state / "alerts.sqlite"
    if not path.exists():
        raise SpyreRegressError(f"{path} does not exist; run `spyre-regress nightly` first")
    database = store.AlertStore(path)
    try:
        if args.set:
            if not args.set[0].isdigit():
                raise SpyreRegressError(f"alert id must be a number, not {args.set[0]!r}")
            database.update(int(args.set[0]), status=args.set[1])
        rows = database.rows()
    finally:
        database.close()
    if rows:
        print(pd.DataFrame(rows).to_string(index=False))
    else:
        print("no alerts")
    return EXIT_OK


def _add_demo(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="the whole system on a history with known regressions",
                       description="Build a scratch repository with injected regressions, run "
                       "the nightly on it and leave the reports (README: quick start).")
    p.add_argument("--out", type=Path, default=Path("spyre-regress-demo"), metavar="DIR",
                   help="output directory, must be new or empty (default %(default)s)")
    p.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    _show_warnings()
    summary = demo.run(args.out, _progress)
    out = Path(args.out).resolve()
    table = pd.DataFrame([{"culprit": r["commit"][:10], "stage": r["stage"], "kind": r["kind"],
                           "cost": f"x{r['ratio']:.2f}", "workaround": r["workaround"] or "-",
                           "report": str(Path(r["report"]).relative_to(out))}
                          for r in summary["regressions"]])
    print(table.to_string(index=False) if len(table) else "no regressions found")
    print(f"summary: {Path(args.out) / 'summary.json'}")
    if summary.get("dashboard"):
        print(f"dashboard: {summary['dashboard']} (or `asv preview` in {args.out}/repo)")
    return EXIT_OK if not summary["failures"] else EXIT_REGRESSED


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
