"""Runs a device program: the shared interpreter behind every executable artifact and the runtime.

Values live as fp32 tensors. Each op computes in fp32 and its result is stored in the op's
device format: SEN169_FP16 (DLFloat16, `spyre_sim.dlfloat`) for "f16" and bool, IEEE_FP32 for
"f32" (ops torch-spyre runs in fp32), integers as integers. Storage around fp32 compute because
native 16-bit matmul on these CPUs is slower than fp32. Kernels that ask for 16-bit
accumulation get it emulated explicitly, one 64-element stick of DLFloat16 partial sums at a
time. Where a binding carries a layout, data crosses host<->device through it (stride_map for
the DMA, device_dims for the kernel's view), so a wrong layout shows up as wrong numbers.

Each call also notes where non-finite values first appear (`NonFinite`): the first H2D
conversion, op or CPU fallback whose result holds inf/NaN while its inputs were finite.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from spyre_sim import layouts as L
from spyre_sim.dlfloat import round_and_check, round_dlfloat16
from spyre_sim.errors import NonFinite
from spyre_sim.ops import OPS, apply_view, fallback_callable

STICK_ELEMS = 64  # 16-bit elements per 128-byte stick: the unit of a 16-bit partial sum


@dataclass(frozen=True)
class Binding:
    name: str
    layout: L.TensorLayout | None
    host_dtype: str
    dtype: str
    kind: str


@dataclass(frozen=True)
class KernelStep:
    name: str
    ops: tuple  # tuple[ir.Node, ...]
    accumulation: str


@dataclass(frozen=True)
class ViewStep:
    node: Any  # ir.Node


@dataclass(frozen=True)
class HostStep:
    """A CPU fallback: inputs come back over D2H, the op runs on the host, the result goes H2D."""

    node: Any  # ir.Node with op "aten.<name>.<overload>"
    input_layouts: tuple[L.TensorLayout | None, ...]
    output_layout: L.TensorLayout | None


@dataclass(frozen=True)
class ExecPlan:
    inputs: tuple[Binding, ...]
    constants: tuple[tuple[Binding, torch.Tensor], ...]
    steps: tuple[KernelStep | ViewStep | HostStep, ...]
    outputs: tuple[Binding | None, ...]


def round_to(x: torch.Tensor, dtype: str) -> torch.Tensor:
    """Store `x` as the device would: DLFloat16 for "f16", fp32 for "f32", 0/1 for bool,
    integers as integers."""
    if dtype == "i32":
        return x.to(torch.int64)
    if dtype == "bool":
        return (x != 0).to(torch.float32)
    if dtype == "f32":
        return x.to(torch.float32)
    return round_dlfloat16(x)


def _sum_fp16(x: torch.Tensor, dims: Sequence[int], keepdim: bool) -> torch.Tensor:
    """Sum with a 16-bit (DLFloat16) accumulator, adding one stick of rounded partials at a
    time."""
    dims = sorted(d % x.dim() for d in dims) if x.dim() else []
    if not dims:
        return x.clone()
    kept = [d for d in range(x.dim()) if d not in dims]
    flat = x.permute(kept + dims).reshape(*[x.shape[d] for d in kept], -1)
    acc = torch.zeros(flat.shape[:-1])
    for start in range(0, flat.shape[-1], STICK_ELEMS):
        partial = round_to(flat[..., start:start + STICK_ELEMS].sum(-1), "f16")
        acc = round_to(acc + partial, "f16")
    if keepdim:
        for d in dims:
            acc = acc.unsqueeze(d)
    return acc


def _fp16_accumulating(op: str, args: list, attrs: dict) -> torch.Tensor | None:
    """16-bit-accumulation variants of the ops that sum (knob value "fp16": partial sums in
    the SEN169_FP16 format); None when the op does not accumulate."""
    if op in ("sum", "mean"):
        x = args[0]
        total = _sum_fp16(x, attrs["dims"], attrs.get("keepdim", False))
        if op == "sum":
            return total
        count = 1
        for d in attrs["dims"]:
            count *= x.shape[d]
        return total / count
    if op == "softmax":
        dim = attrs["dim"]
        shifted = args[0] - args[0].amax(dim=dim, keepdim=True)
        exps = round_to(torch.exp(shifted), "f16")
        return exps / _sum_fp16(exps, [dim], True)
    if op == "layernorm":
        x, weight, bias = (list(args) + [None, None])[:3]
        dims = list(range(x.dim() - attrs["ndims"], x.dim()))
        count = 1
        for d in dims:
            count *= x.shape[d]
        mean = round_to(_sum_fp16(x, dims, True) / count, "f16")
        centered = round_to(x - mean, "f16")
        var = round_to(_sum_fp16(round_to(centered * centered, "f16"), dims, True) / count, "f16")
        out = centered * torch.rsqrt(var + attrs["eps"])
        out = out * weight if weight is not None else out
        return out + bias if bias is not None else out
    if op in ("mm", "bmm"):
        a, b = args
        acc = torch.zeros(*a.shape[:-1], b.shape[-1])
        for start in range(0, a.shape[-1], STICK_ELEMS):
            part = a[..., start:start + STICK_ELEMS] @ b[..., start:start + STICK_ELEMS, :]
            acc = round_to(acc + round_to(part, "f16"), "f16")
        return acc
    return None


def compute_node(node, env: dict[str, torch.Tensor],
                 accumulation: str) -> tuple[torch.Tensor, bool]:
    """The node's result as the device stores it, and whether it is all finite."""
    args = [env[a] if isinstance(a, str) else a for a in node.inputs]
    attrs = node.attr
    result = _fp16_accumulating(node.op, args, attrs) if accumulation == "fp16" else None
    if result is None:
        result = OPS[node.op].compute(*args, **attrs)
    if node.dtype == "f16":
        return round_and_check(result)
    value = round_to(result, node.dtype)
    return value, all_finite(value)


