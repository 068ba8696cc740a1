"""Repeatability and cost of the compile-work family: the full grid measured N times.

Each run is one valgrind process over the asv family's grid (every workload at seq 127 and
128, width 1024), exactly as `CompileWork.setup_cache` measures it at one commit. Prints the
spread of every (workload, seq, stage) series over the runs, max/min - 1, and each run's wall
and CPU time; `--json` keeps the counts.

    python scripts/compile_work_repeat.py --runs 10 --json compile-work-repeat.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

# benchmarks/ is this checkout's asv suite, not part of the installed package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_compile_work, compile_work  # noqa: E402


def spreads(runs: list[compile_work.Measurement]) -> dict[tuple, float]:
    """max/min - 1 of each (workload, seq, width, stage) series over the runs."""
    series: dict[tuple, list[int]] = {}
    for run in runs:
        for point, per_stage in run.counts.items():
            for stage, instructions in per_stage.items():
                series.setdefault((*point, stage), []).append(instructions)
    return {key: max(values) / min(values) - 1 for key, values in series.items()
            if len(values) == len(runs) and min(values) > 0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write every run's counts here")
    args = parser.parse_args()
    points = bench_compile_work.grid_points()
    runs = []
    for index in range(args.runs):
        run = compile_work.measure(points, timeout=bench_compile_work.MEASURE_TIMEOUT_S)
        runs.append(run)
        print(f"run {index + 1}/{args.runs}: {len(run.counts)} points, {len(run.errors)} "
              f"failed, {run.seconds:.0f} s wall, {run.cpu_seconds:.0f} s CPU", flush=True)
        if args.json:
            args.json.write_text(json.dumps([r.to_json() for r in runs], indent=1))
    spread = spreads(runs)
    worst = sorted(spread.items(), key=lambda item: -item[1])[:5]
    print(f"{len(spread)} series over {len(runs)} runs: spread (max/min - 1) median "
          f"{statistics.median(spread.values()):.4%}, max {max(spread.values()):.4%}")
    for key, value in worst:
        print(f"  {value:.4%}  {key}")
    walls = [r.seconds for r in runs]
    cpus = [r.cpu_seconds for r in runs]
    print(f"cost per run: wall {min(walls):.0f}/{statistics.median(walls):.0f}/{max(walls):.0f} s"
          f", CPU {min(cpus):.0f}/{statistics.median(cpus):.0f}/{max(cpus):.0f} s "
          "(min/median/max)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
