"""Host wall time of a warm call of the compiled CPU code: a real clock, noisy on a shared
machine, which is what spyre-regress's statistics are for (its `host_time` metric matches
`HostTime.`)."""

from __future__ import annotations

import torch

from benchmarks import compiled, workloads


class ExecuteHostTime:
    params = (list(workloads.SUITE), list(workloads.SEQ_LENGTHS))
    param_names = ("workload", "seq")
    number = 5  # calls per sample: each takes a few milliseconds
    repeat = (20, 20, 60.0)
    warmup_time = 0.2
    timeout = 300
    version = "execute-host-1"

    def setup(self, workload: str, seq: int) -> None:
        _, self.function, self.inputs = compiled.compile_workload(workload, seq)

    def time_call(self, workload: str, seq: int) -> None:
        with torch.no_grad():
            self.function(*self.inputs)
