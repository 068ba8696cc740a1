"""A night's benchmarks on many workers: asv on each worker, one results store on the driver.

The suite is cut in two by the metric table (`metrics.Metric.shares_host`): one unit of work
per (commit, host class) runs `asv run` on that commit for the benchmarks of the families
whose figures may share a host, or for the wall-clock ones, on
a worker, with an asv configuration of the worker's own - its environment directory (so two
asv runs never clobber one environment, asv issue #377; the environment is built once per
worker and reused for every commit it measures) and a results directory fresh for the unit,
so a unit retried after its worker died leaves nothing half-written. The unit returns the
documents asv wrote; the driver merges them into the one store
(`ResultsStore.merge`; asv has no merge, asv issue #1362), once per unit. The night's bench
is that store and this runner (`nightly.Bench`).
Re-measurement is one unit per (commit, host class) of the requested series, whose new samples
are appended to the store as `asv run --append-samples` appends them.

Every worker must see the repository under test at the same path as the driver (one host,
or a shared filesystem), and have spyre-regress installed.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.compile_work import deal
from regressions import codec, metrics, processes
from regressions.detection import remeasure
from regressions.errors import SpyreRegressError
from regressions.probing import suite
from regressions.probing.protocol import ProbeRequest
from regressions.records import asv_documents
from regressions.records.results_store import ResultsStore, document_samples
from spyre_regress.executor import Executor, Work

Progress = Callable[[str], None]


@dataclass(frozen=True)
class AsvUnit:
    """One `asv run` on a worker: benchmarks matching `bench` at `commit`."""

    repo: str
    commit: str
    machine: str
    bench: str
    env: dict[str, str] = field(default_factory=dict)


def run_asv_unit(unit: AsvUnit, scratch: Path) -> asv_documents.Store:
    """`unit` on this worker, in `scratch`: what asv wrote, read back."""
    results_dir = scratch / "results" / uuid.uuid4().hex
    config = worker_config(Path(unit.repo), scratch, results_dir)
    env = {**unit.env, "HOME": str(scratch / "home")}
    if "PIP_CACHE_DIR" not in env and "HOME" in os.environ:  # share what pip fetched
        env["PIP_CACHE_DIR"] = str(Path(os.environ["HOME"]) / ".cache" / "pip")
    home = scratch / "home" / ".asv-machine.json"
    if not home.is_file() or unit.machine not in json.loads(home.read_text()):
        processes.run_asv(["--config", str(config), "machine", "--yes", "--machine",
                           unit.machine], Path(unit.repo), env=env)
    done = processes.run_asv(["--config", str(config), "run", "--machine", unit.machine,
                              "--record-samples", "--show-stderr", "--bench", unit.bench,
                              f"{unit.commit}^!"], Path(unit.repo), env=env)
    if done.returncode not in (0, 2):  # 2: a benchmark failed; detection reports it
        tail = (done.stdout or "").strip().splitlines()[-3:]
        raise SpyreRegressError(f"asv run failed at {unit.commit[:12]} (exit "
                                f"{done.returncode}): {tail}")
    try:
        return ResultsStore(results_dir).snapshot()
    finally:
        shutil.rmtree(results_dir, ignore_errors=True)


def worker_config(repo: Path, scratch: Path, results_dir: Path) -> Path:
    """The repository's asv configuration with the worker's own directories: absolute paths
    to the repository and its suite, the environments under `scratch`."""
    from asv.util import load_json  # asv's reader, which allows the file's comments

    conf = load_json(str(repo / "asv.conf.json"), js_comments=True)
    conf.update(repo=str(suite.history_repo(repo)),
                benchmark_dir=str((repo / conf.get("benchmark_dir", "benchmarks")).resolve()),
                env_dir=str(scratch / "env"), results_dir=str(results_dir),
                html_dir=str(scratch / "html"))
    path = scratch / f"asv.{results_dir.name}.conf.json"
    path.write_text(json.dumps(conf, indent=1))
    return path


SHARED, CLOCK = "shared", "clock"  # the two units of a commit


def host_class(benchmark: str) -> str:
    """Which of a commit's two units measures `benchmark`: the families whose figures do not
    depend on what runs beside them (`Metric.shares_host`) in one, the wall clocks in the
    other, which holds its host's clock slot."""
    return SHARED if metrics.metric_for(benchmark).shares_host else CLOCK


def units_of(names: Sequence[str]) -> dict[str, list[str]]:
    """The suite cut into a commit's units (`host_class`). One `asv run` per unit: each run
    pays for discovering the suite and installing the commit (about 15 s here), so a unit
    per family would pay it five times a commit; two units let the shared families of two
    commits run on two workers at once while the clock families stay alone."""
    grouped: dict[str, list[str]] = {}
    for name in sorted(names):
        grouped.setdefault(host_class(name), []).append(name)
    return {unit: grouped[unit] for unit in (SHARED, CLOCK) if unit in grouped}


def selection(names: Sequence[str], within: str | None = None) -> str:
    """An asv --bench regex for exactly `names` (each with all its parameters), and only
    what `within` (the user's --bench) also matches."""
    alternatives = "|".join(re.escape(n) for n in sorted(names))
    scope = f"(?=.*(?:{within}))" if within else ""
    return f"^{scope}(?:{alternatives})(?:\\(|$)"


