"""The numbers a report states, computed once from a validated investigation: pure functions.

Timing: median and IQR per build, and the bad/good ratio of geometric means with a 95% Welch
interval on log samples (Kalibera & Jones, ISMM 2013: `regressions.stats.ratio_interval`) and a
two-sided Mann-Whitney p-value, the same statistics detection and bisection use.
Correctness: torch's `same()` oracle compares the compiled output's RMSE against a float64
reference with eager fp16's RMSE against the same reference; we pass at RMSE ratio <= 2 (its
default multiplier) and add a max-abs bound so one wildly wrong element cannot hide in a mean.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from regressions import stats

REPORT_CONFIDENCE = 0.95
# torch._dynamo.utils.same(): res_error <= multiplier * ref_error (+ tol / 10), multiplier 2.0.
DEFAULT_RMSE_RATIO = 2.0
# Absolute bound on the largest element error. fp16 rounding of an O(1..8) output is at most
# 2^-8..2^-6 (0.004..0.016); 0.05 is several such steps, so only a real defect exceeds it.
DEFAULT_MAX_ABS = 0.05


@dataclass(frozen=True)
class SampleSummary:
    n: int
    median: float
    q1: float
    q3: float
    mean: float
    geomean: float
    minimum: float
    maximum: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1


@dataclass(frozen=True)
class Comparison:
    """bad vs good for one timing series: the headline numbers of a report."""

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

    def describe(self) -> str:
        return (f"RMSE vs float64 at most {self.rmse_ratio:g}x eager fp16's RMSE (torch same() "
                f"oracle), and max abs error at most {self.max_abs:g}; non-finite output fails")


@dataclass(frozen=True)
class Correctness:
    build: str
    status: str  # ok | the probe's failure status
    max_abs: float | None
    max_rel: float | None
    rmse: float | None
    rmse_ratio: float | None
    passed: bool
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class KernelChanges:
    removed: tuple[str, ...]  # only at the good commit
    added: tuple[str, ...]  # only at the bad commit
    changed: tuple[tuple[str, float, float], ...]  # (name, good_us, bad_us), |delta| > 0.5%
    good_total_us: float
    bad_total_us: float

    @property
    def any(self) -> bool:
        return bool(self.removed or self.added or self.changed)


def summarize(samples: Sequence[float]) -> SampleSummary:
    values = np.asarray(samples, dtype=float)
    q1, median, q3 = (float(x) for x in np.percentile(values, [25, 50, 75]))
    return SampleSummary(int(values.size), median, q1, q3, float(values.mean()),
                         float(np.exp(np.log(values).mean())), float(values.min()),
                         float(values.max()))


def compare_series(name: str, unit: str, good: Sequence[float] | None,
                   bad: Sequence[float] | None,
                   confidence: float = REPORT_CONFIDENCE) -> Comparison:
    """Summaries of both builds, and the ratio with its interval when both were measured."""
    if not good or not bad:
        return Comparison(name, unit, summarize(good) if good else None,
                          summarize(bad) if bad else None, None, None, confidence, None)
    interval = stats.ratio_interval(good, bad, confidence=confidence)
    pvalue = stats.mann_whitney(good, bad).pvalue
    return Comparison(name, unit, summarize(good), summarize(bad), interval.ratio,
                      (interval.low, interval.high), confidence, pvalue)


def tolerance_from(document: Mapping[str, Any]) -> Tolerance:
    """The investigation's `tolerance` (optional) over the defaults."""
    given = document.get("tolerance") or {}
    return Tolerance(float(given.get("rmse_ratio", DEFAULT_RMSE_RATIO)),
                     float(given.get("max_abs", DEFAULT_MAX_ABS)))


def judge(build: str, timing: Mapping[str, Any], tolerance: Tolerance) -> Correctness:
    """Pass/fail of one build's output against float64 at `tolerance`."""
    if timing["status"] != "ok":
        return Correctness(build, timing["status"], None, None, None, None, False,
                           (f"the build did not run: {timing.get('detail', timing['status'])}",))
    errors = timing["errors"]
    values = {name: float(errors[name]) for name in ("max_abs", "max_rel", "rmse", "rmse_ratio")}
    reasons = []
    if not all(math.isfinite(v) for v in (values["max_abs"], values["rmse"])):
        reasons.append("non-finite output (NaN or inf)")
    if not values["rmse_ratio"] <= tolerance.rmse_ratio:
        reasons.append(f"RMSE ratio {values['rmse_ratio']:.3g} > {tolerance.rmse_ratio:g}")
    if not values["max_abs"] <= tolerance.max_abs:
        reasons.append(f"max abs {values['max_abs']:.3g} > {tolerance.max_abs:g}")
    return Correctness(build, "ok", values["max_abs"], values["max_rel"], values["rmse"],
                       values["rmse_ratio"], not reasons, tuple(reasons))


def kernel_changes(kernels: Sequence[Mapping[str, Any]],
                   relative: float = 0.005) -> KernelChanges:
    """Kernels that appear, disappear, or change time by more than `relative` (0.5%)."""
    removed = tuple(k["name"] for k in kernels if k["bad_us"] is None)
    added = tuple(k["name"] for k in kernels if k["good_us"] is None)
    changed = tuple(
        (k["name"], float(k["good_us"]), float(k["bad_us"])) for k in kernels
        if k["good_us"] is not None and k["bad_us"] is not None
        and abs(k["bad_us"] - k["good_us"]) > relative * max(abs(k["good_us"]), 1e-12))
    return KernelChanges(removed, added, changed,
                         sum(float(k["good_us"] or 0.0) for k in kernels),
                         sum(float(k["bad_us"] or 0.0) for k in kernels))


def config_differences(good: Mapping[str, Any], bad: Mapping[str, Any]) -> dict[str, list]:
    """Config fields whose values differ between the builds: {field: [good, bad]}."""
    if not good or not bad:
        return {}
    return {name: [good.get(name), bad.get(name)] for name in sorted(set(good) | set(bad))
            if good.get(name) != bad.get(name)}


def stage_row(stages: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    return next((row for row in stages["stages"] if row["stage"] == name), None)


def total_compile_s(timing: Mapping[str, Any]) -> float | None:
    if timing["status"] != "ok":
        return None
    return float(sum(timing["compile_times"].values()))


def member_label(member: Mapping[str, Any]) -> str:
    """`benchmark(params)` as a plain string, whatever shape params has."""
    params = member.get("params")
    if params in (None, "", [], {}):
        return str(member["benchmark"])
    return f"{member['benchmark']}{params if isinstance(params, str) else tuple(params)}"


def as_dict(value: Any) -> Any:
    """Dataclasses (nested, in tuples) as JSON-ready dicts and lists."""
    if hasattr(value, "__dataclass_fields__"):
        return {k: as_dict(v) for k, v in asdict(value).items()}
    if isinstance(value, (list, tuple)):
        return [as_dict(v) for v in value]
    if isinstance(value, dict):
        return {k: as_dict(v) for k, v in value.items()}
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
