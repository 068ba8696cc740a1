"""Building the decompose stage's graph: device dtypes, the node builder, the op registry.

`GraphBuilder` emits Spyre nodes (shapes inferred on meta tensors, device dtypes by
torch-spyre's rules); `register` fills the decomposition table that `spyre_sim.decompositions`
and `spyre_sim.nn_decompositions` populate; `convert_node` dispatches one ATen node to its
decomposition, to a CPU fallback (`ops.FALLBACK_OPS`, with a one-time `FallbackWarning`), or
raises `SpyreCompileError` naming the op, the stage and the shapes.

Device dtypes (torch_spyre/csrc/types_mapping.h; research on torch-spyre's dtype gate):
float16 and bfloat16 are stored as SEN169_FP16 (DLFloat16, "f16"); float32 host tensors are
converted to SEN169_FP16 on the way in (torch-spyre's downcast path, TORCH_SPYRE_DOWNCAST_WARN);
int64 is stored as int32, bool as SEN169_FP16. IEEE_FP32 ("f32") values exist only where the
program itself widens a 16-bit float to float32, and then only ops in `ops.SPYRE_FP32_OPS` may
consume them.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from spyre_sim.config import Config, Decisions
from spyre_sim.errors import FallbackWarning, SpyreCompileError
from spyre_sim.ir import (
    CapturedGraph,
    DeviceDtype,
    Node,
    Placement,
    UniqueNames,
    Value,
    make_attrs,
)
from spyre_sim.ops import FALLBACK_OPS, OPS, SPYRE_FP32_OPS, VIEW_OPS, apply_view

STAGE = "decompose"

_DEVICE_DTYPES: dict[torch.dtype, DeviceDtype] = {
    torch.float16: "f16", torch.float32: "f16", torch.bfloat16: "f16",
    torch.int64: "i32", torch.int32: "i32", torch.bool: "bool",
}
_NARROW_FLOATS = (torch.float16, torch.bfloat16)
_COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "logical_not")
_warned: set[str] = set()


def _warn_once(key: str, message: str, category: type[Warning] = UserWarning) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, category, stacklevel=4)


def device_dtype(dtype: torch.dtype, what: str, shape: tuple[int, ...]) -> DeviceDtype:
    """The device dtype a host tensor of `dtype` is stored in."""
    if dtype not in _DEVICE_DTYPES:
        raise SpyreCompileError(
            STAGE, what, [shape],
            f"dtype {str(dtype).replace('torch.', '')} is not supported on Spyre; use float16 "
            "(float32 and bfloat16 are stored as DLFloat16, int64 as int32, bool as DLFloat16)",
        )
    if dtype == torch.float32:
        _warn_once("fp32", "spyre_sim: float32 tensors are converted to DLFloat16 (SEN169_FP16) "
                           "on the device")
    if dtype == torch.int64:
        _warn_once("int64", "spyre_sim: int64 tensors are stored as int32 on the device")
    return _DEVICE_DTYPES[dtype]


def widens_to_fp32(source: torch.dtype | None, target: torch.dtype) -> bool:
    """A cast from a 16-bit float to float32: the one way an IEEE_FP32 device value arises."""
    return source in _NARROW_FLOATS and target == torch.float32


def meta_tensor(value: Any) -> torch.Tensor | None:
    return value if isinstance(value, torch.Tensor) else None


def static_shape(tensor: torch.Tensor, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(s) for s in tensor.shape)
    except (TypeError, RuntimeError):
        raise SpyreCompileError(
            STAGE, what, [tuple(str(s) for s in tensor.shape)],
            "dynamic shapes are not supported; compile with torch.compile(..., dynamic=False)",
        ) from None


@dataclass(frozen=True)
class Ref:
    """A value name inside a CPU fallback's arguments (a plain str there is a literal)."""

    name: str


