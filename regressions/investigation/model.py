"""The investigation of one alert, as typed data: what `reports` renders, and nothing else.

One producer builds it (`regressions.investigation.investigator.Investigator`); every figure
a report quotes is computed here, once, with what it was measured on (`Program`) beside it,
so a title, a table and a causal statement cannot quote two different numbers for one thing.
The JSON form is `to_json(investigation)`, read back and validated field by field by `load`
(docs/formats.md lists the fields).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from regressions import metrics, stats
from regressions.bisection.commits import BisectResult
from regressions.bisection.minimize import MinimizeResult
from regressions.bisection.stages import StageReport
from regressions.codec import RecordError, from_json, to_json
from regressions.detection.alerts import Alert
from regressions.errors import SpyreRegressError
from regressions.probing.protocol import KernelTime

INVESTIGATION_VERSION = 3  # 3: stage bases named for their evidence (instructions, ...)
# Reports state a 95% interval for timing ratios (Kalibera & Jones, ISMM 2013).
REPORT_CONFIDENCE = 0.95
# torch._dynamo.utils.same(): res_error <= multiplier * ref_error, multiplier 2.0 by default.
DEFAULT_RMSE_RATIO = 2.0
# Absolute bound on the largest element error. DLFloat16 rounding (9 fraction bits) of an
# O(1..8) output is half an ulp, 2^-10..2^-7 (0.001..0.008); 0.05 is several such steps at 8,
# so only a real defect exceeds it.
DEFAULT_MAX_ABS = 0.05
ERROR_FIELDS = ("max_abs", "max_rel", "rmse", "rmse_ratio", "rmse_ratio_fp16")


@dataclass(frozen=True, kw_only=True)
class Target:
    """One benchmark series as the probes measure it: the program, the shape, the metric."""

    benchmark: str
    params: tuple[str, ...]  # asv's repr strings, in param order
    workload: str
    seq: int
    width: int | None  # None: the workload's default width
    metric: str  # a `metrics.Metric` name
    stage: str | None = None  # compile metrics: the stage the benchmark times
    error: str | None = None  # numerics: one of metrics.ERRORS

    @property
    def measures(self) -> metrics.Metric:
        """The metric's entry in the table: how it is probed, judged and shown."""
        return metrics.by_name(self.metric)

    @property
    def probe(self) -> metrics.Probe | None:
        """How a probe measures this metric (`metrics.Metric.probe`)."""
        return self.measures.probe

    @property
    def label(self) -> str:
        params = ", ".join(self.params)
        return f"{self.benchmark}({params})" if self.params else self.benchmark


@dataclass(frozen=True)
class Program:
    """What a number was measured on, said the same way everywhere it is quoted."""

    workload: str
    seq: int
    width: int | None
    form: Literal["benchmark", "full", "minimized"]
    ops: int | None = None

    def describe(self) -> str:
        """`benchmark`: the catalogue's program as the benchmark builds it (parameters in the
        module); `full`: its captured ATen graph as a standalone program (weights become
        inputs, as the minimizer and the reproducer see it); `minimized`: what is left of
        that graph after minimization."""
        shape = f"seq {self.seq}" + (f", width {self.width}" if self.width else "")
        ops = f"{self.ops} ATen op{'s' if self.ops != 1 else ''}" if self.ops else "ATen graph"
        if self.form == "benchmark":
            return f"the {self.workload} benchmark program at {shape}"
        if self.form == "minimized":
            return (f"the minimized program ({ops} cut from the captured {self.workload} "
                    f"program at {shape})")
        return f"the captured {self.workload} program ({ops}, weights as inputs, {shape})"


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    subject: str
    date: str  # ISO 8601, committer date


@dataclass(frozen=True)
class Commits:
    good: CommitInfo
    bad: CommitInfo
    culprit: CommitInfo | None


