"""Compile-work family: instructions executed by each compile stage, counted under callgrind.

The clock families time a stage in milliseconds, and on a shared machine their samples spread
by several percent; the number of instructions a stage executes does not depend on the
neighbours. `compile_work.measure` counts them for the whole grid in one valgrind process per
commit (`setup_cache`), and each benchmark process only looks its value up, as the numerics
family does. The values are `track_` values (one per commit; lower is better), near-
deterministic: docs/benchmarks.md gives their measured spread and cost.

Every point uses width 1024 (bench_compile.STAGE_WIDTH, the per-stage clock family's width):
the stages' work depends on the graph, not on the weights, and building 4096-wide weights
under valgrind would cost seconds per point. Without valgrind the family is skipped
(NotImplementedError) with a message that says how to install it.
"""

from __future__ import annotations

from benchmarks import compile_work, prepare, workloads
from benchmarks.bench_compile import STAGE_WIDTH

WORKLOAD_NAMES = prepare.grid(list(workloads.SUITE), ["attention"])
SEQ_LENGTHS = prepare.grid([127, 128], [128])
# One valgrind process: ~20 s of uninstrumented imports plus ~7 s of CPU time per point
# (docs/benchmarks.md), and more wall time on a loaded machine.
MEASURE_TIMEOUT_S = 1740


def grid_points() -> list[tuple[str, int, int]]:
    """The measured points, in the order one valgrind process measures them."""
    return [(name, seq, STAGE_WIDTH) for name in WORKLOAD_NAMES for seq in SEQ_LENGTHS]


def lookup_table(measurement: compile_work.Measurement) -> dict:
    """`setup_cache`'s value: instructions by (workload, seq, stage), failures by (workload,
    seq), plus the commit's stages; "missing" when nothing could be measured here."""
    if measurement.missing:
        return {"missing": measurement.missing}
    values: dict = {"stages": measurement.stages}
    for (name, seq, _), error in measurement.errors.items():
        values[name, seq] = error
    for (name, seq, _), per_stage in measurement.counts.items():
        for stage, instructions in per_stage.items():
            values[name, seq, stage] = instructions
    return values


class CompileWork:
    """Instructions per compile stage ("dynamo" = `spyre_sim.capture`, the others
    `spyre_sim.run_stage` over each captured graph), for every workload at seq 127 and 128."""

    params = (WORKLOAD_NAMES, SEQ_LENGTHS, list(prepare.STAGES))
    param_names = ("workload", "seq", "stage")
    timeout = 60  # per lookup process
    version = "compile-work-1"

    def setup_cache(self) -> dict:
        try:
            measured = compile_work.measure(grid_points(), timeout=MEASURE_TIMEOUT_S)
        except compile_work.ValgrindUnavailable as missing:
            return {"missing": str(missing)}
        return lookup_table(measured)

    setup_cache.timeout = MEASURE_TIMEOUT_S + 60

    def setup(self, values: dict, workload: str, seq: int, stage: str) -> None:
        if "missing" in values:
            raise NotImplementedError(values["missing"])
        if (workload, seq) in values:
            raise RuntimeError(f"{workload} at seq {seq} failed: {values[workload, seq]}")
        if (workload, seq, stage) not in values:
            raise NotImplementedError(f"stage {stage!r} is not in spyre_sim.STAGES here")

    def track_instructions(self, values: dict, workload: str, seq: int, stage: str) -> int:
        return values[workload, seq, stage]

    track_instructions.unit = "instructions"
