"""The nightly command: the night (`regressions.night`) on asv, git and SQLite.

`run_night` sequences benchmark, detect with re-measurement, lifecycle, investigation and
publication; this module supplies its real side: the results store on disk and the runner
that fills it (`Bench`: asv here, `AsvRunner`, or units of work on an executor,
`scaleout.DistributedRunner`), the alert records in `STATE/alerts.sqlite`, the probes and
report bundles (`spyre_regress.reporting.Reporter`), the time of day, and the lock against
overlapping runs.

Real nightlies batch commits (MongoDB every 2-24 h, Daly et al., ICPE 2020): `stride`
benchmarks every n-th first-parent commit plus the newest. asv keeps each commit's results as
soon as they are measured, and `--skip-existing-commits` resumes an interrupted run. Detection
that is unsure asks for more samples (`remeasure`: `asv run --append-samples` on
the commits it names, unbenchmarked ones of the stride window included) before it decides;
a change in tonight's newest commit is reported tonight, provisionally. The records
(`lifecycle`) live in SQLite: an alert is investigated once, a bundle is written
only when the investigation's own measurement confirms it, alerts with one culprit share one
report, and a provisional alert is confirmed or withdrawn as later nights add commits.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from regressions import git, night, processes
from regressions.detection import detect, remeasure
from regressions.detection.detect import Series
from regressions.errors import SpyreRegressError
from regressions.investigation import investigator
from regressions.probing import suite
from regressions.records import alert_store, files, lifecycle
from regressions.records.results_store import ResultsStore
from spyre_regress import dashboard
from spyre_regress.executor import Executor
from spyre_regress.reporting import Published, Reporter, Reporting
from spyre_regress.scaleout import DistributedRunner, ExecutorProbes

Progress = Callable[[str], None]
TRANSIENTS_VERSION = 1
UNITS_VERSION = 3  # 2: the phases of each executor run; 3: `alone` (was `clock`) per unit
UNFINISHED_NIGHT_VERSION = 1  # STATE/unfinished-night.json: what a night found measured


@dataclass(kw_only=True)
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
    budget: float = remeasure.BUDGET_FRACTION  # re-measurement seconds, fraction of tonight's
    remeasure_rounds: int = remeasure.MAX_ROUNDS  # 0: no re-measurement (the demo)
    # samples per side behind an investigation's confirmation at the culprit, and timed
    # iterations per build in its report
    samples: int = investigator.CONFIRM_SAMPLES
    workers: int | None = None  # an embedded cluster of this many worker processes
    scheduler: str | None = None  # or a running Dask cluster, tcp://HOST:PORT
    dashboard: bool = False  # the embedded cluster's dashboard, on localhost
    since: str | None = None  # the oldest commit to benchmark (None: the branch's first)

    @property
    def results_dir(self) -> Path:
        return self.repo / ".asv" / "results"

    @property
    def history(self) -> Path:
        """The git repository whose commits the suite measures (`suite.history_repo`)."""
        return suite.history_repo(self.repo)

    @property
    def reporting(self) -> Reporting:
        """Where the night's investigations and reports go."""
        return Reporting(repo=self.repo, results_dir=self.results_dir,
                         state_dir=self.state_dir, reports_dir=self.reports_dir,
                         machine=self.machine, env=self.asv_env, floors=self.floors,
                         samples=self.samples)

    @property
    def store(self) -> ResultsStore:
        """The nightly's results store: asv's, of its machine, in the branch's order."""
        return ResultsStore(self.results_dir, self.machine, self.history)


@dataclass(kw_only=True)
class NightlyRun:
    commits_benchmarked: list[str]
    records: list[lifecycle.AlertRecord]  # every alert record after tonight
    events: list[lifecycle.Event]  # tonight's transitions
    published: list[Published]  # the culprit reports written tonight
    transients: list[detect.Transient]
    remeasurement_note: str  # what re-measurement spent (`night.remeasurement_line`)
    dashboard: Path | None  # asv's dashboard, made to work offline
    failures: list[str]
    environment_events: list[lifecycle.Event] = field(default_factory=list)  # new ones
    awaiting: list[detect.Regression] = field(default_factory=list)  # not yet confirmed
    # wall seconds per step, in order (`night.NightResult.phases`; with asv, "asv set-up"
    # apart from "benchmark", and "dashboard")
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def new_reports(self) -> bool:
        return bool(self.published)


