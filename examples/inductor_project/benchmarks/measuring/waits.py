"""Where a wait goes: a call's wall time split into the parts the kernel accounts for it.

A user waits for a compile in wall time. What the measuring process's CPU clock cannot see is
time nobody in the process spends on a CPU: a sleep, a retry with back-off, a lock or a file,
and child processes (a backend compiler run as a subprocess, Inductor's C++ build, a worker
pool). The kernel tells these apart, so a region of code (a whole compile, one stage) is read
at its start and its end and its wall time split into:

- `cpu`: this process's CPU time, every thread (`time.process_time`);
- `children_cpu`: its child processes' CPU time: children reaped in the region
  (`getrusage(RUSAGE_CHILDREN)`, which counts a child once it is waited for) plus what its
  live descendants (a persistent worker pool, never reaped) spent, from `/proc/<pid>/stat`
  (utime + stime + cutime + cstime, in clock ticks);
- `run_queue`: time this process's threads were runnable but waiting for a CPU (the second
  field of `/proc/self/task/<tid>/schedstat`): what a busy neighbour adds;
- `blocked`: the rest, wall - cpu - children_cpu - run_queue, never below zero: sleeps, lock,
  pipe and file waits, the time a child waited beyond its CPU (its own run-queue wait and
  I/O: the kernel keeps no record of them once it is reaped) and, on a virtual machine, time
  the hypervisor took the CPU away ("steal": the scheduler's clock excludes it, so it is in
  neither cpu nor run_queue).

Where children or threads work in parallel with the process, their CPU overlaps its wall
time and `blocked` is understated (clamped at zero). Without `/proc` (not Linux) `run_queue`
reads 0 and `children_cpu` counts reaped children only.

The API, for a suite that copies this file (standard library only):

    result, wait = waits.measure(call)            # one call: its Wait
    regions = waits.Regions()
    with regions.region("sdsc"):                   # any named regions, in any order
        ...
    regions.waits                                  # {"sdsc": Wait(...)}, repeats summed
    waits.judged("blocked", wait.blocked)          # a part as a gate judges it (FLOORS)

Each `Wait` has `wall`, `cpu`, `children_cpu`, `run_queue` and `blocked`, in seconds.
"""

from __future__ import annotations

import contextlib
import os
import resource
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

# The parts a gate judges; `wall` is the user's figure and `run_queue` moves with the
# neighbours, so neither is judged.
JUDGED_PARTS = ("cpu", "children_cpu", "blocked")
# A judged part reads at least its floor, so a part near zero (no child process, no wait) is
# the same value at both commits and never flags on the ratio of two noises; above it, a
# change is judged as any other. Measured on the 2-core machine the suite is calibrated on
# (`python scripts/clock_spread.py --waits`, docs/measurements/premerge-gate.md, "The parts'
# floors and stolen time"): over 238 benchmark processes of the 17 compile rows, beside other
# jobs (load 4-9), the blocked time of a spyre_sim compile or stage was 0 ms in the median,
# at most 3.3 ms, and its children's CPU 0 exactly; a sleep of 50 ms or a child's 0.2 s clears
# 5 ms by far.
FLOORS = {"cpu": 0.0, "children_cpu": 0.005, "blocked": 0.005}
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
T = TypeVar("T")


class Wait(NamedTuple):
    """One region's wall time and its parts, in seconds (see the module's text)."""

    wall: float
    cpu: float
    children_cpu: float
    run_queue: float
    blocked: float

    def __add__(self, other: object) -> Wait:
        if not isinstance(other, Wait):
            return NotImplemented
        return Wait(*(a + b for a, b in zip(self, other, strict=True)))


ZERO = Wait(wall=0.0, cpu=0.0, children_cpu=0.0, run_queue=0.0, blocked=0.0)


class Snapshot(NamedTuple):
    """What the kernel had accounted at one moment."""

    wall: float
    cpu: float
    reaped: float  # CPU of the children reaped so far
    waiting: dict[int, float]  # thread id -> its run-queue wait so far
    live: dict[tuple[int, int], float]  # (pid, start time) of a live descendant -> its CPU


def judged(part: str, seconds: float) -> float:
    """A part as the gate judges it: never below its floor (`FLOORS`)."""
    return max(seconds, FLOORS.get(part, 0.0))


