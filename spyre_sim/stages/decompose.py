"""Stage 2 — decompose: ATen ops into the Spyre op vocabulary, fallbacks marked for the CPU.

The per-op rewrites live in `spyre_sim.decompositions` and `spyre_sim.nn_decompositions`
(torch_spyre/_inductor/decompositions.py plays that part upstream): addmm -> mm*alpha +
beta*bias, linear -> matmul + add, SDPA -> explicit Q·Kᵀ·V with a softmax, layer_norm and
softmax either as fused Spyre ops or explicit arithmetic (knobs `layernorm_decomposition`,
`softmax_decomposition`); `spyre_sim.graph_builder` holds the node builder and the device dtype
rules. This stage walks the captured graph through them, then runs common-subexpression
elimination (knob `cse`) and dead-code elimination.
"""

from __future__ import annotations

import logging
from typing import Literal

import torch

from spyre_sim import decompositions, nn_decompositions  # noqa: F401 - fill the table
from spyre_sim.config import Config, Decisions
from spyre_sim.errors import SpyreCompileError
from spyre_sim.graph_builder import (
    GraphBuilder,
    convert_node,
    device_dtype,
    meta_tensor,
    static_shape,
)
from spyre_sim.ir import CapturedGraph, Graph, Node, Value

log = logging.getLogger("spyre_sim.decompose")
STAGE = "decompose"


def _eliminate_common_subexpressions(
    nodes: list[Node], outputs: list, config: Config
) -> list[Node]:
    decisions = Decisions(config, STAGE)
    seen: dict[tuple, str] = {}
    rename: dict[str, str] = {}
    kept = []
    for node in nodes:
        inputs = tuple(rename.get(a, a) if isinstance(a, str) else a for a in node.inputs)
        node = Node(name=node.name, op=node.op, inputs=inputs, attrs=node.attrs, shape=node.shape,
                    dtype=node.dtype, placement=node.placement)
        key = (node.op, node.inputs, repr(node.attrs), node.shape, node.dtype, node.placement)
        if key in seen and decisions.use("cse", lambda n=node, k=key: f"%{n.name} = %{seen[k]}"):
            rename[node.name] = seen[key]
            continue
        seen.setdefault(key, node.name)
        kept.append(node)
    outputs[:] = [rename.get(o, o) if isinstance(o, str) else o for o in outputs]
    return kept


def _eliminate_dead_code(nodes: list[Node], outputs: list) -> list[Node]:
    live = {o for o in outputs if isinstance(o, str)}
    kept = []
    for node in reversed(nodes):
        if node.name in live:
            kept.append(node)
            live.update(node.value_inputs)
    return list(reversed(kept))


def run(captured: CapturedGraph, config: Config) -> Graph:
    b = GraphBuilder(captured, config)
    kinds = iter(captured.input_kinds)
    graph_outputs: list = []
    output_dtypes: list = []
    for fx_node in captured.graph_module.graph.nodes:
        if fx_node.op == "placeholder":
            val = meta_tensor(fx_node.meta.get("val"))
            kind: Literal["input", "parameter"] = next(kinds, "input")
            if val is None:
                raise SpyreCompileError(STAGE, f"input {fx_node.name}", [],
                                        "non-tensor graph inputs are not supported")
            shape = static_shape(val, f"input {fx_node.name}")
            dtype = device_dtype(val.dtype, f"input {fx_node.name}", shape)
            name = b.fresh(fx_node.name)
            b.values[name] = (shape, dtype)
            b.inputs.append(Value(name, shape, dtype, str(val.dtype).replace("torch.", ""),
                                  kind=kind))
            b.env[fx_node] = name
        elif fx_node.op == "get_attr":
            tensor = getattr(captured.graph_module, fx_node.target)
            b.env[fx_node] = b.constant(fx_node.name, tensor.detach().to(torch.float32))
        elif fx_node.op == "call_function":
            b.env[fx_node] = convert_node(b, fx_node)
        elif fx_node.op == "output":
            results = fx_node.args[0] if isinstance(fx_node.args[0], (list, tuple)) \
                else [fx_node.args[0]]
            for result in results:
                value = b.env.get(result) if isinstance(result, torch.fx.Node) else None
                meta = meta_tensor(result.meta.get("val")) \
                    if isinstance(result, torch.fx.Node) else None
                if isinstance(result, torch.fx.Node) and not isinstance(value, str):
                    raise SpyreCompileError(STAGE, f"output {result.name}", [],
                                            "graph outputs must be tensors")
                graph_outputs.append(value)
                output_dtypes.append(str(meta.dtype).replace("torch.", "") if meta is not None
                                     else None)
    nodes = b.nodes
    nodes = _eliminate_common_subexpressions(nodes, graph_outputs, config)
    nodes = _eliminate_dead_code(nodes, graph_outputs)
    fallbacks = sorted({n.op for n in nodes if n.placement == "cpu"})
    log.info("decompose: %d ops, %d CPU fallback(s) %s", len(nodes), len(fallbacks), fallbacks)
    return Graph(index=captured.index, inputs=tuple(b.inputs), nodes=tuple(nodes),
                 outputs=tuple(graph_outputs),
                 output_host_dtypes=tuple(output_dtypes), constants=tuple(b.constants))
