"""What the month simulation plants, and where: two configurations of a busy branch.

`TRAINING` is the configuration the detection, re-measurement and lifecycle constants were
tuned on; `HELD_OUT` moves the events to other places in the nights (newest commit <->
inside a night, other outlier distances), lands more commits per night at a wider stride,
and is scored on other seeds. Sizes run from 1.5% to x2 over device time, compile time,
host time, numerics and throughput, with a failure, an improvement and a slow drift; and the
runner changes a few times a month (GitHub-hosted runners change hardware between runs),
on nights drawn from a stream of their own so the planted events land where they did.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from regressions.groundtruth.month import (
    COMPILE,
    DEVICE,
    HOST,
    NUMERICS,
    STAGE,
    THROUGHPUT,
    Branch,
    Event,
    EventKind,
    RunnerChange,
    Spec,
    select,
    suite,
)


@dataclass(frozen=True, kw_only=True)
class Plant:
    """One planted event: what it does and to which series; `place` says where it lands
    (newest, interior, oldest, window-1, window-2 (the next commit in the same stride
    window as window-1), or outlier:<label>:<gap>, `gap` benchmarked commits before that
    event's first benchmarked commit at the new level)."""

    label: str
    kind: EventKind
    symptom: str
    factor: float
    benchmarks: tuple[str, ...]
    workload: object = None
    seq: object = None
    stage: object = None
    length: int = 1
    with_: str = ""  # lands at the same commit as this label


@dataclass(frozen=True, kw_only=True)
class MonthConfig:
    """A simulated month: which plants land where (labels of PLANTS -> placement; a plant
    without a placement is left out), how many nights and commits, the stride, and the
    first seed it is scored on."""

    name: str
    places: dict[str, str]
    nights: int = 30
    initial_commits: int = 24
    commits_per_night: float = 9.0
    stride: int = 3
    first_seed: int = 0
    runner_changes: int = 0  # nights (never the first) on which the hardware changes


PLANTS: tuple[Plant, ...] = (
    Plant(label="decode x2", kind="step", symptom="device_time", factor=2.0, benchmarks=(DEVICE,),
          workload="attention", seq=1),
    Plant(label="mlp +10%", kind="step", symptom="device_time", factor=1.10, benchmarks=(DEVICE,),
          workload="mlp"),
    Plant(label="linear +5%", kind="step", symptom="device_time", factor=1.05, benchmarks=(DEVICE,),
          workload="linear", seq=(512, 1024)),
    Plant(label="softmax +3%", kind="step", symptom="device_time", factor=1.03,
          benchmarks=(DEVICE,), workload="softmax"),
    Plant(label="layernorm +1.5%", kind="step", symptom="device_time", factor=1.015,
          benchmarks=(DEVICE,), workload="layernorm", seq=(512, 1024)),
    Plant(label="attention +6%", kind="step", symptom="device_time", factor=1.06,
          benchmarks=(DEVICE,), workload="attention", seq=(512, 1024)),
    Plant(label="attention +4%", kind="step", symptom="device_time", factor=1.04,
          benchmarks=(DEVICE,), workload="attention", seq=(127, 128)),
    Plant(label="embedding +8%", kind="step", symptom="device_time", factor=1.08,
          benchmarks=(DEVICE,), workload="embedding"),
    Plant(label="decompose x1.5", kind="step", symptom="compile_time", factor=1.5,
          benchmarks=(STAGE,), stage="decompose"),
    Plant(label="decompose total +10%", kind="step", symptom="compile_time", factor=1.10,
          benchmarks=(COMPILE,),
          with_="decompose x1.5"),
    Plant(label="attention compile +20%", kind="step", symptom="compile_time", factor=1.20,
          benchmarks=(COMPILE,), workload="attention"),
    Plant(label="layout +8%", kind="step", symptom="compile_time", factor=1.08, benchmarks=(STAGE,),
          stage="layout"),
    Plant(label="host +25%", kind="step", symptom="host_time", factor=1.25, benchmarks=(HOST,)),
    Plant(label="fp16 accumulate x2", kind="step", symptom="numerics", factor=2.0,
          benchmarks=NUMERICS,
          stage=("kernel", "runtime")),
    Plant(label="softmax rmse +30%", kind="step", symptom="numerics", factor=1.30,
          benchmarks=NUMERICS[:1], workload="softmax"),
    Plant(label="mlp throughput -12%", kind="step", symptom="track", factor=0.88,
          benchmarks=(THROUGHPUT,), workload="mlp"),
    Plant(label="embedding fails", kind="breaks", symptom="failure", factor=1.0,
          benchmarks=(DEVICE,), workload="embedding", seq=(512, 1024)),
    Plant(label="rmsnorm -10% (improvement)", kind="step", symptom="device_time", factor=0.90,
          benchmarks=(DEVICE,), workload="rmsnorm"),
    Plant(label="linear drift +9%", kind="drift", symptom="device_time", factor=1.09,
          benchmarks=(DEVICE,), workload="linear", seq=(1, 127, 128),
          length=30),
    Plant(label="mlp glitch x1.4", kind="outlier", symptom="device_time", factor=1.4,
          benchmarks=(DEVICE,), workload="mlp", seq=128),
    Plant(label="attention compile glitch x1.5", kind="outlier", symptom="compile_time", factor=1.5,
          benchmarks=(COMPILE,),
          workload="attention"),
    Plant(label="mlp throughput glitch x0.6", kind="outlier", symptom="track", factor=0.6,
          benchmarks=(THROUGHPUT,), workload="mlp"),
)

TRAINING = MonthConfig(name="training", places={
    "decode x2": "newest", "mlp +10%": "interior", "linear +5%": "newest",
    "softmax +3%": "interior", "layernorm +1.5%": "interior", "attention +6%": "window-1",
    "attention +4%": "window-2", "embedding +8%": "oldest", "decompose x1.5": "interior",
    "attention compile +20%": "newest", "layout +8%": "interior", "host +25%": "interior",
    "fp16 accumulate x2": "newest", "softmax rmse +30%": "interior",
    "mlp throughput -12%": "interior", "embedding fails": "interior",
    "rmsnorm -10% (improvement)": "interior", "linear drift +9%": "interior",
    "mlp glitch x1.4": "outlier:mlp +10%:2",
    "attention compile glitch x1.5": "outlier:attention compile +20%:1",
    "mlp throughput glitch x0.6": "outlier:mlp throughput -12%:5",
}, runner_changes=3)

HELD_OUT = MonthConfig(name="held-out", places={
    **TRAINING.places,
    "decode x2": "interior", "linear +5%": "interior", "softmax +3%": "newest",
    "host +25%": "newest", "fp16 accumulate x2": "interior", "softmax rmse +30%": "newest",
    "attention compile +20%": "interior", "layernorm +1.5%": "newest",
    "mlp glitch x1.4": "outlier:mlp +10%:1",
    "attention compile glitch x1.5": "outlier:attention compile +20%:3",
    "mlp throughput glitch x0.6": "outlier:mlp throughput -12%:2",
}, initial_commits=30, commits_per_night=12.0, stride=4, first_seed=1000, runner_changes=3)


def build_branch(config: MonthConfig, seed: int) -> Branch:
    """The history, nights and events of one simulated month."""
    rng = np.random.default_rng([seed, 4242])
    sizes = [config.initial_commits] + [max(3, int(rng.poisson(config.commits_per_night)))
                                        for _ in range(config.nights - 1)]
    nights, start = [], 0
    for size in sizes:
        nights.append((start, start + size - 1))
        start += size
    commits = [hashlib.sha1(f"month {config.name} {seed} {i}".encode()).hexdigest()
               for i in range(start)]
    branch = Branch(seed=seed, suite=suite(), commits=commits, nights=nights, events=[],
                    stride=config.stride)
    free = list(rng.permutation(np.arange(1, config.nights - 2)))
    landed: dict[str, int] = {}
    for plant in PLANTS:  # primary events first, outliers after the steps they flank
        place = config.places.get(plant.label, "")
        if plant.with_:
            if plant.with_ not in landed:
                continue
            at = landed[plant.with_]
        elif not place or place.startswith("outlier:"):
            continue  # not planted in this configuration, or an outlier (below)
        else:
            at = _land(branch, place, landed, free, rng=rng)
        landed[plant.label] = at
        branch.events.append(_event(branch.suite, plant, at))
    for plant in PLANTS:
        place = config.places.get(plant.label, "")
        if place.startswith("outlier:"):
            _, target, gap = place.split(":")
            at = _outlier_commit(branch, landed[target], int(gap))
            branch.events.append(_event(branch.suite, plant, at))
    branch.runner_changes = runner_changes(config, seed)
    return branch


# A runner change moves the clock series by 8% to 30%, faster or slower (hosted runners'
# CPU generations differ by that much: the store moved x0.76-x1.44 at such commits).
RUNNER_SIZES = (1.08, 1.30)


def runner_changes(config: MonthConfig, seed: int) -> list[RunnerChange]:
    """The nights the hardware changes on and by how much: a stream of their own, so the
    events planted above stay where they were without runner changes."""
    rng = np.random.default_rng([seed, 5150])
    nights = sorted(int(n) for n in rng.choice(np.arange(1, config.nights),
                                               config.runner_changes, replace=False))
    return [RunnerChange(n, float(np.exp(rng.uniform(*np.log(RUNNER_SIZES))))
                         ** (1 if rng.random() < 0.5 else -1)) for n in nights]


def _event(specs: list[Spec], plant: Plant, at: int) -> Event:
    targets = select(specs, plant.benchmarks, workload=plant.workload, seq=plant.seq,
                     stage=plant.stage)
    return Event(label=plant.label, kind=plant.kind, commit=at, targets=targets,
                 factor=plant.factor, length=plant.length,
                 symptom=plant.symptom)


def _land(branch: Branch, place: str, landed: dict[str, int], free: list, rng) -> int:
    """The commit where an event with this placement lands."""
    if place == "oldest":
        first, second = branch.benchmarked(0)[:2]
        return int(rng.integers(first + 1, second + 1))
    if place == "window-2":
        return landed["__window"] + 1
    night = int(free.pop())
    first, last = branch.nights[night]
    if place == "newest":
        return last
    if place == "window-1":
        marks = branch.benchmarked(night)
        gaps = [(a, b) for a, b in zip(marks, marks[1:], strict=False) if b - a >= 2]
        a, _ = gaps[int(rng.integers(len(gaps)))] if gaps else (first, last)
        landed["__window"] = a + 1
        return a + 1
    return int(rng.integers(first + 1, last))  # inside the night, never its newest commit


def _outlier_commit(branch: Branch, step: int, gap: int) -> int:
    """The benchmarked commit `gap` benchmarked commits before the step's first benchmarked
    commit at the new level; never the newest commit of its night (that would be an edge)."""
    marks = sorted({c for night in range(len(branch.nights)) for c in branch.benchmarked(night)})
    newest = {last for _, last in branch.nights}
    first_new = next(i for i, c in enumerate(marks) if c >= step)
    index = first_new - gap
    while marks[index] in newest:
        index -= 1
    return marks[index]
