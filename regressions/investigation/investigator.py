"""From an alert to an explanation: bisect the commit, the stage and the knob, minimize, time.

The `Investigator` is the one producer of `Investigation`s. It decides what to measure and
what the measurements mean; a `History` names the commits and a `Prober` measures inside one
build, so the same investigation runs on a git repository with a probe subprocess per commit
(`spyre_regress.prober`) and on builds emulated in this process (`spyre_regress.emulated`).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from regressions import metrics
from regressions.bisection import knobs, minimize, stages
from regressions.bisection.commits import BisectResult, Measurement, bisect_commits
from regressions.detection.alerts import Alert
from regressions.detection.detect import Regression
from regressions.errors import SpyreRegressError
from regressions.investigation import model
from regressions.investigation.model import Target
from regressions.probing.protocol import (
    Failed,
    KnobsAnswer,
    KnobScope,
    StageAnswer,
    TimingAnswer,
)

# Samples per side behind the confirmation at the culprit, and as many timed iterations per
# build in the report (`Investigator.samples`; the demo takes fewer).
CONFIRM_SAMPLES = TIMING_ITERATIONS = 100

Progress = Callable[[str], None]
RatioOf = Callable[[str], float | None]  # program source -> bad/good metric ratio


class History(Protocol):
    """The commits of the project under test."""

    def resolve(self, ref: str) -> str: ...
    def between(self, good: str, bad: str) -> list[str]: ...  # good first, bad last
    def parent(self, sha: str) -> str: ...
    def describe(self, sha: str) -> model.CommitInfo: ...


class Prober(Protocol):
    """Measurements inside one build of the compiler (the probe commands of probe.py)."""

    backend: str  # the compiler under test's backend (backends.interface.MODULES)
    compiler: str | None  # the repository's module in the backend's compiler's place
    def bench(self, commit: str, target: Target, samples: int | None = None
              ) -> Measurement: ...  # one run; at least `samples` samples when given
    def stages(self, commits: Sequence[str], target: Target,
               traces: Sequence[Path | None] | None = None
               ) -> list[tuple[StageAnswer, stages.Capture]]: ...  # one probe per commit
    def knobs(self, commit: str, target: Target, scope: KnobScope | None = None,
              part: tuple[int, int] | None = None, restoring_share: float | None = None
              ) -> KnobsAnswer | Failed: ...  # part (i, n): knobs i, i + n, ... only
    def work(self, commits: Sequence[str], target: Target
             ) -> list[Mapping[str, int] | None]: ...  # instructions per stage, if countable
    def ratios(self, good: str, bad: str, target: Target
               ) -> AbstractContextManager[RatioOf]: ...
    def timing(self, commit: str, target: Target, source: str, iterations: int
               ) -> TimingAnswer | Failed: ...
    def full_candidate(self, target: Target) -> minimize.Candidate: ...
    def program_source(self, target: Target) -> tuple[str, int, bool]: ...


@dataclass(frozen=True)
class Located:
    """What `Investigator.locate` found: the culprit, its parent, the bisection behind it, and
    the confirmation at the culprit (None for a failure, which needs no ratio)."""

    bisection: BisectResult
    parent: str
    culprit: str
    confirmation: model.Confirmation | None


class BuildFailed(SpyreRegressError):
    """A probe at one build failed: its compile (or its run) raised. `failed` is the probe's
    answer: the error, and the compile stage it was raised in where the compiler names one."""

    def __init__(self, commit: str, failed: Failed) -> None:
        super().__init__(f"the stage probe failed at {commit[:12]}: {failed.detail}")
        self.commit, self.failed = commit, failed


class NotReproduced(SpyreRegressError):
    """The investigation's own measurement does not confirm the alert; `evidence` says why."""

    def __init__(self, message: str, bisection: BisectResult,
                 confirmation: model.Confirmation | None = None, refuted: bool = False
                 ) -> None:
        super().__init__(message)
        self.bisection = bisection
        self.confirmation = confirmation
        self.refuted = refuted  # the measurement confirms, but another finding outweighs it