def branch_history(repo: Path, branch: str, since: str | None = None) -> list[str]:
    """The branch's first-parent commits, oldest first; from `since` on when given (a project
    whose early history the suite cannot build: torch-spyre's commits before its torch
    2.13 upgrade pin another torch).

    Raises:
        SpyreRegressError: `since` is not on the branch's first-parent chain.
    """
    history = git.first_parent_history(repo, branch)
    if since is None:
        return history
    start = git.resolve(repo, since)
    if start not in history:
        raise SpyreRegressError(f"--since {since} is not on {branch}'s first-parent history; "
                                "pass a commit of the branch itself")
    return history[history.index(start):]


def select_commits(history: list[str], stride: int) -> list[str]:
    """Every `stride`-th commit from the oldest, and always the newest."""
    if stride < 1:
        raise SpyreRegressError(f"--stride must be at least 1, not {stride}")
    chosen = history[::stride]
    if history and history[-1] not in chosen:
        chosen.append(history[-1])
    return chosen


def benchmark(options: NightlyOptions, commits: list[str], progress: Progress) -> float:
    """asv run on `commits`, streaming asv's own progress lines; the seconds asv took before
    it ran the first benchmark (creating environments, installing, discovering)."""
    config = options.repo / "asv.conf.json"
    if not config.exists():
        raise SpyreRegressError(f"{config} does not exist: nightly benchmarks with the "
                                "repository's own asv.conf.json")
    processes.run_asv(["machine", "--yes", "--machine", options.machine], options.repo,
                      env=options.asv_env)
    hashes = options.state_dir / "commits.txt"
    files.write_text(hashes, "\n".join(commits) + "\n")
    arguments = ["run", "--machine", options.machine, "--record-samples",
                 "--skip-existing-commits", "--show-stderr"]
    if options.bench:
        arguments += ["--bench", options.bench]
    arguments.append(f"HASHFILE:{hashes}")
    started = time.monotonic()
    setup = [0.0]

    def with_time_left(line: str) -> None:
        """asv's own "[ 25.00%]" progress, plus the time left at the rate so far."""
        if not setup[0] and re.search(r"Running \d+ total benchmarks", line):
            setup[0] = time.monotonic() - started
        match = re.search(r"\[\s*([\d.]+)%\]", line)
        fraction = float(match.group(1)) / 100 if match else 0.0
        if fraction > 0.02:
            elapsed = time.monotonic() - started
            line += f"  (about {elapsed * (1 - fraction) / fraction:.0f} s left)"
        progress(line)

    done = processes.run_asv(arguments, options.repo, env=options.asv_env,
                             stream=with_time_left)
    if done.returncode not in (0, 2):  # 2: some benchmark failed; detection reports it
        raise SpyreRegressError(f"asv run failed (exit {done.returncode}): "
                                f"{(done.stdout or '').strip().splitlines()[-1:]}")
    progress(f"asv run finished in {time.monotonic() - started:.0f} s")
    return setup[0]


