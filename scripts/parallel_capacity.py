"""How much faster this machine runs N independent CPU-bound processes at once than one
after another: the ceiling on what any executor gets from N workers on one host.

A virtual machine's cores may be hyperthreads or shared with other guests, so two processes
on "2 cores" need not run twice as fast as one. Runs `--processes` copies of a fixed
pure-Python loop (no I/O, no memory traffic to speak of) one at a time, then all at once,
`--repeat` times, and prints the median speed-up (serial seconds / concurrent seconds).

    python scripts/parallel_capacity.py --processes 2 --repeat 3
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

LOOP = "s = 0\nfor i in range(30_000_000):\n    s += i * i % 7\n"


def wall(copies: int) -> float:
    started = time.monotonic()
    children = [subprocess.Popen([sys.executable, "-c", LOOP]) for _ in range(copies)]
    for child in children:
        child.wait()
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    speedups = []
    for _ in range(args.repeat):
        serial = sum(wall(1) for _ in range(args.processes))
        concurrent = wall(args.processes)
        speedups.append(serial / concurrent)
        print(f"{args.processes} one after another {serial:.1f} s, at once {concurrent:.1f} s: "
              f"x{speedups[-1]:.2f}", flush=True)
    print(f"median speed-up of {args.processes} processes at once: "
          f"x{statistics.median(speedups):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