@dataclass(frozen=True, kw_only=True)
class Confirmation:
    """The investigation's own measurement of the alert's benchmark at the culprit and its
    parent (the bisection's samples): the figure every headline quotes."""

    program: Program
    metric: str
    unit: str
    good_n: int
    bad_n: int
    good_median: float
    bad_median: float
    ratio: float
    ci: tuple[float, float]
    confidence: float
    pvalue: float | None  # None: deterministic values, compared exactly
    floor: float
    confirmed: bool  # worse by at least the floor, interval excluding 1


@dataclass(frozen=True)
class Errors:
    max_abs: float | None
    max_rel: float | None
    rmse: float | None
    rmse_ratio: float | None  # to the backend's eager run (spyre_sim: DLFloat16)
    rmse_ratio_fp16: float | None = None  # to eager IEEE fp16


@dataclass(frozen=True, kw_only=True)
class BuildRun:
    """One build's timing probe: synchronized iterations of one program, and its output."""

    status: Literal["ok", "failed", "untestable"]
    detail: str = ""
    host_s: tuple[float, ...] = ()
    device_us: tuple[float, ...] = ()
    errors: Errors | None = None
    kernels: tuple[KernelTime, ...] = ()
    compile_s: Mapping[str, float] = field(default_factory=dict)
    environment: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    nonfinite: str | None = None  # where inf/NaN first appeared (kernel, stage, op)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True, kw_only=True)
class SampleSummary:
    n: int
    median: float
    q1: float
    q3: float
    mean: float
    geomean: float
    minimum: float
    maximum: float


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """bad vs good for one timing series."""

    name: str
    unit: str
    good: SampleSummary | None
    bad: SampleSummary | None
    ratio: float | None  # bad / good, geometric means
    ci: tuple[float, float] | None
    confidence: float
    pvalue: float | None


@dataclass(frozen=True)
class Tolerance:
    rmse_ratio: float = DEFAULT_RMSE_RATIO
    max_abs: float = DEFAULT_MAX_ABS

    def describe(self, eager_run: str) -> str:
        """The tolerance in words; `eager_run` is what the RMSE ratio divides by, as the
        measuring backend ran it (backends.interface.WORDING)."""
        return (f"RMSE vs float64 at most {self.rmse_ratio:g}x that of {eager_run} "
                f"(torch same() oracle), and max abs error at most "
                f"{self.max_abs:g}; inf/NaN anywhere in the run fails")


UNMEASURED = "unmeasured"  # a build whose program ran nowhere here (a card's, as torch-spyre's)


@dataclass(frozen=True)
class Correctness:
    build: str
    status: str
    errors: Errors | None
    passed: bool
    reasons: tuple[str, ...]

    @property
    def verdict(self) -> str:
        """PASS or FAIL, or "not measured" where the build's program cannot run here."""
        if self.status == UNMEASURED:
            return "not measured"
        return "PASS" if self.passed else "FAIL"


@dataclass(frozen=True, kw_only=True)
class Timing:
    """Both builds running one program (the one the reproducer embeds), compared."""

    program: Program
    iterations: int
    good: BuildRun
    bad: BuildRun
    device: Comparison
    host: Comparison
    tolerance: Tolerance
    correctness: tuple[Correctness, Correctness]


@dataclass(frozen=True)
class KnobTrial:
    knob: str
    stage: str
    value: Any
    metric: float


@dataclass(frozen=True, kw_only=True)
class Workaround:
    """A Config knob that restores the metric at the bad build: a local workaround."""

    knob: str
    value: Any
    stage: str
    program: Program
    metric: str
    unit: str
    metric_bad: float
    metric_with_knob: float
    metric_good: float
    recovered: float
    decisive_application: str | None
    trials: tuple[KnobTrial, ...] = ()


@dataclass(frozen=True)
class Related:
    """Another alert whose bisection named the same culprit: one more symptom of the change,
    listed in the same report (as Perfherder groups alerts by push)."""

    alert: Alert
    confirmation: Confirmation | None
    first_divergent_stage: str | None


