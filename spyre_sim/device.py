"""Spyre hardware parameters: every number the timing model uses, in one place.

Each value names its source. Tags follow research/spyre-hw.md: [S] stated by a source,
[S fit] fitted to measurements by torch-spyre's cost model, [D] derived by arithmetic,
[E] our estimate (no source; recalibrate when a device is available). Override any of them
through `Config(device=DeviceParams(...))`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class DeviceParams:
    # --- compute ---
    physical_cores: int = 32  # [S] torch-spyre docs/architecture/spyre_accelerator.md
    corelets_per_core: int = 2  # [S] TS-arch: 2 corelets share one LX
    pe_rows: int = 8  # [S] 8x8 PE systolic array per corelet (TS-arch, IBM blog)
    pe_cols: int = 8  # [S]
    simd_lanes: int = 8  # [S] TS-fp: 8 fp16 lanes per PE
    clock_ghz: float = 1.1  # [S] TS-clk clock read-back on a dev card (datasheet says 1.5)
    # Sustained fp16 MAC rate per core; 1024 MAC/cycle x 1.1 GHz. [S fit] TS-cost cost_model.py
    mac_per_ns_per_core: float = 1140.0
    pt_fill_rows: int = 64  # [S] TS-cost: PE array full at ~64 rows per core
    pt_eff_exponent: float = 0.35  # [S fit] TS-cost: pt_eff = min(1, (M_core/64)^0.35)
    # --- scratchpad / memory ---
    lx_bytes_per_core: int = 2 << 20  # [S] 2 MiB LX per core (scratchpad/allocator.py)
    lx_allocatable_fraction: float = 0.8  # [S] DXP_LX_FRAC_AVAIL=0.2 reserved
    stick_bytes: int = 128  # [S] BYTES_IN_STICK, spyre_tensor_impl.h
    dram_peak_gbps: float = 204.8  # [S] LPDDR5-6400 x 256 bit (work_division.py _HBM_BW_GBS)
    dram_effective_gbps: float = 150.0  # [S fit] TS-cost bw_peak, one direction
    dram_turnaround_ns_per_byte: float = 0.00574  # [S fit] TS-cost alpha: R=W reaches ~105 GB/s
    # Share of the DRAM bus a few cores can drive (cores -> factor). [S fit] TS-cost
    few_core_bw: tuple[tuple[int, float], ...] = (
        (1, 0.11), (2, 0.22), (4, 0.43), (8, 0.54), (16, 0.54), (32, 1.0),
    )
    # --- on-chip ring ---
    ring_gbps: float = 136.5  # [S] TS-comm measured one-way
    ring_latency_us: float = 0.149  # [S] TS-comm one-way fixed cost
    ring_hop_ns: float = 4.6  # [S] TS-comm extra per hop
    psum_us_per_elem_per_hop: float = 1.4e-4  # [S fit] work_division.py _PSUM_PER_ELEM_US
    # --- vector units (SFU/SFP) ---
    sfu_elems_per_us_per_core: float = 1.76e3  # [S fit] work_division floors (silu/gelu/exp)
    simple_alu_speedup: float = 4.0  # [E] add/mul/relu vs transcendental on the SFU
    reduce_elems_per_us_per_core: float = 1.2e4  # [S fit] work_division simple reduce floor
    softmax_elems_per_us_per_core: float = 1.4e3  # [S fit] work_division softmax floor
    fp16_accumulation_speedup: float = 2.0  # [E] fp16 partial sums: half the SFU passes
    restickify_gbps: float = 116.0  # [S fit] TS-cost transpose/restickify rate
    # --- overlap of compute and memory inside a kernel ---
    overlap_beta: float = 0.3  # [E] midpoint of TS-cost's -22..-31% / +22..31% bias
    # --- host link and launches ---
    pcie_gbps: float = 50.0  # [E] PCIe Gen5 x16 = 63 GB/s theoretical [D]
    dma_latency_us: float = 10.0  # [E] per host<->device transfer
    launch_us: float = 20.0  # [S-derived/E] device-visible gap per kernel launch
    host_fallback_elems_per_us: float = 500.0  # [E] CPU fallback op throughput

    def to_dict(self) -> dict:
        return asdict(self)

    def bandwidth_share(self, cores: int) -> float:
        """Fraction of DRAM bandwidth `cores` cores can drive (step interpolation)."""
        share = self.few_core_bw[0][1]
        for threshold, factor in self.few_core_bw:
            if cores >= threshold:
                share = factor
        return share