class GraphBuilder:
    """Emits Spyre nodes while walking the ATen graph."""

    def __init__(self, captured: CapturedGraph, config: Config) -> None:
        self.captured, self.config = captured, config
        self.decisions = Decisions(config, "decompose")  # the decomposition knobs' choices
        self.nodes: list[Node] = []
        self.values: dict[str, tuple[tuple[int, ...], str]] = {}  # name -> (shape, dtype)
        self.env: dict[torch.fx.Node, Any] = {}
        self.names = UniqueNames()
        self.inputs: list[Value] = []
        self.constants: list[tuple[str, torch.Tensor]] = []

    def fresh(self, base: str) -> str:
        return self.names.fresh(base)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.values[name][0]

    def constant(self, base: str, tensor: torch.Tensor) -> str:
        """A tensor the compiler creates (a causal mask, a lifted constant): resident on device."""
        name = self.fresh(base)
        self.constants.append((name, tensor))
        self.values[name] = (tuple(tensor.shape), "f16")
        self.inputs.append(Value(name, tuple(tensor.shape), "f16",
                                 str(tensor.dtype).replace("torch.", ""), kind="constant"))
        return name

    def dtype(self, name: str) -> str:
        return self.values[name][1]

    def emit(self, base: str, op: str, inputs: tuple, *, placement: Placement = "device",
             out_shape: tuple[int, ...] | None = None, out_dtype: str | None = None,
             **attrs) -> str:
        """Append `op(inputs; attrs)`; its shape and dtype are inferred unless given."""
        attrs_t = make_attrs(**attrs)
        if placement == "device":
            self._check_fp32_operands(op, inputs)
        shape = out_shape if out_shape is not None else \
            self._infer_shape(op, inputs, dict(attrs_t))
        dtype = out_dtype if out_dtype is not None else \
            self._infer_dtype(op, inputs, dict(attrs_t))
        name = self.fresh(base)
        self.nodes.append(Node(name=name, op=op, inputs=tuple(inputs), attrs=attrs_t,
                               shape=tuple(shape), dtype=dtype, placement=placement))
        self.values[name] = (tuple(shape), dtype)
        return name

    def _check_fp32_operands(self, op: str, inputs: tuple) -> None:
        """torch-spyre's dtype gate: an IEEE_FP32 operand only for SPYRE_FP32_OPS."""
        if op in VIEW_OPS or op == "to_dtype" or OPS[op].opfunc in SPYRE_FP32_OPS:
            return
        if any(isinstance(a, str) and self.dtype(a) == "f32" for a in inputs):
            raise SpyreCompileError(
                STAGE, op, [self.shape(a) for a in inputs if isinstance(a, str)],
                f"the program widened a 16-bit float to float32 before {op}, and Spyre runs "
                f"{OPS[op].opfunc} in SEN169_FP16 only (SPYRE_FP32_OPS); cast the operand "
                "back to float16 before this op")

    def _infer_shape(self, op: str, inputs: tuple, attrs: dict) -> tuple[int, ...]:
        metas = [torch.empty(self.shape(a), device="meta") if isinstance(a, str) else a
                 for a in inputs]
        if op in VIEW_OPS:
            return tuple(apply_view(op, metas[0], attrs).shape)
        return tuple(OPS[op].compute(*metas, **attrs).shape)

    def _infer_dtype(self, op: str, inputs: tuple, attrs: dict) -> str:
        if op in _COMPARISONS:
            return "bool"
        if op in ("to_dtype", "full"):
            return attrs["dtype"]
        tensor_dtypes = {self.dtype(a) for a in inputs if isinstance(a, str)}
        if op in VIEW_OPS and tensor_dtypes:
            return tensor_dtypes.pop()
        if tensor_dtypes == {"i32"} and not any(isinstance(a, float) for a in inputs):
            return "i32"
        return "f32" if "f32" in tensor_dtypes else "f16"


# --- the decomposition table ----------------------------------------------------------------

Handler = Callable[[GraphBuilder, torch.fx.Node, list, dict], Any]
HANDLERS: dict[str, Handler] = {}


def register(*names: str) -> Callable[[Handler], Handler]:
    def decorate(fn: Handler) -> Handler:
        for name in names:
            HANDLERS[name] = fn
        return fn
    return decorate