@dataclass(frozen=True, kw_only=True)
class Investigation:
    version: int
    alert: Alert
    target: Target
    commits: Commits
    bisect: BisectResult | None
    confirmation: Confirmation | None
    stages: StageReport
    workaround: Workaround | None
    minimized: MinimizeResult | None
    source: str  # the program the timing ran and the reproducer embeds
    timing: Timing
    traces: Mapping[str, str | None]
    related: tuple[Related, ...] = ()  # the same culprit's other alerts
    backend: str = "spyre_sim"  # the compiler measured (backends.interface.MODULES)
    compiler: str | None = None  # the repository's module in its compiler's place, if any

    @property
    def symptoms(self) -> tuple[Alert, ...]:
        """Every alert this report answers: its own, then the related ones."""
        return (self.alert, *(r.alert for r in self.related))


def load(document: Any, source: str = "investigation") -> Investigation:
    """An investigation from its JSON form, every field checked.

    Raises:
        SpyreRegressError: naming the first field that is missing or mistyped, or a version
            this spyre-regress does not read.
    """
    if not isinstance(document, Mapping):
        raise SpyreRegressError(f"{source} must be a JSON object (docs/formats.md)")
    version = document.get("version")
    if version == 2:
        document = _update_to_3(document)
    elif version != INVESTIGATION_VERSION:
        raise SpyreRegressError(
            f"{source} has investigation format version {version!r}; this spyre-regress reads "
            f"versions 2 and {INVESTIGATION_VERSION} (re-run the investigation with this "
            "version)")
    try:
        investigation = from_json(Investigation, document, "investigation")
    except RecordError as error:
        raise SpyreRegressError(f"{source}: {error}; docs/formats.md lists the investigation "
                                "fields") from None
    if not (investigation.timing.good.ok or investigation.timing.bad.ok):
        raise SpyreRegressError(f"{source}: neither build ran (`timing.good.status` and "
                                "`timing.bad.status` are not \"ok\"): nothing to report")
    return investigation


# Version 2 named the stage report's basis after the metric that measured it.
_BASES_V2 = {"compile_work": "instructions", "compile_time": "compile_clock"}


def _update_to_3(document: Mapping) -> dict:
    stages = document.get("stages")
    if isinstance(stages, Mapping) and stages.get("basis") in _BASES_V2:
        stages = {**stages, "basis": _BASES_V2[stages["basis"]]}
    return {**document, "stages": stages, "version": INVESTIGATION_VERSION}


def dump(investigation: Investigation) -> dict:
    """The JSON form of an investigation (`load` reads it back)."""
    return to_json(investigation)


# --- the figures, computed once ------------------------------------------------------------

def summarize(samples: Sequence[float]) -> SampleSummary:
    """n, median, quartiles (numpy's linear interpolation), mean, geometric mean, range."""
    values = np.asarray(samples, dtype=float)
    q1, median, q3 = (float(x) for x in np.percentile(values, [25, 50, 75]))
    geomean = float(np.exp(np.log(values).mean())) if (values > 0).all() else math.nan
    return SampleSummary(n=int(values.size), median=median, q1=q1, q3=q3, mean=float(values.mean()),
                         geomean=geomean,
                         minimum=float(values.min()), maximum=float(values.max()))


def compare_series(name: str, unit: str, good: Sequence[float] | None,
                   bad: Sequence[float] | None,
                   confidence: float = REPORT_CONFIDENCE) -> Comparison:
    """Summaries of both builds; the ratio of geometric means with a Welch interval on log
    samples and the two-sided p of that same test, so p and interval never disagree."""
    if not good or not bad:
        return Comparison(name=name, unit=unit, good=summarize(good) if good else None,
                          bad=summarize(bad) if bad else None, ratio=None, ci=None,
                          confidence=confidence, pvalue=None)
    interval = stats.ratio_interval(good, bad, confidence=confidence)
    pvalue = stats.welch_pvalue(good, bad)
    return Comparison(name=name, unit=unit, good=summarize(good), bad=summarize(bad),
                      ratio=interval.ratio,
                      ci=(interval.low, interval.high), confidence=confidence, pvalue=pvalue)


