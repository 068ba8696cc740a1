"""Measure the simulator's own speed: cold compile, warm call, timing-only call.

Each sample is a fresh Python process (a cold compile is only cold in a new process: Dynamo's
caches and torch's lazy initialisation live in the process). In each process: import torch +
spyre_sim (timed apart), build the MLP block (Linear 4096->4096, GELU, Linear 4096->4096) at
seq 127, time `spyre_sim.compile` (all eight stages), then warm calls against eager fp32
interleaved, then a timing-only (`numerics=False`) program.

    python scripts/bench_backend.py --processes 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PROBE = r"""
import json, time
start = time.perf_counter()
import torch
import spyre_sim
from benchmarks import workloads
imports_s = time.perf_counter() - start
import warnings
warnings.simplefilter("ignore")
torch.set_num_threads(torch.get_num_threads())
model, (x,) = workloads.build("mlp", 127)
start = time.perf_counter()
program = spyre_sim.compile(model, (x,))
compile_s = time.perf_counter() - start
program.run(x)  # first run uploads the weights to the (simulated) device
warm, eager = [], []
with torch.no_grad():
    model(x)
    for _ in range(7):
        t = time.perf_counter(); program.run(x); warm.append(time.perf_counter() - t)
        t = time.perf_counter(); model(x); eager.append(time.perf_counter() - t)
timing_only = spyre_sim.compile(model, (x,), spyre_sim.Config(numerics=False))
timing_only.run(x)
fast = []
for _ in range(50):
    t = time.perf_counter(); timing_only.run(x); fast.append(time.perf_counter() - t)
med = lambda v: sorted(v)[len(v) // 2]
print(json.dumps({"imports_s": imports_s, "compile_s": compile_s,
                  "stages_s": program.compile_times, "warm_s": med(warm),
                  "eager_fp32_s": med(eager), "warm_over_eager": med(warm) / med(eager),
                  "timing_only_ms": med(fast) * 1e3}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=10)
    args = parser.parse_args()
    samples = []
    for index in range(args.processes):
        out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True,
                             text=True).stdout
        samples.append(json.loads(out.strip().splitlines()[-1]))
        print(f"process {index + 1}/{args.processes}: compile "
              f"{samples[-1]['compile_s']:.3f} s", file=sys.stderr)
    print(f"{'figure':28} {'min':>9} {'median':>9} {'max':>9}")
    for key in ("imports_s", "compile_s", "warm_s", "eager_fp32_s", "warm_over_eager",
                "timing_only_ms"):
        values = [s[key] for s in samples]
        print(f"{key:28} {min(values):9.3f} {statistics.median(values):9.3f} "
              f"{max(values):9.3f}")
    for stage in samples[0]["stages_s"]:
        values = [s["stages_s"][stage] for s in samples]
        print(f"  stage {stage:20} {min(values):9.4f} {statistics.median(values):9.4f} "
              f"{max(values):9.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
