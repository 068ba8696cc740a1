"""What the benchmarks of this suite share: torch-spyre through spyre-regress's backend module
(`torch_spyre.py` beside this file), and one compile of a grid point per round, timed in a
fresh process, that every row of the point reads.

A compile's stages are timed together (`Timeline` in the backend module charges each moment
to the innermost running stage): with a process per row, a point would be compiled once per
stage, 27 times a round. So the first row of a point in a round compiles it, in a process
forked for that (after one discarded compile there: a forked process's first writes copy the
pages it shares with its parent), between two runs of the reference workload (`clocks.py`:
the machine's momentary speed cancels), and writes every stage's CPU seconds, in the
reference's units, to a file in asv's `setup_cache` directory, which asv keeps for every
class of the suite across the rounds of a run; the point's other rows read it. A row's k-th
sample is the point's k-th compile: one independent process per sample, as with the other
host clocks of spyre-regress (its docs/benchmarks.md, "Clocks and noise"). The same compile's
device program, priced by spyre_sim's timing model after it was timed, is what the device-time
rows read (bench_execute): device time costs no compile of its own.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks import clocks, workloads
from benchmarks import torch_spyre as backend

MEASUREMENT_VERSION = 2  # the per-point files in asv's setup_cache directory (2: device)
ROUNDS = 3  # samples per row and commit: three compiles of each point
# SPYRE_REGRESS_GRID=demo picks a small grid (the end-to-end tests'; asv passes the
# environment on to discovery and to every benchmark process), as spyre-regress's own suite.
GRID = os.environ.get("SPYRE_REGRESS_GRID", "full")


def grid(full: list, demo: list) -> list:
    """A parameter list: the full one, or the small one under SPYRE_REGRESS_GRID=demo."""
    return demo if GRID == "demo" else full
# Every pass of torch-spyre's CustomPreSchedulingPasses from torch 2.13's upgrade (#3374) to
# 2026-08-20, in pipeline order; a pass of the installed checkout that is not listed here is
# added after them, so a newer checkout's passes have rows too.
KNOWN_PASSES = (
    "deadcode_elimination", "propagate_named_dims", "validate_named_dims", "assign_dim_hints",
    "_maybe_reorder_unhinted_interlopers", "_maybe_coarse_tile_hints", "split_multi_ops",
    "propagate_spyre_tensor_layouts", "validate_ops", "optimize_restickify_locations",
    "finalize_layouts", "insert_restickify", "enforce_indirect_access_layout",
    "insert_post_mutation_restickify", "insert_bmm_padding", "dedup_and_promote_constants",
    "_maybe_coarse_tile_span_overflow", "span_reduction", "_distribute_work",
    "_maybe_scratchpad_planning")
PASSES = KNOWN_PASSES + tuple(p for p in backend.checkout_passes() if p not in KNOWN_PASSES)
STAGES = (*backend.HEAD, *PASSES, *backend.TAIL)


def load() -> None:
    """torch-spyre loaded (where the entry point did not already) and quiet, then one compile
    discarded: the forkserver pays the lazy imports of a first compile once per round, not
    every benchmark process (a first compile took 6.6 s here, the next ones 0.3-3 s)."""
    backend.load_compiler()
    with contextlib.suppress(Exception):  # a commit that cannot compile fails in its rows
        backend.compile(*workloads.build("softmax", 128))
    # torch-spyre's loggers (made by now) warn of ops its validator does not know yet on
    # every compile: its business, not the benchmark's output
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("spyre"):
            logging.getLogger(name).setLevel(logging.ERROR)


def compile_seconds(name: str, seq: int) -> dict[str, Any]:
    """In a process forked for it: one discarded compile, then one timed between reference
    runs; CPU seconds per stage and in all, in the reference's units, or the failure."""
    program, inputs = workloads.build(name, seq)

    def measure() -> dict[str, Any]:
        try:
            backend.compile(program, inputs)
            compiled, _, reference = clocks.between_references(
                lambda: backend.compile(program, inputs), time.process_time)
        except backend.CompileFailure as failure:
            return {"failure": str(failure)}
        scale = clocks.REFERENCE_S / max(reference, 1e-9)
        return {"seconds": {stage: value * scale for stage, value in
                            compiled.compile_s.items()}, "device": device(compiled)}
    return clocks.in_child(measure)


def device(compiled: Any) -> dict[str, Any]:
    """The timed compile's device program priced by spyre_sim's timing model (after the
    timing: the compile's seconds do not include it): its device seconds per call and how
    many kernels the model could not time; or why it could not be priced."""
    try:
        run = compiled.run()
    except (RuntimeError, ImportError) as error:
        return {"failure": f"{type(error).__name__}: {error}"}
    return {"seconds": run.device_us / 1e6, "unmodelled": run.unmodelled}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def sample(name: str, seq: int, row: str) -> float | None:
    """Row `row`'s next sample of point (name, seq): the seconds of the point's compile this
    row has not read yet, compiled now if no row of the point compiled it yet; None when the
    stage does not exist at this commit. A `device:` row reads the compile's modelled device
    time (`device:seconds`) or its count of unmodelled kernels (`device:unmodelled`). Raises
    RuntimeError when the compile (or, for a device row, its pricing) failed."""
    path = Path(os.getcwd(), re.sub(r"\W", "_", f"compile-{name}-{seq}") + ".json")
    with _locked(path):
        state: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {
            "version": MEASUREMENT_VERSION, "compiles": [], "read": {}}
        compiles: list[dict[str, Any]] = state["compiles"]
        read: int = state["read"].get(row, 0)
        if read == len(compiles):
            compiles.append(compile_seconds(name, seq))
        state["read"][row] = read + 1
        path.write_text(json.dumps(state))
    measured = compiles[read]
    if "failure" in measured:
        raise RuntimeError(measured["failure"])
    family, _, stage = row.partition(":")
    if family == "device":  # `device:seconds` or `device:unmodelled` (bench_execute)
        if "failure" in measured["device"]:
            raise RuntimeError(measured["device"]["failure"])
        return measured["device"][stage]
    return measured["seconds"].get(stage) if stage in STAGES or stage == "total" else None
