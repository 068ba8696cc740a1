"""The probe protocol: what the tool asks a probe and what each probe command answers.

The probe child (`probe.py`) runs inside a commit's checkout, whose own `regressions` (if it
has one) is another version of this tool, so it loads this file by path from the current
tree, as it loads `backends/*.py`: this module imports only the standard library. The tool
writes one `ProbeRequest` per probe; the child reads it back through the codec
(`regressions/codec.py`, loaded by path too) and answers with one of the dataclasses below,
as JSON; the tool reads each answer through the same codec (`answers.read`), which checks
every field, so the code that uses an answer names attributes instead of string keys. A new
field is declared here once. A probe that failed or found the commit untestable answers
`Failed`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

PROBE_ANSWER_VERSION = 1
Status = Literal["ok", "failed", "untestable"]


@dataclass(frozen=True)
class KernelTime:
    """One kernel of a compiled program: its execution time per call (noise-free, no launch
    gap), what bounds it (compute or memory) and the cores it ran on, where the backend
    models a device. The one kernel-timing record of the project: a backend's run reports
    its kernels with these fields (`backends.interface.Execution.kernels`, the compiler's
    own records, which cannot import this tool), the probe reads them into this record,
    and probe answers, stage reports and investigations keep it."""

    name: str
    time_us: float | None  # None: the backend's model could not time it (its name says why)
    bound: str = ""
    cores: int | None = None

    @classmethod
    def of(cls, kernel: Any) -> KernelTime:
        """A backend's kernel record as this one: any object with these fields (the
        compiler's own; `cores` is missing in builds from before the simulator counted
        them; a kernel its model cannot time has a NaN time, kept as None)."""
        time_us = float(kernel.time_us)
        return cls(str(kernel.name), None if math.isnan(time_us) else time_us,
                   str(kernel.bound), getattr(kernel, "cores", None))


@dataclass(frozen=True)
class KnobScope:
    """One knob's value applied to its first `limit` decisions only, for each limit."""

    knob: str
    value: Any
    limits: tuple[int, ...]


@dataclass(frozen=True, kw_only=True)
class ProbeRequest:
    """What a probe is told: the compiler under test, the program, the measurement, and
    the fields of the one command that reads them (None: the command's default)."""

    # the compiler under test: its backend module and the harness, by path, and the
    # repository's module in the backend's compiler's place, if any
    backend: str = ""  # empty: spyre_sim's backend beside probe.py (a request from before)
    compiler: str | None = None
    harness: str = ""
    # the program: a workload of the catalogue (`workloads`, by path) at a shape, or a
    # module's `source` defining program and make_inputs
    workloads: str | None = None
    workload: str = ""
    seq: int = 0
    width: int | None = None
    source: str | None = None
    # the measurement: the build's config values, the metric's probe method, the stage a
    # compile time is read for, the numerics error a value is
    config: Mapping[str, Any] = field(default_factory=dict)
    metric: str = ""
    stage: str | None = None
    error: str | None = None
    # a compile metric's part of the compile's wall time (benchmarks/waits.py: cpu,
    # children_cpu, blocked); None: the compile's seconds as its backend reports them
    wait_part: str | None = None
    # discover, bench: the suite copy; bench: one benchmark at one parameter combination
    suite: str = ""
    benchmark: str = ""
    params: tuple[str, ...] = ()
    samples: int | None = None  # bench, sample: at least this many samples
    # stages: where the capture and the noise-free run's trace go, per-stage numerics, and
    # the host clock's warm calls (a host-time metric's knob search needs the good value)
    capture_dir: str = ""
    trace: str | None = None
    numerics: bool = True
    host_clock: bool = False
    compile_repeats: int | None = None  # stages, compile_time: cold compiles timed
    calls: int | None = None  # host_time: warm calls timed
    iterations: int | None = None  # timing: synchronized iterations
    compile_work: str = ""  # work: the suite's compile_work module, by path
    # host clocks (compile seconds, warm-call seconds): the suite's clocks module, by path,
    # whose forked processes and reference workload make each value one process's, as the
    # suite's own host-clock samples are (benchmarks/clocks.py); empty: in this process
    clocks: str = ""
    scope: KnobScope | None = None  # knobs: narrow one knob to its first decisions
    part: tuple[int, int] | None = None  # knobs: this probe's share (i, n): knobs i, i+n, ...
    # knobs: a value restores the metric below this share of the defaults (on a clock, a
    # trial far above it is read no further); None: every trial read in full
    restoring_share: float | None = None


