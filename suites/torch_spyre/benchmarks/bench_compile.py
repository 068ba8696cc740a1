"""Compile family: the CPU time of a cold torch-spyre compile, in all and per stage.

Stages are torch-spyre's pre-scheduling passes, named as it names them, and the rest of the
compile around them: Dynamo, AOT Autograd, the post-grad passes, lowering, scheduling and
codegen (the backend module's `STAGES`). A stage's time is its self time in the compile, so
the stages of a point add up to its total. torch-spyre logs its passes' times in whole
milliseconds; these are the process's CPU seconds, in the units of the reference workload
(`compiled.py`). A pass a commit lacks is skipped there (a pass added in a range starts its
series), a point that fails to compile fails every row with its classed error.

`CompileStage` and `CompileTotal` cover the workloads at both sizes; `CompileDepth*` the
graph-size axis (`stack_<n>`, one block repeated n times, at the smaller size), where a pass
that grows faster than the graph shows.
"""

from __future__ import annotations

from benchmarks import clocks, compiled, workloads


class RoundMeasured:
    """One sample per row and round, read from the compile of its point in that round
    (`compiled.sample`); the classes share their `setup_cache`, and with it the directory
    asv runs them in, where the measurements are kept."""

    timer = staticmethod(clocks.process_clock)
    number = 1
    repeat = (1, 1, 300.0)
    rounds = compiled.ROUNDS
    warmup_time = 0.0
    timeout = 300

    def setup_cache(self) -> int:
        """Nothing to compute: asv runs every class that shares this function in one
        directory, kept across rounds, where `compiled.sample` keeps the compiles. (The
        value, which asv hands every benchmark method first, only has to be there.)"""
        return compiled.MEASUREMENT_VERSION

    def take(self, name: str, seq: int, row: str) -> None:
        value = compiled.sample(name, seq, row)
        if value is None:
            raise NotImplementedError(f"{row.rpartition(':')[2]} is not a stage at this commit")
        self.value = value

    def report(self) -> None:
        clocks.advance(self.value)


compiled.load()


WORKLOADS = compiled.grid(list(workloads.SUITE), ["mlp", "swiglu"])
SEQ_LENGTHS = compiled.grid(list(workloads.SEQ_LENGTHS), [128])
STACKS = compiled.grid(list(workloads.STACKS), ["stack_1", "stack_2"])


class CompileTotal(RoundMeasured):
    params = (WORKLOADS, SEQ_LENGTHS)
    param_names = ("workload", "seq")
    version = "torch-spyre-compile-total-1"

    def setup(self, _: int, workload: str, seq: int) -> None:
        self.take(workload, seq, "total:total")

    def time_compile(self, _: int, workload: str, seq: int) -> None:
        self.report()


class CompileStage(RoundMeasured):
    params = (list(compiled.STAGES), WORKLOADS, SEQ_LENGTHS)
    param_names = ("stage", "workload", "seq")
    version = "torch-spyre-compile-stage-1"

    def setup(self, _: int, stage: str, workload: str, seq: int) -> None:
        self.take(workload, seq, f"stage:{stage}")

    def time_stage(self, _: int, stage: str, workload: str, seq: int) -> None:
        self.report()


class CompileDepthTotal(RoundMeasured):
    params = (STACKS, [workloads.SEQ_LENGTHS[0]])
    param_names = ("workload", "seq")
    version = "torch-spyre-compile-depth-total-1"

    def setup(self, _: int, workload: str, seq: int) -> None:
        self.take(workload, seq, "total:total")

    def time_compile(self, _: int, workload: str, seq: int) -> None:
        self.report()


class CompileDepthStage(RoundMeasured):
    params = (list(compiled.STAGES), STACKS, [workloads.SEQ_LENGTHS[0]])
    param_names = ("stage", "workload", "seq")
    version = "torch-spyre-compile-depth-stage-1"

    def setup(self, _: int, stage: str, workload: str, seq: int) -> None:
        self.take(workload, seq, f"stage:{stage}")

    def time_stage(self, _: int, stage: str, workload: str, seq: int) -> None:
        self.report()