def parse_params(text: str) -> tuple[str, ...]:
    """detect's "('mlp', 127)" back to asv's repr strings ("'mlp'", "127")."""
    if not text:
        return ()
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise SpyreRegressError(f"cannot read params {text!r}; give them as detect prints "
                                "them, e.g. \"('mlp', 127)\"") from None
    values = value if isinstance(value, tuple) else (value,)
    return tuple(repr(v) for v in values)


def target_for(benchmark: str, params: tuple[str, ...], param_names: Sequence[str],
               numerics_widths: dict[str, int], stage_width: int | None = None) -> Target:
    """What a probe measures for one benchmark series, from the metrics table.

    The width is the one the benchmark builds the workload at, so the probes measure the
    benchmark's own program: `numerics_widths` for numerics, `stage_width` for a per-stage
    compile benchmark (a `stage` parameter), the workload's default otherwise.
    """
    if len(params) != len(param_names):
        raise SpyreRegressError(f"{benchmark} takes parameters {list(param_names)}; got "
                                f"{len(params)} value(s)")
    values = dict(zip(param_names, (ast.literal_eval(p) for p in params), strict=True))
    workload, seq = values.get("workload"), values.get("seq")
    metric = metrics.metric_for(benchmark)
    if metric.probe is None or workload is None or seq is None:
        raise SpyreRegressError(f"{benchmark}{params}: the probes need a known metric and "
                                f"'workload' and 'seq' parameters; this benchmark is "
                                f"'{metric.name}' with {list(param_names)}")
    stage = values.get("stage") if metric.per_stage else None
    width = {"numerics_width": numerics_widths.get(workload), "stage_width": stage_width,
             "workload_default": stage_width if stage is not None else None}[metric.width]
    error = metrics.numerics_error(benchmark) if metric.errors else None
    return Target(benchmark=benchmark, params=params, workload=workload, seq=int(seq), width=width,
                  metric=metric.name, stage=stage, error=error)


def alert_target(alert: Alert, param_names: dict[str, tuple[str, ...]],
                 numerics_widths: dict[str, int], stage_width: int | None = None) -> Target:
    probe = alert.probe
    if probe.benchmark not in param_names:
        raise SpyreRegressError(f"{probe.benchmark} is not in the suite's benchmark list; "
                                "pass the results directory the alert was detected in")
    return target_for(probe.benchmark, parse_params(probe.params), param_names[probe.benchmark],
                      numerics_widths, stage_width=stage_width)


