"""Numerics family: numerical error after each executable stage, against a float64 oracle.

For every workload (at the moderate widths of `workloads.NUMERICS_WIDTHS`), every sequence
length of the execute family (decode 1 through 1024: accumulation error grows with the reduced
dimension, overflow with activation size) and every stage in EXECUTABLE_STAGES, the stage's
artifact is executed (`Program.run_stage`; "runtime" runs the compiled binary) and compared
with `Program.reference` in float64:

- max abs error: max |out - ref| over all output elements;
- max rel error: max |out - ref| / max |ref| (relative to the output's scale, so elements
  near zero do not dominate);
- RMSE vs eager DLFloat16: RMSE(out, ref) / RMSE(eager DLFloat16, ref), where eager DLFloat16
  runs the same ATen graph storing every op's result in DLFloat16, the device's own format
  (`Program.reference(..., dtype=spyre_sim.dlfloat16)`; the idea of torch's `same()`
  oracle). About 1 means "as accurate as eager in the device's format"; a larger value is
  error the compiler added. Its own class, so commits without DLFloat16 skip it.
- RMSE vs eager fp16: the same ratio against IEEE fp16 eager (kept for comparison with older
  figures; DLFloat16 has one fraction bit fewer, so a correct device sits near 2x here).

A stage whose run turned finite values into inf/NaN (`spyre_sim.NonFiniteWarning`) is a
failure naming the kernel, op and stage where it happened, not a number.

Values are deterministic, so these are `track_` benchmarks (lower is better): one value per
commit; asv applies `number`/`repeat`/`rounds`/`warmup_time` to `time_` benchmarks only and
flags a change by its ratio alone (`-f`, 1.1 by default). The whole grid is computed once per
commit in `setup_cache` (one process, shared by both classes: asv keys the cache by the
function's module and line); each benchmark process only looks its value up. A grid is kept
under a digest of the compiler's sources and this code (`kept`), so an unchanged compiler
(`main` in every `asv continuous main HEAD`) is not computed again.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import torch

from benchmarks import kept, prepare, workloads
from benchmarks.prepare import spyre_sim

WORKLOAD_NAMES = prepare.grid(list(workloads.SUITE), ["layernorm"])
SEQ_LENGTHS = prepare.grid(list(workloads.SEQ_LENGTHS), [128])


def _flatten(outputs) -> torch.Tensor:
    return torch.cat([o.detach().double().flatten() for o in outputs if o.is_floating_point()])


def _rmse(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out - ref).pow(2).mean().sqrt())


def _ratio(rmse: float, baseline: float) -> float:
    return rmse / baseline if baseline else (1.0 if rmse == 0 else float("inf"))


def _run_stage(program, stage: str, inputs) -> tuple[torch.Tensor, str | None]:
    """The stage's flattened outputs, and where it first produced inf/NaN (None if clean)."""
    warning_class = getattr(spyre_sim, "NonFiniteWarning", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = _flatten(program.run_stage(stage, *inputs))
    for warning in caught:
        if warning_class is not None and isinstance(warning.message, warning_class):
            return out, warning.message.location.describe()
    if not bool(torch.isfinite(out).all()):
        return out, "an unreported place (inf/NaN in the outputs)"
    return out, None


def stage_errors(workload: str, seq: int, stages) -> dict[str, dict]:
    """Error metrics of each stage's output for one workload, keyed by stage; a stage that
    produced inf/NaN from finite values maps to {"nonfinite": where}."""
    fn, inputs = workloads.build(workload, seq, workloads.NUMERICS_WIDTHS[workload])
    program = spyre_sim.compile(fn, inputs)
    reference = _flatten(program.reference(*inputs))
    baselines = {"rmse_vs_eager_fp16": torch.float16}
    if getattr(spyre_sim, "dlfloat16", None) is not None:
        baselines["rmse_vs_eager_dlfloat16"] = spyre_sim.dlfloat16
    baseline_rmse = {metric: _rmse(_flatten(program.reference(*inputs, dtype=dtype)), reference)
                     for metric, dtype in baselines.items()}
    scale = float(reference.abs().max())
    errors: dict[str, dict] = {}
    for stage in stages:
        out, nonfinite = _run_stage(program, stage, inputs)
        if nonfinite is not None:
            errors[stage] = {"nonfinite": nonfinite}
            continue
        max_abs = float((out - reference).abs().max())
        rmse = _rmse(out, reference)
        errors[stage] = {"max_abs": max_abs, "max_rel": max_abs / scale if scale else max_abs}
        errors[stage].update({metric: _ratio(rmse, baseline)
                              for metric, baseline in baseline_rmse.items()})
    return errors


def numerics_grid(workload_names, seq_lengths, stages) -> dict:
    """Every (workload, seq, stage) value, or the error that stopped a workload."""
    values: dict = {}
    for workload in workload_names:
        for seq in seq_lengths:
            try:
                per_stage = stage_errors(workload, seq, stages)
            except Exception as error:  # re-raised by that workload's setup
                values[workload, seq] = f"{type(error).__name__}: {error}"
                continue
            for stage, metrics in per_stage.items():
                values[workload, seq, stage] = metrics
    return values


NUMERICS_GRID_VERSION = 1  # the kept grid's JSON document


def grid_document(values: dict) -> dict:
    """The grid as JSON: one entry per (workload, seq, stage) value or (workload, seq)
    failure."""
    return {"version": NUMERICS_GRID_VERSION,
            "entries": [[*key, value] if len(key) == 3 else [*key, None, value]
                        for key, value in values.items()]}


def grid_values(document: dict) -> dict:
    if document.get("version") != NUMERICS_GRID_VERSION:
        raise ValueError(f"numerics grid version {document.get('version')!r}")
    return {(workload, seq, stage) if stage is not None else (workload, seq): value
            for workload, seq, stage, value in document["entries"]}


def kept_grid(workload_names, seq_lengths, stages) -> dict:
    """`numerics_grid`, or the grid kept for the same compiler sources and measuring code."""
    key = kept.digest({"format": NUMERICS_GRID_VERSION, "workloads": workload_names,
                       "seqs": seq_lengths, "stages": stages,
                       "widths": workloads.NUMERICS_WIDTHS},
                      [Path(__file__), Path(workloads.__file__)])
    return kept.kept("numerics", key,
                     lambda: numerics_grid(workload_names, seq_lengths, stages),
                     grid_document, decode=grid_values)


class _NumericsGrid:
    """The grid both numerics classes read: computed once per commit by `setup_cache`."""

    params = (WORKLOAD_NAMES, SEQ_LENGTHS,
              prepare.grid(list(prepare.EXECUTABLE_STAGES), ["decompose", "kernel", "runtime"]))
    param_names = ("workload", "seq", "stage")

    def setup_cache(self) -> dict:
        try:
            prepare.require("compile", "Config", "Program.run_stage", "Program.reference",
                            "EXECUTABLE_STAGES")
        except NotImplementedError as missing:
            return {"missing": str(missing)}
        prepare.steady_process()
        stages = [s for s in prepare.EXECUTABLE_STAGES if s in spyre_sim.EXECUTABLE_STAGES]
        return kept_grid(WORKLOAD_NAMES, SEQ_LENGTHS, stages)

    # the whole grid: 35 compiles and references (docs/benchmarks.md)
    prepare.asv_attributes(setup_cache, timeout=900)

    def setup(self, values: dict, workload: str, seq: int, stage: str) -> None:
        if "missing" in values:
            raise NotImplementedError(values["missing"])
        if (workload, seq) in values:
            raise RuntimeError(f"{workload} at seq {seq} failed: {values[workload, seq]}")
        if (workload, seq, stage) not in values:
            raise NotImplementedError(f"stage {stage!r} is not executable at this commit")
        where = values[workload, seq, stage].get("nonfinite")
        if where is not None:
            raise RuntimeError(f"{workload} at seq {seq}, stage {stage}: non-finite values "
                               f"(inf/NaN) first produced by {where}")


class NumericsStageError(_NumericsGrid):
    """Per-stage error against float64, for every workload and sequence length."""

    version = "numerics-stage-2"  # 2: the seq grid of the execute family; inf/NaN fails
    timeout = 120  # per lookup process

    def track_max_abs_error(self, values: dict, workload: str, seq: int, stage: str) -> float:
        return values[workload, seq, stage]["max_abs"]

    prepare.asv_attributes(track_max_abs_error, unit="abs error")

    def track_max_rel_error(self, values: dict, workload: str, seq: int, stage: str) -> float:
        return values[workload, seq, stage]["max_rel"]

    prepare.asv_attributes(track_max_rel_error, unit="rel error")

    def track_rmse_vs_eager_fp16(self, values: dict, workload: str, seq: int,
                                 stage: str) -> float:
        return values[workload, seq, stage]["rmse_vs_eager_fp16"]

    prepare.asv_attributes(track_rmse_vs_eager_fp16, unit="x eager fp16")


class NumericsStageErrorDLFloat16(_NumericsGrid):
    """Per-stage RMSE relative to eager DLFloat16, the device's own format (like with like)."""

    version = "numerics-dlfloat16-1"
    timeout = 120  # per lookup process

    def setup(self, values: dict, workload: str, seq: int, stage: str) -> None:
        super().setup(values, workload, seq, stage)
        if "rmse_vs_eager_dlfloat16" not in values[workload, seq, stage]:
            raise NotImplementedError("spyre_sim.dlfloat16 is missing at this commit")

    def track_rmse_vs_eager_dlfloat16(self, values: dict, workload: str, seq: int,
                                      stage: str) -> float:
        return values[workload, seq, stage]["rmse_vs_eager_dlfloat16"]

    prepare.asv_attributes(track_rmse_vs_eager_dlfloat16, unit="x eager dlfloat16")
