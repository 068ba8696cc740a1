"""The executor: a night's units of work on Dask distributed.

One module owns the engine. `Executor.start` connects a Dask client to an embedded
`LocalCluster` (`--workers N`: worker processes with one thread each, listening on
localhost only, no dashboard unless asked) or to a running cluster by address
(`--scheduler tcp://HOST:PORT`). Units of work (`Work`) are plain functions with a plain
argument, run on a worker with a scratch directory of that worker's own.

What may share a host is modelled with Dask worker resources: one worker per host holds a
`clock` slot. Work whose figure is read on a wall clock (host time, compile clocks) asks for
that slot and runs only after every other unit of the batch has finished, so it never shares
its host with another benchmark; work whose figure does not depend on its neighbours
(simulated device time, numerics, instruction counts) runs on every worker at once. A
comparison is pinned to one worker (`Work.pin`), as Pinpoint pins both sides of a comparison
to one bot (catapult dashboard/pinpoint/models/quest/run_test.py). Every unit is submitted
`pure=False`, so a repeated measurement is never deduplicated away, and with `retries`, so a
unit whose worker died runs again elsewhere; its result reaches the caller once.
"""

from __future__ import annotations

import logging
import re
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regressions.errors import SpyreRegressError

Progress = Callable[[str], None]
CLOCK = "clock"
RETRIES = 2  # a unit is tried at most three times (a worker killed under it counts too)
CONNECT_TIMEOUT = "10s"
ADDRESS = re.compile(r"^(tcp|tls)://[A-Za-z0-9.\-\[\]:]+:\d+$")
START_HINT = ("start one with `dask scheduler --host HOST` and on each benchmark host "
              "`dask worker tcp://HOST:8786 --nworkers 1 --nthreads 1 --resources clock=1`")


@dataclass(frozen=True)
class Work:
    """One unit of work: `function(argument, scratch)` on a worker, `scratch` a directory
    of that worker's own. `alone`: its figure is read on the host's clock, so it runs alone
    on its host, holding the host's clock slot;
    `pin`: the address of the worker it must run on."""

    name: str
    function: Callable[[Any, Path], Any]
    argument: Any
    alone: bool = False
    pin: str | None = None


@dataclass(frozen=True)
class Timed:
    """A finished unit: how long it ran, and where (what a projection is built from)."""

    name: str
    alone: bool
    seconds: float
    worker: str


@dataclass(frozen=True)
class Phase:
    """One phase of a `run`: its units all shared a host (`alone` False) or each held its
    host's clock slot; the wall time from its first submission to its last result."""

    alone: bool
    units: int
    seconds: float


def _on_worker(function: Callable[[Any, Path], Any], argument: Any, scratch_root: str | None
               ) -> tuple[Any, float, str]:
    """Run one unit on the worker this is called on: its result, seconds, worker name."""
    from distributed import get_worker

    worker = get_worker()
    root = Path(scratch_root) if scratch_root else Path(tempfile.gettempdir()) / \
        "spyre-regress-workers"
    scratch = root / re.sub(r"[^A-Za-z0-9_.-]", "_", str(worker.name))
    scratch.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    return function(argument, scratch), time.monotonic() - started, str(worker.name)


async def _grant_clock(dask_worker) -> None:
    await dask_worker.set_resources(**{CLOCK: 1})


def _worker_table(dask_scheduler) -> dict[str, dict]:
    """The scheduler's own table of workers, host and resources (run on the scheduler)."""
    return {address: {"host": state.host, "resources": dict(state.resources)}
            for address, state in dask_scheduler.workers.items()}


def check_address(address: str) -> str:
    """`address` if it reads as a Dask scheduler address, else a usage error."""
    if not ADDRESS.match(address):
        raise SpyreRegressError(f"--scheduler {address!r} is not a scheduler address; give "
                                "it as tcp://HOST:PORT (e.g. tcp://10.0.0.5:8786)")
    return address


