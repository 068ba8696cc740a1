"""Instructions of a torch-spyre compile under callgrind: how much of the whole compile the
stage rows account for, and how much each stage's count moves between two runs.

The torch-spyre suite's compile-work family counts each stage of a compile (its counted
subset, bench_compile_work.POINTS) through backends/torch_spyre.py's `compile_in_regions`:
the regions are Dynamo, AOT Autograd, the post-grad passes, lowering, each pre-scheduling
pass, scheduling and codegen, and together they cover the `torch.compile` call. This counts
that grid `--runs` times, and once more the backend's whole `compile()` as one region (the
call a user makes: the device inputs and the cache directory around the compile included),
and prints each stage's share, the rows' coverage of the whole, and each stage's spread
(max - min over the runs, relative to the median), with valgrind's wall time.

    python scripts/torch_spyre_work.py --repo CHECKOUT [--runs 2] [--points mlp:128,...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from backends import interface
from benchmarks import compile_work

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "suites" / "torch_spyre" / "benchmarks"
DEFAULT_POINTS = "mlp:128,stack_2:128"

# The backend with its whole compile as one region: what a user's call costs.
WHOLE = """
import importlib.util, sys
_spec = importlib.util.spec_from_file_location("spyre_regress_backend", {path!r})
_backend = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _backend
_spec.loader.exec_module(_backend)
STAGES = ("whole",)
load_compiler = _backend.load_compiler


def compile_in_regions(program, inputs, values, region):
    with region("whole"):
        _backend.compile(program, inputs, values)
"""


def measure(points: list, backend: Path, checkout: Path) -> tuple[dict, float]:
    """compile_work.measure of `points` through `backend` with the checkout on the path, in
    the suite's folder (its workloads.py beside its compile_work.py)."""
    started = time.monotonic()
    found = compile_work.measure(points, backend=str(backend), shares=2,
                                 workloads=SUITE / "workloads.py",
                                 env={**os.environ, "PYTHONPATH": str(checkout)})
    if found.missing or found.errors:
        raise SystemExit(f"not counted: {found.missing or found.errors}")
    return found.counts, time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="a torch-spyre checkout")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--points", default=DEFAULT_POINTS, help="workload:seq,...")
    args = parser.parse_args(argv)
    points = [(name, int(seq), None) for name, seq in
              (item.split(":") for item in args.points.split(","))]
    backend = interface.module_path("torch_spyre")
    runs, seconds = [], []
    for _ in range(args.runs):
        counts, took = measure(points, backend, args.repo)
        runs.append(counts)
        seconds.append(took)
    with tempfile.TemporaryDirectory() as scratch:
        whole_backend = Path(scratch) / "torch_spyre_whole.py"
        whole_backend.write_text(WHOLE.format(path=str(backend)))
        whole, whole_took = measure(points, whole_backend, args.repo)
    report = {}
    for point in points:
        stages = runs[0][point]
        total = sum(stages.values())
        spread = {s: (max(r[point][s] for r in runs) - min(r[point][s] for r in runs))
                  / statistics.median(r[point][s] for r in runs) for s in stages}
        report[f"{point[0]}-{point[1]}"] = {
            "rows_instructions": total, "whole_instructions": whole[point]["whole"],
            "coverage": total / whole[point]["whole"],
            "largest_spread": max(spread.values()),
            "spread_over_1pct": sorted(s for s, v in spread.items() if v > 0.01),
            "stages": {s: {"instructions": n, "share": n / total, "spread": spread[s]}
                       for s, n in sorted(stages.items(), key=lambda kv: -kv[1])}}
    print(json.dumps({"runs": args.runs, "valgrind_seconds": seconds,
                      "whole_valgrind_seconds": whole_took, "points": report}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