def out_shape(fx_node: torch.fx.Node, index: int | None = None) -> tuple[int, ...]:
    val = fx_node.meta["val"] if index is None else fx_node.meta["val"][index]
    return static_shape(val, str(fx_node.target))


def reduce_dims(b: GraphBuilder, x: str, dims: Any) -> list[int]:
    """Normalised reduction dims; None or [] means every dim (torch's sum/mean rule)."""
    rank = len(b.shape(x))
    if rank == 0:
        return []
    if dims is None or dims == [] or dims == ():
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % rank for d in dims)


def shapes_of(b: GraphBuilder, args: list) -> list:
    return [b.shape(a) if isinstance(a, str) else a for a in args
            if isinstance(a, (str, int, float))]


def _encode(value: Any, refs: list[str]) -> Any:
    if isinstance(value, Ref):
        refs.append(value.name)
        return {"input": len(refs) - 1}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).replace("torch.", "")}
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(value, (list, tuple)):
        return [_encode(v, refs) for v in value]
    return value


def fallback(b: GraphBuilder, n: torch.fx.Node, op_name: str, args: list, kwargs: dict,
             base: str, results: list | None = None) -> str | tuple[str, ...]:
    """`op_name` run on the CPU; value arguments are `Ref`s. One node per tensor result
    (`results`: their meta tensors, by default the fx node's), each taking its own output."""
    if not isinstance(n.target, torch._ops.OpOverload):
        raise TypeError(f"{n.name}: a CPU fallback runs an ATen op, not {n.target!r}")
    target = f"aten.{op_name}.default" if op_name != n.target.overloadpacket.__name__ \
        else str(n.target)
    refs: list[str] = []
    encoded_args = _encode(list(args), refs)
    encoded_kwargs = {k: _encode(v, refs) for k, v in sorted(kwargs.items())
                      if k not in ("device", "pin_memory", "layout", "memory_format")}
    _warn_once(f"fallback:{target}", f"torch.ops.{target.rsplit('.', 1)[0]} is falling back to cpu",
               FallbackWarning)
    if results is None:
        val = n.meta["val"]
        results = list(val) if isinstance(val, (tuple, list)) else [val]
    names = []
    for index, meta in enumerate(results):
        shape = static_shape(meta, target)
        names.append(b.emit(base if len(results) == 1 else f"{base}_{index}", target,
                            tuple(refs), placement="cpu", out_shape=shape,
                            out_dtype=device_dtype(meta.dtype, target, shape),
                            args=encoded_args, kwargs=encoded_kwargs,
                            output=index if len(results) > 1 else None,
                            input_dtypes=[b.dtype(r) for r in refs]))
    return names[0] if len(results) == 1 else tuple(names)


def convert_node(b: GraphBuilder, fx_node: torch.fx.Node) -> Any:
    """One ATen node -> Spyre nodes; returns the value name(s) standing for its result."""
    name = fx_node.target.overloadpacket.__name__ \
        if isinstance(fx_node.target, torch._ops.OpOverload) else ""
    wrap = Ref if name in FALLBACK_OPS else (lambda value: value)

    def lookup(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return wrap(b.env[value])
        if isinstance(value, (list, tuple)):
            return type(value)(lookup(v) for v in value)
        return value

    args = [lookup(a) for a in fx_node.args]
    kwargs = {k: lookup(v) for k, v in fx_node.kwargs.items()}
    if fx_node.target is operator.getitem:
        return args[0][args[1]]
    if not name:
        raise SpyreCompileError(STAGE, str(fx_node.target), shapes_of(b, args),
                                "only ATen ops are supported after AOTAutograd")
    if name in FALLBACK_OPS:
        return fallback(b, fx_node, name, args, kwargs=kwargs, base=fx_node.name)
    handler = HANDLERS.get(name)
    if handler is None:
        raise SpyreCompileError(
            STAGE, str(fx_node.target), shapes_of(b, args),
            "no Spyre decomposition or kernel for this op, and it is not a CPU fallback "
            "(see spyre_sim.ops.OPS and FALLBACK_OPS)",
        )
    return handler(b, fx_node, args, kwargs)
