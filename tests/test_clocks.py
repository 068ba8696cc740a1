"""benchmarks/clocks.py: a host-clock sample is one forked process's call time relative to a
reference workload timed beside it."""

import os
import statistics

import pytest

from benchmarks import clocks


class FakeMachine:
    """A clock that only moves when fake work runs, at a speed the test sets: the machine's
    momentary speed, which the reference is there to cancel."""

    def __init__(self) -> None:
        self.now, self.slowdown = 0.0, 1.0

    def clock(self) -> float:
        return self.now

    def work(self, seconds: float) -> None:
        self.now += seconds * self.slowdown


@pytest.fixture
def one_thread():
    """One intra-op thread, as every benchmark process has (`prepare.steady_process`): the
    reference's matmuls on a thread pool would add other threads' CPU time to the clock."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def machine(monkeypatch):
    fake = FakeMachine()
    monkeypatch.setattr(clocks, "reference", lambda: fake.work(clocks.REFERENCE_S))
    return fake


def test_a_sample_is_the_call_over_its_references_so_the_machine_speed_cancels(machine):
    def call():
        machine.work(0.004)
        machine.slowdown *= 1.5  # the machine slows down after every call

    timed = clocks.timed_calls(lambda: None, call, machine.clock, min_calls=3)
    assert len(timed) == 3
    raw = [took for took, _ in timed]
    assert raw[-1] > 2 * raw[0]  # the clock alone saw the call get slower
    # the reference before a call ran at its speed, the one after at the next one's
    assert clocks.relative_seconds(timed) == pytest.approx(0.004 / 1.25, rel=1e-9)


def test_a_process_times_calls_until_it_has_enough_and_never_more_than_the_cap(machine):
    def timed(seconds, **limits):
        return len(clocks.timed_calls(lambda: None, lambda: machine.work(seconds),
                                      machine.clock, **limits))

    assert timed(0.1) == 1  # one compile is enough time
    assert timed(0.001, min_seconds=0.0095) == 10
    assert timed(1e-6, min_seconds=1.0, max_calls=7) == 7
    assert timed(0.1, min_calls=4) == 4


def test_prepare_runs_before_every_call_and_is_not_timed(machine):
    calls = []

    def prepare():
        machine.work(10.0)  # untimed: rebuilding the call's inputs
        calls.append("prepare")

    def call():
        machine.work(0.002)
        calls.append("call")

    timed = clocks.timed_calls(prepare, call, machine.clock, min_calls=2, min_seconds=0)
    assert calls == ["prepare", "call"] * 3  # the first call is untimed
    assert [took for took, _ in timed] == pytest.approx([0.002, 0.002])


def test_a_warm_call_sample_discards_the_slow_calls_after_the_fork(machine):
    costs = iter([0.009, 0.006] + [0.004] * 10)  # the first two calls pay for the fork

    timed = clocks.timed_calls(lambda: None, lambda: machine.work(next(costs)), machine.clock,
                               clocks.WARM_CALL_MIN_CALLS, discarded=clocks.WARM_CALL_DISCARDED)
    assert [took for took, _ in timed] == pytest.approx([0.004] * clocks.WARM_CALL_MIN_CALLS)


def test_the_host_time_benchmark_takes_the_warm_call_settings():
    from benchmarks import bench_execute

    host = bench_execute.ExecuteHostTime
    assert (host.min_calls, host.discarded_calls) == (clocks.WARM_CALL_MIN_CALLS,
                                                      clocks.WARM_CALL_DISCARDED)


def test_each_sample_is_taken_in_a_fresh_process_and_advances_the_clock():
    parent = os.getpid()
    seen = []

    def call():
        seen.append(os.getpid())  # a child's list: the parent's stays empty

    before = clocks.process_clock()
    value = clocks.sample(lambda: None, call, clocks.time.perf_counter)
    assert value > 0
    assert clocks.process_clock() - before == pytest.approx(value)
    assert seen == []  # the calls ran in the child
    assert clocks.in_child(os.getpid) != parent


def test_a_failure_in_the_measuring_process_is_raised_with_its_traceback():
    def broken():
        raise ValueError("kernel k0 has no descriptor")

    with pytest.raises(RuntimeError, match="kernel k0 has no descriptor"):
        clocks.sample(lambda: None, broken, clocks.time.perf_counter)


def test_a_process_forked_after_torch_used_its_thread_pool_still_measures():
    """The suite's own processes run on one thread, but a pytest worker or a probe may have
    run torch on its OpenMP pool before it forks: the child must not hang in its first op."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        square = torch.randn(512, 512)
        torch.mm(square, square)  # the pool's threads exist in this process now
        value = clocks.in_child(lambda: float(torch.mm(square, square).sum()), timeout=120)
    finally:
        torch.set_num_threads(threads)
    assert value == pytest.approx(float(torch.mm(square, square).sum()), rel=1e-4)


def test_a_measuring_process_that_does_not_answer_is_killed_and_named():
    import time

    with pytest.raises(RuntimeError, match="did not answer within 1 s"):
        clocks.in_child(lambda: time.sleep(60), timeout=1)