def at_start() -> Snapshot:
    """The counters at a region's start, the slow reads first (the descendants: a /proc scan
    when there are children; each thread's schedstat) and the wall clock last, so the region
    pays for none of them."""
    live = live_descendants()
    waiting = run_queue_waits()
    reaped = reaped_children_cpu()
    cpu = time.process_time()
    return Snapshot(wall=time.perf_counter(), cpu=cpu, reaped=reaped, waiting=waiting, live=live)


def at_end() -> Snapshot:
    """The counters at a region's end: the wall clock first, the slow reads last."""
    wall = time.perf_counter()
    cpu = time.process_time()
    reaped = reaped_children_cpu()
    return Snapshot(wall=wall, cpu=cpu, reaped=reaped, waiting=run_queue_waits(),
                    live=live_descendants())


def between(start: Snapshot, end: Snapshot) -> Wait:
    """The parts of the wall time from `start` to `end`."""
    wall = end.wall - start.wall
    cpu = end.cpu - start.cpu
    waited = sum(seconds - start.waiting.get(tid, 0.0) for tid, seconds in end.waiting.items())
    # A descendant alive at the start and gone at the end was reaped: its whole CPU then
    # shows in a parent's reaped total (ours or a live descendant's cutime), so what it had
    # spent before the region comes off.
    live = sum(seconds - start.live.get(key, 0.0) for key, seconds in end.live.items()) - sum(
        seconds for key, seconds in start.live.items() if key not in end.live)
    children = max(0.0, end.reaped - start.reaped + live)
    run_queue = max(0.0, waited)
    return Wait(wall=wall, cpu=cpu, children_cpu=children, run_queue=run_queue,
                blocked=max(0.0, wall - cpu - children - run_queue))


def measure(call: Callable[[], T]) -> tuple[T, Wait]:
    """`call`'s result and the parts of the wall time it took."""
    start = at_start()
    result = call()
    return result, between(start, at_end())


class Regions:
    """Named regions of one run (a compile's stages): `with regions.region(name):` around
    each, then `waits` holds each name's Wait, summed over its entries."""

    def __init__(self) -> None:
        self.waits: dict[str, Wait] = {}

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        start = at_start()
        try:
            yield
        finally:
            self.waits[name] = self.waits.get(name, ZERO) + between(start, at_end())

    def total(self) -> Wait:
        """Every region's parts, summed."""
        return sum(self.waits.values(), ZERO)


def reaped_children_cpu() -> float:
    """User and system CPU of every child reaped so far (and of their reaped children)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_queue_waits() -> dict[int, float]:
    """Each thread's time spent runnable, waiting for a CPU, so far (empty without
    schedstat: not Linux, or a kernel built without it)."""
    waits: dict[int, float] = {}
    try:
        threads = os.listdir("/proc/self/task")
    except OSError:
        return waits
    for tid in threads:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", "rb") as handle:
                waits[int(tid)] = int(handle.read().split()[1]) / 1e9
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended between the listing and the read
    return waits


def has_children() -> bool:
    """Whether this process has a child (alive, or exited and not yet reaped): one system
    call, so a process without children never scans /proc."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    except (AttributeError, OSError):  # no waitid (not Linux): scan
        return True
    return True


def live_descendants() -> dict[tuple[int, int], float]:
    """CPU so far of every live descendant of this process, by (pid, start time), counting
    its own reaped children (cutime, cstime): a worker pool's members and what they ran."""
    if not has_children():
        return {}
    stats = _process_stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[tuple[int, int], float] = {}
    todo = list(children.get(os.getpid(), ()))
    while todo:
        pid = todo.pop()
        _, started, cpu = stats[pid]
        found[(pid, started)] = cpu
        todo.extend(children.get(pid, ()))
    return found


def _process_stats() -> dict[int, tuple[int, int, float]]:
    """pid -> (parent pid, start time in ticks, CPU seconds with reaped children) of every
    process /proc lists (a process that ends during the scan is left out)."""
    stats: dict[int, tuple[int, int, float]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return stats
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                text = handle.read()
        except OSError:
            continue
        # the command name is in parentheses and may hold spaces: fields follow the last ')'
        fields = text[text.rindex(b")") + 2:].split()
        # fields[0] is the state (field 3): ppid is field 4, utime..cstime 14-17, start 22
        ticks = sum(int(f) for f in fields[11:15])
        stats[int(name)] = (int(fields[1]), int(fields[19]), ticks / _TICK)
    return stats
