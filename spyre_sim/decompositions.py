"""The decomposition table for tensor ops: how each ATen op becomes Spyre ops.

Mirrors torch_spyre/_inductor/decompositions.py: one function per ATen op family, registered
by name with `graph_builder.register`: matmuls, views and copies, pointwise ops, clamps,
reductions, constants and cat. The neural-network composites (softmax, norms, attention) are in
`spyre_sim.nn_decompositions`; the walk, CSE and DCE in `spyre_sim.stages.decompose`.
"""

from __future__ import annotations

import math

import torch

from spyre_sim.errors import SpyreCompileError
from spyre_sim.graph_builder import (
    STAGE,
    GraphBuilder,
    Ref,
    device_dtype,
    fallback,
    meta_tensor,
    out_shape,
    reduce_dims,
    register,
    shapes_of,
    static_shape,
    widens_to_fp32,
)


@register("addmm")
def _addmm(b: GraphBuilder, n, args, kwargs):
    bias, x, w = args[:3]
    beta, alpha = kwargs.get("beta", 1), kwargs.get("alpha", 1)
    product = b.emit(f"{n.name}_mm", "mm", (x, w))
    if alpha != 1:
        product = b.emit(f"{n.name}_alpha", "mul", (product, alpha))
    if beta != 1:
        bias = b.emit(f"{n.name}_beta", "mul", (bias, beta))
    return b.emit(n.name, "add", (product, bias))


@register("mm", "bmm")
def _matmul(b: GraphBuilder, n, args, kwargs):
    return b.emit(n.name, n.target.overloadpacket.__name__, (args[0], args[1]))


@register("linear")
def _linear(b: GraphBuilder, n, args, kwargs):
    x, w = args[0], args[1]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    wt = b.emit(f"{n.name}_wt", "permute", (w,), dims=[1, 0])
    lead = b.shape(x)[:-1]
    flat = b.emit(f"{n.name}_x2d", "view", (x,), shape=[math.prod(lead), b.shape(x)[-1]])
    out = b.emit(f"{n.name}_mm", "mm", (flat, wt))
    if bias is not None:
        out = b.emit(f"{n.name}_bias", "add", (out, bias))
    return b.emit(n.name, "view", (out,), shape=list(out_shape(n)))


@register("t", "transpose", "permute", "numpy_T")
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


@register("view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten",
           "view_as", "expand_as")
def _view(b: GraphBuilder, n, args, kwargs):
    x, shape = args[0], list(out_shape(n))
    if list(b.shape(x)) == shape:
        return x
    if n.target.overloadpacket.__name__ == "expand_as":
        return b.emit(n.name, "expand", (x,), shape=shape)
    return b.emit(n.name, "view", (x,), shape=shape)


@register("expand")
def _expand(b: GraphBuilder, n, args, kwargs):
    x, shape = args[0], list(out_shape(n))
    if list(b.shape(x)) == shape:
        return x
    rank_gap = len(shape) - len(b.shape(x))
    if rank_gap:
        x = b.emit(f"{n.name}_rank", "view", (x,), shape=[1] * rank_gap + list(b.shape(x)))
    return b.emit(n.name, "expand", (x,), shape=shape)


@register("slice")
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


@register("split", "split_with_sizes", "chunk", "unbind")
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
                           shape=list(out_shape(n, index)))
        outputs.append(piece)
        start += size
    return tuple(outputs)


@register("select")
def _select(b: GraphBuilder, n, args, kwargs):
    x, dim, index = args[0], args[1] % len(b.shape(args[0])), args[2]
    index = index % b.shape(x)[dim]
    sliced = b.emit(f"{n.name}_slice", "slice", (x,), dim=dim, start=index, end=index + 1, step=1)
    return b.emit(n.name, "view", (sliced,), shape=list(out_shape(n)))


@register("clone", "alias", "detach", "lift_fresh_copy", "contiguous", "_to_copy",
           "convert_element_type", "to", "type_as")
