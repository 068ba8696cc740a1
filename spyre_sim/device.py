"""Spyre hardware parameters: every number the timing model uses, in one place.

Each value names its source. Tags: [S] stated by a source,
[S fit] fitted to device measurements by torch-spyre, [D] derived by arithmetic from sourced
numbers, [E] our estimate (no source; recalibrate when a device is available). Override any
of them through `Config(device=DeviceParams(...))`; docs/explanation/timing-model.md lists them with
the formulas that use them and the calibration run.

Source keys: TS-arch = torch-spyre docs/source/architecture/spyre_accelerator.md; TS-cost =
torch-spyre torch_spyre/_inductor/cost_model.py (+ docs/source/compiler/cost_model.md);
TS-wd = torch_spyre/_inductor/work_division.py; TS-fp = the torch-spyre design note "The Spyre
matmul work-division cost model, from first principles" (§ numbers refer to it); TS-comm /
TS-clk = AdnanHoque/torch-spyre docs/source/compiler/communication_cost_model.md and its
clock read-back artifact.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True, kw_only=True)
class DeviceParams:
    # --- compute ---
    physical_cores: int = 32  # [S] TS-arch
    corelets_per_core: int = 2  # [S] TS-arch: 2 corelets share one LX
    pe_rows: int = 8  # [S] 8x8 PE systolic array per corelet (TS-arch, IBM blog)
    pe_cols: int = 8  # [S]
    simd_lanes: int = 8  # [S] TS-fp §2: 8 fp16 lanes per PE
    clock_ghz: float = 1.1  # [S] TS-clk clock read-back on a dev card (datasheet assumes 1.5)
    # Sustained fp16 MAC rate per core, ~= 1024 MAC/cycle x 1.1 GHz. [S fit] TS-cost
    mac_per_ns_per_core: float = 1140.0
    pt_fill_rows: int = 64  # [S] TS-cost / TS-fp §4.1: PE array full at ~64 rows per core
    pt_eff_exponent: float = 0.35  # [S fit] TS-cost: pt_eff = min(1, (M_core/64)^0.35)
    # --- scratchpad / memory ---
    lx_bytes_per_core: int = 2 << 20  # [S] 2 MiB LX per core (scratchpad/allocator.py)
    lx_allocatable_fraction: float = 0.8  # [S] DXP_LX_FRAC_AVAIL=0.2 reserved
    # Matmul output accumulator a core keeps in LX: TS-cost's operand re-read threshold of
    # 65,536 output elements per core, held as fp32 partial sums (65,536 x 4 B). [D]
    lx_accumulator_bytes: int = 65536 * 4
    stick_bytes: int = 128  # [S] BYTES_IN_STICK, spyre_tensor_impl.h
    dram_peak_gbps: float = 204.8  # [S] LPDDR5-6400 x 256 bit (TS-wd _HBM_BW_GBS)
    # Achieved DRAM streaming rate into the cores. [S fit] TS-fp §9.2: decode GEMVs stream
    # their weights at 131-136 GB/s (33.6 MB in 0.247 ms); the same rate as the measured
    # one-way ring transfer (136.457 GB/s, TS-comm). TS-cost's mixed-family fit is 150.
    dram_effective_gbps: float = 136.5
    dram_turnaround_ns_per_byte: float = 0.00574  # [S fit] TS-cost alpha: R=W reaches ~105 GB/s
    # Share of the DRAM bus `cores` active cores can drive. [S fit] TS-cost, measured at
    # powers of two; linear in between. [D]
    few_core_bw: tuple[tuple[int, float], ...] = (
        (1, 0.11), (2, 0.22), (4, 0.43), (8, 0.54), (16, 0.54), (32, 1.0),
    )
    # --- on-chip ring ---
    ring_gbps: float = 136.5  # [S] TS-comm measured one-way (136.457 GB/s)
    ring_latency_us: float = 0.149  # [S] TS-comm one-way fixed cost (0.14925 us)
    ring_hop_ns: float = 4.6  # [S] TS-comm extra per hop (two-point sensitivity)
    # K-split partial sums, per output element per extra K partner. [S fit] TS-wd
    # _PSUM_PER_ELEM_US, fitted on a 7-shape device K-split sweep (TS-fp §4.3).
    psum_us_per_elem_per_hop: float = 1.4e-4
    # --- vector units (SFU/SFP) ---
    sfu_elems_per_us_per_core: float = 1.76e3  # [S fit] TS-wd SFP floor (silu sweep)
    simple_alu_speedup: float = 4.0  # [E] add/mul/relu vs transcendental on the SFU
    reduce_elems_per_us_per_core: float = 1.2e4  # [S fit] TS-wd simple reduce (R^2 = 0.97)
    softmax_elems_per_us_per_core: float = 1.4e3  # [S fit] TS-wd softmax floor
    # fp16 partial sums use both 16-bit halves of an fp32 lane: half the SFU passes. [E]
    fp16_accumulation_speedup: float = 2.0
    restickify_gbps: float = 116.0  # [S fit] TS-cost transpose/restickify rate
    # --- overlap of compute and DRAM inside a kernel ---
    # Share of the shorter of (compute, DRAM) that double buffering does not hide: about one
    # pipeline prologue/epilogue per ~20 K-steps. [E] calibrated on the two prefill matmuls
    # (docs/measurements/timing-model.md); TS-cost's fitted range is 0 (its max() form) to 1 (sum).
    overlap_beta: float = 0.05
    # --- host link and launches ---
    pcie_gbps: float = 50.0  # [E] PCIe Gen5 x16 = 63 GB/s theoretical [D]
    dma_latency_us: float = 10.0  # [E] per host<->device transfer (5-30 us plausible)
    # Device-visible gap per kernel launch. [E] 20-100 us; a 32-core microbenchmark measured
    # a 98 us median gap including host setup (TS-comm: AdnanHoque/torch-spyre,
    # docs/source/compiler/communication_cost_model.md).
    launch_us: float = 20.0
    host_fallback_elems_per_us: float = 500.0  # [E] CPU fallback op throughput

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def peak_mac_per_ns_per_core(self) -> float:
        """Datapath peak at the configured clock (1126.4 at 1.1 GHz) [D]; the sustained fit
        `mac_per_ns_per_core` is within 1.2 % of it, which is why the fit is trusted."""
        macs_per_cycle = self.corelets_per_core * self.pe_rows * self.pe_cols * self.simd_lanes
        return macs_per_cycle * self.clock_ghz

    def bandwidth_share(self, cores: int) -> float:
        """Fraction of DRAM bandwidth `cores` active cores can drive.

        Linear between the measured points: a step function would price 25 cores like 16
        (54 %), which makes the split search avoid every non-power-of-two core count.
        """
        points = sorted(self.few_core_bw)
        if cores <= points[0][0]:
            return points[0][1]
        for (c0, s0), (c1, s1) in zip(points, points[1:], strict=False):
            if cores <= c1:
                return s0 + (s1 - s0) * (cores - c0) / (c1 - c0)
        return points[-1][1]
