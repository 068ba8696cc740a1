"""Repeatability and cost of the compile-work family: the full grid measured N times.

Each run counts the asv family's grid (every workload at seq 127 and 128, width 1024) in
`--shares` valgrind processes side by side, exactly as `CompileWork.setup_cache` measures it
at one commit. Prints the
spread of every (workload, seq, stage) series over the runs, max/min - 1, and each run's wall
and CPU time; `--json` keeps the counts.

`--native` also runs the same grid without valgrind after each run (same imports, builds,
warm-ups and compiles, in one process) and prints the ratio of the two wall times (and CPU
times), run by
run, so the slowdown is measured under about the same load. `--instrument from_start`
measures the way the family did before instrumentation started after the imports;
`--baseline FILE` compares the median count of every series with those of an earlier `--json`
file.

    python scripts/compile_work_repeat.py --runs 10 --native --json compile-work-repeat.json
    python scripts/compile_work_repeat.py --runs 3 --instrument from_start --json old.json
    python scripts/compile_work_repeat.py --runs 3 --baseline old.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

# benchmarks/ is this checkout's asv suite, not part of the installed package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_compile_work, compile_work, prepare  # noqa: E402


def series(runs: list[compile_work.Measurement]) -> dict[tuple, list[int]]:
    """Every (workload, seq, width, stage) series measured in all the runs."""
    values: dict[tuple, list[int]] = {}
    for run in runs:
        for point, per_stage in run.counts.items():
            for stage, instructions in per_stage.items():
                values.setdefault((*point, stage), []).append(instructions)
    return {key: counts for key, counts in values.items() if len(counts) == len(runs)}


def spreads(runs: list[compile_work.Measurement]) -> dict[tuple, float]:
    """max/min - 1 of each (workload, seq, width, stage) series over the runs."""
    return {key: max(values) / min(values) - 1 for key, values in series(runs).items()
            if min(values) > 0}


def deviations(runs: list[compile_work.Measurement],
               baseline: list[compile_work.Measurement]) -> dict[tuple, float]:
    """Median count of each series over `runs`, relative to its median over `baseline`."""
    ours, theirs = series(runs), series(baseline)
    return {key: statistics.median(ours[key]) / statistics.median(theirs[key]) - 1
            for key in ours.keys() & theirs.keys() if statistics.median(theirs[key]) > 0}


def _triple(values: list[float], unit: str = " s", digits: int = 0) -> str:
    return "/".join(f"{v:.{digits}f}" for v in (min(values), statistics.median(values),
                                                   max(values))) + unit


def _report(runs: list, ratios: list[tuple[float, float]], baseline: list | None) -> None:
    spread = spreads(runs)
    worst = sorted(spread.items(), key=lambda item: -item[1])[:5]
    print(f"{len(spread)} series over {len(runs)} runs: spread (max/min - 1) median "
          f"{statistics.median(spread.values()):.4%}, max {max(spread.values()):.4%}")
    for key, value in worst:
        print(f"  {value:.4%}  {key}")
    print(f"cost per run: wall {_triple([r.seconds for r in runs])}, CPU "
          f"{_triple([r.cpu_seconds for r in runs])}, of which the child's imports "
          f"{_triple([max(s.get('imports', 0.0) for s in r.phases['shares']) for r in runs])}"
          " (min/median/max)")
    if ratios:
        print(f"compile work / native: wall {_triple([w for w, _ in ratios], 'x', 1)}, CPU "
              f"{_triple([c for _, c in ratios], 'x', 1)} (min/median/max)")
    if baseline:
        moved = deviations(runs, baseline)
        worst = sorted(moved.items(), key=lambda item: -abs(item[1]))[:5]
        print(f"{len(moved)} series against the baseline's medians: |median ratio - 1| "
              f"median {statistics.median(abs(v) for v in moved.values()):.4%}, max "
              f"{max(abs(v) for v in moved.values()):.4%}")
        for key, value in worst:
            print(f"  {value:+.4%}  {key}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", type=Path, help="write every run's counts here")
    parser.add_argument("--instrument", choices=sorted(compile_work.INSTRUMENT_MODES),
                        default=compile_work.default_instrument())
    parser.add_argument("--native", action="store_true",
                        help="after each run, time the same grid natively in one process: "
                             "print the ratio")
    parser.add_argument("--shares", type=int, default=bench_compile_work.SHARES,
                        help="processes the grid is counted in (default: the family's)")
    parser.add_argument("--baseline", type=Path, help="an earlier --json file to compare with")
    args = parser.parse_args()
    baseline = None
    if args.baseline:
        baseline = [compile_work.Measurement.from_json(doc)
                    for doc in json.loads(args.baseline.read_text())]
    points = bench_compile_work.grid_points()
    runs, ratios = [], []
    for index in range(args.runs):
        run = bench_compile_work.measure_grid(points, instrument=args.instrument,
                                              shares=args.shares)
        runs.append(run)
        line = (f"run {index + 1}/{args.runs}: {len(run.counts)} points, {len(run.errors)} "
                f"failed, {run.seconds:.1f} s wall, {run.cpu_seconds:.1f} s CPU, phases "
                f"{run.phases}, load {os.getloadavg()[0]:.2f}")
        if args.native:
            native = compile_work.run_natively(points, preload=prepare.LAZY_TORCH_MODULES)
            ratios.append((run.seconds / native["seconds"],
                           run.cpu_seconds / native["cpu_seconds"]))
            line += (f"; native {native['seconds']:.1f} s wall, {native['cpu_seconds']:.1f} s "
                     f"CPU, phases {native['phases']}: ratio {ratios[-1][0]:.1f}x wall, "
                     f"{ratios[-1][1]:.1f}x CPU")
        print(line, flush=True)
        if args.json:
            args.json.write_text(json.dumps([r.to_json() for r in runs], indent=1))
    _report(runs, ratios, baseline)
    return 0


if __name__ == "__main__":
    sys.exit(main())
