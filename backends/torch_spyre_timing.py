"""torch-spyre's device program priced by spyre_sim's timing model: what a run of a torch-spyre
compile would take on a modelled Spyre card, kernel by kernel, with no card.

The program is what `torch_spyre_sdsc` (beside this file) read from the compile: the wrapper's
steps and each kernel's SDSC executions. Each SDSC execution becomes the cost model's kernel
description (`spyre_sim.cost.KernelWork`) and is priced by its one cost model
(`spyre_sim.cost.kernel_cost` with `DeviceParams`); the steps become spyre_sim's timeline
(`spyre_sim.timeline.run_record`), a Chrome trace included. spyre_sim is imported where a
price is asked for: it is this tool's own package, installed with spyre-regress, and a suite
written out by `spyre-regress suite` carries a copy of it, so the backend module imports
nothing of the tool at module level. docs/torch-spyre-device-time.md says what each SDSC
field becomes and what is guessed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

try:  # installed beside this module (a written-out suite) or embedded with it
    import torch_spyre_sdsc as sdsc
except ImportError:  # loaded by path from spyre-regress's backends/ folder
    import importlib.util
    import sys
    from pathlib import Path

    _spec = importlib.util.spec_from_file_location(
        "torch_spyre_sdsc", Path(__file__).with_name("torch_spyre_sdsc.py"))
    assert _spec is not None and _spec.loader is not None
    sdsc = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = sdsc
    _spec.loader.exec_module(sdsc)
# Ops whose vector work the reader states itself: torch-spyre's own decompositions, which
# spyre_sim's op table (`spyre_sim.ops.OPS`, opfunc -> vector class) does not name, and one
# it names for another meaning (spyre_sim's `layernormnorm` is a whole LayerNorm; torch-spyre
# splits it in three: `exx2` sums x and x^2 per row, `layernormscale` takes 1/sqrt of the
# variance, `layernormnorm` applies mean, scale, weight and bias), each with its vector class
# and ALU passes per element (`shuffle` moves LX data between cores through the vector unit).
# GUESSED: the classes and passes, from what each op computes.
READER_OPS = {"shuffle": ("simple", 1), "exx2": ("simple", 2),
              "layernormscale": ("transcendental", 1), "layernormnorm": ("simple", 4)}
RESTICKIFY_OPS = ("ReStickifyOpHBM",)  # spyre_sim.ops: restickify's opfunc
MATMUL_OPS = ("batchmatmul",)


@dataclass(frozen=True, kw_only=True)
class KernelRow:
    """One kernel of the device program, as a run reports it (the interface's kernel record:
    `name`, `time_us`, `bound`, `cores`) with what a table shows beside it. An unmodelled
    kernel's `time_us` is NaN and its name says why: never a zero."""

    name: str
    time_us: float
    bound: str
    cores: int
    bytes: int = 0
    flops: int = 0
    op: str = ""
    splits: tuple[tuple[str, int], ...] = ()
    repeats: int = 1
    reason: str | None = None

    @property
    def modelled(self) -> bool:
        return self.reason is None


@dataclass(frozen=True)
class Priced:
    """A device program priced: the modelled device time per call (launch gaps, kernels,
    transfers and CPU fallbacks; an unmodelled kernel adds nothing and is counted in
    `unmodelled`), every kernel's row in program order, and the timeline as a Chrome trace."""

    device_us: float
    kernels: tuple[KernelRow, ...]
    trace: dict
    unmodelled: tuple[str, ...]
    reader_version: int = sdsc.READER_VERSION


def _model() -> Any:
    """spyre_sim's cost model and timeline, imported where a price is asked for."""
    try:
        from spyre_sim import cost, device, ops, timeline
    except ImportError as error:
        raise ImportError("the timing model lives in spyre_sim, spyre-regress's own package: "
                          "run where spyre-regress is installed, or in a suite written out by "
                          f"`spyre-regress suite` (it carries a copy) ({error})") from error
    return cost, device, ops, timeline


def vector_classes(ops: Any) -> dict[str, tuple[str, int]]:
    """opfunc -> (vector class, passes): spyre_sim's op table, then the reader's own entries
    (READER_OPS); passes 0 means one ALU pass per operand beyond the first."""
    return {**{d.opfunc: (d.vector_class, 0) for d in ops.OPS.values()}, **READER_OPS}


