"""Stage 3 — lower: Spyre ops into loop-level IR (pointwise, reduction, matmul) and fusion groups.

Mirrors torch_spyre/_inductor/lowering.py (mm/bmm become a reduction over K with ranges
[B,]M,N) and the scheduler's SDSC bundles (scheduler.py, fusion.py): each fusion group becomes
one kernel, and values passed between its nodes stay in the LX scratchpad. Fusion is the named
decision `fusion`: a pointwise op joins its producer's kernel when it iterates over the same
space, nothing else needs the producer first, and the bundle stays within the 6 argument
segments a kernel can address (torch_spyre/_inductor/constants.py SEGMENT_OFFSETS).
"""

from __future__ import annotations

import logging

from spyre_sim.config import Config, Decisions
from spyre_sim.ir import FusionGroup, Graph, LoopGraph, LoopNode, Node
from spyre_sim.ops import OPS, VIEW_OPS

log = logging.getLogger("spyre_sim.lower")
STAGE = "lower"
MAX_KERNEL_TENSORS = 6  # len(SEGMENT_OFFSETS) - 1 non-intermediate tensors per SDSC bundle
FUSION_ANCHORS = ("pointwise", "matmul", "reduction")


def loop_node(node: Node, shapes: dict[str, tuple[int, ...]]) -> LoopNode:
    if node.placement == "cpu":
        return LoopNode(node, "fallback", node.shape)
    if node.op in VIEW_OPS:
        return LoopNode(node, "view", node.shape)
    kind = OPS[node.op].kind
    attrs = node.attr
    if kind == "matmul":
        return LoopNode(node, kind, node.shape, (shapes[node.value_input(0)][-1],))
    if node.op == "softmax":
        return LoopNode(node, kind, node.shape, (node.shape[attrs["dim"]],))
    if node.op == "layernorm":
        return LoopNode(node, kind, node.shape, node.shape[-attrs["ndims"]:])
    if kind == "reduction":
        source = shapes[node.value_input(0)]
        return LoopNode(node, kind, node.shape, tuple(source[d] for d in attrs["dims"]))
    return LoopNode(node, kind, node.shape)


def _external_tensors(members: list[LoopNode]) -> int:
    inside = {m.name for m in members}
    inputs = {a for m in members for a in m.node.value_inputs if a not in inside}
    return len(inputs) + 1


def fuse(nodes: list[LoopNode], config: Config) -> list[FusionGroup]:
    decisions = Decisions(config, STAGE)
    position = {n.name: i for i, n in enumerate(nodes)}
    consumers: dict[str, list[int]] = {}
    for i, n in enumerate(nodes):
        for a in n.node.value_inputs:
            consumers.setdefault(a, []).append(i)
    members: list[list[LoopNode]] = []
    group_of: dict[str, int] = {}
    for i, candidate in enumerate(nodes):
        if candidate.kind in ("view", "fallback"):
            continue
        target = None
        if candidate.kind == "pointwise" and candidate.node.op != "cat":
            for producer in candidate.node.value_inputs:
                g = group_of.get(producer)
                if g is None or members[g][-1].name != producer:
                    continue
                if members[g][0].kind not in FUSION_ANCHORS:
                    continue
                if nodes[position[producer]].node.shape != candidate.node.shape:
                    continue
                group_names = {m.name for m in members[g]}
                tail = position[producer]
                if any(tail < c < i for m in group_names for c in consumers.get(m, ())
                       if nodes[c].name not in group_names):
                    continue
                if _external_tensors(members[g] + [candidate]) > MAX_KERNEL_TENSORS:
                    continue
                if decisions.use("fusion", lambda p=producer, c=candidate.name: f"%{p} -> %{c}"):
                    target = g
                break
        if target is None:
            members.append([candidate])
            group_of[candidate.name] = len(members) - 1
        else:
            members[target].append(candidate)
            group_of[candidate.name] = target
    return [
        FusionGroup(f"g{index}", group[0].kind, tuple(m.name for m in group))
        for index, group in enumerate(members)
    ]


def run(graph: Graph, config: Config) -> LoopGraph:
    shapes = {v.name: v.shape for v in graph.inputs} | {n.name: n.shape for n in graph.nodes}
    nodes = [loop_node(n, shapes) for n in graph.nodes]
    groups = fuse(nodes, config)
    log.info("lower: %d nodes, %d kernels", len(nodes), len(groups))
    return LoopGraph(index=graph.index, inputs=graph.inputs, nodes=tuple(nodes),
                     groups=tuple(groups), outputs=graph.outputs,
                     output_host_dtypes=graph.output_host_dtypes, constants=graph.constants)
