"""Stage bisection: where do a good and a bad build of the compiler first differ?

Pure functions over two stage captures (the stage-capture protocol of docs/reference/spyre_sim.md,
loaded by `records.captures.load_capture`) and two stage probes' answers: unified diffs of each
stage's canonical text, the first stage whose artifact differs, per-stage compile-time deltas,
per-kernel device-time deltas, and for numerical regressions the first stage whose executed
output drifts further from float64. When no artifact differs (a compile-time regression that
computes the same program more slowly), the stage that does the most extra work - instructions
where they were counted, else significant compile time - is the answer; for a regression in
another part of a compile's wall time (its children's CPU, its blocked time:
benchmarks/waits.py), the stage where that part grew most.
"""

from __future__ import annotations

import difflib
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from benchmarks import waits
from regressions import stats
from regressions.probing.protocol import Failed, KernelTime, StageAnswer

STAGE_REPORT_VERSION = 4  # 4: `wait_part`, and the `wait` basis
# What named the first divergent stage: its canonical artifact differs, or (no artifact
# differs) it executes more instructions, or it got significantly slower on the clock, or
# the part of its wall time the regression is in (`wait_part`) grew significantly, or the
# bad build's compile raised in it.
Basis = Literal["artifact", "instructions", "compile_clock", "wait", "compile_error"]
COMPILE_RATIO_FLOOR = 1.5  # a stage must get at least this much slower to be named
# Instruction counts repeat within 1% (docs/measurements/asv-suite.md); a stage that grew by 1% or
# more did more work, and when no artifact differs the one that added the most is named.
WORK_GROWTH_FLOOR = 0.01
COMPILE_P = 0.05
NUMERICS_TOLERANCE = 0.10  # bad's error more than 10% above good's at the same stage


@dataclass(frozen=True)
class Capture:
    stages: tuple[str, ...]
    texts: Mapping[str, str]
    wall_s: Mapping[str, float]
    log: str = ""


@dataclass(frozen=True, kw_only=True)
class StageDelta:
    stage: str
    changed: bool
    diff_lines: int  # added + removed lines
    compile_s_good: float
    compile_s_bad: float
    compile_ratio: float | None  # None: the good build took no measurable time
    compile_p: float | None
    instructions_good: int | None = None  # counted under callgrind, when valgrind is there
    instructions_bad: int | None = None

    @property
    def work_growth(self) -> float | None:
        """Relative growth of the stage's instruction count, bad against good."""
        if not self.instructions_good or self.instructions_bad is None:
            return None
        return self.instructions_bad / self.instructions_good - 1


@dataclass(frozen=True)
class KernelDelta:
    """One kernel at both builds: None where a build lacks it, or, `unmodelled`, where the
    backend's model could not time it (its name says why)."""

    name: str
    good_us: float | None
    bad_us: float | None
    unmodelled: bool = False

    @property
    def delta_us(self) -> float:
        return (self.bad_us or 0.0) - (self.good_us or 0.0)


@dataclass(kw_only=True)
class StageReport:
    good: str
    bad: str
    workload: str
    seq: int
    width: int | None  # the width the probe built the workload at
    first_divergent_stage: str | None
    basis: Basis | None
    stage_diff_lines: int
    diff: str
    stages: list[StageDelta]
    kernels: list[KernelDelta]
    device_time_us: dict[str, float | None]  # None: the backend has no device clock
    numerics_first_divergent_stage: str | None = None
    numerics: dict[str, dict[str, dict[str, float | None]]] = field(default_factory=dict)
    log_excerpt: str = ""
    # the median warm call's host seconds at each build, where the stage probe read the host
    # clock (the good build's value of a host-time metric, for the knob search)
    host_s: dict[str, float | None] = field(default_factory=dict)
    # the part of each stage's compile wall time `stages` compares (children_cpu, blocked);
    # None: each stage's compile seconds as its backend reports them (wall time)
    wait_part: str | None = None


def unified_diff(good: str, bad: str, stage: str) -> str:
    lines = difflib.unified_diff(good.splitlines(keepends=True), bad.splitlines(keepends=True),
                                 fromfile=f"good/{stage}", tofile=f"bad/{stage}", n=3)
    return "".join(lines)


