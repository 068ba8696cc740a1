"""The device timeline of one run: job-plan steps in FIFO order, as a Chrome trace.

Steps run in order on one stream (torch-spyre's SpyreStream, docs/source/runtime/index.md):
each kernel pays a device-visible launch gap, then runs on its cores; CPU fallbacks pay a D2H
per input, the host op, and an H2D for the result. Graph inputs are already resident (as after
`x.to("spyre")`) and outputs stay on the device. The trace is Chrome's JSON event format
(complete "X" events plus "M" name metadata), which Perfetto and chrome://tracing open: one
process for the device (a thread per core and one for the PCIe DMA engine) and one for the
host (launches and fallback ops).

Run-to-run variability is one multiplicative lognormal factor per run with mean exactly 1, so
it spreads samples without moving the mean. The default CV (Config.noise_cv = 1.5 %) sits
between torch-spyre's measured kernel-time spread (0.05-0.33 % of the mean) and the spread of
a kernel pair including its inter-kernel launch gap (2.2 %); see docs/timing-model.md.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Any, Literal

DEVICE_PID, HOST_PID = 1, 2
DMA_TID = 100


@dataclass(frozen=True, kw_only=True)
class JobStep:
    kind: Literal["compute", "d2h", "h2d", "host"]
    name: str
    duration_us: float  # execution alone
    launch_us: float = 0.0  # device-visible gap before it (kernel launch)
    cores: int = 1
    args: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class KernelRecord:
    name: str
    time_us: float
    cores: int
    bound: str
    bytes: int
    flops: int


@dataclass(frozen=True)
class RunRecord:
    device_time_us: float
    kernels: tuple[KernelRecord, ...]
    trace: dict = field(compare=False)


def noise_factor(rng: random.Random, cv: float) -> float:
    """Lognormal with mean 1 and coefficient of variation `cv` (0 gives exactly 1).

    sigma^2 = ln(1 + cv^2) and mu = -sigma^2 / 2 make E[factor] = 1 and sd/mean = cv, so
    noise widens distributions without biasing any mean a regression detector compares.
    """
    if cv <= 0:
        return 1.0
    sigma = math.sqrt(math.log1p(cv * cv))
    return math.exp(rng.gauss(-0.5 * sigma * sigma, sigma))


def _meta(name: str, pid: int, tid: int, label: str) -> dict:
    return {"name": name, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {"name": label}}


def _meta_events(max_cores: int) -> list[dict]:
    events = [
        _meta("process_name", DEVICE_PID, 0, "Spyre device"),
        _meta("process_name", HOST_PID, 0, "host"),
        _meta("thread_name", DEVICE_PID, DMA_TID, "DMA (PCIe)"),
        _meta("thread_name", HOST_PID, 0, "launch / fallback"),
    ]
    events += [_meta("thread_name", DEVICE_PID, core, f"core {core}")
               for core in range(max_cores)]
    return events


def run_record(steps: tuple[JobStep, ...], factor: float, label: str = "") -> RunRecord:
    """Scale the base timeline by this run's noise factor and lay it out as a trace.

    `kernels[i].time_us` is the kernel's execution alone; `device_time_us` is the span of
    the whole timeline (launch gaps, transfers and host ops included).
    """
    if factor <= 0:
        raise ValueError(f"noise factor {factor!r} must be positive")
    events: list[dict] = []
    kernels: list[KernelRecord] = []
    now = 0.0
    prefix = f"{label}/" if label else ""
    for step in steps:
        name = prefix + step.name
        launch, duration = step.launch_us * factor, step.duration_us * factor
        if launch:
            events.append({"name": f"launch {name}", "ph": "X", "ts": now, "dur": launch,
                           "pid": HOST_PID, "tid": 0, "cat": "launch"})
            now += launch
        args = dict(step.args)
        if step.kind == "compute":
            for core in range(step.cores):
                events.append({"name": name, "ph": "X", "ts": now, "dur": duration,
                               "pid": DEVICE_PID, "tid": core, "cat": "kernel", "args": args})
            kernels.append(KernelRecord(name=name, time_us=duration, cores=step.cores,
                                        bound=args.get("bound", ""),
                                        bytes=args.get("bytes", 0), flops=args.get("flops", 0)))
        elif step.kind in ("d2h", "h2d"):
            events.append({"name": name, "ph": "X", "ts": now, "dur": duration,
                           "pid": DEVICE_PID, "tid": DMA_TID, "cat": step.kind, "args": args})
        else:
            events.append({"name": name, "ph": "X", "ts": now, "dur": duration,
                           "pid": HOST_PID, "tid": 0, "cat": "fallback", "args": args})
        now += duration
    max_cores = max((s.cores for s in steps if s.kind == "compute"), default=0)
    trace = {"traceEvents": _meta_events(max_cores) + events, "displayTimeUnit": "ms",
             "otherData": {"generator": "spyre_sim", "version": 1}}
    return RunRecord(now, tuple(kernels), trace)