def _host_tensor(value: torch.Tensor, dtype: str) -> torch.Tensor:
    if dtype == "i32":
        return value.to(torch.int64).contiguous()
    return round_to(value.detach(), dtype).contiguous()


def to_device(value: torch.Tensor, binding_dtype: str, layout: L.TensorLayout | None):
    """Host tensor -> what a kernel reads: converted, DMA'd through the layout, read back."""
    host = _host_tensor(value, binding_dtype)
    if layout is None:
        return host
    return L.device_to_logical(L.host_to_device(host, layout), layout)


def to_host(value: torch.Tensor, layout: L.TensorLayout | None) -> torch.Tensor:
    """What a kernel wrote -> host memory, through the layout."""
    if layout is None:
        return value
    return L.device_to_host(L.logical_to_device(value, layout), layout)


def all_finite(value: Any) -> bool:
    """No inf or NaN in `value` (True for integer tensors and non-tensors)."""
    if not isinstance(value, torch.Tensor) or not value.is_floating_point() or not value.numel():
        return True
    # One single-threaded reduction usually settles it: a finite sum means all are finite.
    if value.dtype == torch.float32 and value.is_contiguous() and not value.requires_grad:
        total = np.add.reduce(value.numpy(), axis=None)
    else:
        total = value.sum()
    return bool(np.isfinite(float(total))) or bool(torch.isfinite(value).all())


_HOST_DTYPES = {
    "float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16,
    "int64": torch.int64, "int32": torch.int32, "bool": torch.bool,
}


def cast_to_host_dtype(value: torch.Tensor, host_dtype: str) -> torch.Tensor:
    target = _HOST_DTYPES.get(host_dtype, torch.float32)
    if target is torch.bool:
        return value != 0
    return value.to(target)


def _fallback_args(template: Any, tensors: list[torch.Tensor]) -> Any:
    """Decode a fallback's encoded arguments: {"input": i} is tensor i, {"dtype": name} a dtype."""
    if isinstance(template, dict) and set(template) == {"input"}:
        return tensors[template["input"]]
    if isinstance(template, dict) and set(template) == {"dtype"}:
        return getattr(torch, template["dtype"])
    if isinstance(template, (list, tuple)):
        return type(template)(_fallback_args(t, tensors) for t in template)
    return template