def run(options: NightlyOptions, progress: Progress) -> NightlyRun:
    if options.state_dir.exists() and not options.state_dir.is_dir():
        raise SpyreRegressError(f"--state {options.state_dir} is a file; pass a directory "
                                "(it is created if missing)")
    options.state_dir.mkdir(parents=True, exist_ok=True)
    with files.exclusive_lock(options.state_dir / "nightly.lock"), \
            contextlib.ExitStack() as stack:
        # opened first: a damaged database is refused before anything slow runs
        database = alert_store.AlertStore(options.state_dir / "alerts.sqlite")
        stack.callback(database.close)
        executor = None
        try:
            history = branch_history(options.history, options.branch, options.since)
            commits = select_commits(history, options.stride)
            if options.workers is not None or options.scheduler is not None:
                executor = stack.enter_context(Executor.start(
                    options.workers, options.scheduler, dashboard=options.dashboard,
                    scratch_root=options.state_dir / "workers" if options.workers else None,
                    progress=progress))
            progress(f"benchmarking {len(commits)} of {len(history)} commits on "
                     f"{options.branch} (stride {options.stride})")
            reporter = Reporter(options.reporting, progress,
                                None if executor is None else ExecutorProbes(executor),
                                1 if executor is None else executor.workers)
            runner = AsvRunner(options, progress) if executor is None else \
                DistributedRunner(options.store, options.repo, options.asv_env, options.bench,
                                  executor=executor, work_dir=options.state_dir / "work",
                                  progress=progress)
            bench = Bench(options.store, runner, options.state_dir)
            tonight = night.run_night(
                commits, history, bench, database, investigations=reporter, now=utc_now,
                settings=night.Settings(budget=options.budget, rounds=options.remeasure_rounds,
                                        floors=options.floors), progress=progress)
            bench.finished()
        finally:
            if executor is not None:
                _write_units(options.state_dir / "units.json", executor)
        _write_transients(options.state_dir / "transients.json", tonight.transients)
        phases = _phases(tonight.phases, runner)
        started = time.monotonic()
        published_dashboard = render_dashboard(options, progress)
        phases["dashboard"] = time.monotonic() - started
        return NightlyRun(
            commits_benchmarked=commits, records=tonight.records, events=tonight.events,
            published=tonight.published, transients=tonight.transients,
            remeasurement_note=f"{night.remeasurement_line(tonight.remeasurement)} (measured "
                               f"in {bench.remeasuring_seconds:.0f} s)",
            dashboard=published_dashboard, failures=tonight.failures,
            environment_events=tonight.environment_events, awaiting=tonight.awaiting,
            phases=phases)


def _phases(night_phases: dict[str, float], runner: Runner) -> dict[str, float]:
    """The night's phases, with asv's set-up (environments, installs, discovery) apart from
    its benchmarking."""
    setup = runner.setup_seconds if isinstance(runner, AsvRunner) else 0.0
    if not setup:
        return dict(night_phases)
    phases = {"asv set-up": setup}
    for name, seconds in night_phases.items():
        phases[name] = seconds - setup if name == "benchmark" else seconds
    return phases


def utc_now() -> str:
    """The time of a transition, as the records' notes give it."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


class Runner(Protocol):
    """What fills a results store: benchmarks new commits, measures requested series again."""

    def run(self, commits: Sequence[str]) -> None: ...
    def measure_again(self, requests: Sequence[remeasure.Request]
                      ) -> list[tuple[float, ...] | None]: ...


class Bench:
    """The night's bench (`night.Bench`): the results store and the runner that fills it.
    What it found `measured` outlives an interrupt: a night that did not finish
    (interrupted, or stopped by an error) left its answer in STATE/unfinished-night.json, and
    the commits it found measured count as tonight's again, so the night that resumes has
    the re-measurement budget the interrupted one had (without a `state_dir`, nothing
    outlives the night)."""

    def __init__(self, store: ResultsStore, runner: Runner, state_dir: Path | None = None
                 ) -> None:
        self.store, self.runner = store, runner
        self.marker = None if state_dir is None else state_dir / "unfinished-night.json"
        self.remeasuring_seconds = 0.0  # wall time of tonight's re-measurement runs

    def measured(self) -> set[str]:
        if self.marker is None:
            return self.store.commits()
        if self.marker.is_file():
            kept = files.read_json(self.marker, "unfinished night's record",
                                   "remove it to count every measured commit as measured")
            return set(kept.get("measured", ()))
        held = self.store.commits()
        files.write_json(self.marker, {"version": UNFINISHED_NIGHT_VERSION,
                                       "measured": sorted(held)})
        return held

    def finished(self) -> None:
        """Tonight ran to its end: the next night starts from the results store."""
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)

    def run(self, commits: Sequence[str]) -> None:
        self.runner.run(commits)

    def series(self) -> list[Series]:
        return self.store.series()

    def measure_again(self, requests: Sequence[remeasure.Request]
                      ) -> Sequence[Sequence[float] | None]:
        started = time.monotonic()
        try:
            return self.runner.measure_again(requests)
        finally:
            self.remeasuring_seconds += time.monotonic() - started

    def costs(self) -> remeasure.Costs:
        return self.store.costs()


class AsvRunner:
    """What fills the nightly's results store on this host: `asv run` on the repository."""

    def __init__(self, options: NightlyOptions, progress: Progress) -> None:
        self.options, self.progress = options, progress
        self.rounds = 0  # re-measurement rounds tonight, named in the progress
        self.setup_seconds = 0.0  # asv's before the first benchmark of tonight's run

    def run(self, commits: Sequence[str]) -> None:
        self.setup_seconds = benchmark(self.options, list(commits), self.progress)

    def measure_again(self, requests: Sequence[remeasure.Request]
                      ) -> list[tuple[float, ...] | None]:
        self.rounds += 1
        return measure_again(self.options, requests, self.progress, self.rounds)