@dataclass(frozen=True)
class Candidate:
    """One line of a minimization worker's input: a candidate program, as source."""

    source: str


@dataclass(frozen=True)
class Failed:
    """Any command that did not measure: the commit failed or could not be tested."""

    status: Status
    detail: str = ""
    traceback: str = ""  # where the probe's own code failed (for a person reading the file)
    stage: str | None = None  # the compile stage it failed in, where the compiler says one


@dataclass(frozen=True)
class Done:
    """A command with nothing to answer but that it ran (a worker whose input closed)."""

    status: Status = "ok"


@dataclass(frozen=True)
class DiscoverAnswer:
    """`discover`: the suite's benchmarks, each with its parameter names and each
    parameter's values (asv's repr strings, the form detect prints and bench takes)."""

    status: Status
    benchmarks: Mapping[str, tuple[str, ...]]
    params: Mapping[str, tuple[tuple[str, ...], ...]] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class BenchAnswer:
    """`bench`: one asv benchmark's samples at one parameter combination; `sample`: the
    metric's samples measured directly (the position fields keep their defaults)."""

    status: Status
    samples: tuple[float, ...]
    deterministic: bool
    param_index: int = 0
    combos: int = 1
    param_lists: tuple[tuple[str, ...], ...] = ()
    benchmark_version: str | None = None
    started_at: float | None = None
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class StageAnswer:
    """`stages`: a compile with stage capture, repeated compile times, the noise-free run's
    kernels and device time, and each executable stage's error against float64."""

    status: Status
    compile_times: tuple[Mapping[str, float], ...]
    device_time_us: float | None  # None: the backend has no device clock
    kernels: tuple[KernelTime, ...]
    stages: tuple[str, ...]
    stage_errors: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    width: int | None = None
    detail: str = ""
    host_s: float | None = None  # median warm call, when the request asked for the host clock
    backend: Mapping[str, Any] = field(default_factory=dict)  # the backend's versions
    # per compile of `compile_times`: the parts of the whole compile's wall time ("total") and,
    # when the request names a part other than the CPU (`wait_part`), of each region's (a
    # backend's `compile_in_regions`: spyre_sim's stages, Inductor's one "compile"), by part
    # (benchmarks/waits.py's Wait fields), in seconds
    compile_waits: tuple[Mapping[str, Mapping[str, float]], ...] = ()


@dataclass(frozen=True)
class KnobTrialAnswer:
    knob: str
    stage: str
    value: Any
    metric: float
    index: int = 0  # the knob's place in the table, so shares of the knobs merge in order


@dataclass(frozen=True)
class ScopedAnswer:
    """The metric with the knob's value applied to its first `limit` decisions only, and the
    decisions the compile logged."""

    limit: int
    metric: float
    applications: tuple[str, ...]


@dataclass(frozen=True)
class KnobsAnswer:
    """`knobs`: the probe metric at the build's defaults and under each other knob value;
    for a request with a `scope`, only the scoped measurements, the baseline being the one
    with the knob applied nowhere (limit 0; 0.0 where the backend cannot scope a knob)."""

    status: Status
    baseline: float
    trials: tuple[KnobTrialAnswer, ...]
    scoped: tuple[ScopedAnswer, ...] = ()
    detail: str = ""


@dataclass(frozen=True, kw_only=True)
class TimingAnswer:
    """`timing`: synchronized iterations of one program, its output's errors."""

    status: Status
    host_s: tuple[float, ...]
    device_us: tuple[float, ...]
    errors: Mapping[str, float | None] | None
    kernels: tuple[KernelTime, ...]
    compile_times: Mapping[str, float]
    environment: Mapping[str, Any] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    nonfinite: str | None = None
    width: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class WorkAnswer:
    """`work`: instructions per compile stage of one program."""

    status: Status
    instructions: Mapping[str, int]
    detail: str = ""


@dataclass(frozen=True)
class MetricAnswer:
    """A minimization worker's answer for one candidate program."""

    status: Status
    metric: float
    detail: str = ""


Answer = (Failed | Done | DiscoverAnswer | BenchAnswer | StageAnswer | KnobsAnswer
          | TimingAnswer | WorkAnswer | MetricAnswer)
# What each command answers when it measured (`worker`: per candidate line; its last
# answer, when its input closes, is `Done`).
ANSWERS: dict[str, type] = {
    "discover": DiscoverAnswer, "bench": BenchAnswer, "sample": BenchAnswer,
    "stages": StageAnswer, "knobs": KnobsAnswer, "timing": TimingAnswer, "work": WorkAnswer,
    "worker": MetricAnswer}
