"""Numerical error of the compiled output against the program run in float64: max |out - ref|
/ max |ref|, the definition spyre-regress's reports use (its `numerics` metric and the
`max_rel` error). Deterministic: fixed seeds, one thread."""

from __future__ import annotations

import copy

import torch

from benchmarks import compiled, workloads


def max_rel_error(workload: str, seq: int) -> float:
    program, function, inputs = compiled.compile_workload(
        workload, seq, workloads.NUMERICS_WIDTHS[workload])
    with torch.no_grad():
        output = function(*inputs).double()
        reference = copy.deepcopy(program).double()(*(x.double() for x in inputs))
    return ((output - reference).abs().max() / reference.abs().max()).item()


class Numerics:
    params = (list(workloads.SUITE), list(workloads.SEQ_LENGTHS))
    param_names = ("workload", "seq")
    unit = "relative error"
    timeout = 300
    version = "numerics-1"

    def track_max_rel_error(self, workload: str, seq: int) -> float:
        return max_rel_error(workload, seq)
