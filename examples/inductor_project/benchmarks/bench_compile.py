"""Cold compiles with the project's backend. `Compile`: the CPU time of one cold compile
(Dynamo, AOT Autograd, Inductor's passes, scheduling, code generation; the C++ build of an
unchanged kernel is a cache hit). Each process compiles once untimed first: torch's lazy
imports and first-use setup are not the compiler's work.

`CompileWithBuild`: the same cold compile with Inductor's C++ kernel cache fresh for every
timed compile, so the C++ compiler builds each kernel again, as a user's first compile of a
new kernel does; its wall time judged in parts, one row each (spyre-regress's
benchmarks/waits.py, copied in `measuring/`): the process's CPU (`time_compile`), its child
processes' CPU (`time_compile_children_cpu`: the C++ compiler, g++, run as a subprocess) and
its blocked time (`time_compile_blocked`). One sample per benchmark process, in seven rounds
(spyre-regress's benchmarks/clocks.py).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import torch

from benchmarks import compiled, workloads
from benchmarks.measuring import clocks

# Rounds of the per-process samples: seven a side is the fewest with which asv's
# Mann-Whitney test can reach its p < 0.002 (spyre-regress's
# docs/explanation/gate-sampling.md).
CLOCK_ROUNDS = 7


class Compile:
    params = (list(workloads.SUITE), list(workloads.SEQ_LENGTHS))
    param_names = ("workload", "seq")
    timer = staticmethod(time.process_time)
    number = 1  # one compile per sample, each after its own cache reset
    repeat = (10, 10, 120.0)
    warmup_time = 0.0
    timeout = 300
    version = "compile-1"

    def setup(self, workload: str, seq: int) -> None:
        compiled.compile_workload(workload, seq)  # once per process: the warm-up compile
        self.program, self.inputs = workloads.build(workload, seq)
        torch._dynamo.reset()

    def time_compile(self, workload: str, seq: int) -> None:
        from torch._inductor import config

        function = torch.compile(self.program, backend=compiled.backend().compile_with_defaults,
                                 dynamic=False)
        with config.patch(compiled.NO_FX_CACHE), torch.no_grad():
            function(*self.inputs)


class CompileWithBuild(clocks.ProcessSampled):
    """A cold compile whose C++ build is not a cache hit (the MLP: one C++ build of its
    kernels, ~1.3 s of the C++ compiler's CPU on a 2-core machine, against ~0.25 s of the
    process's own)."""

    params = (["mlp"], list(workloads.SEQ_LENGTHS))
    param_names = ("workload", "seq")
    clock = staticmethod(time.process_time)
    rounds = CLOCK_ROUNDS
    timeout = 300
    version = "compile-with-build-1"
    # No discarded compile in the forked process: a compile with its C++ build takes ~1.5 s,
    # against which the first call's copied pages (a few ms) do not show.
    discarded_calls = 0

    def setup(self, workload: str, seq: int) -> None:
        self.workload, self.seq = workload, seq
        self.root: str | None = None

    def prepare_row(self) -> None:
        from torch._inductor import config

        # The C++ builds run in this process's subprocesses, not in Inductor's compile
        # workers: a process forked from one that started a worker pool would wait on
        # workers it does not have.
        config.compile_threads = 1
        compiled.compile_workload(self.workload, self.seq)  # first-use costs
        self.program, self.inputs = workloads.build(self.workload, self.seq)
        self.root = tempfile.mkdtemp(prefix="inductor-build-")
        self.warm_up()  # one compile with a C++ build: its first-use costs too

    def fresh(self) -> None:
        """A fresh, empty kernel cache (a folder of its own under `root`) and Inductor's
        in-memory code caches cleared, so the next compile builds every kernel."""
        from torch._inductor.utils import clear_caches

        torch._dynamo.reset()
        clear_caches()
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(dir=self.root)

    def call(self) -> None:
        from torch._inductor import config

        function = torch.compile(self.program, backend=compiled.backend().compile_with_defaults,
                                 dynamic=False)
        with config.patch(compiled.NO_FX_CACHE), torch.no_grad():
            function(*self.inputs)

    def teardown(self, workload: str, seq: int) -> None:
        if self.root:
            shutil.rmtree(self.root, ignore_errors=True)

    def time_compile(self, workload: str, seq: int) -> None:
        self.part_sample("cpu", workload, seq)

    def time_compile_children_cpu(self, workload: str, seq: int) -> None:
        self.part_sample("children_cpu", workload, seq)

    def time_compile_blocked(self, workload: str, seq: int) -> None:
        self.part_sample("blocked", workload, seq)