def run_host_op(step: HostStep, env: dict[str, torch.Tensor]) -> torch.Tensor:
    """A CPU fallback: inputs copied to the host (bools as bools), the op, the result back."""
    node = step.node
    attrs = node.attr
    dtypes = attrs.get("input_dtypes") or [""] * len(node.value_inputs)
    tensors = [to_host(env[name], layout) != 0 if dtype == "bool" else to_host(env[name], layout)
               for name, layout, dtype in zip(node.value_inputs, step.input_layouts, dtypes,
                                              strict=True)]
    args = _fallback_args(attrs.get("args", []), tensors)
    kwargs = {k: _fallback_args(v, tensors) for k, v in attrs.get("kwargs", {}).items()}
    result = fallback_callable(node.op)(*args, **kwargs)
    if "output" in attrs:  # one node per result of a multi-output op
        result = result[attrs["output"]]
    return to_device(result, node.dtype, step.output_layout)


class Executor:
    """A loaded device program; parameters stay resident across calls, as on the card.

    A call returns the outputs and the first place (`NonFinite`) where this run turned finite
    values into inf/NaN, or None. `stage` and `graph` label that place.
    """

    def __init__(self, plan: ExecPlan, stage: str = "runtime", graph: int = 0) -> None:
        self.plan, self.stage, self.graph = plan, stage, graph
        self._constants = {b.name: to_device(t, b.dtype, b.layout) for b, t in plan.constants}
        self._constant_note = next(
            (self._note(f"h2d %{b.name}", "to_device") for b, t in plan.constants
             if all_finite(t) and not all_finite(self._constants[b.name])), None)
        self._resident: dict[str, tuple[weakref.ref, int, torch.Tensor]] = {}

    def _note(self, kernel: str, op: str) -> NonFinite:
        return NonFinite(kernel, self.stage, op, self.graph)

    def _load(self, binding: Binding, value: torch.Tensor) -> tuple[torch.Tensor, bool]:
        """What the kernels read, and whether it crossed H2D now (not resident already)."""
        if binding.kind != "parameter":
            return to_device(value, binding.dtype, binding.layout), True
        cached = self._resident.get(binding.name)
        if cached is not None and cached[0]() is value and cached[1] == value._version:
            return cached[2], False
        loaded = to_device(value, binding.dtype, binding.layout)
        self._resident[binding.name] = (weakref.ref(value), value._version, loaded)
        return loaded, True

    def _load_inputs(self, inputs: Sequence[torch.Tensor], env: dict) -> NonFinite | None:
        note = None
        for binding, value in zip(self.plan.inputs, inputs, strict=True):
            loaded, fresh = self._load(binding, value)
            env[binding.name] = loaded
            if note is None and fresh and not all_finite(loaded) and all_finite(value):
                note = self._note(f"h2d %{binding.name}", "to_device")
        return note

    def _run_kernel(self, step: KernelStep, env: dict, note: NonFinite | None):
        for node in step.ops:
            env[node.name], finite = compute_node(node, env, step.accumulation)
            if note is None and not finite \
                    and all(all_finite(env[a]) for a in node.value_inputs):
                note = self._note(step.name, node.op)
        return note

    def _outputs(self, env: dict, note: NonFinite | None) -> tuple[list, NonFinite | None]:
        outputs: list[torch.Tensor | None] = []
        for out in self.plan.outputs:
            if out is None:
                outputs.append(None)
                continue
            device = to_host(env[out.name], out.layout)
            host = cast_to_host_dtype(device, out.host_dtype)
            if note is None and not all_finite(host) and all_finite(device):
                note = self._note(f"d2h %{out.name}", "to_host")
            outputs.append(host)
        return outputs, note

    def __call__(self, inputs: Sequence[torch.Tensor]) -> tuple[list, NonFinite | None]:
        env = dict(self._constants)
        note = self._load_inputs(inputs, env)
        note = self._constant_note or note
        for step in self.plan.steps:
            if isinstance(step, KernelStep):
                note = self._run_kernel(step, env, note)
            elif isinstance(step, ViewStep):
                node = step.node
                env[node.name] = apply_view(node.op, env[node.inputs[0]], node.attr)
            else:
                value = env[step.node.name] = run_host_op(step, env)
                if note is None and not all_finite(value) \
                        and all(all_finite(env[a]) for a in step.node.value_inputs):
                    note = self._note(f"cpu %{step.node.name}", step.node.op)
        return self._outputs(env, note)
