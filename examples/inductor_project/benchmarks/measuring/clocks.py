"""Host-clock samples that asv may treat as independent draws: one per benchmark process.

asv compares two commits with a Mann-Whitney test on their pooled samples, which is only right
when the samples are independent. Host clocks (the CPU time of a compile, the wall time of a
warm call) are not, when one process hands asv several of them. Measured on the 2-core
machine this suite is sized for (`python scripts/clock_spread.py`,
docs/explanation/gate-sampling.md): the speed of one thread moves by up to x1.75 from one moment to
the next (the core's other hardware thread is busy or not), so the calls of one process agree with
each other far better than with the calls of the next process; and processes forked from one
benchmark process (which built the program they time, in one stretch of time) agree better than
processes of another benchmark process. Each of those layers, counted as independent draws, made an
unchanged pair of commits flag clock rows: 8-14 rows with several samples per process, one
row in six runs with several forked processes per benchmark process.

So a host-clock benchmark hands asv one value per benchmark process, and asv starts one per
row, commit and round. The benchmark process warms up once (`ProcessSampled.warm_up`:
first-use costs paid before any timing), then `sample` forks one fresh process, which times
its calls each between two runs of a fixed reference workload (`reference`: Python bytecode
and small torch ops, the two kinds of work the compiler and the executor do) and returns the
median over its calls of

    call time / reference time x REFERENCE_S

that is, the call's time at the machine speed at which the reference takes REFERENCE_S. The
reference is timed on the same clock, right before and right after the call, so what the
machine's momentary speed does to both cancels. asv reads the value through
`timer = process_clock`, a clock that `sample` advances by it, as the device clock advances
by each simulated run (bench_execute).

A compile's sample has parts (`waits.py`, its sibling): the process's CPU as above, its child
processes' CPU and the time it spent blocked, each judged in a row of its own. One forked
process measures them all at once (`sample_waits`); the benchmark process of the first row
asv runs in a round takes them, and leaves the other parts for the rows that follow it in
the same round (`ProcessSampled.part_sample`), so a part costs a benchmark process that
measures nothing.

Stdlib and torch only: the probes load this file (and `waits.py` beside it) by path to
measure clocks the same way; a suite of another project copies both.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import importlib
import importlib.util
import json
import os
import select
import signal
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar


def _sibling(name: str) -> ModuleType:
    """A module beside this file: from its package in a suite, by path where a probe loaded
    this file by path (the name it is given there is this one's, with `name` after it)."""
    if __package__:
        return importlib.import_module(f"{__package__}.{name}")
    loaded = sys.modules.get(f"{__name__}_{name}")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location(f"{__name__}_{name}",
                                                  Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


waits = _sibling("waits")

# What one run of `reference` takes on an undisturbed core of the machine the suite was
# calibrated on (an AMD EPYC vCPU, Python 3.11, torch 2.13: the fastest of 3,000 runs,
# `python scripts/clock_spread.py --reference`). It only scales the samples into seconds: a
# sample is the call's time in units of the reference's, so on another machine the values
# are in the same units, not that machine's seconds (docs/explanation/gate-sampling.md, "One sample,
# one process").
REFERENCE_S = 0.82e-3
REFERENCE_LOOP = 10_000  # Python additions and multiplications
REFERENCE_OBJECTS = 2_000  # small objects made and freed: the allocator, as a compile uses it
REFERENCE_MATMULS = 8  # 64 x 64 matmuls, each followed by an in-place add
# A child times calls until it has timed `min_calls` calls and at least MIN_SECONDS of them,
# and never more than MAX_CALLS: a 1 ms stage is timed ~10 times, a 100 ms compile once.
# More calls in one process buy little: its calls share the moment it ran in.
MIN_SECONDS = 0.01
MAX_CALLS = 50
# A warm call of a compiled program (bench_execute.ExecuteHostTime, the probes' host time):
# WARM_CALL_DISCARDED untimed calls in the child, then at least WARM_CALL_MIN_CALLS timed.
# Measured on the 2-core machine (8 benchmark processes x 4 children, softmax, layernorm and
# mlp at seq 128; docs/measurements/premerge-gate.md): the second call after the fork is still
# 1.5-1.9x slower than the third and later ones, and with one discarded call and MIN_SECONDS a 6 ms
# call was timed twice, so that slow call was half of every sample. Two discarded calls and
# the median of five cut the spread of the samples (coefficient of variation) from 0.108 to
# 0.073 (softmax) and from 0.161 to 0.073 (layernorm), and the difference between benchmark
# processes, which had looked like a lottery of the process, went with it.
WARM_CALL_DISCARDED = 2
WARM_CALL_MIN_CALLS = 5
# A measuring process that has not answered by then is killed: one sample takes seconds, and
# asv's own `timeout` (300 s) would end the benchmark process first.
CHILD_TIMEOUT_S = 600.0
# The parts one benchmark process measured and the next rows of its round take (asv runs
# the rows of one benchmark class one after another, within seconds). Older than this, they
# are another round's and nobody takes them.
PENDING_AGE_S = 300.0

T = TypeVar("T")
_elapsed = 0.0
_operands: tuple | None = None


def process_clock() -> float:
    """The clock asv's `timer` reads: the sum of every sample `sample` has taken in this
    process, so the difference across one call of the benchmark is that call's sample."""
    return _elapsed


def reference() -> None:
    """A fixed amount of the work the measured code does: interpreter bytecode, small objects
    made and freed, and small torch ops. Its duration at the moment of a call says how fast
    the machine runs then."""
    import torch  # imported already wherever a benchmark or a probe measures

    global _operands
    if _operands is None:
        generator = torch.Generator().manual_seed(0)
        _operands = (torch.randn(64, 64, generator=generator),
                     torch.randn(64, 64, generator=generator))
    total = 0
    for i in range(REFERENCE_LOOP):
        total += i * i
    table = {}
    for i in range(REFERENCE_OBJECTS):
        table[str(i)] = (i, [i])
    del table
    left, right = _operands
    for _ in range(REFERENCE_MATMULS):
        torch.mm(left, right).add_(1.0)


def between_references(call: Callable[[], T], clock: Callable[[], float]
                       ) -> tuple[T, float, float]:
    """`call`'s result, its seconds on `clock`, and the mean seconds of the `reference` runs
    right before and right after it (the garbage collector off, as asv's timer has it)."""
    with _collector_off():
        before = _timed(reference, clock)
        start = clock()
        result = call()
        took = clock() - start
        after = _timed(reference, clock)
    return result, took, (before + after) / 2


def timed_calls(prepare: Callable[[], object], call: Callable[[], object],
                clock: Callable[[], float], min_calls: int = 1,
                min_seconds: float = MIN_SECONDS, max_calls: int = MAX_CALLS,
                discarded: int = 1) -> list[tuple[float, float]]:
    """Time `call` (after `prepare`, untimed) between runs of `reference` in this process,
    until enough is timed: per call, its seconds and the mean of the reference runs right
    before and right after it (a run after one call is the run before the next).

    `discarded` calls run first untimed: a forked process's first call writes to pages it
    still shares with its parent (reference counts, caches), and the kernel copies each one.
    That made first calls 1.3-3.6x slower than the next ones (a decompose stage 5.5 ms
    against 1.5 ms, a layernorm call 16.6 ms against 6.1 ms), by an amount that moves with
    the machine's state; a warm call of a compiled program needs two (WARM_CALL_DISCARDED)."""
    return [(took, ref) for took, ref, _ in timed_waits(
        prepare, call, clock, min_calls, min_seconds=min_seconds, max_calls=max_calls,
        discarded=discarded, read_waits=False)]


def timed_waits(prepare: Callable[[], object], call: Callable[[], object],
                clock: Callable[[], float], min_calls: int = 1,
                min_seconds: float = MIN_SECONDS, max_calls: int = MAX_CALLS,
                discarded: int = 1, read_waits: bool = True) -> list[tuple[float, float, Any]]:
    """`timed_calls`, each call also with the parts of its wall time (`waits.Wait`; None
    when not `read_waits`), read around the same call the clock times."""
    reference()  # its first run allocates the operands
    for _ in range(discarded):
        prepare()
        call()
    timed: list[tuple[float, float, Any]] = []
    prepare()
    with _collector_off():
        previous = _timed(reference, clock)
    while True:
        with _collector_off():
            start = waits.at_start() if read_waits else None
            took = _timed(call, clock)
            wait = waits.between(start, waits.at_end()) if start is not None else None
            after = _timed(reference, clock)
        timed.append((took, (previous + after) / 2, wait))
        previous = after
        enough = len(timed) >= min_calls and sum(t for t, _, _ in timed) >= min_seconds
        if enough or len(timed) >= max_calls:
            return timed
        prepare()


def _timed(work: Callable[[], object], clock: Callable[[], float]) -> float:
    start = clock()
    work()
    return clock() - start


@contextlib.contextmanager
def _collector_off() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def relative_seconds(timed: list[tuple[float, float]]) -> float:
    """The process's sample: its median call time over the reference's, x REFERENCE_S."""
    return statistics.median(took / max(ref, 1e-9) for took, ref in timed) * REFERENCE_S


def wait_figures(timed: list[tuple[float, float, Any]]) -> dict[str, float]:
    """A process's figures for each part of its calls' wall time: `cpu` its sample as
    `relative_seconds` gives it (relative to the reference, as the CPU row always was), every
    other part (children_cpu, blocked, run_queue, wall) the median over its calls, in
    seconds: a sleep or a child's work does not run at the machine's momentary speed."""
    figures = {part: statistics.median(getattr(wait, part) for _, _, wait in timed)
               for part in waits.Wait._fields}
    figures["cpu"] = relative_seconds([(took, ref) for took, ref, _ in timed])
    return figures


def in_child(measure: Callable[[], Any], timeout: float = CHILD_TIMEOUT_S) -> Any:
    """Run `measure` in a forked child of this process and return its (JSON) value; the
    child's exception, if any, is raised here as a RuntimeError carrying its traceback, and
    so is a child that has not answered within `timeout` seconds (it is killed).

    The child runs torch on one intra-op thread. A process forked after its parent ran torch
    ops on the OpenMP pool hangs in its first parallel op (the pool's threads are not copied
    by fork): measured here, a 64 x 64 matmul in such a child never returned. Every benchmark
    process is on one thread already (`prepare.steady_process`); a test or a probe that forks
    from a process that was not must not hang."""
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, report, and leave without running the parent's exits
        os.close(read_end)
        status = 0
        try:
            _one_thread()
            message = {"value": measure()}
        except BaseException:  # noqa: BLE001 (every failure goes back to the parent)
            message, status = {"error": traceback.format_exc()}, 1
        with os.fdopen(write_end, "w") as out:
            json.dump(message, out)
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as source:
        answered, _, _ = select.select([source], [], [], timeout)
        text = source.read() if answered else None
    if text is None:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    if text is None:
        raise RuntimeError(f"measuring process did not answer within {timeout:.0f} s; killed")
    message = json.loads(text) if text else {"error": "the measuring process died"}
    if "error" in message:
        raise RuntimeError(f"measuring process failed:\n{message['error']}")
    return message["value"]


def _one_thread() -> None:
    """torch on one intra-op thread in this (forked) process, where torch is imported."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def advance(seconds: float) -> None:
    """Move `process_clock` by a sample taken elsewhere: the compile of a grid point that
    another benchmark process of the same round timed (the torch-spyre suite's rows)."""
    global _elapsed
    _elapsed += seconds


def sample(prepare: Callable[[], object], call: Callable[[], object],
           clock: Callable[[], float], min_calls: int = 1, discarded: int = 1) -> float:
    """One asv sample of `call`: a fresh process's `relative_seconds`. Advances
    `process_clock` by it, and returns it."""
    global _elapsed
    value = float(in_child(lambda: relative_seconds(timed_calls(
        prepare, call, clock, min_calls, discarded=discarded))))
    _elapsed += value
    return value


def sample_waits(prepare: Callable[[], object], call: Callable[[], object],
                 clock: Callable[[], float], min_calls: int = 1, discarded: int = 1
                 ) -> dict[str, float]:
    """One fresh process's `wait_figures` of `call`: every part of its wall time at once."""
    return {part: float(value) for part, value in in_child(lambda: wait_figures(timed_waits(
        prepare, call, clock, min_calls, discarded=discarded))).items()}


def _pending_file(row: str) -> Path | None:
    """Where one benchmark row's parts wait for the rows after it in this round: keyed by the
    process asv forked this one from (one forkserver per commit and round) and the commit.
    None outside an asv run (a probe runs a benchmark with no rows after it)."""
    commit = os.environ.get("ASV_COMMIT")
    if not commit:
        return None
    key = hashlib.sha256(f"{row}|{os.getppid()}|{commit}".encode()).hexdigest()[:32]
    return Path(tempfile.gettempdir()) / f"spyre-regress-parts-{os.getuid()}" / key


def take_pending(row: str, part: str) -> float | None:
    """`part` of `row` as the round's first row measured it, taken once; None when no fresh
    one waits (this row then measures)."""
    path = _pending_file(row)
    if path is None:
        return None
    try:
        left = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not left or time.time() - left.get("at", 0) > PENDING_AGE_S or part not in left["parts"]:
        return None
    value = float(left["parts"].pop(part))
    if left["parts"]:
        path.write_text(json.dumps(left))
    else:
        path.unlink(missing_ok=True)
    return value


def leave_pending(row: str, parts: dict[str, float]) -> None:
    """Leave `parts` of `row` for the rows after this one in the round."""
    path = _pending_file(row)
    if path is None or not parts:
        return
    path.parent.mkdir(mode=0o700, exist_ok=True)
    for old in path.parent.iterdir():  # another round's leftovers (a row that never ran)
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > PENDING_AGE_S:
                old.unlink()
    path.write_text(json.dumps({"at": time.time(), "parts": parts}))


class ProcessSampled:
    """What every host-clock benchmark class shares: one asv sample per benchmark process,
    taken in one process forked from it.

    The benchmark process is the unit that draws independently: processes forked from one
    share what it built (the program, its heap) and its stretch of time, and agree with each
    other better than with those of the next one (docs/explanation/gate-sampling.md, "The round is
    the unit"). asv starts one benchmark process per row, commit and
    round, so a class sets only its `rounds`.

    A class sets `clock` (what a call is timed with), `call` (the timed work) and, when a call
    needs something made fresh before it (untimed), `fresh`; its `setup` calls `warm_up` last
    and its `time_` method returns `self.sample()`.

    A class whose rows are parts of a wait (a compile: cpu, children_cpu, blocked) has one
    `time_` method per part, each calling `self.part_sample(part, *params)`; its `setup` does
    only what is cheap, and `prepare_row` the rest (the program, `warm_up`), which only the
    row that measures runs."""

    timer = staticmethod(process_clock)
    number = 1  # one forked process per asv sample
    repeat = (1, 1, 300.0)  # one asv sample per benchmark process
    warmup_time = 0.0  # the benchmark process warms up itself (`warm_up`)
    clock: Callable[[], float] = staticmethod(time.process_time)
    min_calls = 1
    discarded_calls = 1  # untimed calls in each child before the timed ones

    def fresh(self) -> None:
        """Prepare the next timed call, untimed: nothing by default."""

    def call(self) -> None:
        raise NotImplementedError

    def warm_up(self) -> None:
        """One discarded call in the benchmark process itself, once: the processes forked
        after it inherit one that has paid its first-use costs (torch's lazy imports, caches
        filled on a first compile or call), so none of them times those."""
        if getattr(self, "_warm", False):
            return
        self.fresh()
        self.call()
        self._warm = True

    def sample(self) -> None:
        sample(self.fresh, self.call, self.clock, self.min_calls, discarded=self.discarded_calls)

    def prepare_row(self) -> None:
        """Everything the measuring row needs before it forks (a part row that takes its
        value from the round's first row needs none of it)."""
        self.warm_up()

    def part_sample(self, part: str, *params: object) -> None:
        """One asv sample of `part` of the call's wait (`waits.JUDGED_PARTS`), as the gate
        judges it (`waits.judged`: never below the part's floor). The first row of a round
        measures every part in one forked process and leaves the others for its sibling
        rows; a row that finds its part left by it takes that instead of measuring."""
        global _elapsed
        row = f"{type(self).__module__}.{type(self).__qualname__}{params!r}"
        value = take_pending(row, part)
        if value is None:
            self.prepare_row()
            figures = sample_waits(self.fresh, self.call, self.clock, self.min_calls,
                                   discarded=self.discarded_calls)
            judged = {p: waits.judged(p, figures[p]) for p in waits.JUDGED_PARTS}
            value = judged.pop(part)
            leave_pending(row, judged)
        _elapsed += value
