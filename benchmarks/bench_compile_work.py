"""Compile-work family: instructions executed by each compile stage, counted under callgrind.

The clock families time a stage in milliseconds, and on a shared machine their samples spread
by several percent; the number of instructions a stage executes does not depend on the
neighbours. `compile_work.measure` counts them for the whole grid in two valgrind processes
side by side per commit (`setup_cache`), and each benchmark process only looks its value up,
as the numerics family does. The values are `track_` values (one per commit; lower is
better), near-deterministic: docs/benchmarks.md gives their measured spread and cost.

Every point uses width 1024 (bench_compile.STAGE_WIDTH, the per-stage clock family's width):
the stages' work depends on the graph, not on the weights, and building 4096-wide weights
under valgrind would cost seconds per point. Without valgrind the family is skipped
(NotImplementedError) with a message that says how to install it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from benchmarks import compile_work, kept, prepare, workloads
from benchmarks.bench_compile import STAGE_WIDTH

WORKLOAD_NAMES = prepare.grid(list(workloads.SUITE), ["attention"])
SEQ_LENGTHS = prepare.grid([127, 128], [128])
# The grid's valgrind processes run side by side, each ~20 s of uninstrumented imports, then
# its share (docs/benchmarks.md); more wall time on a loaded machine.
MEASURE_TIMEOUT_S = 1740
# The grid is counted in two processes, one per core of the 2-core machines this suite is
# sized for; a fixed number, not the machine's core count, because counts depend on what ran
# before them in their process, so the deal must not change from one machine to the next.
SHARES = 2
# Instructions counted per point (millions, its eight stages summed, measured here): they
# only balance the shares, so they need not be exact or current.
WORKLOAD_WEIGHTS = {"linear": 190, "mlp": 267, "attention": 495, "rmsnorm": 211,
                    "layernorm": 189, "softmax": 125, "embedding": 228}


def grid_points() -> list[tuple[str, int, int]]:
    """The measured points, in grid order (`compile_work.shares_of` splits them into shares)."""
    return [(name, seq, STAGE_WIDTH) for name in WORKLOAD_NAMES for seq in SEQ_LENGTHS]


def grid_shares(points: list) -> list[list]:
    """The points each process counts, in the order it counts them."""
    return compile_work.shares_of(points, SHARES, WORKLOAD_WEIGHTS)


def cache_key(points: list) -> str | None:
    """A digest of what the grid's counts depend on (`kept.digest`): the compiler's sources,
    the measuring code (compile_work.py, its child and manifest, workloads.py), valgrind's
    version, the way the grid is dealt into processes and what they import first. None when
    spyre_sim is absent."""
    try:
        valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        valgrind = None
    here = Path(compile_work.__file__)
    return kept.digest({"format": compile_work.COMPILE_WORK_VERSION,
                        "shares": grid_shares(points), "preload": prepare.LAZY_TORCH_MODULES,
                        "valgrind": valgrind, "instrument": compile_work.default_instrument()},
                       [here, compile_work.CHILD, compile_work.EXCHANGE,
                        here.with_name("workloads.py")])


def measure_grid(points: list, shares: int = SHARES, **options) -> compile_work.Measurement:
    """`compile_work.measure` of the grid as the family counts it: dealt into `SHARES`
    processes, torch's lazily imported modules imported before anything is instrumented."""
    return compile_work.measure(points, timeout=MEASURE_TIMEOUT_S, shares=shares,
                                weights=WORKLOAD_WEIGHTS, preload=prepare.LAZY_TORCH_MODULES,
                                **options)


def measure_cached(points: list) -> compile_work.Measurement:
    """`measure_grid`, or the measurement kept under the same cache key (`kept`): an
    unchanged compiler (main in every `asv continuous main HEAD`, both sides of a docs-only
    change) would otherwise spend a valgrind run per commit on the same numbers."""
    return kept.kept("compile-work", cache_key(points), lambda: measure_grid(points),
                     compile_work.Measurement.to_json, decode=compile_work.Measurement.from_json)


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
    version = "compile-work-2"  # 2: counted in two processes after every warm-up (docs)

    def setup_cache(self) -> dict:
        try:
            measured = measure_cached(grid_points())
        except compile_work.ValgrindUnavailable as missing:
            return {"missing": str(missing)}
        return lookup_table(measured)

    prepare.asv_attributes(setup_cache, timeout=MEASURE_TIMEOUT_S + 60)

    def setup(self, values: dict, workload: str, seq: int, stage: str) -> None:
        if "missing" in values:
            raise NotImplementedError(values["missing"])
        if (workload, seq) in values:
            raise RuntimeError(f"{workload} at seq {seq} failed: {values[workload, seq]}")
        if (workload, seq, stage) not in values:
            raise NotImplementedError(f"stage {stage!r} is not in spyre_sim.STAGES here")

    def track_instructions(self, values: dict, workload: str, seq: int, stage: str) -> int:
        return values[workload, seq, stage]

    prepare.asv_attributes(track_instructions, unit="instructions")
