"""The per-kernel cost model: what one kernel costs on a Spyre card, in microseconds.

Pure functions on `KernelWork` (what a kernel does: iteration space, work split, DRAM bytes,
MACs, vector work) and `DeviceParams`. The kernel stage calls it to choose a work division; the
runtime calls it to build the device timeline from the compiled binary. Formulas follow torch-
spyre's fitted cost model (torch_spyre/_inductor/cost_model.py, docs/source/compiler/
cost_model.md); docs/explanation/timing-model.md explains each term and the calibration.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Literal

from spyre_sim.device import DeviceParams
from spyre_sim.ops import OPS

KernelKind = Literal["matmul", "pointwise", "reduction", "softmax", "layernorm", "restickify",
                     "constant"]


@dataclass(frozen=True, kw_only=True)
class KernelWork:
    name: str
    kind: KernelKind
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


@dataclass(frozen=True, kw_only=True)
class KernelCost:
    compute_us: float  # PE array (matmul) time
    vector_us: float  # SFU/reduction time
    memory_us: float  # DRAM time, operand re-reads included
    psum_us: float  # partial sums over the ring for K splits
    relayout_us: float  # restickify / transpose traffic
    total_us: float
    bound: Literal["compute", "memory"]
    flops: int
    bytes: int  # DRAM bytes moved, re-reads included
    reread_bytes: int = 0  # matmul operand bytes streamed again (output chunks beyond LX)
    output_chunks: int = 1  # passes a core needs over its output tile (LX accumulator)


MATMUL_ELEM_BYTES = 2  # Spyre matmuls read SEN169_FP16 operands (spyre_kernel.py dtype gate)
ACCUMULATOR_BYTES = {"fp32": 4, "fp16": 2}


def pt_efficiency(rows_per_core: float, device: DeviceParams) -> float:
    """PE-array efficiency for `rows_per_core` output rows (TS-cost: min(1, (M/64)^0.35)).

    The 8x8 array eats 8 rows per pass and needs ~8 passes to hide its fill latency, so a
    core with few rows (decode, or a prime M that cannot be split) runs below its MAC peak.
    """
    return min(1.0, (max(rows_per_core, 1.0) / device.pt_fill_rows) ** device.pt_eff_exponent)


def bandwidth_gbps(cores: int, device: DeviceParams) -> float:
    """DRAM bytes per ns that `cores` active cores achieve (few cores under-drive the bus)."""
    return device.dram_effective_gbps * device.bandwidth_share(max(cores, 1))


def memory_time_us(read_bytes: int, write_bytes: int, cores: int, device: DeviceParams) -> float:
    """DRAM time: (R+W)/BW plus read/write turnaround, derated when few cores drive the bus."""
    ns = (read_bytes + write_bytes) / bandwidth_gbps(cores, device)
    ns += device.dram_turnaround_ns_per_byte * min(read_bytes, write_bytes)
    return ns / 1e3


def output_tile_elems(work: KernelWork) -> int:
    """Output elements one core accumulates at a time (batches run one after another)."""
    return -(-work.dim("m") // work.split("m")) * -(-work.dim("n") // work.split("n"))


def output_chunks(work: KernelWork, device: DeviceParams) -> int:
    """How many passes a core makes over its output tile.

    The output-stationary matmul keeps its partial sums in LX for the whole K loop; a tile
    larger than the accumulator budget is done in chunks, each streaming the K loop again
    (TS-fp §2: "the output must fit or the kernel chunks the output").
    """
    acc_bytes = output_tile_elems(work) * ACCUMULATOR_BYTES.get(work.accumulation, 4)
    return max(1, -(-acc_bytes // device.lx_accumulator_bytes))


def matmul_reread_bytes(work: KernelWork, device: DeviceParams) -> tuple[int, int]:
    """DRAM bytes re-read because the output tile is done in chunks, and the chunk count.

    Each extra chunk streams the cheaper operand again (activations when the chunks run
    along N, weights when they run along M); the other operand is read once. Operands
    shared by several cores are multicast over the ring, so a re-read costs its bytes once.
    """
    chunks = output_chunks(work, device)
    if work.kind != "matmul" or chunks == 1:
        return 0, chunks
    lhs = min(work.dim("b") * work.dim("m") * work.dim("k") * MATMUL_ELEM_BYTES,
              work.hbm_read_bytes)
    rhs = work.hbm_read_bytes - lhs
    return (chunks - 1) * min(lhs, rhs), chunks


def psum_time_us(work: KernelWork, device: DeviceParams) -> float:
    """Combining K-split partial sums: (k-1) steps, never faster than the ring can move them.

    The fitted per-element term (TS-wd, from a device K-split sweep) is what decides splits:
    it prices prefill K-splits as the losers torch-spyre measured. The physical floor is the
    ring alone with the k_fast mapping (K partners adjacent, one hop per step): latency plus
    one core's partial tile at the one-way ring rate. Decode shapes sit on the floor.
    """
    k_split = work.split("k")
    if work.kind != "matmul" or k_split <= 1:
        return 0.0
    acc_bytes = ACCUMULATOR_BYTES.get(work.accumulation, 4)
    outputs = work.dim("b") * work.dim("m") * work.dim("n")
    fitted = outputs * device.psum_us_per_elem_per_hop * acc_bytes / 4
    tile_bytes = -(-work.dim("b") // work.split("b")) * output_tile_elems(work) * acc_bytes
    ring = device.ring_latency_us + device.ring_hop_ns / 1e3 + tile_bytes / device.ring_gbps / 1e3
    return (k_split - 1) * max(fitted, ring)


def vector_time_us(work: KernelWork, device: DeviceParams) -> float:
    """SFU time: transcendental ops at the SFP rate, simple ALU ops faster, reductions at
    their own fitted rate (softmax's fused amax-exp-sum-div much slower)."""
    cores = max(work.cores_used, 1)
    rate = device.sfu_elems_per_us_per_core * cores
    vector_us = work.transcendental_elems / rate
    vector_us += work.simple_elems / (rate * device.simple_alu_speedup)
    if work.reduce_elems:
        per_core = device.softmax_elems_per_us_per_core if work.kind == "softmax" \
            else device.reduce_elems_per_us_per_core
        reduce_us = work.reduce_elems / (per_core * cores)
        if work.accumulation == "fp16":
            reduce_us /= device.fp16_accumulation_speedup
        vector_us += reduce_us
    return vector_us


def roofline_floor_us(work: KernelWork, device: DeviceParams) -> tuple[float, float]:
    """(compute floor, memory floor): the MACs at the sustained rate with a full PE array,
    and the kernel's DRAM bytes at the bandwidth its cores can drive. No kernel beats
    either; tests hold the model to that."""
    cores = max(work.cores_used, 1)
    compute = work.macs / cores / device.mac_per_ns_per_core / 1e3
    memory = (work.hbm_read_bytes + work.hbm_write_bytes) / bandwidth_gbps(cores, device) / 1e3
    return compute, memory


def _overlap(a_us: float, b_us: float, device: DeviceParams) -> float:
    """Two double-buffered activities: the longer one plus the share of the shorter one that
    the pipeline's prologue and epilogue leave exposed."""
    return max(a_us, b_us) + device.overlap_beta * min(a_us, b_us)


def kernel_cost(work: KernelWork, device: DeviceParams) -> KernelCost:
    """The kernel's time on its cores, and which resource bounds it.

    T = ov(ov(pe, sfu), mem) + psum + relayout with ov(a, b) = max(a, b) + beta * min(a, b):
    the PE array and the SFU are separate units (a fused epilogue runs on the SFU while the
    array computes the next tile), and DRAM streams under both; mem includes read/write
    turnaround and matmul operand re-reads.
    """
    cores = max(work.cores_used, 1)
    compute_us = 0.0
    if work.kind == "matmul":
        rows_per_core = work.dim("m") / work.split("m")
        rate = device.mac_per_ns_per_core * pt_efficiency(rows_per_core, device)
        compute_us = work.macs / cores / rate / 1e3
    reread, chunks = matmul_reread_bytes(work, device)
    read, write = work.hbm_read_bytes + reread, work.hbm_write_bytes
    memory_us = memory_time_us(read, write, cores, device)
    relayout_us = 0.0
    if work.kind == "restickify":
        relayout_us = (read + write) / (device.restickify_gbps
                                        * device.bandwidth_share(cores)) / 1e3
        memory_us = 0.0
    vector_us = vector_time_us(work, device)
    psum_us = psum_time_us(work, device)
    busy_us = _overlap(compute_us, vector_us, device)
    total_us = _overlap(busy_us, memory_us, device)
    total_us += psum_us + relayout_us
    bound: Literal["compute", "memory"] = \
        "compute" if busy_us > memory_us + relayout_us else "memory"
    flops = 2 * work.macs + work.transcendental_elems + work.simple_elems + work.reduce_elems
    return KernelCost(compute_us=compute_us, vector_us=vector_us, memory_us=memory_us,
                      psum_us=psum_us, relayout_us=relayout_us, total_us=total_us, bound=bound,
                      flops=flops, bytes=read + write, reread_bytes=reread, output_chunks=chunks)


def transfer_time_us(nbytes: int, device: DeviceParams) -> float:
    """One host<->device DMA over PCIe; `nbytes` are stick-padded, since the DMA descriptor
    re-sticks on the fly and moves whole sticks (inferred from torch-spyre's
    docs/source/architecture/dataflow_architecture.md and torch-spyre#3750)."""
    return device.dma_latency_us + nbytes / device.pcie_gbps / 1e3


def host_op_time_us(elements: int, device: DeviceParams) -> float:
    """A CPU fallback op: an estimated element rate (no Spyre-host measurement exists)."""
    return elements / device.host_fallback_elems_per_us


def divisors(n: int) -> list[int]:
    """Ascending divisors: the legal core counts for a dim (splits divide evenly). A dim of
    size 0 (an empty tensor) is not split."""
    if n <= 0:
        return [1]
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@dataclass(frozen=True)
class OpWork:
    """One op inside a kernel, as the cost model sees it."""

    op: str
    vector_class: Literal["transcendental", "simple", "none"]
    output_elems: int
    input_elems: int
    reduces: bool = False


def derive_work(
    name: str,
    kind: KernelKind,
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
    return KernelWork(name=name, kind=kind, dims=dims, splits=splits, cores_used=cores,
                      hbm_read_bytes=read_bytes, hbm_write_bytes=write_bytes, macs=macs,
                      transcendental_elems=transcendental, simple_elems=simple, reduce_elems=reduce,
                      accumulation=accumulation)


def op_work(op: str, output_shape: tuple[int, ...],
            input_shapes: tuple[tuple[int, ...], ...]) -> OpWork:
    """How one op loads the vector units: transcendental ops run at the SFU rate, simple ones
    faster; matmuls and data movement do no vector work; reductions count their inputs."""
    definition = OPS.get(op)
    vector: Literal["transcendental", "simple", "none"] = "none"
    if definition is not None and definition.kind != "matmul" \
            and op not in ("restickify", "pad_rows", "full"):
        vector = definition.vector_class
    return OpWork(
        op,
        vector,
        math.prod(output_shape),
        sum(math.prod(shape) for shape in input_shapes),
        reduces=op in REDUCING_OPS,
    )


REDUCING_OPS = ("sum", "mean", "amax", "amin", "softmax", "layernorm")
