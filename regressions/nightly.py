"""The nightly loop: benchmark new commits with asv, detect, investigate new alerts, report.

Real nightlies batch commits (MongoDB every 2-24 h, research/detection.md §2): `stride`
benchmarks every n-th first-parent commit plus the newest, and bisection narrows each alert
inside the gaps later. asv keeps each commit's results as soon as they are measured and
`--skip-existing-commits` resumes an interrupted run; alert state lives in SQLite so an
alert is investigated and reported once, and can then be triaged.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from regressions import detect, git, investigate, results, runner, store
from regressions.errors import SpyreRegressError

FORMAT_VERSION = 1
Progress = Callable[[str], None]


@dataclass
class NightlyOptions:
    repo: Path
    state_dir: Path
    reports_dir: Path
    branch: str = "main"
    stride: int = 1
    bench: str | None = None
    machine: str = "nightly"
    asv_env: dict[str, str] = field(default_factory=dict)  # e.g. a smaller benchmark grid
    floors: tuple[tuple[str, float], ...] = ()  # detect's (regex, fraction) magnitude floors


@dataclass
class NightlyRun:
    commits_benchmarked: list[str]
    alerts: list[dict]  # detect JSON alerts, each with "id", "status", "new"
    investigated: list[dict]  # {"alert_id", "investigation", "bundle"} for new alerts
    html: Path | None
    failures: list[str]


def select_commits(history: list[str], stride: int) -> list[str]:
    """Every `stride`-th commit from the oldest, and always the newest."""
    if stride < 1:
        raise SpyreRegressError(f"--stride must be at least 1, not {stride}")
    chosen = history[::stride]
    if history and history[-1] not in chosen:
        chosen.append(history[-1])
    return chosen


def alert_key(alert: dict) -> str:
    members = sorted(f"{m['benchmark']}{m['params']}" for m in alert["members"])
    return f"{alert['good_commit']}..{alert['bad_commit']}:{alert['kind']}:{len(members)}:" \
           f"{members[0] if members else ''}"


def benchmark(options: NightlyOptions, commits: list[str], progress: Progress) -> None:
    """asv run on `commits`, streaming asv's own progress lines."""
    config = options.repo / "asv.conf.json"
    if not config.exists():
        raise SpyreRegressError(f"{config} does not exist: nightly benchmarks with the "
                                "repository's own asv.conf.json")
    runner.run_asv(["machine", "--yes", "--machine", options.machine], options.repo,
                   env=options.asv_env)
    hashes = options.state_dir / "commits.txt"
    store.write_text(hashes, "\n".join(commits) + "\n")
    arguments = ["run", "--machine", options.machine, "--record-samples",
                 "--skip-existing-commits", "--show-stderr"]
    if options.bench:
        arguments += ["--bench", options.bench]
    arguments.append(f"HASHFILE:{hashes}")
    started = time.monotonic()

    def with_time_left(line: str) -> None:
        """asv's own "[ 25.00%]" progress, plus the time left at the rate so far."""
        match = re.search(r"\[\s*([\d.]+)%\]", line)
        fraction = float(match.group(1)) / 100 if match else 0.0
        if fraction > 0.02:
            elapsed = time.monotonic() - started
            line += f"  (about {elapsed * (1 - fraction) / fraction:.0f} s left)"
        progress(line)

    done = runner.run_asv(arguments, options.repo, env=options.asv_env, stream=with_time_left)
    if done.returncode not in (0, 2):  # 2: some benchmark failed; detection reports it
        raise SpyreRegressError(f"asv run failed (exit {done.returncode}): "
                                f"{(done.stdout or '').strip().splitlines()[-1:]}")
    progress(f"asv run finished in {time.monotonic() - started:.0f} s")