class Investigator:
    """Runs the steps of an investigation; `history` and `prober` do every measurement."""

    def __init__(self, history: History, prober: Prober,
                 progress: Progress = lambda _: None, probes: int = 1,
                 samples: int = CONFIRM_SAMPLES) -> None:
        """`probes`: how many probes may measure at once (workers of an executor); a metric
        read on a wall clock is always measured one probe at a time. `samples`: per side
        behind the confirmation at the culprit, and the report's timed iterations per build
        (CONFIRM_SAMPLES and TIMING_ITERATIONS; the demo takes fewer)."""
        self.history, self.prober, self.progress = history, prober, progress
        self.probes = probes
        self.samples = samples

    def _in_flight(self, target: Target) -> int:
        if self.probes == 1:  # nothing to decide (and a simulated failure names no metric)
            return 1
        return self.probes if target.measures.shares_host else 1

    def _concurrently(self, target: Target, function: Callable[[Any], Any],
                      items: Sequence[Any]) -> list[Any]:
        """`function` over `items`, as many at once as probes may be in flight, in order."""
        width = min(len(items), self._in_flight(target))
        if width <= 1:
            return [function(item) for item in items]
        with ThreadPoolExecutor(width) as pool:
            return list(pool.map(function, items))

    def _bench_many(self, target: Target) -> Callable[[Sequence[str]], list[Measurement]]:
        """Measure several commits at once (one bisection round)."""
        return lambda commits: self._concurrently(
            target, lambda c: self.prober.bench(c, target), commits)

    # -- 1. commit bisection ------------------------------------------------------------
    def bisect(self, good: str, bad: str, target: Target, magnitude: float | None = None
               ) -> BisectResult:
        """The first bad commit; `magnitude` is the step detection measured (relative), which
        sizes the verdicts' sample caps."""
        commits = self.history.between(good, bad)
        if len(commits) < 2:
            raise SpyreRegressError(f"{bad} is not a descendant of {good} on the first-parent "
                                    "chain; pass the older commit as --good")
        self.progress(f"bisecting {len(commits) - 1} commits between {good[:10]} and "
                      f"{bad[:10]} on {target.label}")
        return bisect_commits(commits, lambda c: self.prober.bench(c, target), magnitude,
                              probes=self._in_flight(target),
                              measure_many=self._bench_many(target))

    # -- 2. stage bisection --------------------------------------------------------------
    def stages(self, good: str, bad: str, target: Target,
               traces: Sequence[Path] | None = None) -> stages.StageReport:
        """The first divergent stage; with `traces` (good, bad), each build's noise-free run
        of the program is written there as a Chrome trace."""
        self.progress(f"capturing stages at {good[:10]} (good) and {bad[:10]} (bad)")
        (good_probe, good_capture), (bad_probe, bad_capture) = self.prober.stages(
            (good, bad), target, traces)
        instructions = None
        if target.measures.counts_instructions:
            self.progress("counting instructions per stage at both builds (valgrind)")
            instructions = self.prober.work((good, bad), target)
        return stages.bisect_stages(good_capture, bad_capture, good_probe, bad_probe, good=good,
                                    bad=bad,
                                    workload=target.workload, seq=target.seq,
                                    width=good_probe.width,
                                    instructions=instructions,
                                    wait_part=target.measures.wait_part)

    # -- 3. knob bisection ---------------------------------------------------------------
    def knobs(self, bad: str, target: Target, regression: knobs.Regression,
              width: int | None = None) -> model.Workaround | None:
        """The knob whose other value recovers most of the regression, if it recovers at
        least `knobs.RESTORED`, narrowed to its decisive application."""
        self.progress(f"toggling compiler knobs at {bad[:10]}")
        answer = self._all_knobs(bad, target, regression.restoring_share)
        if isinstance(answer, Failed):
            self.progress(f"knob probe failed: {answer.detail}")
            return None
        found = knobs.restoring(answer, regression)
        if found is None:
            return None
        best = found.trial
        scoped = self.prober.knobs(bad, target, KnobScope(best.knob, best.value,
                                                          knobs.SCOPE_LIMITS))
        decisive = None if isinstance(scoped, Failed) else knobs.decisive_application(
            scoped, answer.baseline, regression)
        # the knob probe builds the catalogue's program, as the benchmark does
        program = model.Program(target.workload, target.seq, width, "benchmark")
        trials = tuple(model.KnobTrial(t.knob, t.stage, t.value, t.metric)
                       for t in answer.trials)
        return model.Workaround(knob=best.knob, value=best.value, stage=best.stage, program=program,
                                metric=target.metric,
                                unit=target.measures.probe_unit, metric_bad=answer.baseline,
                                metric_with_knob=best.metric,
                                metric_good=regression.good_at(answer.baseline),
                                recovered=found.recovered,
                                decisive_application=decisive, trials=trials)

    def _all_knobs(self, bad: str, target: Target, restoring_share: float
                   ) -> KnobsAnswer | Failed:
        """Every knob's trials, the knobs shared out over the probes that may run at once
        and merged back in the table's order."""
        width = self._in_flight(target)
        if width == 1:
            return self.prober.knobs(bad, target, restoring_share=restoring_share)
        shares = self._concurrently(target, lambda i: self.prober.knobs(
            bad, target, part=(i, width), restoring_share=restoring_share),
            list(range(width)))
        failed = next((s for s in shares if isinstance(s, Failed)), None)
        if failed is not None:
            return failed
        trials = sorted((t for s in shares for t in s.trials), key=lambda t: t.index)
        return replace(shares[0], trials=tuple(trials))

    # -- 4. minimization -----------------------------------------------------------------
    def minimize(self, good: str, bad: str, target: Target,
                 candidate: minimize.Candidate) -> minimize.MinimizeResult | None:
        if not target.measures.minimizable:
            return None  # e.g. a compile-time cost vanishes with the graph that pays it
        with self.prober.ratios(good, bad, target) as ratio_of:
            full = ratio_of(minimize.to_source(candidate))
            if full is None or full <= 1.0:
                self.progress("minimization skipped: the full program shows no regression")
                return None
            threshold = 1 + 0.5 * (full - 1)
            self.progress(f"minimizing {candidate.op_count} ops (ratio {full:.3f}, keep "
                          f">= {threshold:.3f})")
            return minimize.minimize(candidate, ratio_of, threshold, self.progress)

    # -- 5. timing for the report --------------------------------------------------------
    def timing(self, commit: str, target: Target, source: str) -> model.BuildRun:
        answer = self.prober.timing(commit, target, source, self.samples)
        if isinstance(answer, Failed):
            return model.BuildRun(status=answer.status, detail=answer.detail)
        return model.BuildRun(status="ok", detail="", host_s=answer.host_s,
                              device_us=answer.device_us,
                              errors=model.errors_from(answer.errors), kernels=answer.kernels,
                              compile_s=answer.compile_times,
                              environment=answer.environment, config=answer.config,
                              nonfinite=answer.nonfinite)

    # -- the first bad commit, confirmed --------------------------------------------------
    def locate(self, alert: Alert, target: Target,
               floors: Sequence[tuple[str, float]] = ()) -> Located:
        """The culprit and the investigation's own measurement of it against its parent: the
        part of an investigation that decides whether a regression is reported.

        Raises:
            NotReproduced: bisection or the confirmation at the culprit does not show the
                regression.
            SpyreRegressError: no single culprit (untestable commits), or a probe failed.
        """
        good, bad = self.history.resolve(alert.good_commit), self.history.resolve(alert.bad_commit)
        result = self.bisect(good, bad, target, expected_step(alert.probe))
        if not result.reproduced:
            raise NotReproduced(f"the regression did not reproduce between {good[:10]} and "
                                f"{bad[:10]}", result)
        if result.culprit is None:
            raise SpyreRegressError(f"bisection between {good[:10]} and {bad[:10]} named no "
                                    f"single culprit (candidates: "
                                    f"{[c[:10] for c in result.candidates]})")
        culprit, parent = result.culprit, self.history.parent(result.culprit)
        result = self._enough_samples(result, (parent, culprit), target)
        confirmed = confirm(result, parent, culprit, target, member=alert.probe, floors=floors)
        if confirmed is not None and not confirmed.confirmed:
            raise NotReproduced(f"at the culprit {culprit[:10]} the benchmark measures "
                                f"x{confirmed.ratio:.3f} ({confirmed.confidence:.0%} CI "
                                f"{confirmed.ci[0]:.3f}-{confirmed.ci[1]:.3f}), not beyond "
                                f"the {confirmed.floor:.0%} floor", result, confirmed)
        return Located(result, parent, culprit, confirmed)

    def _enough_samples(self, result: BisectResult, commits: Sequence[str], target: Target
                        ) -> BisectResult:
        """The bisection's samples with each of `commits` topped up to `samples`, so
        the confirmation does not rest on the few samples a clear bisection verdict needed
        (a noisy compile clock can show a real step at x1.01 on 20 samples)."""
        if result.deterministic or result.kind == metrics.FAILURE:
            return result
        samples = dict(result.samples)
        short = [c for c in commits if len(samples.get(c, ())) < self.samples]
        more = self._concurrently(target, lambda c: self.prober.bench(
            c, target, self.samples - len(samples.get(c, ()))), short)
        for commit, measured in zip(short, more, strict=True):
            if measured.status == "ok":
                samples[commit] = (*samples.get(commit, ()), *measured.samples)
        return replace(result, samples=samples)

    # -- the whole investigation ---------------------------------------------------------
    def investigate(self, alert: Alert, target: Target, out_dir: Path,
                    floors: Sequence[tuple[str, float]] = ()) -> model.Investigation:
        """Every step for one alert: `locate`, then the stage, the knob, the minimized
        program and the timing a report needs.

        Raises:
            NotReproduced, SpyreRegressError: as `locate`; and NotReproduced when the stages
                refute a compile-time rise (no artifact differs, no stage does more work).
        """
        located = self.locate(alert, target, floors)
        result, parent, culprit = located.bisection, located.parent, located.culprit
        confirmed = located.confirmation
        out_dir.mkdir(parents=True, exist_ok=True)
        traces = {"good": out_dir / "trace_good.json", "bad": out_dir / "trace_bad.json"}
        if result.kind == metrics.FAILURE:
            return self._failure(alert, target, located, traces)
        report = self.stages(parent, culprit, target, (traces["good"], traces["bad"]))
        if target.measures.refuted_without_more_work and stages.work_unchanged(report):
            raise NotReproduced(
                f"at the culprit {culprit[:10]} no compile stage's artifact differs and none "
                "executes more instructions than at its parent: the compile-time rise is the "
                "machine's load, not the compiler", result, confirmed, refuted=True)
        if confirmed is not None and confirmed.program.width is None:  # the default, as built
            confirmed = replace(confirmed, program=replace(confirmed.program, width=report.width))
        workaround = None
        regression = measured_regression(report, target, confirmed)
        if regression is not None:
            workaround = self.knobs(culprit, target, regression, report.width)
        full_source, op_count, graph = self.prober.program_source(target)
        minimized = self.minimize(parent, culprit, target,
                                  self.prober.full_candidate(target)) if graph else None
        source = minimized.source if minimized else full_source
        program = model.Program(target.workload, target.seq, report.width,
                                "minimized" if minimized else "full",
                                ops=minimized.ops_after if minimized else op_count)
        self.progress(f"timing {self.samples} synchronized iterations at the good and the "
                      "bad build")
        runs = {side: self.timing(commit, target, source)
                for side, commit in (("good", parent), ("bad", culprit))}
        commits = model.Commits(self.history.describe(parent), self.history.describe(culprit),
                                self.history.describe(culprit))
        return model.Investigation(
            version=model.INVESTIGATION_VERSION, alert=alert, target=target, commits=commits,
            bisect=result, confirmation=confirmed, stages=report,
            workaround=workaround, minimized=minimized, source=source,
            timing=model.timing(program, runs["good"], runs["bad"]),
            traces={side: str(path) if path.is_file() else None for side, path in traces.items()},
            backend=self.prober.backend, compiler=self.prober.compiler)

    def _failure(self, alert: Alert, target: Target, located: Located,
                 traces: Mapping[str, Path]) -> model.Investigation:
        """A benchmark that stops running: the culprit's compile fails. The stage is where
        the compiler raised, the evidence its error; no knob, no minimization (the program
        that fails is the probe's own), and the timing of the good build beside the bad
        build's failure."""
        result, parent, culprit = located.bisection, located.parent, located.culprit
        self.progress(f"capturing stages at {parent[:10]} (good); the compile at "
                      f"{culprit[:10]} (bad) fails")
        (good_probe, good_capture), = self.prober.stages((parent,), target, (traces["good"],))
        try:
            self.prober.stages((culprit,), target, (traces["bad"],))
        except BuildFailed as failed:
            report = stages.failure_report(good_capture, good_probe, failed.failed,
                                           good=parent, bad=culprit, workload=target.workload,
                                           seq=target.seq)
        else:
            raise NotReproduced(f"the benchmark fails at {culprit[:10]}, but its compile "
                                "there does not", result)
        source, op_count, _ = self.prober.program_source(target)
        program = model.Program(target.workload, target.seq, report.width, "full", ops=op_count)
        runs = {side: self.timing(commit, target, source)
                for side, commit in (("good", parent), ("bad", culprit))}
        commits = model.Commits(self.history.describe(parent), self.history.describe(culprit),
                                self.history.describe(culprit))
        return model.Investigation(
            version=model.INVESTIGATION_VERSION, alert=alert, target=target, commits=commits,
            bisect=result, confirmation=None, stages=report, workaround=None, minimized=None,
            source=source, timing=model.timing(program, runs["good"], runs["bad"]),
            traces={side: str(path) if path.is_file() else None for side, path in traces.items()},
            backend=self.prober.backend, compiler=self.prober.compiler)


