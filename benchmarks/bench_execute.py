"""Execute family: a warm call of a compiled program, as simulated device time and host time.

Device time is what the timing model says the Spyre card would take. `timer` reads
`spyre_sim.device_clock`, which advances by each run's simulated time, so every sample is one
run's device time and asv's Mann-Whitney test works on real distributions. The programs use
`Config(numerics=False, noise_seed=None)`: the timeline is the same as with numerics (values
are simply not computed) and each process draws its own run-to-run noise (default CV 1.5%).

Host time is the cost of the same call with the default config (fp16 numerics computed on
the CPU): the simulator's own work, which a slower executor or an accidental per-call
conversion would change. Its clock is the process's CPU time, not wall time: the call runs on
one thread without I/O, so on an idle machine the two agree, while on a shared 2-core machine
wall time mostly measures the neighbours (see bench_compile). Device time is not affected.
"""

from __future__ import annotations

import time

from benchmarks import prepare, workloads
from benchmarks.prepare import spyre_sim

WORKLOAD_NAMES = list(workloads.SUITE)


def _missing_device_clock() -> float:
    raise NotImplementedError("spyre_sim.device_clock is missing at this commit")


class ExecuteDeviceTime:
    """Simulated device time of one run: every workload, decode to the [1024, 4096] class."""

    params = (prepare.grid(WORKLOAD_NAMES, ["mlp", "attention"]),
              prepare.grid([1, 127, 128, 512, 1024], [127, 128]))
    param_names = ("workload", "seq")
    # The simulated clock; a commit without it skips in setup before the timer is read.
    timer = staticmethod(getattr(spyre_sim, "device_clock", _missing_device_clock))
    number = 1  # one run per sample: the sample is exactly that run's device time
    # 20 samples per commit in one round (prepare.ROUNDS). Each run draws its noise
    # from the program's own stream, so 20 runs of one process are distributed as 10 + 10 of
    # two, and the simulated clock does not see the host's load.
    repeat = (20, 20, 40.0)
    rounds = prepare.ROUNDS
    warmup_time = 0.0  # the simulated clock has no warm-up effects
    timeout = 120
    version = "execute-device-1"

    def setup(self, workload: str, seq: int) -> None:
        prepare.require("compile", "Config", "device_clock", "Program.run")
        prepare.steady_process()
        self.program = prepare.program(workload, seq, numerics=False, noise_seed=None)
        self.inputs = prepare.workload(workload, seq)[1]

    def time_device(self, workload: str, seq: int) -> None:
        self.program.run(*self.inputs)


class ExecuteHostTime:
    """Host wall time of a warm call with fp16 numerics, at decode and prefill-128 shapes."""

    params = (prepare.grid(WORKLOAD_NAMES, ["mlp"]), prepare.grid([1, 128], [128]))
    param_names = ("workload", "seq")
    # Wall time, as a user waits for the call; on a loaded machine it is noisier than CPU time
    # (docs/benchmarks.md, "Clocks and noise").
    timer = staticmethod(time.perf_counter)
    number = 1  # calls take 0.3-110 ms, far above the timer's resolution
    repeat = (10, 10, 10.0)  # 20 per commit in two rounds (prepare.CLOCK_ROUNDS)
    rounds = prepare.CLOCK_ROUNDS
    warmup_time = 0.05  # at least one unmeasured call: the executor is built on first use
    timeout = 120
    version = "execute-host-2"

    def setup(self, workload: str, seq: int) -> None:
        prepare.require("compile", "Config", "Program.run")
        prepare.steady_process()
        self.program = prepare.program(workload, seq)
        self.inputs = prepare.workload(workload, seq)[1]

    def time_run(self, workload: str, seq: int) -> None:
        self.program.run(*self.inputs)