def run(options: NightlyOptions, progress: Progress) -> NightlyRun:
    options.state_dir.mkdir(parents=True, exist_ok=True)
    with store.exclusive_lock(options.state_dir / "nightly.lock"):
        history = git.first_parent_history(options.repo, options.branch)
        commits = select_commits(history, options.stride)
        progress(f"benchmarking {len(commits)} of {len(history)} commits on "
                 f"{options.branch} (stride {options.stride})")
        benchmark(options, commits, progress)
        results_dir = options.repo / ".asv" / "results"
        frame = results.load_results(results_dir, repo=options.repo, machine=options.machine)
        series = results.series_from_frame(frame)
        alerts = detect.alerts_to_json(detect.cluster_alerts(
            detect.find_regressions(series, floors=options.floors)))["alerts"]
        progress(f"detect: {len(series)} series, {len(alerts)} alert(s)")
        database = store.AlertStore(options.state_dir / "alerts.sqlite")
        names = param_names(results_dir)
        widths = numerics_widths(options.repo)
        investigated, failures = [], []
        try:
            for alert in alerts:
                alert_id, new = database.upsert(alert_key(alert), alert["kind"],
                                                alert["good_commit"], alert["bad_commit"], alert)
                alert["id"], alert["new"] = alert_id, new
                row = next(r for r in database.rows() if r["id"] == alert_id)
                alert["status"] = row["status"]
                if row["status"] != "new":
                    continue
                progress(f"alert {alert_id} ({alerts.index(alert) + 1} of {len(alerts)}): "
                         f"investigating {alert['kind']} regression "
                         f"{alert['good_commit'][:8]}..{alert['bad_commit'][:8]}")
                try:
                    outcome = _investigate_and_report(options, alert, alert_id, names,
                                                      widths, results_dir, progress)
                except SpyreRegressError as error:
                    failures.append(f"alert {alert_id}: {error}")
                    progress(f"alert {alert_id}: investigation failed: {error}")
                    continue
                investigated.append(outcome)
                document = outcome["investigation"]
                database.update(alert_id, status="reported",
                                culprit=document["commits"]["culprit"]["sha"],
                                stage=document["stages"]["first_divergent_stage"],
                                report=str(outcome["bundle"]))
                alert["status"] = "reported"
        finally:
            database.close()
        html = publish(options, progress)
        return NightlyRun(commits, alerts, investigated, html, failures)


def _investigate_and_report(options, alert, alert_id, param_names, widths, results_dir,
                            progress) -> dict:
    from reports import write_bundle

    work_dir = options.state_dir / "work"
    investigator = investigate.Investigator(options.repo, work_dir, results_dir,
                                            options.machine, progress, options.asv_env)
    out_dir = options.reports_dir / f"alert-{alert_id:03d}"
    document = investigate.investigate(investigator, alert, param_names, widths, out_dir)
    store.write_json(out_dir / "investigation.json", document)
    bundle = write_bundle(document, out_dir)
    progress(f"alert {alert_id}: report written to {bundle}")
    return {"alert_id": alert_id, "investigation": document, "bundle": bundle}


def publish(options: NightlyOptions, progress: Progress) -> Path | None:
    done = runner.run_asv(["publish"], options.repo, env=options.asv_env)
    if done.returncode != 0:
        progress(f"asv publish failed (exit {done.returncode}); the results are still there")
        return None
    return options.repo / ".asv" / "html"


def param_names(results_dir: Path) -> dict[str, tuple[str, ...]]:
    meta = store.read_json(results_dir / "benchmarks.json", "asv benchmark list")
    return {name: tuple(entry.get("param_names") or ()) for name, entry in meta.items()
            if isinstance(entry, dict)}


def numerics_widths(repo: Path) -> dict[str, int]:
    """NUMERICS_WIDTHS from the repository's workload catalogue, read without importing it."""
    import ast

    tree = ast.parse((repo / "benchmarks" / "workloads.py").read_text())
    for node in ast.walk(tree):
        target = getattr(node, "target", None) or (node.targets[0] if isinstance(
            node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "NUMERICS_WIDTHS":
            return ast.literal_eval(node.value)
    return {}
