"""The per-kernel cost model on plain data: bounds, monotonicity, and each physical term."""

import dataclasses
import random
import re
from pathlib import Path

import pytest

from spyre_sim.cost import (
    KernelKind,
    KernelWork,
    derive_work,
    kernel_cost,
    matmul_reread_bytes,
    op_work,
    output_chunks,
    psum_time_us,
    pt_efficiency,
    roofline_floor_us,
)
from spyre_sim.device import DeviceParams

DEVICE = DeviceParams()
ROOT = Path(__file__).resolve().parents[1]
KINDS: tuple[KernelKind, ...] = ("matmul", "pointwise", "reduction", "softmax", "layernorm",
                                 "restickify", "constant")


def random_work(rng: random.Random) -> KernelWork:
    kind = rng.choice(KINDS)
    cores = rng.choice((1, 2, 3, 4, 8, 16, 25, 32))
    if kind == "matmul":
        b, m = rng.choice((1, 1, 2, 8)), rng.choice((1, 4, 64, 127, 128, 512, 1024))
        n, k = 64 * rng.randint(1, 200), 64 * rng.randint(1, 128)
        split_k = rng.choice((1, 1, 2, 4))
        dims = (("b", b), ("m", m), ("n", n), ("k", k))
        splits = (("b", 1), ("m", 1), ("n", max(1, cores // split_k)), ("k", split_k))
        read = 2 * (b * m * k + k * n) + rng.randint(0, 4096)
        return KernelWork(name="mm", kind=kind, dims=dims, splits=splits, cores_used=cores,
                          hbm_read_bytes=read, hbm_write_bytes=2 * b * m * n,
                          macs=b * m * n * k, simple_elems=rng.choice((0, m * n)),
                          accumulation=rng.choice(("fp32", "fp16")))
    elems = rng.randint(1, 1 << 24)
    reduce = elems if kind in ("reduction", "softmax", "layernorm") else 0
    return KernelWork(name="k", kind=kind, dims=(("d0", elems),), splits=(("d0", cores),),
                      cores_used=cores,
                      hbm_read_bytes=2 * elems * rng.randint(0, 3),
                      hbm_write_bytes=2 * elems if kind != "reduction" else 128,
                      transcendental_elems=rng.choice((0, elems)),
                      simple_elems=rng.choice((0, elems)), reduce_elems=reduce,
                      accumulation=rng.choice(("fp32", "fp16")))


def test_no_kernel_beats_its_compute_or_memory_floor():
    rng = random.Random(3)
    for _ in range(3000):
        work = random_work(rng)
        cost = kernel_cost(work, DEVICE)
        compute, memory = roofline_floor_us(work, DEVICE)
        assert cost.total_us >= compute and cost.total_us >= memory, work
        assert cost.total_us >= cost.compute_us and cost.total_us >= cost.vector_us
        assert cost.bound in ("compute", "memory")


def test_time_grows_with_bytes_and_with_flops():
    rng = random.Random(5)
    for _ in range(1000):
        work = random_work(rng)
        base = kernel_cost(work, DEVICE).total_us
        more_read = dataclasses.replace(work, hbm_read_bytes=work.hbm_read_bytes + (1 << 20))
        more_write = dataclasses.replace(work, hbm_write_bytes=work.hbm_write_bytes + (1 << 20))
        assert kernel_cost(more_read, DEVICE).total_us > base
        assert kernel_cost(more_write, DEVICE).total_us > base
        if work.kind == "restickify":
            continue  # pure data movement: the vector units are not involved
        more_vector = dataclasses.replace(work, transcendental_elems=work.transcendental_elems
                                          + (1 << 20))
        assert kernel_cost(more_vector, DEVICE).total_us > base
        if work.kind == "matmul":
            more_macs = dataclasses.replace(work, macs=work.macs * 2)
            assert kernel_cost(more_macs, DEVICE).total_us > base


def test_pe_array_efficiency_rises_to_full_at_64_rows():
    assert pt_efficiency(64, DEVICE) == 1.0 and pt_efficiency(512, DEVICE) == 1.0
    assert pt_efficiency(1, DEVICE) == pytest.approx((1 / 64) ** 0.35)
    values = [pt_efficiency(rows, DEVICE) for rows in (1, 2, 8, 16, 32, 63)]
    assert values == sorted(values) and values[-1] < 1.0


def test_bandwidth_share_hits_the_measured_points_and_interpolates():
    for cores, share in DEVICE.few_core_bw:
        assert DEVICE.bandwidth_share(cores) == pytest.approx(share)
    assert DEVICE.bandwidth_share(24) == pytest.approx(0.54 + 0.46 / 2)
    shares = [DEVICE.bandwidth_share(c) for c in range(1, 33)]
    assert shares == sorted(shares)


def test_sustained_mac_rate_matches_the_datapath_peak():
    assert DEVICE.peak_mac_per_ns_per_core == pytest.approx(2 * 8 * 8 * 8 * 1.1)
    assert DEVICE.mac_per_ns_per_core == pytest.approx(DEVICE.peak_mac_per_ns_per_core, rel=0.02)


def _pointwise(op: str, cores: int) -> KernelWork:
    shape = (1024, 4096)
    ops = (op_work(op, shape, (shape,)),)
    nbytes = 2 * 1024 * 4096
    return derive_work("k", "pointwise", (("d0", 1024), ("d1", 4096)),
                       (("d0", cores), ("d1", 1)), read_bytes=nbytes, write_bytes=nbytes, ops=ops,
                       accumulation="fp32")


def test_pointwise_is_memory_bound_at_32_cores_and_gelu_exp_neg_cost_the_same():
    costs = {op: kernel_cost(_pointwise(op, 32), DEVICE) for op in ("gelu", "exp", "neg")}
    assert all(c.bound == "memory" for c in costs.values())
    times = [c.total_us for c in costs.values()]
    assert max(times) / min(times) < 1.03
    # on one core the SFU is the bottleneck and the transcendental op costs more
    gelu, neg = (kernel_cost(_pointwise(op, 1), DEVICE) for op in ("gelu", "neg"))
    assert gelu.bound == "compute" and gelu.total_us > 1.5 * neg.total_us


def _matmul(m, n, k, splits, accumulation="fp32"):
    dims = (("b", 1), ("m", m), ("n", n), ("k", k))
    return derive_work("mm", "matmul", dims, tuple(zip("bmnk", splits, strict=True)),
                       read_bytes=2 * (m * k + k * n), write_bytes=2 * m * n,
                       ops=(op_work("mm", (m, n), ((m, k), (k, n))),),
                       accumulation=accumulation)


def test_output_tile_beyond_the_lx_accumulator_is_chunked_and_rereads_activations():
    fits = _matmul(512, 4096, 4096, (1, 8, 4, 1))  # 64 x 1024 = 65,536 fp32 partial sums
    assert output_chunks(fits, DEVICE) == 1 and matmul_reread_bytes(fits, DEVICE)[0] == 0
    wide = _matmul(512, 12800, 4096, (1, 8, 4, 1))  # 64 x 3200 = 204,800 partial sums
    assert output_chunks(wide, DEVICE) == 4
    assert matmul_reread_bytes(wide, DEVICE) == (3 * 512 * 4096 * 2, 4)
    half = dataclasses.replace(wide, accumulation="fp16")
    assert output_chunks(half, DEVICE) == 2
    assert kernel_cost(half, DEVICE).total_us < kernel_cost(wide, DEVICE).total_us


def test_k_split_partial_sums():
    assert psum_time_us(_matmul(1, 1024, 4096, (1, 1, 16, 1)), DEVICE) == 0.0
    decode = _matmul(1, 1024, 4096, (1, 1, 16, 2))  # tiny output: the ring latency floor
    ring = DEVICE.ring_latency_us + DEVICE.ring_hop_ns / 1e3 + 64 * 4 / DEVICE.ring_gbps / 1e3
    assert psum_time_us(decode, DEVICE) == pytest.approx(ring)
    prefill = _matmul(512, 4096, 4096, (1, 8, 2, 2))  # big output: the fitted device sweep
    fitted = 512 * 4096 * DEVICE.psum_us_per_elem_per_hop
    assert psum_time_us(prefill, DEVICE) == pytest.approx(fitted)
    half = dataclasses.replace(prefill, accumulation="fp16")
    assert psum_time_us(half, DEVICE) == pytest.approx(fitted / 2)
    four = _matmul(512, 4096, 4096, (1, 8, 1, 4))
    assert psum_time_us(four, DEVICE) == pytest.approx(3 * fitted)


def test_restickify_moves_bytes_at_the_relayout_rate():
    work = KernelWork(name="r", kind="restickify", dims=(("d0", 4096),), splits=(("d0", 32),),
                      cores_used=32, hbm_read_bytes=1 << 22, hbm_write_bytes=1 << 22)
    cost = kernel_cost(work, DEVICE)
    assert cost.bound == "memory" and cost.memory_us == 0.0
    assert cost.total_us == pytest.approx((1 << 23) / DEVICE.restickify_gbps / 1e3)


def test_fp16_reduction_accumulation_halves_the_reduce_work():
    work = KernelWork(name="s", kind="softmax", dims=(("d0", 512), ("r", 1024)),
                      splits=(("d0", 4),), cores_used=4,
                      hbm_read_bytes=1 << 20, hbm_write_bytes=1 << 20, reduce_elems=512 * 1024)
    fp32 = kernel_cost(work, DEVICE)
    fp16 = kernel_cost(dataclasses.replace(work, accumulation="fp16"), DEVICE)
    assert fp16.vector_us == pytest.approx(fp32.vector_us / DEVICE.fp16_accumulation_speedup)
    assert fp16.total_us < fp32.total_us


def test_every_device_parameter_names_its_source():
    """A number without [S]/[S fit]/[D]/[E] on its line or the comment above fails."""
    lines = (ROOT / "spyre_sim" / "device.py").read_text().splitlines()
    tag = re.compile(r"\[(S|S fit|D|E)\]")
    for field in dataclasses.fields(DeviceParams):
        index = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{field.name}:"))
        context = [lines[index]]
        j = index - 1
        while lines[j].strip().startswith("#"):
            context.append(lines[j])
            j -= 1
        assert any(tag.search(line) for line in context), field.name


def test_docs_list_every_device_parameter():
    text = (ROOT / "docs" / "timing-model.md").read_text()
    missing = [f.name for f in dataclasses.fields(DeviceParams) if f"`{f.name}`" not in text]
    assert not missing
