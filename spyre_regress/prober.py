"""The investigation on a git repository: commits from git, measurements in probe subprocesses.

`GitHistory` names commits with git. `SubprocessProber` measures each commit in a subprocess
of its own (`regressions/probing/probe.py`) with that commit's exported tree on PYTHONPATH
and a copy of today's benchmark suite, so historical compilers are measured with current
benchmarks, as asv measures them; it writes each probe's `ProbeRequest` and reads its answer
through the probe protocol (`regressions.probing.protocol`). Bisection measurements are
recorded in asv's results format in a store of their own (`results_dir`), so they never
change what `detect` reports on the asv results. The investigation's real side, as the
nightly's bench is the night's: it runs git and subprocesses, so it sits with the
orchestration.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import shutil
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from backends import interface
from regressions import codec, git, processes
from regressions.bisection import minimize
from regressions.bisection.commits import Measurement
from regressions.bisection.stages import Capture
from regressions.investigation import model
from regressions.investigation.investigator import BuildFailed, Progress, RatioOf
from regressions.investigation.model import Target
from regressions.probing import answers, suite
from regressions.probing.protocol import (
    BenchAnswer,
    Candidate,
    Failed,
    KnobsAnswer,
    KnobScope,
    MetricAnswer,
    ProbeRequest,
    StageAnswer,
    TimingAnswer,
    WorkAnswer,
)
from regressions.records import asv_documents, captures

PROBE_ENV = "bisect-probe"  # env name of bisection measurements in their results store
# One valgrind process: ~100 s of torch import under callgrind, more on a loaded machine.
WORK_TIMEOUT_S = 1800.0


def probe_request(target: Target, backend: str = "spyre_sim", compiler: str | None = None,
                  workloads: str | None = None, source: str | None = None) -> ProbeRequest:
    """What every probe command is told about the target: the compiler under test (its
    backend module, by path, and the repository's module in its compiler's place, if any),
    the program (the workload's name and shape in the catalogue `workloads`, or a module's
    `source`), the metric's probe and the build's config. A command's own fields are set on
    it with `dataclasses.replace`, which the type checker holds to the protocol's fields."""
    return ProbeRequest(backend=str(interface.module_path(backend)), compiler=compiler,
                        harness=str(suite.harness_path()), workloads=workloads,
                        workload=target.workload, seq=target.seq, width=target.width,
                        source=source, config={"numerics": target.measures.with_numerics},
                        metric=target.probe or "", stage=target.stage, error=target.error,
                        wait_part=target.measures.wait_part)


class ProbeRunner(Protocol):
    """Runs one probe command in a commit's checkout and returns its answer as the JSON the
    probe wrote (read through `answers.read`): here, or as a unit of work on an executor.
    `alone`: the probe reads a wall clock, so it runs on a host with nothing else, and every
    such probe of one investigation on one worker."""

    def __call__(self, checkout: Path, command: str, request: ProbeRequest, timeout: float,
                 env: dict[str, str], alone: bool) -> dict[str, Any]: ...


def local_probe(checkout: Path, command: str, request: ProbeRequest, timeout: float,
                env: dict[str, str], alone: bool = False) -> dict[str, Any]:
    """A probe subprocess on this host (one investigation's probes run one after another,
    but for the stage capture of both ends)."""
    return processes.run_probe(checkout, command, codec.to_json(request), timeout=timeout,
                               env=env)


class GitHistory:
    """First-parent history and commit metadata of a repository."""

    def __init__(self, repo: Path) -> None:
        self.repo = suite.history_repo(Path(repo).resolve())

    def resolve(self, ref: str) -> str:
        return git.resolve(self.repo, ref)

    def between(self, good: str, bad: str) -> list[str]:
        return [self.resolve(good), *git.first_parent_history(self.repo, bad, good)]

    def parent(self, sha: str) -> str:
        return git.resolve(self.repo, f"{sha}~1")

    def describe(self, sha: str) -> model.CommitInfo:
        info = git.commit_info(self.repo, sha)
        return model.CommitInfo(info.sha, info.subject, info.date.isoformat())