def kernel_work(executed: sdsc.Executed, cost: Any, classes: Mapping[str, tuple[str, int]]) -> Any:
    """The cost model's `KernelWork` of one SDSC execution. Raises sdsc.Unmodelled."""
    op = executed.op
    if op is None:
        raise sdsc.Unmodelled(executed.key, executed.reason or "not read")
    if op.symbolic:
        raise sdsc.Unmodelled(op.op, "dimension sizes bound at run time (dimToSymbolMapping_)")
    reads = sum(t.nbytes for t in op.tensors if not t.output and t.memory == "hbm")
    writes = sum(t.nbytes for t in op.tensors if t.output and t.memory == "hbm")
    splits = dict(op.splits)
    if op.op in MATMUL_OPS:
        dims = matmul_dims(op)
        space = tuple((label, math.prod(dict(op.dims)[d] for d in names))
                      for label, names in dims)
        split = tuple((label, math.prod(splits.get(d, 1) for d in names))
                      for label, names in dims)
        work = cost.derive_work(executed.name, "matmul", space, split, read_bytes=reads,
                                write_bytes=writes, ops=(), accumulation="fp32")
    elif op.op in RESTICKIFY_OPS:  # its DRAM bytes at the restickify rate, and it runs on
        # the vector unit (`exUnit` sfp): one pass per element, the floor of one kept in LX
        passes = (cost.OpWork(op.op, "simple", op.volume, input_elems=op.volume),)
        work = cost.derive_work(executed.name, "restickify", op.dims, op.splits,
                                read_bytes=reads, write_bytes=writes, ops=passes,
                                accumulation="fp32")
    else:
        work = _vector_work(executed.name, op, (reads, writes), cost, classes=classes)
    return replace(work, cores_used=op.cores)


