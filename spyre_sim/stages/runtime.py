"""Stage 8 — runtime: load the binary program as a job plan and execute it on the simulated card.

Mirrors torch_spyre/execution/kernel_runner.py with DUMP_SPYRE_CODE: the program becomes an
ordered JobPlan of Compute / D2H / HostCompute / H2D steps (csrc/job_plan.h) run FIFO on one
stream. Everything here is decoded from the CBOR binary — never from the FX graph — so a wrong
layout or a dropped padding upstream shows up in the numbers or the timing, as on hardware.
"""

from __future__ import annotations

import base64
import logging
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import cbor2
import numpy as np
import torch

from spyre_sim import dlfloat
from spyre_sim.config import Config
from spyre_sim.cost import KernelWork, host_op_time_us, kernel_cost, transfer_time_us
from spyre_sim.errors import NonFinite, SpyreRuntimeError
from spyre_sim.executor import (
    Binding,
    ExecPlan,
    Executor,
    HostStep,
    KernelStep,
    ViewStep,
    cast_to_host_dtype,
)
from spyre_sim.ir import Binary, node_from_dict
from spyre_sim.layouts import TensorLayout
from spyre_sim.timeline import JobStep, RunRecord, noise_factor, run_record

log = logging.getLogger("spyre_sim.runtime")
PROGRAM_BINARY_VERSION = 2  # 2: constants as DLFloat16 codes


def _layout(data: dict | None) -> TensorLayout | None:
    return None if data is None else TensorLayout.from_dict(data)


def _constant(entry: dict[str, Any]) -> torch.Tensor:
    """A resident constant from its DLFloat16 codes (little-endian uint16)."""
    raw = entry["dl16"]
    codes = np.frombuffer(raw if isinstance(raw, bytes) else base64.b64decode(raw), dtype="<u2")
    return dlfloat.decode(torch.from_numpy(codes.astype(np.int32))).reshape(entry["shape"])


def _plan(program: dict[str, Any]) -> ExecPlan:
    constants = program["constants"]
    inputs, resident = [], []
    for value in program["inputs"]:
        binding = Binding(value["name"], _layout(value["layout"]), value["host_dtype"],
                          value["dtype"], kind=value["kind"])
        if value["name"] in constants:
            resident.append((binding, _constant(constants[value["name"]])))
        else:
            inputs.append(binding)
    steps: list[KernelStep | HostStep | ViewStep] = []
    for step in program["steps"]:
        if step["type"] == "compute":
            kernel = step["kernel"]
            steps.append(KernelStep(kernel["name"],
                                    tuple(node_from_dict(n) for n in kernel["ops"]),
                                    kernel["accumulation"]))
        elif step["type"] == "host":
            steps.append(HostStep(node_from_dict(step["node"]),
                                  tuple(_layout(lay) for lay in step["input_layouts"]),
                                  _layout(step["output_layout"])))
        else:
            steps.append(ViewStep(node_from_dict(step["node"])))
    outputs = tuple(
        None if out is None else Binding(out["name"], _layout(out["layout"]), out["host_dtype"],
                                         "", kind="output")
        for out in program["outputs"]
    )
    return ExecPlan(tuple(inputs), tuple(resident), tuple(steps), outputs)


