"""Numerics family: numerical error after each executable stage, against a float64 oracle.

For every workload (at the moderate widths of `workloads.NUMERICS_WIDTHS`) and stage in
EXECUTABLE_STAGES, the stage's artifact is executed (`Program.run_stage`; "runtime" runs the
compiled binary) and compared with `Program.reference` in float64:

- max abs error: max |out - ref| over all output elements;
- max rel error: max |out - ref| / max |ref| (relative to the output's scale, so elements
  near zero do not dominate);
- RMSE vs eager fp16: RMSE(out, ref) / RMSE(eager fp16, ref), where eager fp16 runs the same
  ATen graph rounding every op's result to fp16 (the idea of torch's `same()` oracle). About 1
  means "as accurate as fp16 eager"; a larger value is error the compiler added.

Values are deterministic, so these are `track_` benchmarks (lower is better): one value per
commit; asv applies `number`/`repeat`/`rounds`/`warmup_time` to `time_` benchmarks only and
flags a change by its ratio alone (`-f`, 1.1 by default). The whole grid is computed once per
commit in `setup_cache` (one process); each benchmark process only looks its value up.
"""

from __future__ import annotations

import torch

from benchmarks import prepare, workloads
from benchmarks.prepare import spyre_sim

WORKLOAD_NAMES = prepare.grid(list(workloads.SUITE), ["layernorm"])
SEQ_LENGTHS = prepare.grid([127, 128], [128])


def _flatten(outputs) -> torch.Tensor:
    return torch.cat([o.detach().double().flatten() for o in outputs if o.is_floating_point()])


def _rmse(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out - ref).pow(2).mean().sqrt())


def stage_errors(workload: str, seq: int, stages) -> dict[str, dict[str, float]]:
    """Error metrics of each stage's output for one workload, keyed by stage."""
    fn, inputs = workloads.build(workload, seq, workloads.NUMERICS_WIDTHS[workload])
    program = spyre_sim.compile(fn, inputs)
    reference = _flatten(program.reference(*inputs))
    eager_fp16_rmse = _rmse(_flatten(program.reference(*inputs, dtype=torch.float16)), reference)
    scale = float(reference.abs().max())
    errors = {}
    for stage in stages:
        out = _flatten(program.run_stage(stage, *inputs))
        max_abs = float((out - reference).abs().max())
        rmse = _rmse(out, reference)
        errors[stage] = {
            "max_abs": max_abs,
            "max_rel": max_abs / scale if scale else max_abs,
            "rmse_vs_eager_fp16": rmse / eager_fp16_rmse if eager_fp16_rmse else
            (1.0 if rmse == 0 else float("inf")),
        }
    return errors


class NumericsStageError:
    """Per-stage error against float64, for every workload at seq 127 and 128."""

    params = (WORKLOAD_NAMES, SEQ_LENGTHS,
              prepare.grid(list(prepare.EXECUTABLE_STAGES), ["decompose", "kernel", "runtime"]))
    param_names = ("workload", "seq", "stage")
    timeout = 120  # per lookup process
    version = "numerics-stage-1"

    def setup_cache(self) -> dict:
        """Every (workload, seq, stage) value, or the error that stopped a workload."""
        try:
            prepare.require("compile", "Config", "Program.run_stage", "Program.reference",
                            "EXECUTABLE_STAGES")
        except NotImplementedError as missing:
            return {"missing": str(missing)}
        prepare.steady_process()
        stages = [s for s in prepare.EXECUTABLE_STAGES if s in spyre_sim.EXECUTABLE_STAGES]
        values: dict = {}
        for workload in WORKLOAD_NAMES:
            for seq in SEQ_LENGTHS:
                try:
                    per_stage = stage_errors(workload, seq, stages)
                except Exception as error:  # re-raised by that workload's setup
                    values[workload, seq] = f"{type(error).__name__}: {error}"
                    continue
                for stage, metrics in per_stage.items():
                    values[workload, seq, stage] = metrics
        return values

    setup_cache.timeout = 600  # the whole grid: ~14 compiles and references

    def setup(self, values: dict, workload: str, seq: int, stage: str) -> None:
        if "missing" in values:
            raise NotImplementedError(values["missing"])
        if (workload, seq) in values:
            raise RuntimeError(f"{workload} at seq {seq} failed: {values[workload, seq]}")
        if (workload, seq, stage) not in values:
            raise NotImplementedError(f"stage {stage!r} is not executable at this commit")

    def track_max_abs_error(self, values: dict, workload: str, seq: int, stage: str) -> float:
        return values[workload, seq, stage]["max_abs"]

    track_max_abs_error.unit = "abs error"

    def track_max_rel_error(self, values: dict, workload: str, seq: int, stage: str) -> float:
        return values[workload, seq, stage]["max_rel"]

    track_max_rel_error.unit = "rel error"

    def track_rmse_vs_eager_fp16(self, values: dict, workload: str, seq: int,
                                 stage: str) -> float:
        return values[workload, seq, stage]["rmse_vs_eager_fp16"]

    track_rmse_vs_eager_fp16.unit = "x eager fp16"
