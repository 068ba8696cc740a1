"""Compile-work family: instructions each stage of a torch-spyre compile executes, counted
under valgrind's callgrind on a subset of the grid.

The compile family's clocks spread by several percent on a shared machine; instruction counts
repeat. Counting costs about 30 times the compile (valgrind), so only `POINTS` are counted,
once per commit in `setup_cache` (`compile_work.py`, the tool's own parent and child, with
the backend module's `compile_in_regions`: a stage interrupted by others, as codegen is by
the passes it calls, is counted slice by slice and summed); each benchmark process looks its
value up. Without valgrind the family is skipped with a message saying how to install it.
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import compile_work, compiled

# The counted subset: one MLP (the common case) and two blocks of the graph-size axis (a pass
# that grows with the graph grows here first), at the smaller size.
WORKLOADS = tuple(compiled.grid(["mlp", "stack_2"], ["mlp"]))
SEQ_LENGTHS = (128,)
POINTS = tuple((name, seq, None) for name in WORKLOADS for seq in SEQ_LENGTHS)
SHARES = 2  # one valgrind process per point, side by side on a 2-core machine
MEASURE_TIMEOUT_S = 1740
BACKEND = str(Path(compile_work.__file__).with_name("torch_spyre.py"))


def lookup_table(measurement: compile_work.Measurement) -> dict:
    """`setup_cache`'s value: instructions by (workload, seq, stage), failures by (workload,
    seq), or "missing" when nothing could be measured here."""
    if measurement.missing:
        return {"missing": measurement.missing}
    values: dict = {}
    for (name, seq, _), error in measurement.errors.items():
        values[name, seq] = error
    for (name, seq, _), per_stage in measurement.counts.items():
        for stage, instructions in per_stage.items():
            values[name, seq, stage] = instructions
    return values


class CompileWork:
    """Instructions per stage of one compile of each counted point."""

    params = (list(WORKLOADS), list(SEQ_LENGTHS), list(compiled.STAGES))
    param_names = ("workload", "seq", "stage")
    timeout = 60  # per lookup process
    version = "torch-spyre-compile-work-1"

    def setup_cache(self) -> dict:
        try:
            measured = compile_work.measure(list(POINTS), timeout=MEASURE_TIMEOUT_S,
                                            shares=SHARES, backend=BACKEND)
        except compile_work.ValgrindUnavailable as missing:
            return {"missing": str(missing)}
        return lookup_table(measured)

    setup_cache.timeout = MEASURE_TIMEOUT_S + 60  # type: ignore[attr-defined]

    def setup(self, values: dict, workload: str, seq: int, stage: str) -> None:
        if "missing" in values:
            raise NotImplementedError(values["missing"])
        if (workload, seq) in values:
            raise RuntimeError(f"{workload} at seq {seq} failed: {values[workload, seq]}")
        if (workload, seq, stage) not in values:
            raise NotImplementedError(f"{stage} is not a stage at this commit")

    def track_instructions(self, values: dict, workload: str, seq: int, stage: str) -> int:
        return values[workload, seq, stage]

    track_instructions.unit = "instructions"  # type: ignore[attr-defined]