def job_plan(program: dict[str, Any], config: Config) -> tuple[JobStep, ...]:
    """Price every step of the program with the device model (noise-free)."""
    device = config.device
    jobs: list[JobStep] = []
    for step in program["steps"]:
        if step["type"] == "compute":
            kernel = step["kernel"]
            work = KernelWork.from_dict(kernel["work"])
            cost = kernel_cost(work, device)
            args = (("bound", cost.bound), ("bytes", cost.bytes), ("flops", cost.flops),
                    ("split", dict(work.splits)), ("compute_us", round(cost.compute_us, 3)),
                    ("memory_us", round(cost.memory_us, 3)),
                    ("vector_us", round(cost.vector_us, 3)), ("psum_us", round(cost.psum_us, 3)),
                    ("reread_bytes", cost.reread_bytes))
            jobs.append(JobStep(kind="compute", name=kernel["name"], duration_us=cost.total_us,
                                launch_us=device.launch_us,
                                cores=work.cores_used, args=args))
        elif step["type"] == "host":
            node = step["node"]
            for index, layout in enumerate(step["input_layouts"]):
                nbytes = TensorLayout.from_dict(layout).nbytes
                jobs.append(JobStep(kind="d2h", name=f"d2h {node['name']}[{index}]",
                                    duration_us=transfer_time_us(nbytes, device),
                                    args=(("bytes", nbytes),)))
            elements = math.prod(node["shape"])
            jobs.append(JobStep(kind="host", name=f"cpu {node['op']}",
                                duration_us=host_op_time_us(elements, device),
                                args=(("elements", elements),)))
            nbytes = TensorLayout.from_dict(step["output_layout"]).nbytes
            jobs.append(JobStep(kind="h2d", name=f"h2d {node['name']}",
                                duration_us=transfer_time_us(nbytes, device),
                                args=(("bytes", nbytes),)))
    return tuple(jobs)


@dataclass(kw_only=True)
class Executable:
    """Stage 8 artifact: the loaded program — job plan, device timeline, executor."""

    index: int
    plan: ExecPlan
    jobs: tuple[JobStep, ...]
    output_shapes: tuple[tuple[tuple[int, ...], str] | None, ...]
    config: Config
    _executor: Executor | None = field(default=None, repr=False)
    _rng: random.Random = field(default_factory=random.Random, repr=False)

    @property
    def base_device_time_us(self) -> float:
        return sum(j.launch_us + j.duration_us for j in self.jobs)

    def to_text(self) -> str:
        lines = [f"graph {self.index} job plan: {len(self.jobs)} steps, "
                 f"device time {self.base_device_time_us:.3f} us (noise-free)"]
        for job in self.jobs:
            detail = " ".join(f"{k}={v}" for k, v in job.args)
            lines.append(f"  {job.kind:7} {job.name} launch={job.launch_us:.3f}us "
                         f"time={job.duration_us:.3f}us cores={job.cores} {detail}")
        return "\n".join(lines) + "\n"

    def placeholder_outputs(self) -> list[torch.Tensor | None]:
        """Zero tensors of the outputs' shapes and dtypes, computed without running anything."""
        return [None if meta is None else cast_to_host_dtype(torch.zeros(meta[0]), meta[1])
                for meta in self.output_shapes]

    def __call__(self, inputs: Sequence[torch.Tensor],
                 label: str = "") -> tuple[list, RunRecord, NonFinite | None]:
        """Outputs, the timeline record, and where this run first produced inf/NaN (or None)."""
        note = None
        if self.config.numerics:
            if self._executor is None:
                self._executor = Executor(self.plan, "runtime", self.index)
            try:
                outputs, note = self._executor(inputs)
            except (RuntimeError, ValueError, IndexError) as error:
                raise SpyreRuntimeError(f"spyre_sim runtime: graph {self.index}: {error}") \
                    from error
        else:
            outputs = self.placeholder_outputs()
        factor = noise_factor(self._rng, self.config.noise_cv)
        return outputs, run_record(self.jobs, factor, label), note


def run(binary: Binary, config: Config) -> Executable:
    program = cbor2.loads(binary.payload)
    if program.get("version") != PROGRAM_BINARY_VERSION:
        raise SpyreRuntimeError(f"binary format version {program.get('version')!r}; this "
                                f"runtime loads version {PROGRAM_BINARY_VERSION}")
    plan = _plan(program)
    jobs = job_plan(program, config)
    output_shapes = tuple(
        None if out is None else (tuple(out["layout"]["host_size"]), out["host_dtype"])
        for out in program["outputs"]
    )
    seed = config.noise_seed
    rng = random.Random(None if seed is None else seed * 1_000_003 + program["graph"])
    executable = Executable(index=program["graph"], plan=plan, jobs=jobs,
                            output_shapes=output_shapes, config=config, _executor=None, _rng=rng)
    log.info("runtime: %d job steps, %.1f us modelled device time", len(jobs),
             executable.base_device_time_us)
    return executable