def judge(build: str, run: BuildRun, tolerance: Tolerance) -> Correctness:
    """Pass/fail of one build's output against float64 at `tolerance`."""
    if not run.ok:
        return Correctness(build, run.status, None, False,
                           reasons=(f"the build did not run: {run.detail or run.status}",))
    if run.errors is None:  # it compiled; its outputs exist only where its device is
        return Correctness(build, UNMEASURED, None, False,
                           reasons=("the compiled program runs only on the device: its "
                                    "outputs were not computed here",))
    errors = run.errors
    reasons = [f"inf/NaN first appears in {run.nonfinite}"] if run.nonfinite else []
    if not all(v is not None and math.isfinite(v) for v in (errors.max_abs, errors.rmse)):
        reasons.append("non-finite output (NaN or inf)")
    if not (errors.rmse_ratio is not None and errors.rmse_ratio <= tolerance.rmse_ratio):
        reasons.append(f"RMSE ratio {_number(errors.rmse_ratio)} > {tolerance.rmse_ratio:g}")
    if not (errors.max_abs is not None and errors.max_abs <= tolerance.max_abs):
        reasons.append(f"max abs {_number(errors.max_abs)} > {tolerance.max_abs:g}")
    return Correctness(build, "ok", errors, not reasons, reasons=tuple(reasons))


def timing(program: Program, good: BuildRun, bad: BuildRun,
           tolerance: Tolerance = Tolerance()) -> Timing:
    """Both builds' runs of `program`, with every comparison a report states."""
    iterations = max(len(good.device_us), len(bad.device_us), len(good.host_s), len(bad.host_s))
    device = compare_series("simulated device time per call", "us",
                            good.device_us if good.ok else None,
                            bad.device_us if bad.ok else None)
    host = compare_series("host wall time per call", "s", good.host_s if good.ok else None,
                          bad.host_s if bad.ok else None)
    return Timing(program=program, iterations=iterations, good=good, bad=bad, device=device,
                  host=host, tolerance=tolerance,
                  correctness=(judge("good", good, tolerance), judge("bad", bad, tolerance)))


def confirmation(program: Program, metric: metrics.Metric, good: Sequence[float],
                 bad: Sequence[float], floor: float, higher_is_better: bool = False
                 ) -> Confirmation:
    """Whether the culprit's samples confirm the regression: worse by at least `floor`, with
    the interval of the ratio excluding 1 (exactly worse, for deterministic values)."""
    interval = stats.ratio_interval(good, bad, confidence=REPORT_CONFIDENCE)
    exact = stats.is_constant(good) and stats.is_constant(bad)
    # one-sided, in the direction of worse, from the test behind the interval
    pvalue = None if exact else stats.welch_pvalue(
        good, bad, "less" if higher_is_better else "greater")
    ratio, low, high = interval
    worsening = (1 / ratio - 1) if higher_is_better else (ratio - 1)
    excludes_one = (high < 1) if higher_is_better else (low > 1)
    confirmed = math.isfinite(ratio) and worsening >= floor and (excludes_one or exact)
    return Confirmation(program=program, metric=metric.name, unit=metric.unit, good_n=len(good),
                        bad_n=len(bad),
                        good_median=float(np.median(good)), bad_median=float(np.median(bad)),
                        ratio=ratio, ci=(low, high),
                        confidence=REPORT_CONFIDENCE, pvalue=pvalue, floor=floor,
                        confirmed=bool(confirmed))


def errors_from(values: Mapping[str, float | None] | None) -> Errors | None:
    if values is None:
        return None
    return Errors(*(_finite(values.get(name)) for name in ERROR_FIELDS))


def _finite(value: float | None) -> float | None:
    return None if value is None else float(value)


def _number(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3g}"
