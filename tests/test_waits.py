"""benchmarks/waits.py: a region's wall time split into the process's CPU, its children's CPU,
run-queue wait and blocked time, as the kernel accounts them."""

import multiprocessing
import subprocess
import sys
import threading
import time

import pytest

from benchmarks import waits


def burn(seconds: float) -> None:
    """Spend `seconds` of this process's CPU time."""
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


CHILD_BURNS = ("import time\nstart = time.process_time()\n"
               "while time.process_time() - start < 0.15:\n    pass\n")


def test_a_sleep_is_blocked_time_not_cpu():
    _, wait = waits.measure(lambda: time.sleep(0.1))
    assert wait.blocked == pytest.approx(0.1, abs=0.03)
    assert wait.cpu < 0.01 and wait.children_cpu == 0
    assert wait.wall >= 0.1


def test_cpu_work_is_cpu_time_and_a_neighbour_s_share_is_run_queue_wait_not_blocked():
    _, wait = waits.measure(lambda: burn(0.1))
    assert wait.cpu == pytest.approx(0.1, abs=0.01)
    # whatever the machine's load, the wall time the CPU did not account for was spent
    # runnable: the blocked part stays near zero
    assert wait.blocked < 0.02
    # the parts account for the wall time; beside a busy neighbour the schedstat and CPU
    # clocks, read a moment apart from the wall clock, overshoot it by a few ms (2-5 ms at
    # load 5 here), and `blocked` is clamped at zero rather than negative
    assert wait.wall == pytest.approx(wait.cpu + wait.run_queue + wait.blocked, abs=0.01)


def test_a_reaped_child_process_s_cpu_is_children_cpu():
    _, wait = waits.measure(lambda: subprocess.run([sys.executable, "-c", CHILD_BURNS],
                                                   check=True))
    assert 0.15 <= wait.children_cpu < 0.6  # its burn and its interpreter's start
    assert wait.cpu < 0.1


def test_a_live_pool_member_s_cpu_is_children_cpu_though_it_is_never_reaped():
    with multiprocessing.get_context("fork").Pool(1) as pool:
        pool.apply(burn, (0.01,))  # the member is running before the region starts
        _, wait = waits.measure(lambda: pool.apply(burn, (0.2,)))
    # /proc/<pid>/stat counts in clock ticks (10 ms)
    assert wait.children_cpu == pytest.approx(0.2, abs=0.03)
    assert wait.cpu < 0.05


def test_a_thread_s_cpu_is_the_process_s_and_waiting_for_it_is_not_blocked():
    """Waiting for a thread's work is not blocked time: its CPU is the process's. A thread
    that ends inside the region takes its own run-queue wait with it (its schedstat goes
    with it; docs/explanation/compile-parts.md, "What each part cannot see"), so beside a busy
    neighbour that wait reads as blocked; the thread reads it itself just before it ends, and the
    blocked time beyond it stays near zero."""
    queued: list[float] = []

    def work() -> None:
        burn(0.1)
        queued.append(waits.run_queue_waits().get(threading.get_native_id(), 0.0))

    def in_a_thread():
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()

    _, wait = waits.measure(in_a_thread)
    assert wait.cpu == pytest.approx(0.1, abs=0.02)
    assert len(queued) == 1 and queued[0] >= 0
    assert wait.blocked - queued[0] < 0.02


def test_regions_are_named_and_a_repeated_region_sums():
    regions = waits.Regions()
    for _ in range(2):
        with regions.region("wait"):
            time.sleep(0.03)
        with regions.region("work"):
            burn(0.02)
    assert set(regions.waits) == {"wait", "work"}
    assert regions.waits["wait"].blocked == pytest.approx(0.06, abs=0.02)
    assert regions.waits["work"].cpu == pytest.approx(0.04, abs=0.01)
    assert regions.total().wall == pytest.approx(
        regions.waits["wait"].wall + regions.waits["work"].wall)


