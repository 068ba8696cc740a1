"""Execute family: a warm call of a compiled program, as simulated device time and host time.

Device time is what the timing model says the Spyre card would take. `timer` reads
`spyre_sim.device_clock`, which advances by each run's simulated time, so every sample is one
run's device time and asv's Mann-Whitney test works on real distributions. The programs use
`Config(numerics=False, noise_seed=None)`: the timeline is the same as with numerics (values
are simply not computed) and each process draws its own run-to-run noise (default CV 1.5%).

Host time is the cost of the same call with the default config (DLFloat16 numerics computed
on the CPU): the simulator's own work, which a slower executor or an accidental per-call
conversion would change. Its clock is wall time, what a user waits for; each asv sample is
one forked process's median call, relative to a reference workload timed beside each call
(benchmarks/clocks.py), because calls of one process are not independent draws of a host
clock. Device time is a simulated clock: the host's load does not move it.
"""

from __future__ import annotations

import time

from benchmarks import clocks, prepare, workloads
from benchmarks.prepare import spyre_sim

WORKLOAD_NAMES = list(workloads.SUITE)
# Warm calls too short to time honestly: 0.4-0.6 ms, where a process's sample still moved
# with the machine's state by 18-21% from one stretch of time to the next, far more than
# between its calls (scripts/clock_spread.py, docs/measurements/premerge-gate.md). They skip; their
# device-time rows carry the gate.
UNTIMED_CALLS = {("rmsnorm", 1), ("layernorm", 1), ("softmax", 1)}


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


class ExecuteHostTime(clocks.ProcessSampled):
    """Host wall time of a warm call with DLFloat16 numerics, at decode and prefill-128 shapes."""

    params = (prepare.grid(WORKLOAD_NAMES, ["mlp"]), prepare.grid([1, 128], [128]))
    param_names = ("workload", "seq")
    clock = staticmethod(time.perf_counter)  # wall time, as a user waits for the call
    min_calls = clocks.WARM_CALL_MIN_CALLS
    discarded_calls = clocks.WARM_CALL_DISCARDED
    rounds = prepare.CLOCK_ROUNDS
    timeout = 300
    version = "execute-host-5"  # 5: one sample per benchmark process

    def setup(self, workload: str, seq: int) -> None:
        if (workload, seq) in UNTIMED_CALLS:
            raise NotImplementedError(f"a warm {workload} call at seq {seq} is too short to "
                                      "time honestly; its device time is measured")
        prepare.require("compile", "Config", "Program.run")
        prepare.steady_process()
        self.program = prepare.program(workload, seq)
        self.inputs = prepare.workload(workload, seq)[1]
        self.warm_up()  # the executor is built on its first call

    def call(self) -> None:
        self.program.run(*self.inputs)

    def time_run(self, workload: str, seq: int) -> None:
        self.sample()
