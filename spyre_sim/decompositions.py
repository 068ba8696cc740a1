"""The decomposition table: how each ATen op becomes Spyre ops, for the decompose stage.

Mirrors torch_spyre/_inductor/decompositions.py: one function per ATen op family, registered
by name. `GraphBuilder` emits Spyre nodes (inferring shapes on meta tensors); ops in
`ops.FALLBACK_OPS` become CPU fallbacks with a one-time `FallbackWarning`; anything else raises
`SpyreCompileError` naming the op, the stage and the shapes.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable
from typing import Any

import torch

from spyre_sim.config import Config
from spyre_sim.errors import FallbackWarning, SpyreCompileError
from spyre_sim.ir import CapturedGraph, Node, UniqueNames, Value, make_attrs
from spyre_sim.ops import FALLBACK_OPS, OPS, VIEW_OPS, apply_view

STAGE = "decompose"

_DEVICE_DTYPES = {
    torch.float16: "f16", torch.float32: "f16", torch.bfloat16: "f16",
    torch.int64: "i32", torch.int32: "i32", torch.bool: "bool",
}
_warned: set[str] = set()


def _warn_once(key: str, message: str, category: type[Warning] = UserWarning) -> None:
    if key not in _warned:
        _warned.add(key)
        warnings.warn(message, category, stacklevel=4)


def device_dtype(dtype: torch.dtype, what: str, shape: tuple[int, ...]) -> str:
    if dtype not in _DEVICE_DTYPES:
        raise SpyreCompileError(
            STAGE, what, [shape],
            f"dtype {str(dtype).replace('torch.', '')} is not supported on Spyre; use float16 "
            "(float32 and bfloat16 are stored as fp16, int64 as int32, bool as fp16)",
        )
    if dtype == torch.float32:
        _warn_once("fp32", "spyre_sim: float32 tensors are converted to float16 on the device "
                           "(Spyre computes in fp16)")
    if dtype == torch.int64:
        _warn_once("int64", "spyre_sim: int64 tensors are stored as int32 on the device")
    return _DEVICE_DTYPES[dtype]


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


class GraphBuilder:
    """Emits Spyre nodes while walking the ATen graph."""

    def __init__(self, captured: CapturedGraph, config: Config) -> None:
        self.captured, self.config = captured, config
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
                                 str(tensor.dtype).replace("torch.", ""), "constant"))
        return name

    def dtype(self, name: str) -> str:
        return self.values[name][1]

    def emit(self, base: str, op: str, inputs: tuple, *, placement: str = "device",
             out_shape: tuple[int, ...] | None = None, out_dtype: str | None = None,
             **attrs) -> str:
        """Append `op(inputs; attrs)`; its shape and dtype are inferred unless given."""
        attrs_t = make_attrs(**attrs)
        shape = out_shape if out_shape is not None else \
            self._infer_shape(op, inputs, dict(attrs_t))
        dtype = out_dtype if out_dtype is not None else \
            self._infer_dtype(op, inputs, dict(attrs_t))
        name = self.fresh(base)
        self.nodes.append(Node(name, op, tuple(inputs), attrs_t, tuple(shape), dtype, placement))
        self.values[name] = (tuple(shape), dtype)
        return name

    def _infer_shape(self, op: str, inputs: tuple, attrs: dict) -> tuple[int, ...]:
        metas = [torch.empty(self.shape(a), device="meta") if isinstance(a, str) else a
                 for a in inputs]
        if op in VIEW_OPS:
            return tuple(apply_view(op, metas[0], attrs).shape)
        return tuple(OPS[op].compute(*metas, **attrs).shape)

    def _infer_dtype(self, op: str, inputs: tuple, attrs: dict) -> str:
        if op in ("eq", "ne", "lt", "le", "gt", "ge", "logical_not"):
            return "bool"
        if op in ("to_dtype", "full"):
            return attrs["dtype"]
        tensor_dtypes = {self.dtype(a) for a in inputs if isinstance(a, str)}
        if op in VIEW_OPS and tensor_dtypes:
            return tensor_dtypes.pop()
        if tensor_dtypes == {"i32"} and not any(isinstance(a, float) for a in inputs):
            return "i32"
        return "f16"


# --- decompositions: one function per ATen op family ----------------------------------------

Handler = Callable[[GraphBuilder, torch.fx.Node, list, dict], Any]
_HANDLERS: dict[str, Handler] = {}


def _register(*names: str) -> Callable[[Handler], Handler]:
    def decorate(fn: Handler) -> Handler:
        for name in names:
            _HANDLERS[name] = fn
        return fn
    return decorate


def _out_shape(fx_node: torch.fx.Node) -> tuple[int, ...]:
    return static_shape(fx_node.meta["val"], str(fx_node.target))


@_register("addmm")
def _addmm(b: GraphBuilder, n, args, kwargs):
    bias, x, w = args[:3]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    product = b.emit(f"{n.name}_mm", "mm", (x, w))
    if alpha != 1:
        product = b.emit(f"{n.name}_alpha", "mul", (product, alpha))
    if beta != 1:
        bias = b.emit(f"{n.name}_beta", "mul", (bias, beta))
    return b.emit(n.name, "add", (product, bias))


@_register("mm", "bmm")
def _matmul(b: GraphBuilder, n, args, kwargs):
    return b.emit(n.name, n.target.overloadpacket.__name__, (args[0], args[1]))


@_register("linear")
def _linear(b: GraphBuilder, n, args, kwargs):
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    wt = b.emit(f"{n.name}_wt", "permute", (w,), dims=[1, 0])
    lead = b.shape(x)[:-1]
    flat = b.emit(f"{n.name}_x2d", "view", (x,), shape=[math.prod(lead), b.shape(x)[-1]])
    out = b.emit(f"{n.name}_mm", "mm", (flat, wt))
    if bias is not None:
        out = b.emit(f"{n.name}_bias", "add", (out, bias))
    return b.emit(n.name, "view", (out,), shape=list(_out_shape(n)))


@_register("t", "transpose", "permute", "numpy_T")
def _permute(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    rank = len(b.shape(x))
    name = n.target.overloadpacket.__name__
    if name == "permute":
        dims = [d % rank for d in args[1]]
    else:
        dims = list(range(rank))
        if rank >= 2:
            d0, d1 = (args[1], args[2]) if name == "transpose" else (0, 1)
            d0, d1 = d0 % rank, d1 % rank
            dims[d0], dims[d1] = dims[d1], dims[d0]
    if dims == list(range(rank)):
        return x
    return b.emit(n.name, "permute", (x,), dims=dims)


@_register("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten",
           "view_as", "expand_as")
def _view(b: GraphBuilder, n, args, kwargs):
    x, shape = args[0], list(_out_shape(n))
    if list(b.shape(x)) == shape:
        return x
    if n.target.overloadpacket.__name__ == "expand_as":
        return b.emit(n.name, "expand", (x,), shape=shape)
    return b.emit(n.name, "view", (x,), shape=shape)


@_register("expand")
def _expand(b: GraphBuilder, n, args, kwargs):
    x, shape = args[0], list(_out_shape(n))
    if list(b.shape(x)) == shape:
        return x
    rank_gap = len(shape) - len(b.shape(x))
    if rank_gap:
        x = b.emit(f"{n.name}_rank", "view", (x,), shape=[1] * rank_gap + list(b.shape(x)))
    return b.emit(n.name, "expand", (x,), shape=shape)


@_register("slice")
def _slice(b: GraphBuilder, n, args, kwargs):
    x, dim = args[0], args[1] % len(b.shape(args[0])) if len(args) > 1 else 0
    size = b.shape(x)[dim]
    start = args[2] if len(args) > 2 and args[2] is not None else 0
    end = args[3] if len(args) > 3 and args[3] is not None else size
    step = args[4] if len(args) > 4 else 1
    start, end, _ = slice(start, end).indices(size)
    if (start, end, step) == (0, size, 1):
        return x
    return b.emit(n.name, "slice", (x,), dim=dim, start=start, end=end, step=step)


@_register("split", "split_with_sizes", "chunk", "unbind")
def _split(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    name = n.target.overloadpacket.__name__
    rank = len(b.shape(x))
    dim = (args[2] if len(args) > 2 else kwargs.get("dim", 0)) if name != "unbind" \
        else (args[1] if len(args) > 1 else kwargs.get("dim", 0))
    dim %= rank
    parts = [static_shape(v, str(n.target))[dim] if name != "unbind" else 1
             for v in n.meta["val"]]
    outputs, start = [], 0
    for index, size in enumerate(parts):
        piece = x
        if (start, size) != (0, b.shape(x)[dim]):
            piece = b.emit(f"{n.name}_{index}", "slice", (x,), dim=dim, start=start,
                           end=start + size, step=1)
        if name == "unbind":
            piece = b.emit(f"{n.name}_{index}_squeeze", "view", (piece,),
                           shape=list(_out_shape_at(n, index)))
        outputs.append(piece)
        start += size
    return tuple(outputs)


@_register("select")
def _select(b: GraphBuilder, n, args, kwargs):
    x, dim, index = args[0], args[1] % len(b.shape(args[0])), args[2]
    index = index % b.shape(x)[dim]
    sliced = b.emit(f"{n.name}_slice", "slice", (x,), dim=dim, start=index, end=index + 1, step=1)
    return b.emit(n.name, "view", (sliced,), shape=list(_out_shape(n)))


@_register("clone", "alias", "detach", "lift_fresh_copy", "contiguous", "_to_copy",
           "convert_element_type", "to", "type_as")
def _copy(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    val = meta_tensor(n.meta.get("val"))
    if not isinstance(x, str):
        return x
    if val is None:
        return x
    target = device_dtype(val.dtype, str(n.target), _out_shape(n))
    if target == b.dtype(x):
        return x
    return b.emit(n.name, "to_dtype", (x,), dtype=target)


_SAME_NAME = {
    "abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "relu", "silu", "sigmoid", "tanh",
    "floor", "logical_not", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
    "ge", "where",
}


@_register(*_SAME_NAME)
def _same(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    if name == "div" and kwargs.get("rounding_mode") is not None:
        raise SpyreCompileError(STAGE, str(n.target), _shapes(b, args),
                                "div with a rounding_mode has no Spyre kernel")
    return b.emit(n.name, name, tuple(args[:3] if name == "where" else args[:2]))


@_register("gelu")
def _gelu(b: GraphBuilder, n, args, kwargs):
    return b.emit(n.name, "gelu", (args[0],), approximate=kwargs.get("approximate", "none"))


@_register("add", "sub", "rsub")
def _add_sub(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    a, other = args[0], args[1]
    alpha = kwargs.get("alpha", args[2] if len(args) > 2 else 1)
    if alpha != 1:
        other = b.emit(f"{n.name}_alpha", "mul", (other, alpha)) if isinstance(other, str) \
            else other * alpha
    if name == "rsub":
        return b.emit(n.name, "sub", (other, a))
    return b.emit(n.name, name, (a, other))


@_register("pow")
def _pow(b: GraphBuilder, n, args, kwargs):
    base, exponent = args[0], args[1]
    if exponent == 2:
        return b.emit(n.name, "mul", (base, base))
    return b.emit(n.name, "pow", (base, exponent))


@_register("square")
def _square(b: GraphBuilder, n, args, kwargs):
    return b.emit(n.name, "mul", (args[0], args[0]))


@_register("clamp", "clamp_min", "clamp_max", "hardtanh")
def _clamp(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    low = args[1] if len(args) > 1 else kwargs.get("min")
    high = args[2] if len(args) > 2 else kwargs.get("max")
    if name == "clamp_max":
        low, high = None, args[1]
    if name == "hardtanh":
        low = args[1] if len(args) > 1 else -1.0
        high = args[2] if len(args) > 2 else 1.0
    return b.emit(n.name, "clamp", (args[0],), min=low, max=high)


def _reduce_dims(b: GraphBuilder, x: str, dims: Any) -> list[int]:
    rank = len(b.shape(x))
    if dims is None or dims == [] or dims == ():
        return list(range(rank))
    dims = [dims] if isinstance(dims, int) else list(dims)
    return sorted(d % rank for d in dims)


@_register("sum", "mean", "amax", "amin")
def _reduction(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    dims = _reduce_dims(b, x, args[1] if len(args) > 1 else kwargs.get("dim"))
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return b.emit(n.name, n.target.overloadpacket.__name__, (x,), dims=dims, keepdim=bool(keepdim))


@_register("max", "min")
def _max_min(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    x = args[0]
    if len(args) == 1:  # max.default: a full reduction
        return b.emit(n.name, "amax" if name == "max" else "amin", (x,),
                      dims=list(range(len(b.shape(x)))), keepdim=False)
    if isinstance(args[1], str):  # max.other: elementwise
        return b.emit(n.name, "maximum" if name == "max" else "minimum", (x, args[1]))
    dim, keepdim = args[1] % len(b.shape(x)), args[2] if len(args) > 2 else False
    values = b.emit(f"{n.name}_values", "amax" if name == "max" else "amin", (x,), dims=[dim],
                    keepdim=bool(keepdim))
    indices = _fallback(b, n, "argmax" if name == "max" else "argmin", [x, dim, keepdim], {},
                        f"{n.name}_indices", (torch.int64, _out_shape_at(n, 1)))
    return (values, indices)


def _out_shape_at(n: torch.fx.Node, index: int) -> tuple[int, ...]:
    return static_shape(n.meta["val"][index], str(n.target))


def _softmax_of(b: GraphBuilder, base: str, x: str, dim: int) -> str:
    if b.config.softmax_decomposition == "fused":
        return b.emit(base, "softmax", (x,), dim=dim)
    peak = b.emit(f"{base}_amax", "amax", (x,), dims=[dim], keepdim=True)
    shifted = b.emit(f"{base}_sub", "sub", (x, peak))
    exps = b.emit(f"{base}_exp", "exp", (shifted,))
    total = b.emit(f"{base}_sum", "sum", (exps,), dims=[dim], keepdim=True)
    return b.emit(base, "div", (exps, total))


@_register("_softmax", "softmax", "_safe_softmax")
def _softmax(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    return _softmax_of(b, n.name, x, args[1] % len(b.shape(x)))


@_register("_log_softmax", "log_softmax")
def _log_softmax(b: GraphBuilder, n, args, kwargs):
    probs = _softmax_of(b, f"{n.name}_softmax", args[0], args[1] % len(b.shape(args[0])))
    return b.emit(n.name, "log", (probs,))


def _explicit_norm(b: GraphBuilder, base: str, x: str, ndims: int,
                   eps: float) -> tuple[str, str, str]:
    rank = len(b.shape(x))
    dims = list(range(rank - ndims, rank))
    mean = b.emit(f"{base}_mean", "mean", (x,), dims=dims, keepdim=True)
    centered = b.emit(f"{base}_centered", "sub", (x, mean))
    squared = b.emit(f"{base}_squared", "mul", (centered, centered))
    var = b.emit(f"{base}_var", "mean", (squared,), dims=dims, keepdim=True)
    var_eps = b.emit(f"{base}_var_eps", "add", (var, eps))
    rstd = b.emit(f"{base}_rstd", "rsqrt", (var_eps,))
    return b.emit(f"{base}_normed", "mul", (centered, rstd)), mean, rstd


@_register("native_layer_norm", "layer_norm")
def _layer_norm(b: GraphBuilder, n, args, kwargs):
    x, normalized_shape = args[0], args[1]
    weight = args[2] if len(args) > 2 else kwargs.get("weight")
    bias = args[3] if len(args) > 3 else kwargs.get("bias")
    eps = args[4] if len(args) > 4 else kwargs.get("eps", 1e-5)
    ndims = len(normalized_shape)
    users = {u.args[1] for u in n.users if u.target is operator.getitem}
    if b.config.layernorm_decomposition == "fused" and users <= {0}:
        inputs = tuple(v for v in (x, weight, bias) if v is not None)
        if weight is None and bias is not None:
            inputs = (x, None, bias)
        out = b.emit(n.name, "layernorm", inputs, ndims=ndims, eps=float(eps))
        return (out, None, None)
    normed, mean, rstd = _explicit_norm(b, n.name, x, ndims, float(eps))
    if weight is not None:
        normed = b.emit(f"{n.name}_scale", "mul", (normed, weight))
    if bias is not None:
        normed = b.emit(f"{n.name}_shift", "add", (normed, bias))
    return (normed, mean, rstd)


@_register("var_mean", "var")
def _var_mean(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    dims = _reduce_dims(b, x, args[1] if len(args) > 1 else kwargs.get("dim"))
    correction = kwargs.get("correction", 1)
    keepdim = kwargs.get("keepdim", False)
    count = math.prod(b.shape(x)[d] for d in dims)
    mean = b.emit(f"{n.name}_mean", "mean", (x,), dims=dims, keepdim=True)
    centered = b.emit(f"{n.name}_centered", "sub", (x, mean))
    squared = b.emit(f"{n.name}_squared", "mul", (centered, centered))
    total = b.emit(f"{n.name}_sum", "sum", (squared,), dims=dims, keepdim=keepdim)
    var = b.emit(f"{n.name}_var", "mul", (total, 1.0 / max(count - correction, 1)))
    if n.target.overloadpacket.__name__ == "var":
        return var
    if not keepdim:
        mean = b.emit(f"{n.name}_mean_out", "view", (mean,), shape=list(_out_shape_at(n, 1)))
    return (var, mean)


@_register("_scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_attention",
           "_scaled_dot_product_efficient_attention", "_scaled_dot_product_attention_math")
def _sdpa(b: GraphBuilder, n, args, kwargs):
    q, k, v = args[:3]
    name = n.target.overloadpacket.__name__
    if name == "_scaled_dot_product_flash_attention_for_cpu":
        is_causal = args[4] if len(args) > 4 else kwargs.get("is_causal", False)
        mask = kwargs.get("attn_mask")
    else:
        mask = args[3] if len(args) > 3 else kwargs.get("attn_mask")
        is_causal = args[5] if len(args) > 5 else kwargs.get("is_causal", False)
    scale = kwargs.get("scale") or 1.0 / math.sqrt(b.shape(q)[-1])
    qs, ks, vs = b.shape(q), b.shape(k), b.shape(v)
    batch = math.prod(qs[:-2])
    seq_q, seq_k, head = qs[-2], ks[-2], qs[-1]
    q3 = b.emit(f"{n.name}_q", "view", (q,), shape=[batch, seq_q, head])
    kt = b.emit(f"{n.name}_kt", "permute", (k,), dims=list(range(len(ks) - 2)) + [len(ks) - 1,
                                                                                  len(ks) - 2])
    kt3 = b.emit(f"{n.name}_kt3", "view", (kt,), shape=[batch, head, seq_k])
    scores = b.emit(f"{n.name}_scores", "bmm", (q3, kt3))
    scores = b.emit(f"{n.name}_scaled", "mul", (scores, float(scale)))
    if is_causal:
        causal = torch.full((seq_q, seq_k), float("-inf")).triu(1)
        mask_name = b.constant(f"{n.name}_causal_mask", causal)
        scores = b.emit(f"{n.name}_masked", "add", (scores, mask_name))
    if mask is not None:
        if b.dtype(mask) == "bool":
            scores = b.emit(f"{n.name}_masked", "where", (mask, scores, float("-inf")))
        else:
            mask3 = b.emit(f"{n.name}_mask3", "view", (mask,),
                           shape=[-1 if i == 0 else s for i, s in enumerate(b.shape(mask))])
            scores = b.emit(f"{n.name}_masked", "add", (scores, mask3))
    probs = _softmax_of(b, f"{n.name}_probs", scores, 2)
    v3 = b.emit(f"{n.name}_v", "view", (v,), shape=[batch, seq_k, vs[-1]])
    out3 = b.emit(f"{n.name}_pv", "bmm", (probs, v3))
    out = b.emit(n.name, "view", (out3,), shape=list(qs[:-1]) + [vs[-1]])
    return (out, None)


@_register("full", "zeros", "ones", "scalar_tensor", "full_like", "zeros_like", "ones_like",
           "new_zeros", "new_ones", "new_full", "empty", "empty_like", "new_empty", "fill")
def _full(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    val = n.meta["val"]
    fill = {"full": lambda: args[1], "full_like": lambda: args[1], "new_full": lambda: args[2],
            "scalar_tensor": lambda: args[0], "fill": lambda: args[1]}.get(name, lambda: None)()
    if fill is None:
        fill = 1.0 if "ones" in name else 0.0
    shape = _out_shape(n)
    dtype = device_dtype(val.dtype, str(n.target), shape)
    return b.emit(n.name, "full", (), shape=list(shape), dtype=dtype, value=float(fill))


@_register("cat")
def _cat(b: GraphBuilder, n, args, kwargs):
    tensors = [t for t in args[0] if isinstance(t, str)]
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % len(_out_shape(n))
    return b.emit(n.name, "cat", tuple(tensors), dim=dim)


def _encode(value: Any, refs: list[str]) -> Any:
    if isinstance(value, str):
        refs.append(value)
        return {"input": len(refs) - 1}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).replace("torch.", "")}
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return None
    if isinstance(value, (list, tuple)):
        return [_encode(v, refs) for v in value]
    return value


def _fallback(b: GraphBuilder, n, op_name: str, args: list, kwargs: dict, base: str,
              typed_shape: tuple[torch.dtype, tuple[int, ...]]) -> str:
    target = f"aten.{op_name}.default" if op_name != n.target.overloadpacket.__name__ \
        else str(n.target)
    refs: list[str] = []
    encoded_args = _encode(list(args), refs)
    encoded_kwargs = {k: _encode(v, refs) for k, v in sorted(kwargs.items())
                      if k not in ("device", "pin_memory", "layout", "memory_format")}
    dtype, shape = typed_shape
    _warn_once(f"fallback:{target}", f"torch.ops.{target.rsplit('.', 1)[0]} is falling back to cpu",
               FallbackWarning)
    return b.emit(base, target, tuple(refs), placement="cpu", out_shape=shape,
                  out_dtype=device_dtype(dtype, target, shape), args=encoded_args,
                  kwargs=encoded_kwargs)


def _shapes(b: GraphBuilder, args: list) -> list:
    return [b.shape(a) if isinstance(a, str) else a for a in args
            if isinstance(a, (str, int, float))]


def convert_node(b: GraphBuilder, fx_node: torch.fx.Node) -> Any:
    def lookup(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return b.env[value]
        if isinstance(value, (list, tuple)):
            return type(value)(lookup(v) for v in value)
        return value

    args = [lookup(a) for a in fx_node.args]
    kwargs = {k: lookup(v) for k, v in fx_node.kwargs.items()}
    if fx_node.target is operator.getitem:
        return args[0][args[1]]
    if not isinstance(fx_node.target, torch._ops.OpOverload):
        raise SpyreCompileError(STAGE, str(fx_node.target), _shapes(b, args),
                                "only ATen ops are supported after AOTAutograd")
    name = fx_node.target.overloadpacket.__name__
    if name in FALLBACK_OPS:
        val = fx_node.meta["val"]
        return _fallback(b, fx_node, name, args, kwargs, fx_node.name,
                         (val.dtype, static_shape(val, str(fx_node.target))))
    handler = _HANDLERS.get(name)
    if handler is None:
        raise SpyreCompileError(
            STAGE, str(fx_node.target), _shapes(b, args),
            "no Spyre decomposition or kernel for this op, and it is not a CPU fallback "
            "(see spyre_sim.ops.OPS and FALLBACK_OPS)",
        )
    return handler(b, fx_node, args, kwargs)
