"""What a benchmark measures: the one table every part of the tool reads.

Detection takes a series' alert kind, direction and magnitude floor from here; the
investigation takes how a probe measures the metric; reports take its label and unit; the CLI
takes its choices. A benchmark's asv name is matched against `METRICS` in order and the first
pattern that matches (re.search) decides, so the specific families of this project's suite
come before the generic fallbacks that any asv suite gets.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One benchmark family: what it measures, in which unit, and how it is judged.

    `name` is also the alert kind. `probe` says how the investigation measures the metric
    inside one build ("device_time", "host_time", "compile_time", "compile_work" or
    "numerics"); None means only commit bisection applies (a generic benchmark of another
    suite, whose program the probes cannot build). `floor` is the smallest relative worsening
    worth an alert; `tolerance` the relative difference under which two measurements of a
    near-deterministic metric are the same value.
    """

    name: str
    pattern: str
    label: str
    unit: str
    floor: float
    probe: str | None = None
    tolerance: float = 1e-9
    deterministic: bool | None = None  # None: inferred from the samples


METRICS: tuple[Metric, ...] = (
    # Instructions per compile stage, counted under callgrind: near-deterministic (10 runs of
    # the full grid: median spread 0.15%, at most 0.84% in the smallest stages, which execute
    # 0.1-0.6 M instructions; docs/benchmarks.md), so a change beyond 1% is real and a few
    # percent is worth an alert; PyTorch counts instructions for compile-time PR benchmarks
    # for the same reason (torch._C._instruction_counter).
    Metric("compile_work", r"\.CompileWork\.", "compile work", "instructions", 0.02,
           probe="compile_work", tolerance=0.01, deterministic=True),
    # Simulated device time: seeded-noise samples from the timing model (1.5% CV). 1% is the
    # smallest step Chromium's dashboard reports (catapult find_change_points.py).
    Metric("device_time", r"\.ExecuteDeviceTime\.", "simulated device time", "s", 0.01,
           probe="device_time"),
    # Host wall time of a warm call on a shared machine: 10%, the asv suite's own
    # publish threshold for it (asv.conf.json regressions_thresholds).
    Metric("host_time", r"HostTime\.", "host wall time", "s", 0.10, probe="host_time"),
    # Cold compile CPU time: asv's default regressions_threshold (asv/config.py, 0.05).
    Metric("compile_time", r"^(bench_)?compile\.", "compile time", "s", 0.05,
           probe="compile_time"),
    # Numerical error against float64: deterministic under fixed seeds; asv's default 5%.
    Metric("numerics", r"^(bench_)?numerics\.", "numerical error", "", 0.05,
           probe="numerics"),
    # Generic families of any asv suite (the kinds asv itself distinguishes).
    Metric("track", r"\.track_", "tracked value", "", 0.01),
    Metric("memory", r"\.(peak)?mem_", "memory", "bytes", 0.05),
    Metric("time", r"", "time", "s", 0.01),
)
# A series that stops running: its own kind, never a slowdown.
FAILURE = "failure"
KINDS: tuple[str, ...] = tuple(m.name for m in METRICS) + (FAILURE,)
# What the probes can measure (the CLI's --metric choices).
PROBE_METRICS: tuple[str, ...] = tuple(dict.fromkeys(m.probe for m in METRICS if m.probe))

# Which error a numerics benchmark tracks, by the end of its asv name (first match wins).
NUMERICS_ERRORS: tuple[tuple[str, str], ...] = (
    (r"max_abs", "max_abs"),
    (r"max_rel", "max_rel"),
    (r"rmse_vs_eager_fp16$", "rmse_ratio_fp16"),  # against IEEE fp16 eager (older baseline)
    (r"", "rmse_ratio"),  # against eager in the device's own format, DLFloat16
)
ERRORS: tuple[str, ...] = tuple(dict.fromkeys(error for _, error in NUMERICS_ERRORS))


def metric_for(benchmark: str) -> Metric:
    """The first metric whose pattern matches the asv benchmark name."""
    return next(m for m in METRICS if re.search(m.pattern, benchmark))


def by_name(name: str) -> Metric:
    """The metric called `name` (also an alert kind)."""
    for metric in METRICS:
        if metric.name == name:
            return metric
    raise KeyError(f"unknown metric {name!r}; known: {[m.name for m in METRICS]}")


def floor_for(benchmark: str, floors: tuple[tuple[str, float], ...] = ()) -> float:
    """The magnitude floor for a series named `benchmark(params)`: the first user override
    whose regex matches (re.search), else its metric's."""
    for pattern, floor in floors:
        if re.search(pattern, benchmark):
            return floor
    return metric_for(benchmark).floor


def numerics_error(benchmark: str) -> str:
    """Which error field a numerics benchmark tracks (see `NUMERICS_ERRORS`)."""
    return next(error for pattern, error in NUMERICS_ERRORS if re.search(pattern, benchmark))