def test_a_process_sampled_benchmark_warms_up_once_in_its_own_process():
    class Counting(clocks.ProcessSampled):
        prepared = called = 0

        def fresh(self):
            Counting.prepared += 1

        def call(self):
            Counting.called += 1

    benchmark = Counting()
    benchmark.warm_up()
    benchmark.warm_up()  # asv runs setup before every sample
    assert (Counting.prepared, Counting.called) == (1, 1)
    assert Counting.timer is clocks.process_clock and Counting.number == 1


def test_a_slower_call_gives_a_proportionally_larger_sample(one_thread):
    """The arithmetic is pinned exactly on the fake machine above; this is the real thing (a
    fork, the process clock, the real reference) and asks only that four times the work reads
    clearly, and roughly proportionally, larger."""
    def spin(n):
        return lambda: sum(i * i for i in range(n))

    # five interleaved pairs, judged by the median of their ratios (the two samples of a pair
    # share their moment): the reference's matmuls and allocations feel a memory-bound
    # neighbour more than this pure-bytecode spin does, so one moment's sample can be off by
    # a factor. Beside the other pytest worker's valgrind in CI, one pair once read x2.0 and
    # the median of three unpaired samples x2.3.
    ratios = [clocks.sample(lambda: None, spin(80_000), clocks.time.process_time, min_calls=5)
              / clocks.sample(lambda: None, spin(20_000), clocks.time.process_time, min_calls=5)
              for _ in range(5)]
    assert 2 < statistics.median(ratios) < 8  # four times the work


class Sleepy(clocks.ProcessSampled):
    """A call that waits 20 ms: a compile that sleeps (counts its measuring processes)."""

    measured = 0
    rows_prepared = 0

    def prepare_row(self):
        Sleepy.rows_prepared += 1
        super().prepare_row()

    def call(self):
        import time

        time.sleep(0.02)


def test_a_call_s_parts_come_from_one_process_and_its_cpu_is_relative(monkeypatch, machine):
    """`wait_figures`: the CPU figure as `relative_seconds` gives it, the other parts the
    median over the calls, in seconds."""
    def wait(wall, children_cpu, blocked):
        return clocks.waits.Wait(wall=wall, cpu=0.004, children_cpu=children_cpu,
                                 run_queue=0.0, blocked=blocked)

    timed = [(0.004, clocks.REFERENCE_S * 2, wait(0.03, 0.0, 0.026)),
             (0.004, clocks.REFERENCE_S * 2, wait(0.05, 0.01, 0.036)),
             (0.004, clocks.REFERENCE_S * 2, wait(0.04, 0.0, 0.036))]
    figures = clocks.wait_figures(timed)
    assert figures["cpu"] == pytest.approx(0.002)  # the machine ran at half speed
    assert figures["blocked"] == pytest.approx(0.036)
    assert figures["wall"] == pytest.approx(0.04) and figures["children_cpu"] == 0


def test_in_an_asv_round_the_first_row_measures_every_part_and_the_others_take_theirs(
        monkeypatch, tmp_path):
    monkeypatch.setattr(clocks.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", "c0ffee")
    Sleepy.rows_prepared = 0
    start = clocks.process_clock()
    Sleepy().part_sample("cpu", "mlp", 128)
    cpu = clocks.process_clock() - start
    Sleepy().part_sample("blocked", "mlp", 128)
    blocked = clocks.process_clock() - start - cpu
    Sleepy().part_sample("children_cpu", "mlp", 128)
    children = clocks.process_clock() - start - cpu - blocked
    assert Sleepy.rows_prepared == 1  # one measuring process for the three rows
    assert cpu < 0.005
    assert blocked == pytest.approx(0.02, abs=0.01)
    assert children == pytest.approx(clocks.waits.FLOORS["children_cpu"])  # no child: floor
    assert not list(tmp_path.rglob("*-*/*"))  # every part taken: nothing left behind
    # the next round's rows measure again (the parts were taken once)
    Sleepy().part_sample("blocked", "mlp", 128)
    assert Sleepy.rows_prepared == 2


def test_a_part_left_by_another_commit_row_or_round_is_not_taken(monkeypatch, tmp_path):
    monkeypatch.setattr(clocks.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setenv("ASV_COMMIT", "c0ffee")
    clocks.leave_pending("Row('mlp', 128)", {"blocked": 1.0})
    assert clocks.take_pending("Row('mlp', 127)", "blocked") is None
    monkeypatch.setenv("ASV_COMMIT", "decaf")
    assert clocks.take_pending("Row('mlp', 128)", "blocked") is None
    monkeypatch.setenv("ASV_COMMIT", "c0ffee")
    monkeypatch.setattr(clocks.time, "time", lambda: 1e12)  # a round long gone
    assert clocks.take_pending("Row('mlp', 128)", "blocked") is None


def test_outside_an_asv_run_every_part_row_measures_for_itself(monkeypatch, tmp_path):
    """A probe runs one benchmark row, several times, with no sibling rows after it: a part
    it left behind would be taken by the next commit's probe."""
    monkeypatch.setattr(clocks.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.delenv("ASV_COMMIT", raising=False)
    Sleepy.rows_prepared = 0
    Sleepy().part_sample("cpu", "mlp", 128)
    Sleepy().part_sample("blocked", "mlp", 128)
    assert Sleepy.rows_prepared == 2
    assert not list(tmp_path.iterdir())