def confirm(result: BisectResult, parent: str, culprit: str, target: Target,
            member: Regression, floors: Sequence[tuple[str, float]] = ()
            ) -> model.Confirmation | None:
    """The bisection's samples at the culprit and its parent, judged against the floor."""
    if result.kind == metrics.FAILURE or parent not in result.samples \
            or culprit not in result.samples:
        return None
    metric = metrics.by_name(target.metric)
    program = model.Program(target.workload, target.seq, target.width, "benchmark")
    floor = metrics.floor_for(member.name, tuple(floors))
    # detection reports worsenings only: one with a ratio below 1 is a higher-is-better series
    higher = member.ratio is not None and member.ratio < 1
    return model.confirmation(program, metric, result.samples[parent], result.samples[culprit],
                              floor=floor, higher_is_better=higher)


def expected_step(member: Regression) -> float | None:
    """The relative step detection measured on the alert's probe, which sizes bisection's
    sample caps; None when it measured none (a failure)."""
    if member.ratio is None or not math.isfinite(member.ratio) or member.ratio <= 0:
        return None
    return abs(member.ratio - 1) or None


def measured_regression(report: stages.StageReport, target: Target,
                        confirmed: model.Confirmation | None = None
                        ) -> knobs.Regression | None:
    """Both builds' metric as the stage probe measured them (the knob probe measures the same
    way), per the metric's `knob_baseline`; None: no knob search for this metric, or a build
    the stage probe could not measure.

    On a clock of the host (a metric that may not share it) the confirmation's medians are
    the two levels instead, where the regression was confirmed: the stage probe measures the
    builds one after the other, a few calls each, and a neighbour that starts between them
    can invert them (a CI night measured the scalar-kernel culprit's warm call faster than
    its parent's, 5.6 ms against 7.5, and searched no knob), while the confirmation holds the
    bisection's samples from several probes a side. The knob probe only uses their ratio."""
    measures = target.measures
    if measures.knob_baseline is None:
        return None
    if confirmed is not None and confirmed.confirmed and not measures.shares_host:
        return knobs.Regression(confirmed.good_median, confirmed.bad_median)
    good, bad = (_build_metric(report, target, build) for build in ("good", "bad"))
    if good is None or bad is None:
        return None
    return knobs.Regression(good, bad)


def _build_metric(report: stages.StageReport, target: Target, build: str) -> float | None:
    baseline = target.measures.knob_baseline
    if baseline == "runtime_error":
        return report.numerics.get(build, {}).get("runtime", {}).get(target.error or "")
    if baseline == "stage_clock":
        times = {d.stage: (d.compile_s_good if build == "good" else d.compile_s_bad)
                 for d in report.stages}
        return times[target.stage] if target.stage else sum(times.values())
    if baseline == "device_clock":
        return report.device_time_us[build]
    if baseline == "host_clock":
        return report.host_s.get(build)
    return None