class SubprocessProber:
    """Probe commands run in exported checkouts of each commit (regressions/probing/probe.py)."""

    def __init__(self, repo: Path, work_dir: Path, results_dir: Path | None = None,
                 machine: str = "bisect", progress: Progress = lambda _: None,
                 env: dict[str, str] | None = None, runner: ProbeRunner | None = None
                 ) -> None:
        self.repo = Path(repo).resolve()
        self.work_dir = Path(work_dir).resolve()
        self.results_dir, self.machine, self.progress = results_dir, machine, progress
        self.env = dict(env or {})  # for every probe, e.g. the benchmark grid
        self.runner = runner or local_probe
        self.history = suite.history_repo(self.repo)  # where the commits are
        self.checkouts = processes.Checkouts(self.history, self.work_dir / "checkouts")
        self.suite = suite.copy_suite(self.repo, self.work_dir)
        self.workloads = self.suite / suite.CATALOGUE
        self.backend = suite.backend_name(self.suite.parent)  # the compiler under test
        self.compiler = suite.compiler_name(self.suite.parent)  # the project's part of it
        # Instruction counts are exact: one count per (commit, program) serves bisection and
        # the stage report alike, and a valgrind run costs minutes.
        self._counted: dict[tuple, WorkAnswer | Failed] = {}

    def request(self, target: Target) -> ProbeRequest:
        request = probe_request(target, self.backend, self.compiler,
                                workloads=str(self.workloads))
        clocks = self.suite / "clocks.py"  # host clocks per process, where the suite has them
        return dataclasses.replace(request, clocks=str(clocks) if clocks.is_file() else "")

    def _run(self, commit: str, command: str, request: ProbeRequest, timeout: float = 600.0,
             alone: bool = False) -> dict[str, Any]:
        return self.runner(self.checkouts.path(commit), command, request, timeout=timeout,
                           env=self.env, alone=alone)

    def _work(self, commit: str, target: Target) -> WorkAnswer | Failed:
        """The suite's compile_work measurement of the target's program at one commit."""
        key = (commit, target.workload, target.seq, target.width)
        if key not in self._counted:
            self._counted[key] = self._count(commit, target)
        return self._counted[key]

    def _count(self, commit: str, target: Target) -> WorkAnswer | Failed:
        module = self.suite / "compile_work.py"
        if not module.is_file():
            return Failed("untestable", "the benchmark suite has no compile_work.py, so "
                          "instructions cannot be counted")
        started = time.monotonic()
        with processes.still_running(self.progress, f"counting instructions at {commit[:10]} "
                                     "under valgrind"):
            answer = answers.read(WorkAnswer, self._run(commit, "work", dataclasses.replace(
                self.request(target), compile_work=str(module), config={}),
                timeout=WORK_TIMEOUT_S), "work")
        self.progress(f"counted instructions at {commit[:10]}: {answer.status} "
                      f"({time.monotonic() - started:.0f} s under valgrind)")
        return answer

    def work(self, commits: Sequence[str], target: Target) -> list[Mapping[str, int] | None]:
        """Instructions per stage at each commit; None where they cannot be counted."""
        with ThreadPoolExecutor(len(commits)) as pool:
            counted = list(pool.map(lambda c: self._work(c, target), commits))
        return [None if isinstance(a, Failed) else a.instructions for a in counted]

    def bench(self, commit: str, target: Target, samples: int | None = None) -> Measurement:
        """One asv run of the target's benchmark at `commit` (at least `samples` samples
        when given: more rounds in the same process)."""
        if target.measures.bisect_by_count:  # one exact count per build, no asv grid
            counted = self._work(commit, target)
            if isinstance(counted, Failed):
                return Measurement(commit=commit, status=counted.status, detail=counted.detail)
            return Measurement(commit=commit, status="ok",
                               samples=(float(counted.instructions[target.stage or ""]),),
                               deterministic=True, tolerance=target.measures.tolerance)
        started = time.monotonic()
        answer = answers.read(BenchAnswer, self._run(
            commit, "bench", ProbeRequest(suite=str(self.suite), benchmark=target.benchmark,
                                          params=target.params, samples=samples,
                                          backend=str(interface.module_path(self.backend))),
            alone=not target.measures.shares_host), "bench")
        measured = () if isinstance(answer, Failed) else answer.samples
        self.progress(f"measured {commit[:10]}: {answer.status} ({len(measured)} samples, "
                      f"{time.monotonic() - started:.1f} s)")
        if isinstance(answer, Failed):
            return Measurement(commit=commit, status=answer.status, detail=answer.detail)
        if self.results_dir is not None:
            info = git.commit_info(self.history, commit)
            asv_documents.record_measurement(
                self.results_dir, machine=self.machine, env_name=PROBE_ENV, commit=commit,
                commit_date_ms=int(info.date.timestamp() * 1000), benchmark=target.benchmark,
                measured=answer)
        return Measurement(commit=commit, status="ok", samples=answer.samples,
                           deterministic=answer.deterministic)

    def stages(self, commits: Sequence[str], target: Target,
               traces: Sequence[Path | None] | None = None
               ) -> list[tuple[StageAnswer, Capture]]:
        traces = list(traces or [None] * len(commits))
        with ThreadPoolExecutor(len(commits)) as pool:  # one probe process per commit
            return list(pool.map(lambda c, t: self._stage_probe(c, target, t), commits, traces))

    def _stage_probe(self, commit: str, target: Target, trace: Path | None
                     ) -> tuple[StageAnswer, Capture]:
        root = self.work_dir / "captures" / f"{commit[:12]}-{target.workload}-{target.seq}"
        if root.exists():
            shutil.rmtree(root)
        request = dataclasses.replace(
            self.request(target), capture_dir=str(root), trace=str(trace) if trace else None,
            host_clock=target.measures.knob_baseline == "host_clock")
        answer = answers.read(StageAnswer, self._run(
            commit, "stages", request, alone=not target.measures.shares_host), "stages")
        if isinstance(answer, Failed):
            raise BuildFailed(commit, answer)
        return answer, captures.load_capture(captures.single_capture(root))

    def knobs(self, commit: str, target: Target, scope: KnobScope | None = None,
              part: tuple[int, int] | None = None, restoring_share: float | None = None
              ) -> KnobsAnswer | Failed:
        request = dataclasses.replace(self.request(target), scope=scope, part=part,
                                      restoring_share=restoring_share)
        return answers.read(KnobsAnswer, self._run(
            commit, "knobs", request, alone=not target.measures.shares_host), "knobs")

    @contextlib.contextmanager
    def ratios(self, good: str, bad: str, target: Target) -> Iterator[RatioOf]:
        request = self.request(target)
        request = dataclasses.replace(request, config={**request.config, "noise_cv": 0.0})
        workers = [processes.Worker(self.checkouts.path(c), codec.to_json(request), self.env)
                   for c in (good, bad)]

        def ratio_of(source: str) -> float | None:
            with ThreadPoolExecutor(2) as pool:
                good_answer, bad_answer = (answers.read(MetricAnswer, a, "worker") for a in
                                           pool.map(lambda w: w.ask(
                                               codec.to_json(Candidate(source))), workers))
            if isinstance(good_answer, Failed) or isinstance(bad_answer, Failed):
                return None
            return bad_answer.metric / good_answer.metric if good_answer.metric > 0 else None

        try:
            yield ratio_of
        finally:
            for worker in workers:
                worker.close()

    def timing(self, commit: str, target: Target, source: str, iterations: int
               ) -> TimingAnswer | Failed:
        # independent run-to-run noise per build, where the backend simulates it
        request = dataclasses.replace(self.request(target), source=source, iterations=iterations,
                                      config=dict(interface.load(self.backend).INDEPENDENT))
        # the report's host wall time: both builds on the clock worker, never beside other work
        return answers.read(TimingAnswer, self._run(commit, "timing", request, alone=True),
                            "timing")

    def program_source(self, target: Target) -> tuple[str, int, bool]:
        """The probe workload as a standalone module (`program`, `make_inputs`), its ATen op
        count, and whether its source is the graph the minimizer cuts down: the ATen graph
        the backend captures, or, for a backend whose programs are not graphs
        (`GRAPH_PROGRAMS`), the catalogue's own program (the catalogue imports only torch)."""
        candidate = self.full_candidate(target)
        if getattr(interface.load(self.backend), "GRAPH_PROGRAMS", True):
            return minimize.to_source(candidate, "The probe program."), candidate.op_count, True
        return (minimize.catalogue_source(self.workloads.read_text(), target.workload,
                                          target.seq, target.width),
                candidate.op_count, False)

    def full_candidate(self, target: Target) -> minimize.Candidate:
        """The probe workload's ATen graph as the backend captures it, from today's catalogue
        (loaded by path)."""
        spec = importlib.util.spec_from_file_location("spyre_regress_workloads", self.workloads)
        assert spec is not None and spec.loader is not None, self.workloads
        catalogue = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = catalogue  # dataclasses look their module up here
        spec.loader.exec_module(catalogue)
        program, inputs = catalogue.build(target.workload, target.seq, target.width)
        return minimize.from_graph(*interface.load(self.backend).graph(program, inputs))