def matmul_dims(op: sdsc.SdscOp) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(b, m, n, k) of a matmul, each as the SDSC dims it is made of, from which operands
    carry each dim: the batch dims are in all three, M in the input and the output, N in the
    kernel (weights) and the output, K in the input and the kernel. Raises sdsc.Unmodelled."""
    roles = {t.role: [d for d, _ in t.extents] for t in op.tensors}
    if not {"INPUT", "KERNEL", "OUTPUT"} <= set(roles):
        raise sdsc.Unmodelled(op.op, f"operands {sorted(roles)}, not INPUT, KERNEL and OUTPUT")
    a, w, out = (set(roles[r]) for r in ("INPUT", "KERNEL", "OUTPUT"))
    found = (("b", a & w & out), ("m", (a & out) - w), ("n", (w & out) - a), ("k", (a & w) - out))
    if any(len(names) != 1 for label, names in found[1:]):
        raise sdsc.Unmodelled(op.op, "no single M, N and K dim in its operands: "
                         + ", ".join(f"{label}={sorted(n)}" for label, n in found))
    order = [d for d, _ in op.dims]
    return tuple((label, tuple(sorted(names, key=order.index))) for label, names in found)


def _vector_work(name: str, op: sdsc.SdscOp, traffic: tuple[int, int], cost: Any, *,
                 classes: Mapping[str, tuple[str, int]]) -> Any:
    """A vector-unit op: a reduction when its output holds fewer elements than its largest
    input, else pointwise; one ALU pass per operand beyond the first (READER_OPS says more)."""
    if op.op not in classes:
        raise sdsc.Unmodelled(op.op, "an op neither spyre_sim's op table nor the reader knows")
    if op.unit != "sfp":
        raise sdsc.Unmodelled(op.op, f"runs on the {op.unit} unit; the reader prices the PE "
                              "array's matmuls and the vector unit's ops")
    vector_class, passes = classes[op.op]
    inputs = [t for t in op.tensors if not t.output]
    outputs = [t for t in op.tensors if t.output]
    passes = passes or max(1, len(inputs) - 1)
    reduces = bool(outputs) and sum(t.elements for t in outputs) < max(
        (t.elements for t in inputs), default=0)
    work = [cost.OpWork(op.op, vector_class, op.volume, input_elems=op.volume,
                        reduces=reduces)] * passes
    if reduces and op.op in READER_OPS:  # exx2 squares before it sums
        work.append(cost.OpWork(op.op, "simple", op.volume, input_elems=op.volume))
    reads, writes = traffic
    return cost.derive_work(name, "reduction" if reduces else "pointwise", op.dims, op.splits,
                            read_bytes=reads, write_bytes=writes, ops=tuple(work),
                            accumulation="fp32")


def price(program: sdsc.DeviceProgram, device: Any = None) -> Priced:
    """The device program on spyre_sim's modelled card (`device`: a `DeviceParams`, the
    default card when None): each kernel launch pays the launch gap, then its SDSC executions
    run one after another, each priced by `kernel_cost` (times its loop trips); a CPU
    fallback copies its inputs to the host, runs there and copies its result back."""
    cost, device_module, ops, timeline = _model()
    device = device or device_module.DeviceParams()
    classes = vector_classes(ops)
    jobs: list[Any] = []
    rows: list[KernelRow] = []
    for step in program.steps:
        if isinstance(step, sdsc.HostCall):
            jobs += _host_jobs(step, (cost, timeline), device, rows)
            continue
        executions = program.kernels.get(step.kernel, ())
        if step.unimplemented is not None or not executions:
            reason = ("torch-spyre compiles it to a runtime exception" if step.unimplemented
                      else "no SDSC was written for it")
            rows.append(_unmodelled(step.kernel, step.unimplemented or step.kernel, reason, 0))
        launch = device.launch_us
        for executed in executions:
            try:
                work = kernel_work(executed, cost, classes)
            except sdsc.Unmodelled as missing:
                cores = executed.op.cores if executed.op else 0
                rows.append(_unmodelled(executed.name, missing.op, missing.reason, cores))
                continue
            priced = cost.kernel_cost(work, device)
            rows.append(KernelRow(
                name=executed.name, time_us=priced.total_us * executed.repeats,
                bound=priced.bound, cores=work.cores_used,
                bytes=priced.bytes * executed.repeats, flops=priced.flops * executed.repeats,
                op=executed.op.op if executed.op else "", splits=work.splits,
                repeats=executed.repeats))
            jobs.append(timeline.JobStep(kind="compute", name=executed.name,
                                         duration_us=rows[-1].time_us, launch_us=launch,
                                         cores=work.cores_used,
                                         args=_trace_args(priced, work, executed)))
            launch = 0.0
        if launch:  # nothing of the kernel was priced: its launch is still paid
            jobs.append(timeline.JobStep(kind="host", name=f"launch {step.kernel}",
                                         duration_us=0.0, launch_us=launch))
    record = timeline.run_record(tuple(jobs), 1.0)
    record.trace["otherData"].update(generator="spyre-regress torch_spyre_sdsc",
                                     reader_version=sdsc.READER_VERSION)
    return Priced(record.device_time_us, tuple(rows), record.trace,
                  tuple(r.name for r in rows if not r.modelled))


def _unmodelled(name: str, op: str, reason: str, cores: int) -> KernelRow:
    return KernelRow(name=f"unmodelled kernel: {op} ({reason})", time_us=math.nan,
                     bound="unmodelled", cores=cores, op=op, reason=f"{name}: {reason}")


def _trace_args(priced: Any, work: Any, executed: sdsc.Executed) -> tuple[tuple[str, Any], ...]:
    return (("bound", priced.bound), ("bytes", priced.bytes), ("flops", priced.flops),
            ("split", dict(work.splits)), ("repeats", executed.repeats),
            ("compute_us", round(priced.compute_us, 3)),
            ("memory_us", round(priced.memory_us, 3)), ("vector_us", round(priced.vector_us, 3)),
            ("psum_us", round(priced.psum_us, 3)), ("relayout_us", round(priced.relayout_us, 3)),
            ("reread_bytes", priced.reread_bytes))


def _host_jobs(call: sdsc.HostCall, model: tuple[Any, Any], device: Any,
               rows: list[KernelRow]) -> list[Any]:
    """A CPU fallback as spyre_sim's runtime prices one (D2H per input, the host op, H2D of
    the result); an op run eagerly on the device is an unmodelled kernel (no SDSC)."""
    if not call.on_cpu:
        rows.append(_unmodelled(call.op, call.op, "run eagerly on the device: no SDSC in the "
                                "compile", 0))
        return []
    cost, timeline = model
    jobs = [timeline.JobStep(kind="d2h", name=f"d2h {call.op}[{i}]",
                             duration_us=cost.transfer_time_us(n, device), args=(("bytes", n),))
            for i, n in enumerate(call.input_bytes)]
    jobs.append(timeline.JobStep(kind="host", name=f"cpu {call.op}",
                                 duration_us=cost.host_op_time_us(call.elements, device),
                                 args=(("elements", call.elements),)))
    jobs.append(timeline.JobStep(kind="h2d", name=f"h2d {call.op}",
                                 duration_us=cost.transfer_time_us(call.output_bytes, device),
                                 args=(("bytes", call.output_bytes),)))
    return jobs
