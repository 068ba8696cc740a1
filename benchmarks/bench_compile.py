"""Compile family: cold compile time of a whole program, and of each of the eight stages alone.

A compile's wall time, what its user waits for, is judged in parts (benchmarks/waits.py), one
row each: `time_compile` / `time_stage` the CPU time of the measuring process
(`time.process_time`), `..._children_cpu` the CPU time of its child processes (a backend
compiler run as a subprocess), `..._blocked` the time it spent neither on a CPU nor waiting
for one (a sleep, a lock, a file, a child's I/O). Wall time itself mostly measures the
neighbours on a shared machine: with 3 busy processes on the 2 cores, an attention compile
took 5x longer in wall time and 1.3x in CPU time, and the difference was run-queue wait,
which no row judges. A part below its floor (`waits.FLOORS`) reads as the floor.

Each asv sample is one process (benchmarks/clocks.py): the benchmark process compiles once
and discards it, then forks a fresh process per sample, which times its compiles each between
two runs of a fixed reference workload and hands asv the median relative time, in seconds at
the reference's speed. Samples of one process are not independent draws of a host clock;
samples of separate processes are.

"Cold" means the in-process steady state, not a fresh interpreter. Before every timed compile
the process resets Dynamo's caches (`torch._dynamo.reset()`), so the timed call recompiles
everything; but it has already paid its one-time costs: the imports, and the benchmark
process's discarded compile, whose lazy imports (70 modules) and first-use initialisation the
forked processes inherit. No in-process reset brings those back: the first attention compile
of a process took 0.30 s, the next ones 0.11 s. asv's `timeraw_` could time a first compile,
but would pay a torch import (3.5-3.8 s here) per sample.

Only the stages that take long enough to be timed honestly have a clock row (`TIMED_STAGES`);
every stage's work is counted in instructions by the compile-work family, which carries the
gate for the short ones (docs/explanation/gate-sampling.md, "One sample, one process").
"""

from __future__ import annotations

import time

from benchmarks import clocks, prepare, workloads
from benchmarks.prepare import spyre_sim

# Workload width for the per-stage family. Stage 1 is timed with `spyre_sim.capture`, which
# executes the captured graphs once in eager fp32; at the default width of 4096 that forward
# pass (about 100 ms for mlp at seq 128) would hide Dynamo's own 50 ms. At 1024 it is ~10%.
STAGE_WIDTH = 1024
# The stages with a clock row. The others take 0.07-1.3 ms at width 1024 (lower, layout,
# runtime), where one process's sample still moved with the machine's state by more than the
# 10% asv's gate reads as a change (scripts/clock_spread.py, docs/measurements/premerge-gate.md).
TIMED_STAGES = ("dynamo", "decompose", "kernel", "sdsc", "backend")


class CompileTotal(clocks.ProcessSampled):
    """`spyre_sim.compile` of a whole workload (all eight stages) at its default width: its
    CPU time (`time_compile`), its children's CPU time and its blocked time."""

    # Seq barely moves a total dominated by Dynamo (127 and 128 within 5% of each other, 1024
    # adds 4-20%), so the budget goes to every workload at one length; the compile-work
    # family counts every stage at both 127 and 128.
    params = (prepare.grid(list(workloads.SUITE), ["mlp"]), [128])
    param_names = ("workload", "seq")
    clock = staticmethod(time.process_time)
    rounds = prepare.CLOCK_ROUNDS
    timeout = 300
    version = "compile-total-3"  # 3: one sample per benchmark process

    def setup(self, workload: str, seq: int) -> None:
        prepare.require("compile", "Config")
        prepare.steady_process()
        self.workload, self.seq = workload, seq

    def prepare_row(self) -> None:
        self.fn, self.inputs = prepare.workload(self.workload, self.seq)
        self.warm_up()

    def fresh(self) -> None:
        prepare.reset_compile_caches()

    def call(self) -> None:
        spyre_sim.compile(self.fn, self.inputs)

    def time_compile(self, workload: str, seq: int) -> None:
        self.part_sample("cpu", workload, seq)

    def time_compile_children_cpu(self, workload: str, seq: int) -> None:
        self.part_sample("children_cpu", workload, seq)

    def time_compile_blocked(self, workload: str, seq: int) -> None:
        self.part_sample("blocked", workload, seq)


class CompileStage(clocks.ProcessSampled):
    """One compile stage alone, on fresh artifacts of the stages before it (width 1024): its
    CPU time (`time_stage`), its children's CPU time and its blocked time.

    "dynamo" times `spyre_sim.capture` (Dynamo + AOTAutograd, plus the one eager forward
    that capture runs); every other stage times `spyre_sim.run_stage` over each captured graph.
    """

    params = (prepare.grid(list(TIMED_STAGES), ["decompose", "kernel"]),
              prepare.grid(["mlp", "attention"], ["attention"]), [128])
    param_names = ("stage", "workload", "seq")
    clock = staticmethod(time.process_time)
    rounds = prepare.CLOCK_ROUNDS
    timeout = 300
    version = "compile-stage-3"  # 3: one sample per benchmark process

    def setup(self, stage: str, workload: str, seq: int) -> None:
        prepare.require("capture", "run_stage", "Config")
        prepare.require_stage(stage)
        prepare.steady_process()
        self.stage, self.workload, self.seq = stage, workload, seq

    def prepare_row(self) -> None:
        self.fn, self.inputs = prepare.workload(self.workload, self.seq, STAGE_WIDTH)
        self.config = spyre_sim.Config()
        self.artifacts: list = []
        self.warm_up()

    def fresh(self) -> None:
        """Fresh input artifacts: the earlier stages run again, so the timed stage never sees
        an artifact an earlier call worked on; Dynamo's caches reset for a cold capture."""
        prepare.reset_compile_caches()
        if self.stage != "dynamo":
            self.artifacts = prepare.artifacts_before(self.stage, self.workload, self.seq,
                                                      STAGE_WIDTH)

    def call(self) -> None:
        if self.stage == "dynamo":
            spyre_sim.capture(self.fn, self.inputs)
            return
        for artifact in self.artifacts:
            spyre_sim.run_stage(self.stage, artifact, self.config)

    def time_stage(self, stage: str, workload: str, seq: int) -> None:
        self.part_sample("cpu", stage, workload, seq)

    def time_stage_children_cpu(self, stage: str, workload: str, seq: int) -> None:
        self.part_sample("children_cpu", stage, workload, seq)

    def time_stage_blocked(self, stage: str, workload: str, seq: int) -> None:
        self.part_sample("blocked", stage, workload, seq)
