"""The Spyre op vocabulary: what each op computes, and how the hardware executes it.

One table serves every interpreter and the runtime, so the stages can only differ in the
decisions they make (fusion, layouts, accumulation), never in what an op means. Semantics are
fp32 math on logical tensors; the executor rounds results to fp16 where the program says.

Coverage follows torch-spyre: device ops from torch_spyre/ops/eager.py and spyre_kernel.py
`SpyreOpFuncs`; CPU fallbacks from torch_spyre/ops/fallbacks.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import torch
import torch.nn.functional as F

VectorClass = Literal["transcendental", "simple"]  # how an op loads the vector units


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: Literal["pointwise", "reduction", "matmul", "view", "constant"]
    opfunc: str  # SuperDSC opFuncName (spyre_kernel.py SpyreOpFuncs)
    vector_class: VectorClass = "simple"  # transcendental ops run at the SFU rate, simple faster
    compute: Callable[..., torch.Tensor] = field(kw_only=True)


def _as_tensor(value, like: torch.Tensor) -> torch.Tensor:
    return value if isinstance(value, torch.Tensor) else torch.tensor(value, dtype=like.dtype)


def _first_tensor(args) -> torch.Tensor:
    return next(a for a in args if isinstance(a, torch.Tensor))


def _binary(fn):
    def compute(a, b, **_):
        like = _first_tensor((a, b))
        return fn(_as_tensor(a, like), _as_tensor(b, like))
    return compute


def _compare(fn):
    def compute(a, b, **_):
        like = _first_tensor((a, b))
        return fn(_as_tensor(a, like), _as_tensor(b, like)).to(torch.float32)
    return compute


def _where(cond, a, b, **_):
    like = _first_tensor((cond, a, b))
    cond = _as_tensor(cond, like) != 0
    return torch.where(cond, _as_tensor(a, like).float(), _as_tensor(b, like).float())


def _clamp(x, *, min=None, max=None, **_):  # noqa: A002 - mirrors torch.clamp
    return torch.clamp(x, min=min, max=max)


def _reduce(fn):
    def compute(x, *, dims, keepdim=False, **_):
        return fn(x, dim=list(dims), keepdim=keepdim)
    return compute


def _softmax(x, *, dim, **_):
    return torch.softmax(x, dim=dim)


def _layernorm(x, weight=None, bias=None, *, ndims, eps, **_):
    return F.layer_norm(x, x.shape[-ndims:], weight, bias, eps=eps)


def _matmul(a, b, **_):
    return torch.matmul(a, b)


def _full(*, shape, value, **_):
    return torch.full(tuple(shape), float(value))


def _to_dtype(x, *, dtype, **_):
    if dtype == "i32":
        return x.to(torch.int64)
    if dtype == "bool":
        return (x != 0).to(torch.float32)
    return x.to(torch.float32)


_POINTWISE: dict[str, tuple[str, VectorClass, Callable[..., torch.Tensor]]] = {
    # name: (opfunc, vector class, semantics)
    "abs": ("abs", "simple", lambda x, **_: torch.abs(x)),
    "neg": ("neg", "simple", lambda x, **_: torch.neg(x)),
    "relu": ("relufwd", "simple", lambda x, **_: torch.relu(x)),
    "floor": ("floor", "simple", lambda x, **_: torch.floor(x)),
    "reciprocal": ("reciprocal", "transcendental", lambda x, **_: torch.reciprocal(x)),
    "exp": ("exp", "transcendental", lambda x, **_: torch.exp(x)),
    "log": ("log", "transcendental", lambda x, **_: torch.log(x)),
    "sqrt": ("sqrt", "transcendental", lambda x, **_: torch.sqrt(x)),
    "rsqrt": ("rsqrt", "transcendental", lambda x, **_: torch.rsqrt(x)),
    "sigmoid": ("sigmoid", "transcendental", lambda x, **_: torch.sigmoid(x)),
    "tanh": ("tanh", "transcendental", lambda x, **_: torch.tanh(x)),
    "silu": ("silu", "transcendental", lambda x, **_: F.silu(x)),
    "gelu": ("gelufwd", "transcendental",
             lambda x, approximate="none", **_: F.gelu(x, approximate=approximate)),
    "logical_not": ("notequal", "simple", lambda x, **_: (x == 0).to(torch.float32)),
    "add": ("add", "simple", _binary(torch.add)),
    "sub": ("sub", "simple", _binary(torch.sub)),
    "mul": ("mul", "simple", _binary(torch.mul)),
    "div": ("realdiv", "transcendental", _binary(torch.div)),
    "pow": ("pow", "transcendental", _binary(torch.pow)),
    "maximum": ("max", "simple", _binary(torch.maximum)),
    "minimum": ("min", "simple", _binary(torch.minimum)),
    "eq": ("equal", "simple", _compare(torch.eq)),
    "ne": ("notequal", "simple", _compare(torch.ne)),
    "lt": ("lessthan", "simple", _compare(torch.lt)),
    "le": ("lessequal", "simple", _compare(torch.le)),
    "gt": ("greaterthan", "simple", _compare(torch.gt)),
    "ge": ("greaterequal", "simple", _compare(torch.ge)),
    "where": ("where3", "simple", _where),
    "clamp": ("clip", "simple", _clamp),
    "to_dtype": ("identity", "simple", _to_dtype),
    "restickify": ("ReStickifyOpHBM", "simple", lambda x, **_: x),
    "pad_rows": ("identity", "simple", lambda x, **_: x),
}

OPS: dict[str, OpDef] = {
    name: OpDef(name, "pointwise", opfunc, vclass, compute=fn)
    for name, (opfunc, vclass, fn) in _POINTWISE.items()
}
OPS.update({
    "sum": OpDef("sum", "reduction", "sum", "simple", compute=_reduce(torch.sum)),
    "mean": OpDef("mean", "reduction", "mean", "simple", compute=_reduce(torch.mean)),
    "amax": OpDef("amax", "reduction", "max", "simple", compute=_reduce(torch.amax)),
    "amin": OpDef("amin", "reduction", "min", "simple", compute=_reduce(torch.amin)),
    "softmax": OpDef("softmax", "reduction", "softmax", "transcendental", compute=_softmax),
    "layernorm": OpDef("layernorm", "reduction", "layernormnorm", "transcendental",
                       compute=_layernorm),
    "mm": OpDef("mm", "matmul", "batchmatmul", "simple", compute=_matmul),
    "bmm": OpDef("bmm", "matmul", "batchmatmul", "simple", compute=_matmul),
    "full": OpDef("full", "constant", "identity", "simple", compute=_full),
    "cat": OpDef("cat", "pointwise", "identity", "simple",
                 compute=lambda *xs, dim, **_: torch.cat(list(xs), dim=dim)),
})

VIEW_OPS = ("view", "permute", "expand", "slice")

# torch_spyre/_inductor/constants.py SPYRE_FP32_OPS: the opfuncs a kernel may run in IEEE_FP32.
# Every op accepts SEN169_FP16; any other op given an fp32 operand is a compile-time
# Unsupported in torch-spyre ("not a silent downcast"), and a SpyreCompileError here.
SPYRE_FP32_OPS = frozenset({
    "add", "sub", "mul", "where3", "realdiv", "relufwd", "reciprocal", "mean", "sum", "max",
    "min", "layernormscale", "abs", "neg", "exp", "sigmoid", "exx2", "layernormnorm", "identity",
    "sqrt", "rsqrt", "topkvalue", "topkindex", "floor", "to_dtype", "maximum", "minimum", "prod",
})

# What spyre_sim claims to run on the device, as ATen op names (torch-spyre's eager list,
# torch_spyre/ops/eager.py, as far as spyre_sim implements it, plus rms_norm): the OpInfo
# conformance suite (tests/e2e/test_opinfo.py) covers each of these and of FALLBACK_OPS.
DEVICE_ATEN_OPS = (
    "mm", "bmm", "addmm", "add", "sub", "mul", "div", "exp", "log", "sqrt", "rsqrt",
    "reciprocal", "neg", "abs", "relu", "gelu", "silu", "sigmoid", "tanh", "pow", "softmax",
    "sum", "mean", "amax", "amin", "max", "min", "where", "clamp", "maximum", "minimum", "eq",
    "ne", "lt", "le", "gt", "ge", "cat", "layer_norm", "rms_norm", "floor", "logical_not",
)

# torch_spyre/ops/fallbacks.py register_fallback_default (plus decompositions excluded from
# Inductor: tril/triu): these run on the CPU with a FallbackWarning.
FALLBACK_OPS = frozenset({
    "embedding", "arange", "cumsum", "sin", "cos", "tril", "triu", "argmax", "argmin",
    "isin", "bitwise_xor", "bitwise_or", "repeat", "index_select", "gather", "index_copy",
    "any", "topk", "sort", "masked_fill", "scatter",
})


def apply_view(op: str, x: torch.Tensor, attrs: dict) -> torch.Tensor:
    if op == "view":
        return x.reshape(tuple(attrs["shape"]))
    if op == "permute":
        return x.permute(tuple(attrs["dims"]))
    if op == "expand":
        return x.expand(tuple(attrs["shape"]))
    if op == "slice":
        dim, start, end, step = attrs["dim"], attrs["start"], attrs["end"], attrs["step"]
        index = [slice(None)] * x.dim()
        index[dim] = slice(start, end, step)
        return x[tuple(index)]
    raise KeyError(op)


def fallback_callable(target: str) -> Callable:
    """`aten.embedding.default` -> torch.ops.aten.embedding.default."""
    namespace, name, overload = target.split(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload)

# Every op spyre_sim claims: on the device, or on the CPU with a FallbackWarning.
CLAIMED_OPS = DEVICE_ATEN_OPS + tuple(sorted(FALLBACK_OPS))