def selected(benchmark: suite.Benchmark, bench: str | None) -> bool:
    """Whether asv's --bench `bench` selects any of `benchmark`'s points."""
    if not bench or re.search(bench, benchmark.name):
        return True
    combos = itertools.product(*benchmark.params) if benchmark.params else ()
    return any(re.search(bench, f"{benchmark.name}({', '.join(c)})") for c in combos)


class DistributedRunner:
    """What fills the night's results store on an executor: every asv run a unit of work on
    a worker, its documents merged into the store on the driver."""

    def __init__(self, store: ResultsStore, repo: Path, asv_env: dict[str, str],
                 bench: str | None, executor: Executor, work_dir: Path,
                 progress: Progress) -> None:
        self.store, self.repo = store, Path(repo)
        self.asv_env, self.bench, self.executor = dict(asv_env), bench, executor
        self.work_dir, self.progress = Path(work_dir), progress
        self._units: dict[str, list[str]] | None = None

    @property
    def machine(self) -> str:
        return str(self.store.machine)

    def units(self) -> dict[str, list[str]]:
        """A commit's units (`units_of`), of the benchmarks the user's --bench selects (by
        name or by one of its parameter combinations, as asv selects them)."""
        if self._units is None:
            listed = suite.discover(self.repo, self.work_dir)
            self._units = units_of([b.name for b in listed.values()
                                    if selected(b, self.bench)])
        return self._units

    def _unit(self, commit: str, host: str, names: Sequence[str]) -> Work:
        unit = AsvUnit(str(self.repo), commit, self.machine, selection(names, self.bench),
                       env=self.asv_env)
        return Work(f"{host} at {commit[:8]}", run_asv_unit, unit, alone=host == CLOCK)

    def run(self, commits: Sequence[str]) -> None:
        """Every (commit, unit) the store does not hold yet - only its benchmarks the store
        lacks, so nothing is measured twice - merged as each unit finishes."""
        have = self.store.benchmarks_by_commit()
        works = [self._unit(c, host, missing) for c in commits
                 for host, names in self.units().items()
                 if (missing := [n for n in names if n not in have.get(c, set())])]
        self.progress(f"benchmarking {len(works)} unit(s) (commit x shared/clock) on "
                      f"{self.executor.workers} worker(s)")
        for _, store in self.executor.run(works):
            self.store.merge([store])

    def measure_again(self, requests: Sequence[remeasure.Request]
                      ) -> list[tuple[float, ...] | None]:
        """One unit per (commit, host class) of the requests; each request's new samples."""
        groups: dict[tuple[str, str], list[remeasure.Request]] = {}
        for r in requests:
            groups.setdefault((r.commit, host_class(r.benchmark)), []).append(r)
        works = []
        for (commit, host), wanted in groups.items():
            names = sorted({f"{r.benchmark}{r.params}" for r in wanted})
            unit = AsvUnit(str(self.repo), commit, self.machine, "|".join(
                f"^{re.escape(n)}$" for n in names), env=self.asv_env)
            works.append(Work(f"again {host} at {commit[:8]}", run_asv_unit, unit,
                              alone=host == CLOCK))
        added: dict[tuple[str, str, str], tuple[float, ...] | None] = {}
        for _, store in self.executor.run(works):
            self.store.merge([store])
            added.update(document_samples(store))
        return [added.get((r.commit, r.benchmark, r.params)) for r in requests]


@dataclass(frozen=True)
class ProbeUnit:
    """One probe command in a commit's checkout (probing/probe.py), on a worker."""

    checkout: str
    command: str
    request: ProbeRequest
    timeout: float
    env: dict[str, str]


def run_probe_unit(unit: ProbeUnit, scratch: Path) -> dict[str, Any]:
    """The probe's answer, as the JSON it wrote (the prober reads it, `answers.read`)."""
    return processes.run_probe(Path(unit.checkout), unit.command, codec.to_json(unit.request),
                               timeout=unit.timeout, env=unit.env)


class ExecutorProbes:
    """The prober's `ProbeRunner` on an executor: each probe a unit of work; a probe that
    reads a wall clock runs on the clock worker, alone on its host, so both sides of a
    comparison are measured on one worker."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.pinned: str | None = None

    def __call__(self, checkout: Path, command: str, request: ProbeRequest, timeout: float,
                 env: dict[str, str], alone: bool) -> dict[str, Any]:
        unit = ProbeUnit(str(checkout), command, request, timeout, env=dict(env))
        pin = None
        if alone:
            if self.pinned not in self.executor.addresses():  # first, or its worker is gone
                self.pinned = self.executor.clock_worker()
            pin = self.pinned
        return self.executor.one(Work(f"probe {command} at {Path(checkout).name[:8]}",
                                      run_probe_unit, unit, alone=alone, pin=pin))


def shard_of(names: Sequence[str], index: int, count: int,
             seconds: dict[str, float] | None = None) -> list[str]:
    """The benchmarks of shard `index` (1-based) of `count`: the suite dealt out longest
    first to the least loaded shard (`compile_work.deal`), by the seconds each took before
    (asv records every benchmark's duration: `ResultsStore.mean_seconds`) where known, so
    `count` CI jobs finish close together; every benchmark is in exactly one shard, and the
    split depends only on its inputs."""
    if not 1 <= index <= count:
        raise SpyreRegressError(f"--shard {index}/{count}: the index must be 1 to {count}")
    seconds = seconds or {}
    known = sorted(seconds.values())
    typical = known[len(known) // 2] if known else 1.0
    shards = deal({name: seconds.get(name, typical) for name in sorted(names)}, count)
    return sorted(shards[index - 1])
