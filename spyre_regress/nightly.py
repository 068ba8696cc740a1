"""The nightly loop: benchmark new commits with asv, detect, investigate new alerts, report.

Real nightlies batch commits (MongoDB every 2-24 h, Daly et al., ICPE 2020): `stride`
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

from regressions import detect, git, results, runner, store, suite
from regressions.detect import Alert
from regressions.errors import SpyreRegressError
from regressions.investigate import Investigator, NotReproduced, alert_target
from regressions.investigation import Investigation
from regressions.probing import GitHistory, SubprocessProber
from reports import scrub_investigation, write_bundle

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

    @property
    def results_dir(self) -> Path:
        return self.repo / ".asv" / "results"


@dataclass(frozen=True)
class Outcome:
    """One investigated alert: its id, the investigation and the bundle written."""

    alert_id: int
    investigation: Investigation
    bundle: Path


@dataclass
class NightlyRun:
    commits_benchmarked: list[str]
    alerts: list[tuple[int, Alert, str]]  # (id, alert, status) of every alert detected
    investigated: list[Outcome]
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


def alert_key(alert: Alert) -> str:
    members = sorted(m.name for m in alert.members)
    return f"{alert.good_commit}..{alert.bad_commit}:{alert.kind}:{len(members)}:" \
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
    if options.state_dir.exists() and not options.state_dir.is_dir():
        raise SpyreRegressError(f"--state {options.state_dir} is a file; pass a directory "
                                "(it is created if missing)")
    options.state_dir.mkdir(parents=True, exist_ok=True)
    with store.exclusive_lock(options.state_dir / "nightly.lock"):
        history = git.first_parent_history(options.repo, options.branch)
        commits = select_commits(history, options.stride)
        progress(f"benchmarking {len(commits)} of {len(history)} commits on "
                 f"{options.branch} (stride {options.stride})")
        benchmark(options, commits, progress)
        frame = results.load_results(options.results_dir, repo=options.repo,
                                     machine=options.machine)
        series = results.series_from_frame(frame)
        alerts = detect.cluster_alerts(detect.find_regressions(series, floors=options.floors))
        progress(f"detect: {len(series)} series, {len(alerts)} alert(s)")
        run = NightlyRun(commits, [], [], None, [])
        database = store.AlertStore(options.state_dir / "alerts.sqlite")
        try:
            for number, alert in enumerate(alerts, 1):
                _handle(options, database, alert, number, len(alerts), run, progress)
        finally:
            database.close()
        run.html = publish(options, progress)
        return run


def _handle(options: NightlyOptions, database: store.AlertStore, alert: Alert, number: int,
            total: int, run: NightlyRun, progress: Progress) -> None:
    alert_id, _ = database.upsert(alert_key(alert), alert.kind, alert.good_commit,
                                  alert.bad_commit, alert.to_dict())
    status = database.status(alert_id)
    if status == "new":
        progress(f"alert {alert_id} ({number} of {total}): investigating {alert.kind} "
                 f"regression {alert.good_commit[:8]}..{alert.bad_commit[:8]}")
        try:
            outcome = investigate_and_report(options, alert, alert_id, progress)
        except NotReproduced as error:
            database.update(alert_id, status="not-reproduced", note=str(error))
            status = "not-reproduced"
            progress(f"alert {alert_id}: not reproduced: {error}")
        except SpyreRegressError as error:
            run.failures.append(f"alert {alert_id}: {error}")
            progress(f"alert {alert_id}: investigation failed: {error}")
        else:
            run.investigated.append(outcome)
            investigation = outcome.investigation
            database.update(alert_id, status="reported",
                            culprit=investigation.commits.culprit.sha,
                            stage=investigation.stages.first_divergent_stage,
                            report=str(outcome.bundle))
            status = "reported"
    run.alerts.append((alert_id, alert, status))


def investigate_and_report(options: NightlyOptions, alert: Alert, alert_id: int,
                           progress: Progress) -> Outcome:
    work_dir = options.state_dir / "work"
    prober = SubprocessProber(options.repo, work_dir, options.state_dir / "probe-results",
                              options.machine, progress, options.asv_env)
    investigator = Investigator(GitHistory(options.repo), prober, progress)
    target = alert_target(alert, suite.param_names(options.results_dir),
                          suite.numerics_widths(options.repo), suite.stage_width(options.repo))
    out_dir = options.reports_dir / f"alert-{alert_id:03d}"
    investigation = investigator.investigate(alert, target, out_dir, options.floors)
    store.write_json(out_dir / "investigation.json", scrub_investigation(investigation))
    bundle = write_bundle(investigation, out_dir)
    progress(f"alert {alert_id}: report written to {bundle}")
    return Outcome(alert_id, investigation, bundle)


def publish(options: NightlyOptions, progress: Progress) -> Path | None:
    done = runner.run_asv(["publish"], options.repo, env=options.asv_env)
    if done.returncode != 0:
        progress(f"asv publish failed (exit {done.returncode}); the results are still there")
        return None
    return options.repo / ".asv" / "html"
