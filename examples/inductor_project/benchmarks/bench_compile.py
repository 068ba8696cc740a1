"""CPU time of one cold compile of the workload with the project's backend (Dynamo, AOT
Autograd, Inductor's passes, scheduling, code generation; the C++ build of an unchanged kernel
is a cache hit). Each process compiles once untimed first: torch's lazy imports and first-use
setup are not the compiler's work."""

from __future__ import annotations

import time

import torch

from benchmarks import compiled, workloads


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
