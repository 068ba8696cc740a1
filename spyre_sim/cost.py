"""The per-kernel cost model: what one kernel costs on a Spyre card, in microseconds.

Pure functions on `KernelWork` (what a kernel does: iteration space, work split, DRAM bytes,
MACs, vector work) and `DeviceParams`. The kernel stage calls it to choose a work division; the
runtime calls it to build the device timeline from the compiled binary. Formulas follow
research/spyre-hw.md §6 (torch-spyre's fitted cost model, docs/source/compiler/cost_model.md);
docs/timing-model.md explains each term and the calibration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from spyre_sim.device import DeviceParams
from spyre_sim.ops import OPS


@dataclass(frozen=True)
class KernelWork:
    name: str
    kind: str  # matmul | pointwise | reduction | softmax | layernorm | restickify | constant
    dims: tuple[tuple[str, int], ...]  # iteration space (stick dims counted in elements)
    splits: tuple[tuple[str, int], ...]  # cores per dim
    cores_used: int
    hbm_read_bytes: int
    hbm_write_bytes: int
    macs: int = 0  # matmul multiply-accumulates over the padded iteration space
    transcendental_elems: int = 0  # SFU work at the transcendental rate
    simple_elems: int = 0  # SFU work at the simple-ALU rate
    reduce_elems: int = 0  # elements fed to reductions
    accumulation: str = "fp32"

    def dim(self, label: str, default: int = 1) -> int:
        return dict(self.dims).get(label, default)

    def split(self, label: str) -> int:
        return dict(self.splits).get(label, 1)

    def to_dict(self) -> dict:
        data = asdict(self)
        data["dims"] = [list(d) for d in self.dims]
        data["splits"] = [list(s) for s in self.splits]
        return data

    @classmethod
    def from_dict(cls, data: Mapping) -> KernelWork:
        values = dict(data)
        values["dims"] = tuple((str(k), int(v)) for k, v in values["dims"])
        values["splits"] = tuple((str(k), int(v)) for k, v in values["splits"])
        return cls(**values)


@dataclass(frozen=True)
class KernelCost:
    compute_us: float  # PE array (matmul) time
    vector_us: float  # SFU/reduction time
    memory_us: float  # DRAM time
    psum_us: float  # partial sums over the ring for K splits
    relayout_us: float  # restickify / transpose traffic
    total_us: float
    bound: str  # "compute" or "memory"
    flops: int
    bytes: int


def pt_efficiency(rows_per_core: float, device: DeviceParams) -> float:
    """PE-array efficiency for `rows_per_core` output rows (TS-cost: min(1, (M/64)^0.35))."""
    return min(1.0, (max(rows_per_core, 1.0) / device.pt_fill_rows) ** device.pt_eff_exponent)


def memory_time_us(read_bytes: int, write_bytes: int, cores: int, device: DeviceParams) -> float:
    """DRAM time: (R+W)/BW plus read/write turnaround, derated when few cores drive the bus."""
    bandwidth = device.dram_effective_gbps * device.bandwidth_share(cores)  # GB/s == B/ns
    ns = (read_bytes + write_bytes) / bandwidth
    ns += device.dram_turnaround_ns_per_byte * min(read_bytes, write_bytes)
    return ns / 1e3


def kernel_cost(work: KernelWork, device: DeviceParams) -> KernelCost:
    cores = max(work.cores_used, 1)
    memory_us = memory_time_us(work.hbm_read_bytes, work.hbm_write_bytes, cores, device)
    compute_us = vector_us = psum_us = relayout_us = 0.0
    if work.kind == "matmul":
        rows_per_core = work.dim("m") / work.split("m")
        rate = device.mac_per_ns_per_core * pt_efficiency(rows_per_core, device)
        compute_us = work.macs / cores / rate / 1e3
        k_split = work.split("k")
        if k_split > 1:
            outputs = work.dim("b") * work.dim("m") * work.dim("n")
            psum_us = (k_split - 1) * outputs * device.psum_us_per_elem_per_hop
            if work.accumulation == "fp16":
                psum_us /= 2  # half the bytes per partial sum
    if work.kind == "restickify":
        relayout_us = (work.hbm_read_bytes + work.hbm_write_bytes) / device.restickify_gbps / 1e3
        memory_us = 0.0
    vector_rate = device.sfu_elems_per_us_per_core * cores
    vector_us += work.transcendental_elems / vector_rate
    vector_us += work.simple_elems / (vector_rate * device.simple_alu_speedup)
    if work.reduce_elems:
        per_core = device.softmax_elems_per_us_per_core if work.kind == "softmax" \
            else device.reduce_elems_per_us_per_core
        reduce_us = work.reduce_elems / (per_core * cores)
        if work.accumulation == "fp16":
            reduce_us /= device.fp16_accumulation_speedup
        vector_us += reduce_us
    busy_us = compute_us + vector_us
    total_us = max(busy_us, memory_us) + device.overlap_beta * min(busy_us, memory_us)
    total_us += psum_us + relayout_us
    bound = "compute" if busy_us >= memory_us else "memory"
    flops = 2 * work.macs + work.transcendental_elems + work.simple_elems + work.reduce_elems
    return KernelCost(
        compute_us, vector_us, memory_us, psum_us, relayout_us, total_us, bound,
        flops, work.hbm_read_bytes + work.hbm_write_bytes,
    )


def transfer_time_us(nbytes: int, device: DeviceParams) -> float:
    """One host<->device DMA over PCIe (spyre-hw.md §6.10)."""
    return device.dma_latency_us + nbytes / device.pcie_gbps / 1e3


def host_op_time_us(elements: int, device: DeviceParams) -> float:
    return elements / device.host_fallback_elems_per_us


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True)
class OpWork:
    """One op inside a kernel, as the cost model sees it."""

    op: str
    vector_class: str  # transcendental | simple | none
    output_elems: int
    input_elems: int
    reduces: bool = False


def derive_work(
    name: str,
    kind: str,
    dims: tuple[tuple[str, int], ...],
    splits: tuple[tuple[str, int], ...],
    read_bytes: int,
    write_bytes: int,
    ops: tuple[OpWork, ...],
    accumulation: str,
) -> KernelWork:
    """The work of one kernel from its iteration space, tensors and ops.

    Shared by the kernel stage (to choose a work division) and the backend compiler (to
    describe the binary), so both price the same thing.
    """
    sizes = dict(dims)
    macs = sizes.get("b", 1) * sizes.get("m", 1) * sizes.get("n", 1) * sizes.get("k", 1) \
        if kind == "matmul" else 0
    transcendental = sum(o.output_elems for o in ops
                         if o.vector_class == "transcendental" and not o.reduces)
    simple = sum(o.output_elems for o in ops if o.vector_class == "simple" and not o.reduces)
    reduce = sum(o.input_elems for o in ops if o.reduces)
    cores = math.prod(n for _, n in splits) if splits else 1
    return KernelWork(name, kind, dims, splits, cores, read_bytes, write_bytes, macs,
                      transcendental, simple, reduce, accumulation)


def op_work(op: str, output_shape: tuple[int, ...],
            input_shapes: tuple[tuple[int, ...], ...]) -> OpWork:
    """How one op loads the vector units: transcendental ops run at the SFU rate, simple ones
    faster; matmuls and data movement do no vector work; reductions count their inputs."""
    definition = OPS.get(op)
    no_vector = definition is None or definition.kind == "matmul" \
        or op in ("restickify", "pad_rows", "full")
    return OpWork(
        op,
        "none" if no_vector else definition.vector_class,
        math.prod(output_shape),
        sum(math.prod(shape) for shape in input_shapes),
        op in REDUCING_OPS,
    )


REDUCING_OPS = ("sum", "mean", "amax", "amin", "softmax", "layernorm")
