"""What a benchmark measures: the one table every part of the tool reads.

Everything that differs from one metric to another is a field of its entry here, and code
reads the field: detection takes a series' alert kind, direction, floor and tolerance; the
investigation takes how a probe measures the metric, at which width the benchmark builds its
program, whether a knob search, a minimization or instruction counts apply; reports take its
label, units, the clock its samples read and the order of the evidence. A benchmark's asv
name is matched against `METRICS` in order and the first pattern that matches (re.search)
decides, so the specific families of this project's suite come before the generic fallbacks
that any asv suite gets.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from typing import Final, Literal, NamedTuple

from benchmarks import waits

# Alert kinds: one per metric, and "failure" (a series that stops running).
Kind = Literal["compile_work", "device_time", "host_time", "compile_blocked", "compile_children",
               "compile_time", "numerics", "track", "memory", "count", "time", "failure"]
# How the probes measure a metric inside one build (probing/probe.py implements each).
Probe = Literal["device_time", "host_time", "compile_time", "compile_work", "numerics"]
Section = Literal["timing", "correctness", "evidence"]
# Which width the benchmark builds its program at: the workload's default, the compile
# benchmarks' STAGE_WIDTH, or the catalogue's NUMERICS_WIDTHS.
Width = Literal["workload_default", "stage_width", "numerics_width"]
# The stage-probe figure that is the good build's value of the metric (what a knob must
# bring the bad build back to); None: no knob probe measures it.
KnobBaseline = Literal["device_clock", "stage_clock", "runtime_error", "host_clock"]
# How a figure is shown: device time in us, other times in ms or s, counts in millions of
# instructions, errors with what they are, anything else as a number with its unit.
Display = Literal["us", "ms", "instructions", "error", "value"]
# Which part of a compile's wall time a compile metric's samples are (benchmarks/waits.py):
# the process's CPU, its child processes' CPU, or the time it spent blocked.
WaitPart = Literal["cpu", "children_cpu", "blocked"]

FAILURE: Final = "failure"  # a Kind, and the failure of BisectResult.kind
EVIDENCE_FIRST: tuple[Section, ...] = ("evidence", "timing", "correctness")


@dataclass(frozen=True, kw_only=True)
class Metric:
    """One benchmark family: what it measures, in which unit, and how it is judged.

    `name` is also the alert kind. `probe` says how the investigation measures the metric
    inside one build; None means only commit bisection applies (a generic benchmark of another
    suite, whose program the probes cannot build). `floor` is the smallest relative worsening
    worth an alert; `tolerance` the relative difference under which two measurements of a
    near-deterministic metric are the same value.
    """

    name: Kind
    pattern: str
    label: str
    unit: str  # the unit of the benchmark's values in asv's results
    floor: float
    probe: Probe | None = None
    tolerance: float = 1e-9
    deterministic: bool | None = None  # None: inferred from the samples
    probe_unit: str = ""  # the unit the probes report the metric in
    clock: str | None = None  # what the benchmark's samples read, as a report names it
    display: Display = "value"
    sections: tuple[Section, ...] = EVIDENCE_FIRST  # a report's evidence, symptom first
    width: Width = "workload_default"
    per_stage: bool = False  # a `stage` parameter names the compile stage measured
    bisect_by_count: bool = False  # one instruction count per build, not an asv run
    counts_instructions: bool = False  # stage evidence leads with instructions per stage
    with_numerics: bool = False  # the probe's program runs with device numerics on
    errors: bool = False  # values are numerical errors (metrics.ERRORS says which)
    knob_baseline: KnobBaseline | None = None
    knob_quantity: str = ""  # the knob probe's figure as a workaround names it ({stage})
    minimizable: bool = False  # the cost survives cutting the program down
    refuted_without_more_work: bool = False  # a rise with no stage doing more work is load
    reproducer_compiles: int = 1  # cold compiles the reproducer times per run
    timing_row: Literal["device", "host"] | None = None  # the timing row that is the symptom
    # The values come from the benchmarking machine itself (its wall or CPU clock, its
    # memory): a change of runner moves them. False for a simulated clock; a deterministic
    # metric (counts, seeded errors) cannot move with the runner either (`moves_with_runner`).
    runner_bound: bool = True
    # its figure does not depend on what else runs on the host (a simulated clock, counts,
    # errors), so it may be measured beside other work; a wall clock may not
    shares_host: bool = False
    # A compile metric: which part of the compile's wall time its samples are; the stage
    # probe reads the same part per stage, and `change` says how a report words its growth
    # ({where}: "the sdsc stage", "a compile of mlp"; {delta}, {good}, {bad} in ms).
    wait_part: WaitPart | None = None
    change: str = "{where} now takes {delta} more per compile ({good} → {bad})"
    stage_figure: str = "wall time"  # the stage probe's per-stage figure of the metric


METRICS: tuple[Metric, ...] = (
    # Instructions per compile stage, counted under callgrind: near-deterministic (10 runs of
    # the full grid: median spread 0.15%, at most 0.84% in the smallest stages, which execute
    # 0.1-0.6 M instructions; docs/measurements/asv-suite.md), so a change beyond 1% is real and a
    # few percent is worth an alert; PyTorch counts instructions for compile-time PR benchmarks
    # for the same reason (torch._C._instruction_counter).
    Metric(name="compile_work", pattern=r"\.CompileWork\.", label="compile work",
           unit="instructions", floor=0.02, probe="compile_work", tolerance=0.01,
           deterministic=True, probe_unit="instructions",
           clock="instructions counted under callgrind",
           display="instructions", width="stage_width", per_stage=True, bisect_by_count=True,
           counts_instructions=True, shares_host=True),
    # Simulated device time: seeded-noise samples from the timing model (1.5% CV). 1% is the
    # smallest step Chromium's dashboard reports (catapult find_change_points.py).
    Metric(name="device_time", pattern=r"\.ExecuteDeviceTime\.", label="simulated device time",
           unit="s", floor=0.01, probe="device_time", probe_unit="us",
           clock="the simulator's device clock",
           display="us", sections=("timing", "correctness", "evidence"),
           knob_baseline="device_clock", minimizable=True, timing_row="device",
           knob_quantity="noise-free simulated device time per call",
           runner_bound=False, shares_host=True),
    # Host wall time of a warm call on a shared machine: 10%, the asv suite's own
    # publish threshold for it (asv.conf.json regressions_thresholds).
    Metric(name="host_time", pattern=r"HostTime\.", label="host wall time", unit="s", floor=0.10,
           probe="host_time", probe_unit="s", clock="wall time", display="ms",
           sections=("timing", "correctness", "evidence"), with_numerics=True,
           knob_baseline="host_clock",
           knob_quantity="host wall time per warm call (median of 21; a clock: it moves "
                         "with the machine's load)",
           timing_row="host"),
    # The parts of a cold compile's wall time other than the process's CPU
    # (benchmarks/waits.py): its child processes' CPU (a backend compiler run as a
    # subprocess, Inductor's C++ build) and its blocked time (sleeps, locks, files). Each
    # sample reads at least the part's floor (waits.FLOORS), so a part near zero is flat at
    # it, which is not a deterministic series (the next sample may be a little above); a
    # rise above is worth an alert from 10%, the host clocks' floor (a few milliseconds over
    # a floor of five are a larger ratio than they are a wait). Instruction counts cannot
    # see either part (a child's instructions are not the measured process's; a wait
    # executes none), so neither refutes a rise for want of more counted work, and no knob
    # is searched.
    Metric(name="compile_children", pattern=r"^(bench_)?compile\..*_children_cpu\b",
           label="compile children's CPU time", unit="s", floor=0.10, probe="compile_time",
           probe_unit="s", deterministic=False, clock="CPU time of the compile's child processes",
           display="ms", per_stage=True, wait_part="children_cpu", reproducer_compiles=3,
           change="the child processes of {where} now take {delta} more CPU per compile "
                  "({good} → {bad})", stage_figure="children's CPU time"),
    Metric(name="compile_blocked", pattern=r"^(bench_)?compile\..*_blocked\b",
           label="compile blocked time", unit="s", floor=0.10, probe="compile_time",
           probe_unit="s", deterministic=False,
           clock="blocked time (wall time less CPU, children's CPU and run-queue wait)",
           display="ms", per_stage=True, wait_part="blocked", reproducer_compiles=3,
           change="{where} now waits {delta} more per compile, blocked ({good} → {bad})",
           stage_figure="blocked time"),
    # Cold compile CPU time: asv's default regressions_threshold (asv/config.py, 0.05).
    Metric(name="compile_time", pattern=r"^(bench_)?compile\.", label="compile time", unit="s",
           floor=0.05, probe="compile_time", probe_unit="s", clock="CPU time", display="ms",
           per_stage=True, counts_instructions=True, knob_baseline="stage_clock",
           knob_quantity="wall time of the {stage} stage per cold compile (a clock: it "
                         "moves with the machine's load)",
           refuted_without_more_work=True, reproducer_compiles=3, wait_part="cpu"),
    # Numerical error against float64: deterministic under fixed seeds; asv's default 5%.
    Metric(name="numerics", pattern=r"^(bench_)?numerics\.", label="numerical error", unit="",
           floor=0.05, probe="numerics", deterministic=True, display="error",
           sections=("correctness", "evidence", "timing"),
           width="numerics_width", with_numerics=True, errors=True, knob_baseline="runtime_error",
           knob_quantity="numerical error of the output (deterministic)",
           minimizable=True, shares_host=True),
    # Generic families of any asv suite (the kinds asv itself distinguishes).
    Metric(name="track", pattern=r"\.track_", label="tracked value", unit="", floor=0.01),
    Metric(name="memory", pattern=r"\.(peak)?mem_", label="memory", unit="bytes", floor=0.05),
    # A count (operations, instructions, allocations) of a table of results that says so
    # (records/tables.py `kind`): no name matches it, and a change of runner does not move it.
    Metric(name="count", pattern=r"(?!)", label="count", unit="", floor=0.01,
           runner_bound=False),
    Metric(name="time", pattern=r"", label="time", unit="s", floor=0.01, display="ms"),
)
KINDS: tuple[Kind, ...] = tuple(m.name for m in METRICS) + (FAILURE,)
# The metrics the probes can measure, by name (the CLI's --metric choices): a compile
# metric per part of the compile's wall time, all three measured by the compile_time probe.
PROBE_METRICS: tuple[str, ...] = tuple(m.name for m in METRICS if m.probe)

class NumericsError(NamedTuple):
    """One error a numerics benchmark can track: which benchmarks (the end of the asv name,
    first match wins), the field in the probes' answers, what a value of it is after the
    number, its name in a table, and its definition - the one the benchmarks,
    regressions/probing/harness.py and every report use."""

    pattern: str
    field: str
    unit: str
    name: str
    definition: str


NUMERICS_ERRORS: tuple[NumericsError, ...] = (
    NumericsError(r"max_abs", "max_abs", " max abs error", "max abs error",
                  definition="max |out - ref| over the output's elements"),
    NumericsError(r"max_rel", "max_rel", " max rel error", "max rel error",
                  definition="max |out - ref| / max |ref|: relative to the output's scale, so "
                             "elements near zero do not dominate"),
    # against IEEE fp16 eager (the older baseline)
    NumericsError(r"rmse_vs_eager_fp16$", "rmse_ratio_fp16", "× eager IEEE fp16's RMSE",
                  "RMSE ratio vs eager IEEE fp16",
                  definition="RMSE(out, ref) / RMSE(the program run eagerly in IEEE fp16, ref)"),
    # against the backend's eager run: in the device's own format, DLFloat16, for spyre_sim;
    # in the program's dtypes for Inductor ({eager} and {eager_run}: `error_words`)
    NumericsError(r"", "rmse_ratio", "× {eager}'s RMSE", "RMSE ratio vs {eager}",
                  definition="RMSE(out, ref) / RMSE({eager_run}, ref): about 1 is as accurate as "
                             "{eager}"),
)
ERRORS: tuple[str, ...] = tuple(dict.fromkeys(e.field for e in NUMERICS_ERRORS))


def error_words(field: str, eager: str, eager_run: str) -> NumericsError:
    """The unit, name and definition of error `field`, with the eager baseline named as the
    measuring backend ran it (backends.interface.WORDING)."""
    error = next(e for e in NUMERICS_ERRORS if e.field == field)
    words = {"eager": eager, "eager_run": eager_run}
    return error._replace(unit=error.unit.format(**words), name=error.name.format(**words),
                          definition=error.definition.format(**words))

assert set(typing.get_args(Kind)) == set(KINDS), "Kind and METRICS name the same kinds"


def metric_for(benchmark: str) -> Metric:
    """The first metric whose pattern matches the asv benchmark name."""
    return next(m for m in METRICS if re.search(m.pattern, benchmark))


def by_name(name: str) -> Metric:
    """The metric called `name` (also an alert kind)."""
    for metric in METRICS:
        if metric.name == name:
            return metric
    raise KeyError(f"unknown metric {name!r}; known: {[m.name for m in METRICS]}")


def instruction_counts() -> Metric:
    """The metric whose values are instructions counted per compile stage."""
    return next(m for m in METRICS if m.bisect_by_count)


def label_of(kind: str) -> str:
    """What an alert of `kind` is about, as a sentence names it."""
    return "a failure" if kind == FAILURE else by_name(kind).label


def metric_of(benchmark: str, kind: str | None = None) -> Metric:
    """The metric of a series: the one its source declared (`kind`, a table's), else the
    one its name matches (`metric_for`)."""
    return by_name(kind) if kind else metric_for(benchmark)


def floor_for(benchmark: str, floors: tuple[tuple[str, float], ...] = (),
              kind: str | None = None) -> float:
    """The magnitude floor for a series named `benchmark(params)`: the first user override
    whose regex matches (re.search), else its metric's (`metric_of`)."""
    for pattern, floor in floors:
        if re.search(pattern, benchmark):
            return floor
    return metric_of(benchmark, kind).floor


def moves_with_runner(benchmark: str, kind: str | None = None) -> bool:
    """Whether a change of the machine that runs the benchmark can move its values: not for
    a simulated clock nor for a deterministic metric (environment alerts count on it)."""
    metric = metric_of(benchmark, kind)
    return metric.runner_bound and metric.deterministic is not True


def wait_floor(metric: Metric) -> float:
    """The least a sample of the metric's part of a compile's wall time reads (the floor
    the benchmarks apply, benchmarks/waits.py): a value at it says "this much or less"."""
    return waits.FLOORS.get(metric.wait_part or "", 0.0)


def numerics_error(benchmark: str) -> str:
    """Which error field a numerics benchmark tracks (see `NUMERICS_ERRORS`)."""
    return next(e.field for e in NUMERICS_ERRORS if re.search(e.pattern, benchmark))
