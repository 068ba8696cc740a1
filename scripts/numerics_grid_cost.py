"""The CPU time of the numerics family's grid, computed once as its `setup_cache` does.

    python scripts/numerics_grid_cost.py [--workloads NAME ...] [--seqs N ...] [--stages S ...]

Runs `bench_numerics.numerics_grid` (the body of the family's `setup_cache`) in this process
after `prepare.steady_process()` (one thread, as asv runs it), pair by pair, and prints each
(workload, seq) pair's CPU seconds, the pairs at seq 127 and 128, and the whole grid: the
figures docs/measurements/asv-suite.md gives. By default the whole grid, every executable
stage.
"""

from __future__ import annotations

import argparse
import time

import spyre_sim
from benchmarks import bench_numerics, prepare


def grid_cost(workloads: list[str], seqs: list[int], stages: list[str]
              ) -> dict[tuple[str, int], float]:
    """CPU seconds of each (workload, seq) pair of the grid, in grid order."""
    prepare.steady_process()
    seconds = {}
    for workload in workloads:
        for seq in seqs:
            start = time.process_time()
            bench_numerics.numerics_grid([workload], [seq], stages)
            seconds[workload, seq] = time.process_time() - start
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=list(bench_numerics.WORKLOAD_NAMES))
    parser.add_argument("--seqs", nargs="+", type=int, default=list(bench_numerics.SEQ_LENGTHS))
    parser.add_argument("--stages", nargs="+", default=list(spyre_sim.EXECUTABLE_STAGES))
    args = parser.parse_args(argv)
    seconds = grid_cost(args.workloads, args.seqs, args.stages)
    for (workload, seq), cpu in seconds.items():
        print(f"{workload:>10} seq {seq:<5} {cpu:6.2f} s CPU")
    dearest = max(seconds, key=seconds.__getitem__)
    at_127_128 = [cpu for (_, seq), cpu in seconds.items() if seq in (127, 128)]
    print(f"{len(seconds)} pairs x {len(args.stages)} stages: {sum(seconds.values()):.2f} s CPU; "
          f"the {len(at_127_128)} pairs at seq 127 and 128: {sum(at_127_128):.2f} s; "
          f"dearest {dearest[0]} at seq {dearest[1]} ({seconds[dearest]:.2f} s)")


if __name__ == "__main__":
    main()