class Executor:
    """A Dask client on an embedded cluster or a cluster by address; see the module text."""

    def __init__(self, client, cluster=None, scratch_root: Path | None = None,
                 progress: Progress = lambda _: None) -> None:
        self.client, self.cluster, self.progress = client, cluster, progress
        self.scratch_root = None if scratch_root is None else str(scratch_root)
        self.timed: list[Timed] = []  # every unit finished, in the order they finished
        self.phases: list[Phase] = []  # every phase of `run`, with its wall time
        self._grant_clock_slots()

    @classmethod
    def start(cls, workers: int | None = None, scheduler: str | None = None, *,
              dashboard: bool = False, scratch_root: Path | None = None,
              progress: Progress = lambda _: None) -> Executor:
        """An embedded LocalCluster of `workers` processes, or the cluster at `scheduler`.

        Raises:
            SpyreRegressError: the scheduler cannot be reached (naming the address and how
                to start one), or neither or both of the two were given.
        """
        from distributed import Client, LocalCluster

        if (workers is None) == (scheduler is None):
            raise SpyreRegressError("give either --workers N or --scheduler tcp://HOST:PORT")
        if scheduler is not None:
            try:
                client = Client(check_address(scheduler), timeout=CONNECT_TIMEOUT)
            except (OSError, TimeoutError) as error:
                raise SpyreRegressError(f"cannot reach the Dask scheduler at {scheduler} "
                                        f"({type(error).__name__}); {START_HINT}") from None
            if not client.scheduler_info()["workers"]:
                client.close()
                raise SpyreRegressError(f"the Dask scheduler at {scheduler} has no workers; "
                                        f"{START_HINT}")
            progress(f"executor: the cluster at {scheduler}, "
                     f"{len(client.scheduler_info()['workers'])} worker(s)")
            return cls(client, None, scratch_root, progress)
        assert workers is not None  # one of the two is given
        if workers < 1:
            raise SpyreRegressError(f"--workers must be at least 1, not {workers}")
        cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                               silence_logs=logging.CRITICAL,
                               host="127.0.0.1",
                               dashboard_address="127.0.0.1:8787" if dashboard else None,
                               local_directory=str(scratch_root) if scratch_root else None)
        client = Client(cluster)
        progress(f"executor: an embedded cluster of {workers} worker process(es) on localhost"
                 + (f", dashboard at {client.dashboard_link}" if dashboard else ""))
        return cls(client, cluster, scratch_root, progress)

    def _grant_clock_slots(self) -> None:
        """One worker per host holds the clock slot: those the cluster granted one keep it,
        a host whose workers were started without one (or whose holder was restarted) gets
        it on its first worker."""
        if not self.client.scheduler_info()["workers"]:
            self.client.wait_for_workers(1, timeout=120)
        # the scheduler's table, not the client's copy (`scheduler_info`, refreshed every
        # few seconds): right after a worker was restarted that copy still showed the dead
        # one holding the slot, nothing was granted, and a clock unit waited forever
        workers = self.client.run_on_scheduler(_worker_table)
        hosts: dict[str, list[tuple[str, dict]]] = {}
        for address, info in sorted(workers.items()):
            hosts.setdefault(info.get("host", address), []).append((address, info))
        for members in hosts.values():
            if not any(info.get("resources", {}).get(CLOCK) for _, info in members):
                self.client.run(_grant_clock, workers=[members[0][0]])

    def clock_worker(self) -> str:
        """A worker holding a clock slot: where a wall-clock comparison is pinned."""
        self._grant_clock_slots()
        workers = self.client.run_on_scheduler(_worker_table)
        return next(a for a, info in sorted(workers.items())
                    if info.get("resources", {}).get(CLOCK))

    @property
    def workers(self) -> int:
        return len(self.addresses())

    def addresses(self) -> set[str]:
        return set(self.client.scheduler_info()["workers"])

    def _submit(self, work: Work):
        key = f"{re.sub(r'[^A-Za-z0-9_.-]', '_', work.name)}-{uuid.uuid4().hex[:8]}"
        return self.client.submit(
            _on_worker, work.function, work.argument, self.scratch_root, key=key,
            pure=False, retries=RETRIES, resources={CLOCK: 1} if work.alone else None,
            workers=[work.pin] if work.pin else None, allow_other_workers=False)

    def one(self, work: Work) -> Any:
        """Run one unit and wait for its result."""
        result, seconds, worker = self._submit(work).result()
        self.timed.append(Timed(work.name, work.alone, seconds, worker))
        return result

    def _slots(self, alone: bool) -> int:
        """How many units of a phase may run at once: a unit per worker, a clock unit per
        worker holding a clock slot (one per host)."""
        workers = self.client.scheduler_info()["workers"].values()
        return max(1, sum(1 for info in workers
                          if not alone or info.get("resources", {}).get(CLOCK)))

    def run(self, works: Sequence[Work]) -> Iterator[tuple[Work, Any]]:
        """Every unit, each result once as it finishes: the units that may share a host all
        at once, then the clock units, one per host at a time. One progress line per
        finished unit, with the count left and the time left at the rate so far.

        A phase hands out no more units than it has free slots, and the next as one
        finishes: the scheduler places a unit when it is submitted, and a unit queued behind
        a busy worker stayed there while another worker sat idle (a 12-commit night lost a
        fifth of its benchmarking phase to it), since each unit is a task of its own
        whose duration the scheduler never learns."""
        from distributed import as_completed

        phases = [[w for w in works if not w.alone], [w for w in works if w.alone]]
        done, started = 0, time.monotonic()
        for phase in phases:
            if not phase:
                continue
            if phase[0].alone:  # a restarted worker comes back without the slot it held
                self._grant_clock_slots()
            phase_started = time.monotonic()
            running: dict[Any, Work] = {}
            waiting, finished = list(phase), as_completed()
            self._hand_out(waiting, running, finished)
            try:
                for future in finished:
                    work = running.pop(future)
                    result, seconds, worker = future.result()
                    self._hand_out(waiting, running, finished)
                    self.timed.append(Timed(work.name, work.alone, seconds, worker))
                    done += 1
                    self.progress(self._finished(work, seconds, worker, done, total=len(works),
                                                 started=started))
                    yield work, result
            except BaseException:
                self.client.cancel(list(running))
                raise
            self.phases.append(Phase(phase[0].alone, len(phase),
                                     time.monotonic() - phase_started))

    def _hand_out(self, waiting: list[Work], running: dict, finished) -> None:
        """Submit waiting units while the phase has free slots."""
        while waiting and len(running) < self._slots(waiting[0].alone):
            work = waiting.pop(0)
            future = self._submit(work)
            running[future] = work
            finished.add(future)

    @staticmethod
    def _finished(work: Work, seconds: float, worker: str, done: int, total: int,
                  started: float) -> str:
        left = total - done
        rate = (time.monotonic() - started) / done
        eta = f", about {rate * left:.0f} s left" if left else ""
        return (f"done {done} of {total}: {work.name} ({seconds:.1f} s on worker {worker}); "
                f"{left} left{eta}")

    def close(self) -> None:
        """Stop: cancel what is in flight; an embedded cluster's workers stop with it."""
        try:
            self.client.close()
        finally:
            if self.cluster is not None:
                self.cluster.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