def measure_again(options: NightlyOptions, requests: Sequence[remeasure.Request],
                  progress: Progress, round_: int = 1) -> list[tuple[float, ...] | None]:
    """Serve re-measurement requests with `asv run --append-samples`, one run per commit for
    the requested series; the new samples of each request (what the run added)."""
    by_commit: dict[str, list[remeasure.Request]] = {}
    for request in requests:
        by_commit.setdefault(request.commit, []).append(request)
    added: dict[tuple[str, str, str], tuple[float, ...] | None] = {}
    for number, (commit, wanted) in enumerate(by_commit.items(), 1):
        names = sorted({f"{r.benchmark}{r.params}" for r in wanted})
        progress(f"re-measuring {commit[:8]} (round {round_} of at most "
                 f"{remeasure.MAX_ROUNDS}: commit {number} of {len(by_commit)}): "
                 f"{len(names)} series")
        before = options.store.samples_at(commit)
        arguments = ["run", "--machine", options.machine, "--record-samples",
                     "--append-samples", "--show-stderr",
                     *(f"--bench=^{re.escape(name)}$" for name in names), f"{commit}^!"]
        done = processes.run_asv(arguments, options.repo, env=options.asv_env)
        if done.returncode not in (0, 2):
            raise SpyreRegressError(f"asv run --append-samples failed at {commit[:12]} "
                                    f"(exit {done.returncode})")
        after = options.store.samples_at(commit)
        for r in wanted:
            old, new = before.get((r.benchmark, r.params)) or (), after.get((r.benchmark,
                                                                               r.params))
            added[commit, r.benchmark, r.params] = None if new is None else new[len(old):]
    return [added.get((r.commit, r.benchmark, r.params)) for r in requests]


def _write_units(path: Path, executor: Executor) -> None:
    """Every unit of work the night ran on the executor and its seconds: what
    scripts/scaleout_projection.py projects a nightly's wall time from."""
    files.write_json(path, {"version": UNITS_VERSION, "workers": executor.workers,
                            "units": executor.timed, "phases": executor.phases})


def _write_transients(path: Path, transients: Sequence[detect.Transient]) -> None:
    """Single-commit excursions, for a person to look at: never bisected or reported."""
    files.write_json(path, {"version": TRANSIENTS_VERSION, "transients": list(transients)})


def render_dashboard(options: NightlyOptions, progress: Progress) -> Path | None:
    """asv's dashboard (`asv publish`: asv's word; here to publish is to write a culprit's
    report), with the scripts it loads from CDNs served from its own folder."""
    done = processes.run_asv(["publish"], options.repo, env=options.asv_env)
    if done.returncode != 0:
        progress(f"asv publish failed (exit {done.returncode}); the results are still there")
        return None
    html = options.repo / ".asv" / "html"
    online = dashboard.make_offline(html)
    if online:
        progress(f"the dashboard still loads {online} from the network")
    return html
