"""Compiler decisions move simulated time the way the model says, through the real pipeline.

Each test compiles with numerics off and noise off (timing only, deterministic) and reads the
kernels and trace of one run.
"""

import dataclasses
import warnings

import pytest
import torch

import spyre_sim
from spyre_sim.calibrate import TARGETS, TOLERANCE, calibrate
from spyre_sim.cost import kernel_cost, transfer_time_us


def timing(**config) -> spyre_sim.Config:
    return spyre_sim.Config(numerics=False, noise_cv=0.0, cores=config.pop("cores", 32),
                            **config)


def mm(a, b):
    return torch.mm(a, b)


def run_mm(m: int, k: int, n: int, **config):
    a, b = torch.empty(m, k, dtype=torch.float16), torch.empty(k, n, dtype=torch.float16)
    program = spyre_sim.compile(mm, (a, b), timing(**config))
    return program, program.run(a, b)


def kernel_split(result) -> dict[str, int]:
    event = next(e for e in result.trace["traceEvents"] if e.get("cat") == "kernel")
    return event["args"]["split"]


def kernel_works(program):
    return [step.work for step in program.graphs[0].artifacts["kernel"].steps
            if hasattr(step, "work")]


def test_prime_m_cannot_split_on_m_and_pays_per_flop():
    """[M,4096]x[4096,256]: N is only 4 sticks, so 32 cores need an M split; 127 has none and
    falls back to a K split with partial sums on fewer cores."""
    _, prime = run_mm(127, 4096, 256)
    _, even = run_mm(128, 4096, 256)
    assert kernel_split(prime)["m"] == 1 and kernel_split(even)["m"] > 1
    per_flop = [r.kernels[0].time_us / r.kernels[0].flops for r in (prime, even)]
    assert per_flop[0] > 1.5 * per_flop[1]


def test_prime_m_on_a_weight_bound_matmul_costs_slightly_more_per_flop():
    _, prime = run_mm(127, 4096, 4096)
    _, even = run_mm(128, 4096, 4096)
    assert kernel_split(prime)["m"] == 1
    assert prime.kernels[0].bound == even.kernels[0].bound == "memory"
    ratio = (prime.kernels[0].time_us / prime.kernels[0].flops) \
        / (even.kernels[0].time_us / even.kernels[0].flops)
    assert 1.0 < ratio < 1.02  # the same weight stream, 1/128 fewer FLOPs


def _mlp_inputs():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(),
                                torch.nn.Linear(512, 256)).eval()
    return model, torch.randn(128, 256)


def test_fusion_off_costs_launches_and_dram_traffic():
    model, x = _mlp_inputs()
    fused = spyre_sim.compile(model, (x,), timing()).run(x)
    unfused = spyre_sim.compile(model, (x,), timing(fusion=False)).run(x)
    assert len(unfused.kernels) > len(fused.kernels)
    launches = [sum(e.get("cat") == "launch" for e in r.trace["traceEvents"])
                for r in (fused, unfused)]
    assert launches[1] > launches[0]
    assert sum(k.bytes for k in unfused.kernels) > sum(k.bytes for k in fused.kernels)
    assert unfused.device_time_us > fused.device_time_us


@pytest.mark.parametrize("cores", [4, 32])
def test_reduction_accumulation_changes_time_as_the_model_says(cores):
    """fp16 partial sums halve the SFU reduce work: a real saving where the softmax is
    SFU-bound (4 cores), only the overlap share where it is memory-bound (32 cores)."""
    x = torch.randn(512, 1024)
    results, works = {}, {}
    for accumulation in ("fp32", "fp16"):
        program = spyre_sim.compile(lambda t: torch.softmax(t, -1), (x,),
                                    timing(cores=cores, reduction_accumulation=accumulation))
        results[accumulation] = program.run(x).kernels[0]
        (works[accumulation],) = kernel_works(program)
        assert works[accumulation].accumulation == accumulation
    device = spyre_sim.DeviceParams()
    for accumulation, kernel in results.items():
        assert kernel.time_us == pytest.approx(kernel_cost(works[accumulation], device).total_us)
    saving = 1 - results["fp16"].time_us / results["fp32"].time_us
    if cores == 4:
        assert results["fp32"].bound == "compute" and saving > 0.3
    else:
        assert results["fp32"].bound == "memory" and 0 < saving < 0.05


def test_matmul_fp16_accumulation_needs_fewer_output_chunks():
    """The MLP prefill tile (204,800 outputs per core) overflows the LX accumulator in fp32:
    fp16 partial sums halve the chunks, so activations are re-read fewer times."""
    _, fp32 = run_mm(512, 4096, 12800)
    _, fp16 = run_mm(512, 4096, 12800, matmul_accumulation="fp16")
    assert fp16.kernels[0].bytes < fp32.kernels[0].bytes
    assert fp16.kernels[0].time_us < fp32.kernels[0].time_us


def test_cpu_fallback_pays_d2h_and_h2d():
    x = torch.randn(64, 256)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", spyre_sim.FallbackWarning)
        with_fallback = spyre_sim.compile(lambda t: torch.cumsum(t.exp(), 0).exp(), (x,),
                                          timing()).run(x)
        on_device = spyre_sim.compile(lambda t: (t.exp() * 2).exp(), (x,), timing()).run(x)
    events = [e for e in with_fallback.trace["traceEvents"] if e["ph"] == "X"]
    dma = [e for e in events if e.get("cat") in ("d2h", "h2d")]
    assert [e["cat"] for e in dma] == ["d2h", "h2d"]
    device = spyre_sim.DeviceParams()
    for event in dma:
        assert event["dur"] == pytest.approx(transfer_time_us(event["args"]["bytes"], device))
    host = sum(e["dur"] for e in events if e.get("cat") in ("d2h", "h2d", "fallback"))
    on_device_time = sum(k.time_us + device.launch_us for k in with_fallback.kernels)
    assert with_fallback.device_time_us == pytest.approx(on_device_time + host)
    assert host > 2 * device.dma_latency_us
    assert with_fallback.device_time_us > on_device.device_time_us + host


def test_device_parameters_are_overridable_through_config():
    _, base = run_mm(1, 4096, 4096)
    half = dataclasses.replace(spyre_sim.DeviceParams(), dram_effective_gbps=68.25)
    _, slow = run_mm(1, 4096, 4096, device=half)
    assert slow.kernels[0].time_us == pytest.approx(2 * base.kernels[0].time_us, rel=0.02)


def test_calibration_targets_within_tolerance():
    predictions = calibrate(TARGETS)
    errors = {p.target.name: round(p.error, 3) for p in predictions}
    assert all(abs(e) <= TOLERANCE for e in errors.values()), errors
    # decode K-splits the way torch-spyre measured them (n16 k2, n8 k4)
    assert [p.split for p in predictions[3:]] == ["n16 k2", "n8 k4"]
