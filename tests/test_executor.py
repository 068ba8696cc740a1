"""The executor on an embedded cluster: every unit's result once, wall-clock units alone on
their host, a unit whose worker died run again elsewhere, and clear refusals."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from regressions.errors import SpyreRegressError
from spyre_regress.executor import Executor, Work, check_address


def record(argument: tuple[str, str, float], scratch: Path) -> str:
    """A unit that notes when it ran, and on which worker (in a shared log folder)."""
    log, name, seconds = argument
    started = time.time()
    time.sleep(seconds)
    Path(log, f"{name}.json").write_text(json.dumps(
        {"start": started, "end": time.time(), "worker": scratch.name}))
    return name


def die_once(argument: tuple[str, str], scratch: Path) -> str:
    """A unit whose worker process dies under it the first time it runs."""
    marker, name = argument
    if not Path(marker).exists():
        Path(marker).write_text("killed")
        os._exit(1)
    return f"{name} on {scratch.name}"


@pytest.fixture(scope="module")
def progress_lines() -> list[str]:
    """What the module's executor said of its progress."""
    return []


@pytest.fixture(scope="module")
def executor(tmp_path_factory, progress_lines):
    with Executor.start(workers=2, scratch_root=tmp_path_factory.mktemp("workers"),
                        progress=progress_lines.append) as running:
        yield running


def test_units_run_at_once_and_wall_clock_units_alone(executor, progress_lines, tmp_path):
    shared = [Work(f"shared {i}", record, (str(tmp_path), f"shared{i}", 0.6))
              for i in range(4)]
    clock = [Work(f"clock {i}", record, (str(tmp_path), f"clock{i}", 0.3), alone=True)
             for i in range(2)]
    finished = [name for _, name in executor.run([*clock, *shared])]
    assert sorted(finished) == sorted(w.argument[1] for w in [*shared, *clock])
    runs = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert len({runs[f"shared{i}"]["worker"] for i in range(4)}) == 2  # both workers busy
    for name in ("clock0", "clock1"):
        others = [r for n, r in runs.items() if n != name]
        assert all(r["end"] <= runs[name]["start"] or r["start"] >= runs[name]["end"]
                   for r in others), f"{name} shared the host with another unit"
    assert sum("done" in line and "left" in line for line in progress_lines) >= 6


def test_a_phase_hands_out_a_unit_only_to_a_free_worker(executor, tmp_path, monkeypatch):
    # the scheduler places a unit when it is submitted: submitted all at once, a unit could
    # wait behind a long one while the other worker sat idle (a 12-commit night lost a fifth
    # of its benchmarking to it). Never more units in flight than workers:
    handed_out: list[Any] = []  # distributed.Future, untyped
    submit = executor._submit

    def one_per_free_worker(work):
        assert sum(not future.done() for future in handed_out) < executor.workers, work.name
        handed_out.append(submit(work))
        return handed_out[-1]

    monkeypatch.setattr(executor, "_submit", one_per_free_worker)
    works = [Work("long", record, (str(tmp_path), "long", 2.0)),
             *(Work(f"short {i}", record, (str(tmp_path), f"short{i}", 0.2)) for i in range(5))]
    assert sorted(name for _, name in executor.run(works)) == \
        ["long", *(f"short{i}" for i in range(5))]
    runs = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert all(runs[f"short{i}"]["worker"] != runs["long"]["worker"] for i in range(5))


def test_a_unit_whose_worker_died_runs_again_and_returns_once(executor, tmp_path):
    works = [Work("dies", die_once, (str(tmp_path / "marker"), "dies")),
             Work("fine", record, (str(tmp_path), "fine", 0.1))]
    results = [result for _, result in executor.run(works)]
    assert (tmp_path / "marker").read_text() == "killed"
    assert sorted(r.split(" on ")[0] for r in results) == ["dies", "fine"]
    executor.client.wait_for_workers(2, timeout=120)  # the nanny restarts the worker


def test_clock_units_still_run_after_the_clock_worker_died(executor, tmp_path):
    pinned = executor.clock_worker()
    executor.client.run(lambda: os._exit(1), workers=[pinned], on_error="ignore")
    deadline = time.monotonic() + 120  # the dead worker gone, its restarted one up
    while pinned in executor.addresses() or executor.workers < 2:
        assert time.monotonic() < deadline, executor.addresses()
        time.sleep(0.2)
    works = [Work("clock after restart", record, (str(tmp_path), "again", 0.1), alone=True)]
    assert [name for _, name in executor.run(works)] == ["again"]


def test_a_scheduler_that_cannot_be_reached_is_named_with_how_to_start_one(monkeypatch):
    from spyre_regress import executor

    monkeypatch.setattr(executor, "CONNECT_TIMEOUT", "1s")  # the message, not the 10 s wait
    started = time.monotonic()
    with pytest.raises(SpyreRegressError, match=r"tcp://127\.0\.0\.1:9.*dask scheduler"):
        Executor.start(scheduler="tcp://127.0.0.1:9")
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("address", ["localhost:8786", "tcp://", "http://h:1", "-x", ""])
def test_an_address_that_is_not_one_is_refused(address):
    with pytest.raises(SpyreRegressError, match="tcp://HOST:PORT"):
        check_address(address)