def _copy(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    val = meta_tensor(n.meta.get("val"))
    if not isinstance(x, str):
        return x
    if val is None:
        return x
    source = meta_tensor(n.args[0].meta.get("val")) if isinstance(n.args[0], torch.fx.Node) \
        else None
    target = "f32" if widens_to_fp32(source.dtype if source is not None else None, val.dtype) \
        else device_dtype(val.dtype, str(n.target), out_shape(n))
    if target == b.dtype(x):
        return x
    return b.emit(n.name, "to_dtype", (x,), dtype=target)


_SAME_NAME = {
    "abs", "neg", "exp", "log", "sqrt", "rsqrt", "reciprocal", "relu", "silu", "sigmoid", "tanh",
    "floor", "logical_not", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt",
    "ge", "where",
}


@register(*_SAME_NAME)
def _same(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    if name == "div" and kwargs.get("rounding_mode") is not None:
        raise SpyreCompileError(STAGE, str(n.target), shapes_of(b, args),
                                "div with a rounding_mode has no Spyre kernel")
    return b.emit(n.name, name, tuple(args[:3] if name == "where" else args[:2]))


@register("gelu")
def _gelu(b: GraphBuilder, n, args, kwargs):
    return b.emit(n.name, "gelu", (args[0],), approximate=kwargs.get("approximate", "none"))


@register("add", "sub", "rsub")
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


@register("pow")
def _pow(b: GraphBuilder, n, args, kwargs):
    base, exponent = args[0], args[1]
    if exponent == 2:
        return b.emit(n.name, "mul", (base, base))
    return b.emit(n.name, "pow", (base, exponent))


@register("square")
def _square(b: GraphBuilder, n, args, kwargs):
    return b.emit(n.name, "mul", (args[0], args[0]))


@register("clamp", "clamp_min", "clamp_max", "hardtanh")
def _clamp(b: GraphBuilder, n, args, kwargs):
    """Scalar bounds: one clip op. A tensor bound: maximum / minimum with it (torch.clamp's
    min(max(x, low), high), NaN-propagating like clamp)."""
    name = n.target.overloadpacket.__name__
    low = args[1] if len(args) > 1 else kwargs.get("min")
    high = args[2] if len(args) > 2 else kwargs.get("max")
    if name == "clamp_max":
        low, high = None, args[1] if len(args) > 1 else kwargs.get("max")
    if name == "hardtanh":
        low = args[1] if len(args) > 1 else -1.0
        high = args[2] if len(args) > 2 else 1.0
    x = args[0]
    if isinstance(low, str):
        x = b.emit(f"{n.name}_low" if high is not None else n.name, "maximum", (x, low))
        low = None
    if isinstance(high, str):
        x = b.emit(n.name if low is None else f"{n.name}_high", "minimum", (x, high))
        high = None
    if low is None and high is None:
        return x
    return b.emit(n.name, "clamp", (x,), min=low, max=high)


@register("sum", "mean", "amax", "amin")
def _reduction(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    if not b.shape(x):  # a 0-dim tensor: reducing it over dim 0 or -1 leaves it as it is
        return x
    dims = reduce_dims(b, x, args[1] if len(args) > 1 else kwargs.get("dim"))
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return b.emit(n.name, n.target.overloadpacket.__name__, (x,), dims=dims, keepdim=bool(keepdim))


@register("max", "min")
def _max_min(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    x = args[0]
    if len(args) == 1:  # max.default: a full reduction
        if not b.shape(x):
            return x
        return b.emit(n.name, "amax" if name == "max" else "amin", (x,),
                      dims=list(range(len(b.shape(x)))), keepdim=False)
    if isinstance(args[1], str):  # max.other: elementwise
        return b.emit(n.name, "maximum" if name == "max" else "minimum", (x, args[1]))
    keepdim = bool(args[2] if len(args) > 2 else False)
    if not b.shape(x):  # 0-dim: the value itself at index 0
        return (x, b.emit(f"{n.name}_indices", "full", (), shape=[], dtype="i32", value=0.0))
    dim = args[1] % len(b.shape(x))
    values = b.emit(f"{n.name}_values", "amax" if name == "max" else "amin", (x,), dims=[dim],
                    keepdim=keepdim)
    indices = fallback(b, n, "argmax" if name == "max" else "argmin", [Ref(x), dim, keepdim],
                       kwargs={}, base=f"{n.name}_indices", results=[n.meta["val"][1]])
    return (values, indices)


@register("full", "zeros", "ones", "scalar_tensor", "full_like", "zeros_like", "ones_like",
           "new_zeros", "new_ones", "new_full", "empty", "empty_like", "new_empty", "fill")
def _full(b: GraphBuilder, n, args, kwargs):
    name = n.target.overloadpacket.__name__
    val = n.meta["val"]
    fill = {"full": lambda: args[1], "full_like": lambda: args[1], "new_full": lambda: args[2],
            "scalar_tensor": lambda: args[0], "fill": lambda: args[1]}.get(name, lambda: None)()
    if fill is None:
        fill = 1.0 if "ones" in name else 0.0
    shape = out_shape(n)
    dtype = device_dtype(val.dtype, str(n.target), shape)
    return b.emit(n.name, "full", (), shape=list(shape), dtype=dtype, value=float(fill))


@register("cat")
def _cat(b: GraphBuilder, n, args, kwargs):
    # torch.cat skips 1-D empty tensors whatever `dim` is (legacy behaviour it keeps)
    tensors = [t for t in args[0] if isinstance(t, str) and b.shape(t) != (0,)]
    if not tensors:
        return b.emit(n.name, "full", (), shape=list(out_shape(n)), dtype=b.dtype(args[0][0]),
                      value=0.0)
    if len(tensors) == 1:
        return tensors[0]
    dim = (args[1] if len(args) > 1 else kwargs.get("dim", 0)) % len(out_shape(n))
    return b.emit(n.name, "cat", tuple(tensors), dim=dim)
