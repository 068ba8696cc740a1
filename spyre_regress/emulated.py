"""The investigation on builds emulated in this process: no git, no subprocesses.

Example bundles, the report tests and the docs need real investigations of a known change,
quickly. Here a commit is a change of the compiler's defaults (as the scenario commits change
a default in spyre_sim/config.py) plus an optional patch (a context manager that, e.g., slows
a stage down); the build at a commit applies every change up to it, in order, to the one
spyre_sim this process imported. `InProcessProber` answers the `Prober` protocol by running
the probe commands of regressions/probing/probe.py in this process while a build is active,
on the same `ProbeRequest`s and answers as the probe child, so the `Investigator` runs
exactly as it does on a repository. It patches the simulator in this process: orchestration
for examples and tests, beside the prober it stands in for.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from backends import interface
from regressions.bisection import minimize
from regressions.bisection.commits import Measurement
from regressions.bisection.stages import Capture
from regressions.investigation import model
from regressions.investigation.investigator import RatioOf
from regressions.investigation.model import Target
from regressions.probing import probe
from regressions.probing.protocol import (
    BenchAnswer,
    Failed,
    KnobsAnswer,
    KnobScope,
    ProbeRequest,
    StageAnswer,
    TimingAnswer,
)
from regressions.records import captures
from spyre_regress.prober import probe_request

EMULATED_DATE = "2026-01-01T00:00:00+00:00"
T = TypeVar("T")


@dataclass(frozen=True)
class EmulatedBuild:
    """One commit's change: some Config defaults changed and an optional patch."""

    subject: str
    defaults: Mapping[str, Any] = field(default_factory=dict)
    patch: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext

    @property
    def sha(self) -> str:
        return hashlib.sha1(self.subject.encode()).hexdigest()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        with _config_defaults(self.defaults), self.patch():
            yield


@contextlib.contextmanager
def _config_defaults(changes: Mapping[str, Any]) -> Iterator[None]:
    """`spyre_sim.Config()` with other defaults, as a commit editing config.py would have."""
    import spyre_sim
    from spyre_sim import config as config_module

    init = spyre_sim.Config.__init__
    saved = init.__kwdefaults__  # a keyword-only dataclass's __init__ keeps its defaults here
    unknown = sorted(set(changes) - set(saved or {}))
    if saved is None or unknown:
        raise ValueError(f"spyre_sim.Config has no field {unknown[0] if unknown else changes!r}")
    init.__kwdefaults__ = {**saved, **changes}
    config_module._DEFAULTS.clear()  # the cached default Config of knob scopes
    try:
        yield
    finally:
        init.__kwdefaults__ = saved
        config_module._DEFAULTS.clear()


class ListHistory:
    """A linear history of emulated builds, oldest first."""

    def __init__(self, builds: Sequence[EmulatedBuild]) -> None:
        self.builds = {b.sha: b for b in builds}
        self.order = [b.sha for b in builds]

    def resolve(self, ref: str) -> str:
        return ref

    def between(self, good: str, bad: str) -> list[str]:
        return self.order[self.order.index(good):self.order.index(bad) + 1]

    def parent(self, sha: str) -> str:
        return self.order[self.order.index(sha) - 1]

    def describe(self, sha: str) -> model.CommitInfo:
        return model.CommitInfo(sha, self.builds[sha].subject, EMULATED_DATE)

    @contextlib.contextmanager
    def active(self, sha: str) -> Iterator[None]:
        """The build at `sha`: every change up to it, applied in history order."""
        with contextlib.ExitStack() as stack:
            for earlier in self.order[:self.order.index(sha) + 1]:
                stack.enter_context(self.builds[earlier].active())
            yield


class InProcessProber:
    """The probe commands, run here on `source` (a module defining program and make_inputs)
    while the commit's build is active."""

    backend: str = "spyre_sim"  # the emulated builds patch this tree's spyre_sim
    compiler: str | None = None

    def __init__(self, history: ListHistory, source: str, work_dir: Path,
                 samples: int = 20) -> None:
        self.history, self.source, self.samples = history, source, samples
        self.work_dir = Path(work_dir)

    def request(self, target: Target, source: str | None = None) -> ProbeRequest:
        """The request for `target` on `source` (the history's program by default)."""
        return probe_request(target, source=source or self.source)

    def _run(self, commit: str, command: str, request: ProbeRequest, answer: type[T]) -> T:
        """The command's answer, of type `answer`; a probe that did not measure raises."""
        with self.history.active(commit):
            answered = probe.COMMANDS[command](request)
        if not isinstance(answered, answer):
            raise RuntimeError(f"the {command} probe failed: {getattr(answered, 'detail', '')}")
        return answered

    def bench(self, commit: str, target: Target, samples: int | None = None) -> Measurement:
        request = dataclasses.replace(self.request(target),
                                      samples=max(samples or 0, self.samples))
        answer = self._run(commit, "sample", request, BenchAnswer)
        return Measurement(commit=commit, status="ok", samples=answer.samples,
                           deterministic=answer.deterministic)

    def stages(self, commits: Sequence[str], target: Target,
               traces: Sequence[Path | None] | None = None
               ) -> list[tuple[StageAnswer, Capture]]:
        found = []
        for commit, trace in zip(commits, traces or [None] * len(commits), strict=True):
            root = Path(tempfile.mkdtemp(prefix=f"capture-{commit[:8]}-", dir=self.work_dir))
            request = dataclasses.replace(self.request(target), capture_dir=str(root),
                                          trace=str(trace) if trace else None)
            answer = self._run(commit, "stages", request, StageAnswer)  # the backend restores
            found.append((dataclasses.replace(answer, width=target.width),  # the env
                          captures.load_capture(captures.single_capture(root))))
        return found

    def work(self, commits: Sequence[str], target: Target) -> list[Mapping[str, int] | None]:
        """Instructions are counted in a valgrind child, which an emulated build cannot
        patch: not counted here."""
        return [None] * len(commits)

    def knobs(self, commit: str, target: Target, scope: KnobScope | None = None,
              part: tuple[int, int] | None = None, restoring_share: float | None = None
              ) -> KnobsAnswer | Failed:
        return self._run(commit, "knobs", dataclasses.replace(
            self.request(target), scope=scope, part=part, restoring_share=restoring_share),
            KnobsAnswer)

    @contextlib.contextmanager
    def ratios(self, good: str, bad: str, target: Target) -> Iterator[RatioOf]:
        def metric(commit: str, source: str) -> float:
            request = self.request(target, source=source)
            backend = probe._backend(request)
            with self.history.active(commit):
                program, inputs = probe._program(request)
                return probe._metric(backend, request, program, inputs,
                                     values=probe._values(request, **backend.QUIET))

        def ratio_of(source: str) -> float | None:
            try:
                before, after = metric(good, source), metric(bad, source)
            except Exception:  # a candidate the compiler rejects is just not a repro
                return None
            return after / before if before > 0 else None

        yield ratio_of

    def timing(self, commit: str, target: Target, source: str, iterations: int
               ) -> TimingAnswer | Failed:
        request = dataclasses.replace(self.request(target, source), iterations=iterations,
                                      config={"noise_seed": None})
        return self._run(commit, "timing", request, TimingAnswer)

    def full_candidate(self, target: Target) -> minimize.Candidate:
        program, inputs = probe._program(ProbeRequest(source=self.source))
        return minimize.from_graph(*interface.load("spyre_sim").graph(program, inputs))

    def program_source(self, target: Target) -> tuple[str, int, bool]:
        candidate = self.full_candidate(target)
        return minimize.to_source(candidate, "The probe program."), candidate.op_count, True
