"""The device timeline: Chrome-trace validity, the noise model, and timing-only runs."""

import json
import math
import random
import statistics
import warnings

import pytest
import torch

import spyre_sim
from spyre_sim.timeline import DEVICE_PID, DMA_TID, HOST_PID, JobStep, noise_factor, run_record

STEPS = (
    JobStep(kind="compute", name="k0_mm", duration_us=120.0, launch_us=20.0, cores=32,
            args=(("bound", "memory"), ("bytes", 4096), ("flops", 8192), ("split", {"n": 32}))),
    JobStep(kind="d2h", name="d2h x[0]", duration_us=11.0, args=(("bytes", 2048),)),
    JobStep(kind="host", name="cpu cumsum", duration_us=3.0, args=(("elements", 1024),)),
    JobStep(kind="h2d", name="h2d y", duration_us=12.0, args=(("bytes", 2048),)),
    JobStep(kind="compute", name="k1_exp", duration_us=7.5, launch_us=20.0, cores=4,
            args=(("bound", "compute"), ("bytes", 256), ("flops", 64), ("split", {"d0": 4}))),
)


def check_trace(trace: dict, device_time_us: float) -> None:
    """What Perfetto and chrome://tracing need, and what the timeline promises."""
    json.loads(json.dumps(trace))
    events = trace["traceEvents"]
    assert events
    for event in events:
        assert {"name", "ph", "ts", "pid", "tid"} <= set(event), event
    complete = [e for e in events if e["ph"] == "X"]
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in complete)
    named = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in complete} <= named
    assert {e["pid"] for e in events if e["name"] == "process_name"} == {DEVICE_PID, HOST_PID}
    lanes: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for e in complete:
        lanes.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
    for spans in lanes.values():
        spans.sort()
        for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
            assert start >= end - 1e-9
    span = max(e["ts"] + e["dur"] for e in complete)
    assert span == pytest.approx(device_time_us, rel=1e-12)
    for e in complete:
        if e.get("cat") == "kernel":
            assert {"bytes", "flops", "split", "bound"} <= set(e["args"])
            assert e["args"]["bound"] in ("compute", "memory")


def test_run_record_lays_out_steps_back_to_back():
    record = run_record(STEPS, 1.0)
    check_trace(record.trace, record.device_time_us)
    assert record.device_time_us == pytest.approx(120 + 20 + 11 + 3 + 12 + 7.5 + 20)
    assert [k.time_us for k in record.kernels] == [120.0, 7.5]  # execution alone, no launch
    assert [k.cores for k in record.kernels] == [32, 4]
    events = [e for e in record.trace["traceEvents"] if e["ph"] == "X"]
    assert sum(e["tid"] == DMA_TID for e in events) == 2
    assert sum(e.get("cat") == "kernel" for e in events) == 32 + 4
    assert sum(e.get("cat") == "launch" for e in events) == 2


def test_run_record_scales_every_step_by_the_noise_factor():
    base, noisy = run_record(STEPS, 1.0), run_record(STEPS, 1.25)
    assert noisy.device_time_us == pytest.approx(1.25 * base.device_time_us)
    assert [k.time_us for k in noisy.kernels] == pytest.approx([150.0, 9.375])
    with pytest.raises(ValueError, match="positive"):
        run_record(STEPS, 0.0)


@pytest.mark.parametrize("cv", [0.015, 0.2])
def test_noise_has_mean_one_and_the_documented_cv(cv):
    rng = random.Random(11)
    draws = [noise_factor(rng, cv) for _ in range(20_000)]
    mean = statistics.fmean(draws)
    # 5 standard errors of the mean, and of the standard deviation (~1/sqrt(2n) relative)
    assert mean == pytest.approx(1.0, abs=5 * cv / math.sqrt(len(draws)))
    assert statistics.stdev(draws) / mean == pytest.approx(cv, rel=5 / math.sqrt(2 * len(draws)))
    assert min(draws) > 0


def test_noise_off_is_exactly_one_and_draws_nothing():
    rng = random.Random(1)
    state = rng.getstate()
    assert all(noise_factor(rng, 0.0) == 1.0 for _ in range(100))
    assert rng.getstate() == state


def test_default_noise_cv_is_the_documented_one():
    assert spyre_sim.Config().noise_cv == 0.015


def _compile_mlp(**config):
    x = torch.randn(8, 64)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(),
                                torch.nn.Linear(128, 64)).eval()
    return spyre_sim.compile(model, (x,), spyre_sim.Config(**config)), x


def test_noise_off_gives_bit_identical_device_times():
    program, x = _compile_mlp(noise_cv=0.0)
    first, second = program.run(x), program.run(x)
    again, _ = _compile_mlp(noise_cv=0.0)
    third = again.run(x)
    assert first.device_time_us == second.device_time_us == third.device_time_us
    assert first.kernels == second.kernels == third.kernels


def test_seeded_noise_repeats_across_compiles_and_varies_between_runs():
    program, x = _compile_mlp(noise_seed=7)
    times = [program.run(x).device_time_us for _ in range(5)]
    again, _ = _compile_mlp(noise_seed=7)
    assert [again.run(x).device_time_us for _ in range(5)] == times
    assert len(set(times)) == 5
    base = program.graphs[0].executable.base_device_time_us
    assert all(abs(t / base - 1) < 0.1 for t in times)


def test_timing_only_mode_gives_the_numerics_mode_timeline():
    # each program runs before the next compile: compile() resets Dynamo, so an older
    # program would recompile (and draw from a new graph's noise stream) on its next run
    timed, x = _compile_mlp(numerics=False, noise_seed=3)
    timing_only = [timed.run(x) for _ in range(3)]
    computed, _ = _compile_mlp(numerics=True, noise_seed=3)
    with_numerics = [computed.run(x) for _ in range(3)]
    assert len({r.device_time_us for r in timing_only}) == 3
    for a, b in zip(timing_only, with_numerics, strict=True):
        assert a.device_time_us == b.device_time_us and a.kernels == b.kernels
        assert a.trace == b.trace
    assert not torch.equal(with_numerics[0].outputs[0], timing_only[0].outputs[0])


def test_pipeline_trace_with_a_fallback_is_valid():
    def program(ids, weight):
        return torch.nn.functional.embedding(ids, weight).exp()

    ids, weight = torch.randint(0, 100, (16,)), torch.randn(100, 64)
    with warnings.catch_warnings():  # warned once per process, maybe by another test
        warnings.simplefilter("ignore", spyre_sim.FallbackWarning)
        compiled = spyre_sim.compile(program, (ids, weight), spyre_sim.Config(noise_cv=0.0))
    result = compiled.run(ids, weight)
    check_trace(result.trace, result.device_time_us)
    categories = [e.get("cat") for e in result.trace["traceEvents"] if e["ph"] == "X"]
    assert "d2h" in categories and "h2d" in categories and "fallback" in categories