def count_changed_lines(diff: str) -> int:
    return sum(1 for line in diff.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---")))


def compile_deltas(stages: Sequence[str], good_times: Sequence[Mapping[str, float]],
                   bad_times: Sequence[Mapping[str, float]],
                   diffs: Mapping[str, str]) -> list[StageDelta]:
    """Per stage: did the artifact change, by how many lines, and the compile-time change."""
    deltas = []
    for stage in stages:
        good = [t[stage] for t in good_times if stage in t]
        bad = [t[stage] for t in bad_times if stage in t]
        good_median = statistics.median(good) if good else 0.0
        bad_median = statistics.median(bad) if bad else 0.0
        ratio = bad_median / good_median if good_median > 0 else None
        p = stats.mann_whitney(good, bad).pvalue if len(good) >= 3 and len(bad) >= 3 else None
        diff = diffs.get(stage, "")
        deltas.append(StageDelta(stage=stage, changed=bool(diff),
                                 diff_lines=count_changed_lines(diff), compile_s_good=good_median,
                                 compile_s_bad=bad_median, compile_ratio=ratio, compile_p=p))
    return deltas


def kernel_deltas(good: Sequence[KernelTime], bad: Sequence[KernelTime]) -> list[KernelDelta]:
    """Kernels matched by name; the largest absolute change first."""
    good_by, bad_by = {k.name: k.time_us for k in good}, {k.name: k.time_us for k in bad}
    untimed = {k.name for k in (*good, *bad) if k.time_us is None}
    names = list(dict.fromkeys([*good_by, *bad_by]))
    deltas = [KernelDelta(n, good_by.get(n), bad_by.get(n), n in untimed) for n in names]
    return sorted(deltas, key=lambda d: -abs(d.delta_us))


def numerics_divergence(good: Mapping[str, Mapping[str, float | None]],
                        bad: Mapping[str, Mapping[str, float | None]],
                        metric: str = "rmse_ratio",
                        stages: Sequence[str] | None = None) -> str | None:
    """First executable stage (in `stages`' order, else the good build's) where the bad
    build's error exceeds the good build's by more than the tolerance (both measured against
    float64 on the same inputs); the stages that execute are the backend's to say."""
    for stage in stages if stages is not None else list(good):
        if stage in good and stage in bad:
            before, after = good[stage][metric], bad[stage][metric]
            if before is None or after is None:  # not measured at one build
                continue
            if after > before * (1 + NUMERICS_TOLERANCE) + 1e-12:
                return stage
    return None


def part_times(answer: StageAnswer, part: str) -> tuple[dict[str, float], ...]:
    """Per compile of a stage probe: each region's `part` of its wall time (the stage probe's
    `compile_waits`), in the shape `compile_deltas` reads."""
    return tuple({region: parts[part] for region, parts in compile.items() if part in parts}
                 for compile in answer.compile_waits)


def grown_part(deltas: Sequence[StageDelta], part: str) -> str | None:
    """The stage whose `part` of the compile's wall time grew the most, by at least the
    part's floor (a part under it reads as the floor in the benchmarks: waits.FLOORS) and
    significantly; None when none did."""
    grew = [d for d in deltas if d.compile_s_bad - d.compile_s_good >= waits.FLOORS[part]
            and d.compile_p is not None and d.compile_p < COMPILE_P]
    if not grew:
        return None
    return max(grew, key=lambda d: d.compile_s_bad - d.compile_s_good).stage


def with_instructions(deltas: Sequence[StageDelta],
                      instructions: Sequence[Mapping[str, int] | None] | None
                      ) -> list[StageDelta]:
    """The deltas with each stage's instruction counts at both builds, where counted."""
    good, bad = instructions or (None, None)
    return [replace(d, instructions_good=(good or {}).get(d.stage),
                    instructions_bad=(bad or {}).get(d.stage)) for d in deltas]


def counted(deltas: Sequence[StageDelta]) -> bool:
    """Whether every stage's instructions were counted at both builds."""
    return bool(deltas) and all(d.instructions_good is not None and
                                d.instructions_bad is not None for d in deltas)


def slowest_stage(deltas: Sequence[StageDelta]) -> tuple[str | None, Basis | None]:
    """When no artifact differs: the stage that did the most extra work (instruction counts,
    exact), else, only when instructions could not be counted, the one that added the most
    significant compile time (wall clock) beyond the machine's drift: with counts at hand, a
    stage whose work did not grow is not named for a clock that moved with the machine's load."""
    grew = [d for d in deltas if (d.work_growth or 0.0) >= WORK_GROWTH_FLOOR]
    if grew:
        # counted at both builds, or the work would not have grown
        return max(grew, key=lambda d: (d.instructions_bad or 0) - (d.instructions_good or 0)
                   ).stage, "instructions"
    if counted(deltas):
        return None, None
    drift = machine_drift(deltas)
    slower = [d for d in deltas if (d.compile_ratio or 0.0) >= COMPILE_RATIO_FLOOR * drift
              and d.compile_p is not None and d.compile_p < COMPILE_P]
    if slower:
        # the stage that added the most time beyond the machine's drift: a millisecond stage
        # can double from noise, and a 100 ms stage gains more from a busier machine than a
        # 5 ms stage does from doing its work three times
        return max(slower, key=lambda d: d.compile_s_bad - d.compile_s_good * drift).stage, \
            "compile_clock"
    return None, None


def machine_drift(deltas: Sequence[StageDelta]) -> float:
    """How much slower the machine ran the bad build's probe than the good build's: the median
    stage's compile-time ratio. The two probes run one after the other, so a neighbour that
    starts between them slows every stage alike; one regressed stage does not move the median
    of eight (a change that slows most stages alike has no single stage to name)."""
    ratios = [d.compile_ratio for d in deltas if d.compile_ratio is not None]
    return statistics.median(ratios) if ratios else 1.0


def work_unchanged(report: StageReport) -> bool:
    """No artifact differs and no stage executes measurably more instructions, with every
    stage counted: a compile-time rise between these builds is not the compiler's doing."""
    return report.first_divergent_stage is None and counted(report.stages)


def merged_stages(good: Sequence[str], bad: Sequence[str]) -> tuple[str, ...]:
    """Both builds' stages in pipeline order: the good build's, with a stage only the bad
    build has after the stage it follows there (a pass added between two commits)."""
    merged = list(good)
    for index, stage in enumerate(bad):
        if stage not in merged:
            before = next((s for s in reversed(bad[:index]) if s in merged), None)
            merged.insert(0 if before is None else merged.index(before) + 1, stage)
    return tuple(merged)


def text_at(capture: Capture, stage: str, order: Sequence[str]) -> str:
    """The capture's text of `stage`, or, where this build has no such stage (a pass added
    or removed between the builds), its text of the stage before it: what the program looked
    like at that point of this build's pipeline."""
    for earlier in reversed(order[:order.index(stage) + 1]):
        if earlier in capture.texts:
            return capture.texts[earlier]
    return ""


def bisect_stages(good_capture: Capture, bad_capture: Capture, good_probe: StageAnswer,
                  bad_probe: StageAnswer, good: str, bad: str, workload: str, seq: int,
                  width: int | None,
                  instructions: Sequence[Mapping[str, int] | None] | None = None,
                  wait_part: str | None = None) -> StageReport:
    """The two builds' stage report. `wait_part` (children_cpu, blocked): the regression is
    in that part of the compile's wall time, so the stages' compile figures compared are
    that part's, and with no artifact changed the stage it grew in is the one named."""
    stages = merged_stages(good_capture.stages, bad_capture.stages)
    diffs = {s: unified_diff(text_at(good_capture, s, stages), text_at(bad_capture, s, stages),
                             s)
             for s in stages}
    part = wait_part if wait_part != "cpu" else None  # the CPU: the stages' seconds
    good_times, bad_times = ((part_times(good_probe, part), part_times(bad_probe, part))
                             if part else (good_probe.compile_times, bad_probe.compile_times))
    deltas = with_instructions(compile_deltas(stages, good_times, bad_times, diffs),
                               instructions)
    first = next((d.stage for d in deltas if d.changed), None)
    basis: Basis | None = "artifact" if first else None
    if first is None and part:
        first = grown_part(deltas, part)
        basis = "wait" if first else None
    elif first is None:
        first, basis = slowest_stage(deltas)
    diff = diffs[first] if first and basis == "artifact" else ""
    numerics_stage = numerics_divergence(good_probe.stage_errors, bad_probe.stage_errors,
                                         stages=stages)
    log_excerpt = _log_excerpt(bad_capture.log, first)
    return StageReport(
        good=good, bad=bad, workload=workload, seq=seq, width=width, first_divergent_stage=first,
        basis=basis, stage_diff_lines=count_changed_lines(diff), diff=diff, stages=deltas,
        kernels=kernel_deltas(good_probe.kernels, bad_probe.kernels),
        device_time_us={"good": good_probe.device_time_us, "bad": bad_probe.device_time_us},
        numerics_first_divergent_stage=numerics_stage,
        numerics={"good": {s: dict(e) for s, e in good_probe.stage_errors.items()},
                  "bad": {s: dict(e) for s, e in bad_probe.stage_errors.items()}},
        log_excerpt=log_excerpt, host_s={"good": good_probe.host_s, "bad": bad_probe.host_s},
        wait_part=part)


def failure_report(good_capture: Capture, good_probe: StageAnswer, failed: Failed, *,
                   good: str, bad: str, workload: str, seq: int) -> StageReport:
    """The bad build's compile fails: the stage it was raised in (where the compiler names
    one) is where the builds part, and its error is the evidence."""
    deltas = compile_deltas(good_capture.stages, good_probe.compile_times, (), {})
    return StageReport(
        good=good, bad=bad, workload=workload, seq=seq, width=good_probe.width,
        first_divergent_stage=failed.stage, basis="compile_error" if failed.stage else None,
        stage_diff_lines=0, diff="", stages=deltas, kernels=[],
        device_time_us={"good": good_probe.device_time_us, "bad": None},
        log_excerpt=failed.detail)


def _log_excerpt(log: str, stage: str | None, limit: int = 40) -> str:
    """The bad build's compile log lines from the divergent stage's logger (a logger named
    `<compiler>.<stage>`, as spyre_sim's are)."""
    if not stage:
        return ""
    lines = [line for line in log.splitlines()
             if line.split(" ", 1)[0].rsplit(".", 1)[-1] == stage]
    return "\n".join(lines[:limit])
