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

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

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


# A directory for measured grids keyed by everything their counts depend on, or "off".
CACHE_ENV = "SPYRE_REGRESS_COMPILE_WORK_CACHE"


def cache_dir() -> Path | None:
    """Where measured grids are kept: $SPYRE_REGRESS_COMPILE_WORK_CACHE, else the user's cache
    directory; None when the variable says "off"."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen == "off":
        return None
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(chosen) if chosen else base / "spyre-regress" / "compile-work"


def cache_key(points: list) -> str | None:
    """A digest of what the grid's counts depend on: the source files of the spyre_sim that
    this interpreter imports (the commit under test, as asv installs it), the measuring code
    (compile_work.py, workloads.py), every installed distribution's version, the interpreter,
    valgrind's version, the machine and the grid itself. None when spyre_sim is absent."""
    spec = importlib.util.find_spec("spyre_sim")
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        valgrind = subprocess.run(["valgrind", "--version"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        valgrind = None
    digest = hashlib.sha256(json.dumps({
        "format": compile_work.COMPILE_WORK_VERSION, "points": points, "valgrind": valgrind,
        "instrument": compile_work.default_instrument(), "python": sys.version,
        "machine": platform.machine(),
        "distributions": sorted(f"{d.metadata['Name']}=={d.version}"
                                for d in importlib.metadata.distributions())}).encode())
    package = Path(next(iter(spec.submodule_search_locations)))
    sources = [(f"spyre_sim/{path.relative_to(package)}", path)
               for path in sorted(package.rglob("*"))
               if path.is_file() and "__pycache__" not in path.parts]
    sources += [(name, Path(compile_work.__file__).with_name(name))
                for name in ("compile_work.py", "workloads.py")]
    for name, path in sources:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def measure_cached(points: list) -> compile_work.Measurement:
    """`compile_work.measure` of the grid, or the measurement kept under the same cache key.

    Counts are deterministic given what the key covers, so measuring an unchanged compiler
    again (main in every `asv continuous main HEAD`, both sides of a docs-only change) would
    spend ~2 min of valgrind per commit on the same numbers."""
    where, key = cache_dir(), None
    if where is not None:
        key = cache_key(points)
    kept = where / f"{key}.json" if where is not None and key else None
    if kept is not None and kept.exists():
        try:
            return compile_work.Measurement.from_json(json.loads(kept.read_text()))
        except (ValueError, KeyError, compile_work.CompileWorkError):
            pass  # unreadable or from another format version: measure again
    measured = compile_work.measure(points, timeout=MEASURE_TIMEOUT_S)
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(measured.to_json()))
        partial.replace(kept)  # atomic: a concurrent reader sees all of it or nothing
    return measured


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
            measured = measure_cached(grid_points())
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
