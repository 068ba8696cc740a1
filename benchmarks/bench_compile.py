"""Compile family: cold compile time of a whole program, and of each of the eight stages alone.

The clock is the CPU time of the benchmark process (`time.process_time`). Compiling is
single-threaded Python (one intra-op thread, no I/O), so on an idle machine CPU time equals
wall time; on a shared one, wall time mostly measures the neighbours. Measured with 3 busy
processes on the 2 cores: an attention compile took 5x longer in wall time, 1.3x in CPU time.
CPU time is not immune (a neighbour still competes for caches and the core's other hardware
thread), which is why docs/benchmarks.md says how to confirm a flagged compile result.

"Cold" means the in-process steady state, not a fresh interpreter. Before every sample, setup
resets Dynamo's caches (`torch._dynamo.reset()`), so the timed call recompiles everything; but
the process has already paid its one-time costs: the imports, and one discarded warm-up sample
(`warmup_time`) whose compile triggers torch's lazy imports (70 modules) and first-use
initialisation. No in-process reset brings those back: the first attention compile of a
process took 0.30 s, the next ones 0.11 s. asv's `timeraw_` could time a first compile, but
would pay a torch import (3.5-3.8 s here) per sample.

asv_runner 0.3 runs setup before every sample (number = 1 here), which is what makes each
sample cold: the total-compile setup resets Dynamo, and the per-stage setup builds fresh
input artifacts by running the earlier stages again (on one capture per process, which they
only read).
"""

from __future__ import annotations

import time

from benchmarks import prepare, workloads
from benchmarks.prepare import spyre_sim

# Workload width for the per-stage family. Stage 1 is timed with `spyre_sim.capture`, which
# executes the captured graphs once in eager fp32; at the default width of 4096 that forward
# pass (about 100 ms for mlp at seq 128) would hide Dynamo's own 50 ms. At 1024 it is ~10%.
STAGE_WIDTH = 1024


class CompileTotal:
    """`spyre_sim.compile` of a whole workload (all eight stages) at its default width."""

    # Seq barely moves a total dominated by Dynamo (1024 adds 4-20%), so the budget goes to
    # covering every workload at the 127/128 pair rather than to longer sequences.
    params = (prepare.grid(list(workloads.SUITE), ["mlp"]), prepare.grid([127, 128], [128]))
    param_names = ("workload", "seq")
    timer = staticmethod(time.process_time)
    number = 1  # one compile per sample, each after its own cache reset
    # 10 samples per commit (>= 6 for MWU) in two rounds (prepare.CLOCK_ROUNDS)
    repeat = (5, 5, 30.0)
    rounds = prepare.CLOCK_ROUNDS
    warmup_time = 0.001  # exactly one discarded compile: lazy imports, first-use init
    timeout = 180
    version = "compile-total-1"

    def setup(self, workload: str, seq: int) -> None:
        prepare.require("compile", "Config")
        prepare.steady_process()
        self.fn, self.inputs = prepare.workload(workload, seq)
        prepare.reset_compile_caches()

    def time_compile(self, workload: str, seq: int) -> None:
        spyre_sim.compile(self.fn, self.inputs)


class CompileStage:
    """One compile stage alone, on fresh artifacts of the stages before it (width 1024).

    "dynamo" times `spyre_sim.capture` (Dynamo + AOTAutograd, plus the one eager forward
    that capture runs); every other stage times `spyre_sim.run_stage` over each captured graph.
    """

    params = (prepare.grid(list(prepare.STAGES), ["decompose", "lower", "layout", "kernel"]),
              prepare.grid(["mlp", "attention"], ["attention"]), prepare.grid([127, 128], [128]))
    param_names = ("stage", "workload", "seq")
    timer = staticmethod(time.process_time)
    number = 1  # setup prepares fresh input artifacts before each sample
    repeat = (5, 5, 30.0)  # 10 samples per commit in two rounds (prepare.CLOCK_ROUNDS)
    rounds = prepare.CLOCK_ROUNDS
    warmup_time = 0.001  # one discarded sample
    timeout = 180
    version = "compile-stage-1"

    def setup(self, stage: str, workload: str, seq: int) -> None:
        prepare.require("capture", "run_stage", "Config")
        prepare.require_stage(stage)
        prepare.steady_process()
        self.fn, self.inputs = prepare.workload(workload, seq, STAGE_WIDTH)
        if stage == "dynamo":
            self.artifacts = []
        else:
            self.artifacts = prepare.artifacts_before(stage, workload, seq, STAGE_WIDTH)
        self.config = spyre_sim.Config()
        prepare.reset_compile_caches()

    def time_stage(self, stage: str, workload: str, seq: int) -> None:
        if stage == "dynamo":
            spyre_sim.capture(self.fn, self.inputs)
            return
        for artifact in self.artifacts:
            spyre_sim.run_stage(stage, artifact, self.config)
