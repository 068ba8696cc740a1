"""The decomposition table for neural-network composites: softmax, norms, attention.

Registered with `graph_builder.register` like `spyre_sim.decompositions`: softmax and
layer_norm either as fused Spyre ops or explicit arithmetic (knobs `softmax_decomposition`,
`layernorm_decomposition`), var/var_mean, and SDPA as an explicit Q·Kᵀ·V with a softmax.

Masks use DLFloat16's most negative finite value, not -inf: the format has no infinity (its one
NaN/inf code reads back as NaN), which torch-spyre learned when -inf masks came back as NaN
(torch-spyre/torch-spyre PR #4234). exp() of it is still exactly 0.
"""

from __future__ import annotations

import math
import operator

import torch

from spyre_sim import dlfloat
from spyre_sim.graph_builder import GraphBuilder, out_shape, reduce_dims, register


def _softmax_of(b: GraphBuilder, base: str, x: str, dim: int) -> str:
    if b.decisions.use("softmax_decomposition", lambda: f"%{base}") == "fused":
        return b.emit(base, "softmax", (x,), dim=dim)
    peak = b.emit(f"{base}_amax", "amax", (x,), dims=[dim], keepdim=True)
    shifted = b.emit(f"{base}_sub", "sub", (x, peak))
    exps = b.emit(f"{base}_exp", "exp", (shifted,))
    total = b.emit(f"{base}_sum", "sum", (exps,), dims=[dim], keepdim=True)
    return b.emit(base, "div", (exps, total))


@register("_softmax", "softmax", "_safe_softmax")
def _softmax(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    return _softmax_of(b, n.name, x, args[1] % len(b.shape(x)))


@register("_log_softmax", "log_softmax")
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


@register("native_layer_norm", "layer_norm")
def _layer_norm(b: GraphBuilder, n, args, kwargs):
    x, normalized_shape = args[0], args[1]
    weight = args[2] if len(args) > 2 else kwargs.get("weight")
    bias = args[3] if len(args) > 3 else kwargs.get("bias")
    eps = args[4] if len(args) > 4 else kwargs.get("eps", 1e-5)
    ndims = len(normalized_shape)
    users = {u.args[1] for u in n.users if u.target is operator.getitem}
    if users <= {0} and b.decisions.use("layernorm_decomposition",
                                        lambda: f"%{n.name}") == "fused":
        inputs = tuple(v for v in (x, weight, bias) if v is not None)
        if weight is None and bias is not None:
            inputs = (x, None, bias)
        out = b.emit(n.name, "layernorm", inputs, ndims=ndims, eps=float(eps))
        return (out, None, None)
    normed, mean, rstd = _explicit_norm(b, n.name, x, ndims, eps=float(eps))
    if weight is not None:
        normed = b.emit(f"{n.name}_scale", "mul", (normed, weight))
    if bias is not None:
        normed = b.emit(f"{n.name}_shift", "add", (normed, bias))
    return (normed, mean, rstd)


@register("var_mean", "var")
def _var_mean(b: GraphBuilder, n, args, kwargs):
    x = args[0]
    dims = reduce_dims(b, x, args[1] if len(args) > 1 else kwargs.get("dim"))
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
        mean = b.emit(f"{n.name}_mean_out", "view", (mean,), shape=list(out_shape(n, 1)))
    return (var, mean)


@register("_scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_attention",
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
        causal = torch.full((seq_q, seq_k), -dlfloat.MAX).triu(1)
        mask_name = b.constant(f"{n.name}_causal_mask", causal)
        scores = b.emit(f"{n.name}_masked", "add", (scores, mask_name))
    if mask is not None:
        if b.dtype(mask) == "bool":
            scores = b.emit(f"{n.name}_masked", "where", (mask, scores, -dlfloat.MAX))
        else:
            mask3 = b.emit(f"{n.name}_mask3", "view", (mask,),
                           shape=[-1 if i == 0 else s for i, s in enumerate(b.shape(mask))])
            scores = b.emit(f"{n.name}_masked", "add", (scores, mask3))
    probs = _softmax_of(b, f"{n.name}_probs", scores, 2)
    v3 = b.emit(f"{n.name}_v", "view", (v,), shape=[batch, seq_k, vs[-1]])
    out3 = b.emit(f"{n.name}_pv", "bmm", (probs, v3))
    out = b.emit(n.name, "view", (out3,), shape=list(qs[:-1]) + [vs[-1]])
    return (out, None)
