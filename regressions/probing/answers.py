"""What the probe commands answer, as typed records read once at the boundary.

The probe child (`probe.py`) imports nothing of this package, so it writes plain JSON; the
parent reads each answer into one of these dataclasses through the codec, which checks every
field, so the code that uses an answer names attributes instead of string keys. A probe
that failed or found the commit untestable answers only `status` and `detail`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from regressions.codec import RecordError, from_json
from regressions.errors import SpyreRegressError

Status = Literal["ok", "failed", "untestable"]
T = TypeVar("T")


@dataclass(frozen=True)
class Failed:
    """Any command that did not measure: the commit failed or could not be tested."""

    status: Status
    detail: str = ""


@dataclass(frozen=True)
class BenchAnswer:
    """`bench`: one asv benchmark's samples at one parameter combination."""

    status: Status
    samples: tuple[float, ...]
    deterministic: bool
    param_index: int = 0
    combos: int = 1
    param_lists: tuple[tuple[str, ...], ...] = ()
    benchmark_version: str | None = None
    detail: str = ""


@dataclass(frozen=True)
class KernelRun:
    name: str
    time_us: float
    bound: str = ""
    cores: int | None = None


@dataclass(frozen=True)
class StageAnswer:
    """`stages`: a compile with stage capture, repeated compile times, the noise-free run's
    kernels and device time, and each executable stage's error against float64."""

    status: Status
    compile_times: tuple[Mapping[str, float], ...]
    device_time_us: float | None  # None: the backend has no device clock
    kernels: tuple[KernelRun, ...]
    stages: tuple[str, ...]
    stage_errors: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    width: int | None = None
    detail: str = ""
    host_s: float | None = None  # median warm call, when the request asked for the host clock


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
    """`knobs`: the probe metric at the build's defaults and under each other knob value."""

    status: Status
    baseline: float
    trials: tuple[KnobTrialAnswer, ...]
    scoped: tuple[ScopedAnswer, ...] = ()
    detail: str = ""


@dataclass(frozen=True)
class TimingAnswer:
    """`timing`: synchronized iterations of one program, its output's errors."""

    status: Status
    host_s: tuple[float, ...]
    device_us: tuple[float, ...]
    errors: Mapping[str, float | None] | None
    kernels: tuple[KernelRun, ...]
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


def read(cls: type[T], answer: Mapping[str, Any], command: str) -> T | Failed:
    """The answer of `command` as `cls` when it measured, else `Failed`.

    Raises:
        SpyreRegressError: an answer that does not have the fields its command writes (a
            probe of another version of this tool).
    """
    known = {name: value for name, value in answer.items() if name not in ("version",
                                                                           "traceback")}
    try:
        if answer.get("status") != "ok":
            return from_json(Failed, {"status": known.get("status"),
                                      "detail": str(known.get("detail", ""))}, command)
        return from_json(cls, {k: v for k, v in known.items()
                               if k in cls.__dataclass_fields__}, command)
    except RecordError as error:
        raise SpyreRegressError(f"the {command} probe answered something this spyre-regress "
                                f"cannot read: {error}") from None