def test_a_region_that_raises_is_still_measured():
    regions = waits.Regions()
    with pytest.raises(ValueError), regions.region("failing"):
        raise ValueError("compile failed")
    assert "failing" in regions.waits


def snapshot(wall=0.0, cpu=0.0, reaped=0.0, waiting=None, live=None):
    return waits.Snapshot(wall=wall, cpu=cpu, reaped=reaped, waiting=waiting or {},
                          live=live or {})


def test_the_parts_add_up_to_the_wall_time_and_blocked_is_the_rest():
    start = snapshot(waiting={1: 5.0, 2: 1.0})
    end = snapshot(wall=1.0, cpu=0.3, reaped=0.2, waiting={1: 5.1, 2: 1.05, 3: 0.05})
    wait = waits.between(start, end)
    assert wait.run_queue == pytest.approx(0.2)  # thread 3 started in the region
    assert wait.blocked == pytest.approx(1.0 - 0.3 - 0.2 - 0.2)


def test_a_descendant_reaped_in_the_region_counts_only_what_it_spent_in_it():
    # a pool member with 2 s of CPU at the start, reaped (3 s in all) by the end
    start = snapshot(live={(10, 1): 2.0, (11, 1): 0.5})
    end = snapshot(wall=2.0, reaped=3.0, live={(11, 1): 0.7, (12, 9): 0.1})
    wait = waits.between(start, end)
    assert wait.children_cpu == pytest.approx((3.0 - 2.0) + 0.2 + 0.1)


def test_parallel_work_never_makes_blocked_negative():
    wait = waits.between(snapshot(), snapshot(wall=1.0, cpu=1.0, reaped=0.9))
    assert wait.blocked == 0.0


def test_a_part_is_judged_at_its_floor_at_least():
    assert waits.judged("blocked", 0.0) == waits.FLOORS["blocked"] > 0
    assert waits.judged("children_cpu", 0.2) == 0.2
    assert waits.judged("cpu", 0.0001) == 0.0001  # the CPU of a compile is never near zero
    assert set(waits.JUDGED_PARTS) <= set(waits.Wait._fields)


def test_a_live_child_and_its_own_child_are_descendants_and_are_found_only_while_alive():
    code = ("import subprocess, sys, time; sys.path.insert(0, 'benchmarks'); import waits\n"
            "alone = (waits.has_children(), waits.live_descendants())\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import subprocess, sys; "
            "subprocess.run([sys.executable, \\'-c\\', \\'import time; time.sleep(3)\\'])'])\n"
            "time.sleep(0.5)\n"
            "found = waits.live_descendants()\n"
            "child.kill(); child.wait()\n"
            "print(alone, len(found), child.pid in {pid for pid, _ in found})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(waits.__file__).rsplit("/benchmarks/", 1)[0], timeout=60)
    assert done.stdout.strip() == "(False, {}) 2 True", done.stderr


def test_the_module_imports_only_the_standard_library():
    """A suite of another project copies this file: it must run where only the standard
    library is importable."""
    code = ("import sys; sys.modules['torch'] = None; sys.path.insert(0, 'benchmarks');"
            " import waits; print(waits.measure(lambda: None)[1].wall >= 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(waits.__file__).rsplit("/benchmarks/", 1)[0])
    assert done.stdout.strip() == "True", done.stderr


def test_the_example_project_s_copies_are_this_suite_s_modules():
    """A suite of another project copies the measuring modules by file; the example project's
    copies (examples/inductor_project/benchmarks/measuring/) must not drift from these."""
    from pathlib import Path

    root = Path(waits.__file__).parents[1]
    for name in ("clocks.py", "waits.py"):
        copy = root / "examples" / "inductor_project" / "benchmarks" / "measuring" / name
        assert copy.read_text() == (root / "benchmarks" / name).read_text(), (
            f"copy {root / 'benchmarks' / name} to {copy}")
