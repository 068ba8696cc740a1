"""A busy branch for a month, as synthetic asv results: the generator behind the month
simulation (`nightsim`, scripts/month_simulation.py).

The suite mirrors the real one (benchmarks/): device time per workload and sequence length
(20 samples a run, 1.5% CV, the simulator's documented noise), host wall time and compile
time (total and per stage; heavier-tailed samples, run-to-run offsets and occasional load
spikes that slow a burst of samples in a block of benchmarks), deterministic per-stage
numerical error, and a higher-is-better throughput track with one value per commit.
Regressions, an improvement, a slow drift, a benchmark that starts failing and one-commit
outliers are planted at commits chosen per seed, and the runner changes on a few nights
(`RunnerChange`: from that night on every measurement of a clock series - the night's run,
re-measurement of old commits, bisection - reads other hardware). `Branch.measure` serves
every measurement from the same model, on the hardware of the night it is taken
(`Branch.night`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from spyre_sim.stages import STAGES  # the one stage tuple

WORKLOADS = ("linear", "mlp", "attention", "rmsnorm", "layernorm", "softmax", "embedding")

NUMERIC_STAGES = ("decompose", "kernel", "runtime")
DEVICE = "bench_execute.ExecuteDeviceTime.time_device"
HOST = "bench_execute.ExecuteHostTime.time_run"
COMPILE = "bench_compile.CompileTotal.time_compile"
STAGE = "bench_compile.CompileStage.time_stage"
NUMERICS = ("bench_numerics.NumericsStageError.track_rmse_vs_eager_fp16",
            "bench_numerics.NumericsStageError.track_max_abs_error")
THROUGHPUT = "bench_execute.Throughput.track_items_per_second"


@dataclass(frozen=True)
class Noise:
    """One family's measurement noise, in log units: per-sample sd (Student-t with `tail`
    degrees of freedom when given, scaled to that sd), a per-run offset sd, and whether load
    spikes reach it."""

    sd: float
    samples: int
    offset: float = 0.0
    tail: float | None = None
    spikes: bool = False


# Device time: the simulator's default run-to-run CV (spyre_sim noise model, 1.5%) and the
# suite's 20 samples per commit; host and compile: wall/CPU time on a shared machine.
NOISE = {
    "device": Noise(0.015, 20, offset=0.003),
    "host": Noise(0.03, 20, offset=0.012, tail=4.0, spikes=True),
    "compile": Noise(0.025, 10, offset=0.008, tail=4.0, spikes=True),
    "numerics": Noise(0.0, 1),
    "throughput": Noise(0.01, 1),
}
# A load spike: per regular run of a commit, this chance that a neighbour loads the machine
# while a block of wall-clock benchmarks runs, slowing a burst of each one's samples.
SPIKE_CHANCE = 0.15
SPIKE_BLOCK = (5, 40)  # benchmarks in the block
SPIKE_FACTOR = (1.15, 1.8)
# The families whose samples read the machine's own clock (metrics.moves_with_runner: host
# wall time, compile CPU time, a throughput measured on the host); device time is the
# simulator's clock and numerics are seeded: no runner moves them.
RUNNER_FAMILIES = ("host", "compile", "throughput")


@dataclass(frozen=True, kw_only=True)
class Spec:
    """One series of the suite: asv benchmark name, params as asv prints them, the noise
    family, the level before any event, and what `select` matches on."""

    benchmark: str
    params: str
    family: str
    level: float
    workload: str
    seq: int | None = None
    stage: str | None = None
    higher_is_better: bool = False

    @property
    def name(self) -> str:
        return f"{self.benchmark}{self.params}"


@dataclass(frozen=True)
class RunnerChange:
    """From `night` on the nightly runs on other hardware: `share` of the clock series
    measure `factor` times what they did (higher is slower; a throughput inverts it), each
    with its own response (lognormal, `spread`), the others as before."""

    night: int
    factor: float
    share: float = 0.9
    spread: float = 0.02


EventKind = Literal["step", "drift", "breaks", "outlier"]


@dataclass(frozen=True, kw_only=True)
class Event:
    """Something planted at `commit` in the series `targets` (indexes into the suite).

    kind: "step" (level x `factor` from `commit` on), "drift" (x `factor` spread evenly over
    `length` commits), "breaks" (the benchmark raises from `commit` on), "outlier" (the
    night's first run at `commit` measures x `factor`; any later run is normal).
    """

    label: str
    kind: EventKind
    commit: int
    targets: tuple[int, ...]
    factor: float = 1.0
    length: int = 1
    symptom: str = ""  # the detection kind it should be reported as


@dataclass(kw_only=True)
class Branch:
    """The suite, the history (one list of commit ids, nights as index ranges) and the
    planted events; `measure` draws samples."""

    seed: int
    suite: list[Spec]
    commits: list[str]
    nights: list[tuple[int, int]]  # [first, last] commit index landed per night
    events: list[Event]
    stride: int
    runs: dict[tuple[int, int], int] = field(default_factory=dict)
    runner_changes: list[RunnerChange] = field(default_factory=list)
    night: int = 0  # the night measurements are taken on: its hardware measures them

    def runner(self, series: int) -> float:
        """What tonight's hardware multiplies the series' level by."""
        spec = self.suite[series]
        factor = 1.0
        if spec.family not in RUNNER_FAMILIES:
            return factor
        for k, change in enumerate(self.runner_changes):
            rng = np.random.default_rng([self.seed, 31337, k, series])
            if change.night <= self.night and rng.random() < change.share:
                response = change.factor * math.exp(change.spread * rng.standard_normal())
                factor *= 1 / response if spec.higher_is_better else response
        return factor

    def level(self, series: int, commit: int) -> float:
        value = self.suite[series].level
        for e in self.events:
            if series not in e.targets or commit < e.commit:
                continue
            if e.kind == "step":
                value *= e.factor
            elif e.kind == "drift":
                done = min(commit - e.commit + 1, e.length) / e.length
                value *= math.exp(math.log(e.factor) * done)
        return value

    def fails(self, series: int, commit: int) -> bool:
        return any(e.kind == "breaks" and series in e.targets and commit >= e.commit
                   for e in self.events)

    def measure(self, series: int, commit: int, samples: int | None = None
                ) -> tuple[float, ...] | None:
        """One run of `series` at `commit`: its samples, or None when it fails there. The
        first run of a commit is the nightly's (outliers and that run's spikes apply)."""
        if self.fails(series, commit):
            return None
        spec = self.suite[series]
        noise = NOISE[spec.family]
        run = self.runs.get((series, commit), 0)
        self.runs[series, commit] = run + 1
        level = self.level(series, commit) * self.runner(series)
        if noise.sd == 0:
            return (level,) * (samples or noise.samples)
        rng = np.random.default_rng([self.seed, series, commit, run])
        n = samples or noise.samples
        if noise.tail:
            draws = rng.standard_t(noise.tail, n) * math.sqrt((noise.tail - 2) / noise.tail)
        else:
            draws = rng.standard_normal(n)
        logs = noise.sd * draws + noise.offset * rng.standard_normal()
        if run == 0:
            logs += self._glitch(series, commit)
        if noise.spikes:
            logs += self._spike(series, commit, run, n)
        return tuple(float(level * math.exp(x)) for x in logs)

    def _glitch(self, series: int, commit: int) -> float:
        return sum(math.log(e.factor) for e in self.events
                   if e.kind == "outlier" and e.commit == commit and series in e.targets)

    def _spike(self, series: int, commit: int, run: int, n: int) -> np.ndarray:
        rng = np.random.default_rng([self.seed, 7_777_777, commit, run])
        out = np.zeros(n)
        if rng.random() >= SPIKE_CHANCE:
            return out
        exposed = [i for i, s in enumerate(self.suite) if NOISE[s.family].spikes]
        size = int(rng.integers(*SPIKE_BLOCK))
        start = int(rng.integers(0, max(1, len(exposed) - size)))
        if series not in exposed[start:start + size]:
            return out
        burst = max(1, int(n * rng.uniform(0.2, 0.5)))  # one asv round, or part of it
        first = int(rng.integers(0, n - burst + 1))
        out[first:first + burst] = math.log(rng.uniform(*SPIKE_FACTOR))
        return out

    def benchmarked(self, night: int) -> list[int]:
        """The commits the nightly benchmarks on `night`: every `stride`-th new commit from
        the first, and the newest (regressions.nightly.select_commits on tonight's commits)."""
        first, last = self.nights[night]
        chosen = list(range(first, last + 1, self.stride))
        return chosen if chosen[-1] == last else [*chosen, last]

    def night_of(self, commit: int) -> int:
        return next(i for i, (first, last) in enumerate(self.nights) if first <= commit <= last)


def suite() -> list[Spec]:
    """The synthetic suite: 308 series in the shape of benchmarks/."""
    specs: list[Spec] = []
    for w in WORKLOADS:
        specs += [Spec(benchmark=DEVICE, params=f"('{w}', {s})", family="device",
                       level=1e-4 * (1 + s / 64), workload=w, seq=s)
                  for s in (1, 127, 128, 512, 1024)]
        specs += [Spec(benchmark=HOST, params=f"('{w}', {s})", family="host",
                       level=2e-3 * (1 + s / 256), workload=w, seq=s)
                  for s in (1, 128)]
        specs += [Spec(benchmark=COMPILE, params=f"('{w}', {s})", family="compile", level=0.2,
                       workload=w, seq=s) for s in (127, 128)]
        specs += [Spec(benchmark=STAGE, params=f"('{st}', '{w}', {s})", family="compile",
                       level=0.02, workload=w, seq=s, stage=st)
                  for st in STAGES for s in (127, 128)]
        specs += [Spec(benchmark=b, params=f"('{w}', {s}, '{st}')", family="numerics",
                       level=1e-3 * (2 + len(st) % 3), workload=w, seq=s,
                       stage=st)
                  for b in NUMERICS for s in (127, 128) for st in NUMERIC_STAGES]
        specs.append(Spec(benchmark=THROUGHPUT, params=f"('{w}')", family="throughput",
                          level=1000.0, workload=w,
                          higher_is_better=True))
    return specs


def select(specs: Sequence[Spec], benchmarks: str | tuple[str, ...], *,
           workload: object = None, seq: object = None, stage: object = None
           ) -> tuple[int, ...]:
    """Indexes of the specs of `benchmarks` whose workload, seq and stage are among the
    given values (a value or a tuple of values; None matches anything)."""
    names = (benchmarks,) if isinstance(benchmarks, str) else benchmarks

    def ok(value: object, wanted: object) -> bool:
        return wanted is None or value in (wanted if isinstance(wanted, tuple) else (wanted,))

    return tuple(i for i, s in enumerate(specs)
                 if s.benchmark in names and ok(s.workload, workload) and ok(s.seq, seq)
                 and ok(s.stage, stage))
