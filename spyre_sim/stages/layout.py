"""Stage 4 — layout: a stick layout per buffer; restickify and padding where operands disagree.

Mirrors torch_spyre/_inductor/propagate_layouts.py and the insert_restickify /
insert_bmm_padding passes: graph inputs take the generic stick layout of their host tensor
(or, with the knob `prepack_weights`, parameters take the layout their consumer needs, so the
weight is re-sticked once at load instead of on every call); pointwise operands must share the
output's stick dim; matmul sticks A on K and B and the output on N, with B's K rows padded to
whole sticks when A's K is. A permute is a free relabelling of the same device memory; a view
that keeps the stick dim whole is free; any other view is a copy (restickify).
"""

from __future__ import annotations

import logging

from spyre_sim.config import Config, Decisions
from spyre_sim.ir import (
    FusionGroup,
    LayoutGraph,
    LoopGraph,
    LoopKind,
    LoopNode,
    Node,
    UniqueNames,
    make_attrs,
)
from spyre_sim.layouts import TensorLayout, elems_per_stick, permuted_layout, stick_layout

log = logging.getLogger("spyre_sim.layout")
STAGE = "layout"


def _order_with_stick(rank: int, stick: int) -> tuple[int, ...]:
    return tuple(d for d in range(rank) if d != stick) + (stick,)


class _Propagation:
    def __init__(self, loop: LoopGraph, config: Config) -> None:
        self.loop = loop
        self.decisions = Decisions(config, STAGE)
        self.layouts: dict[str, TensorLayout] = {}
        self.nodes: list[LoopNode] = []
        self.inserted: dict[tuple[str, tuple], str] = {}
        self.copy_of_view: dict[str, str] = {}
        self.names = UniqueNames([v.name for v in loop.inputs] + [n.name for n in loop.nodes])

    def prepacked_orders(self) -> dict[str, tuple[int, ...]]:
        """Parameters read by a matmul through a transpose: stick them on N at load time."""
        parameters = {v.name: v for v in self.loop.inputs if v.kind == "parameter"}
        producers = {n.name: n for n in self.loop.nodes}
        orders: dict[str, tuple[int, ...]] = {}
        for loop_node in self.loop.nodes:
            if loop_node.kind != "matmul":
                continue
            operand = loop_node.node.value_input(1)
            view = producers.get(operand)
            if view is None or view.node.op != "permute":
                continue
            source = view.node.value_input(0)
            if source not in parameters or source in orders:
                continue
            perm = view.node.attr["dims"]
            order = _order_with_stick(len(perm), perm[-1])
            if self.decisions.use("prepack_weights",
                                  lambda s=source, o=order: f"%{s} dim_order={list(o)}"):
                orders[source] = order
        return orders

    def add(self, node: Node, kind: LoopKind, layout: TensorLayout) -> str:
        self.nodes.append(LoopNode(node, kind, node.shape))
        self.layouts[node.name] = layout
        return node.name

    def restickify(self, operand: str, order: tuple[int, ...]) -> str:
        key = (operand, order)
        if key not in self.inserted:
            source = self.layouts[operand]
            node = Node(name=self.names.fresh(f"restick_{operand}"), op="restickify",
                        inputs=(operand,),
                        attrs=make_attrs(dim_order=list(order)), shape=source.host_size,
                        dtype=source.dtype)
            self.inserted[key] = self.add(node, "pointwise",
                                          stick_layout(source.host_size, source.dtype, order))
        return self.inserted[key]

    def pad_rows(self, operand: str, rows: int) -> str:
        key = (operand, ("pad", rows))
        if key not in self.inserted:
            source = self.layouts[operand]
            node = Node(name=self.names.fresh(f"pad_{operand}"), op="pad_rows", inputs=(operand,),
                        attrs=make_attrs(dim=len(source.host_size) - 2, rows=rows),
                        shape=source.host_size, dtype=source.dtype)
            self.inserted[key] = self.add(node, "pointwise", source)
        return self.inserted[key]

    def stick_on(self, operand: str, host_dim: int) -> str:
        layout = self.layouts[operand]
        if not layout.host_size or layout.stick_dim == host_dim:
            return operand
        return self.restickify(operand, _order_with_stick(len(layout.host_size), host_dim))

    def matmul_operands(self, node: Node) -> tuple:
        a, b = node.value_input(0), node.value_input(1)
        a = self.stick_on(a, len(self.layouts[a].host_size) - 1)
        b = self.stick_on(b, len(self.layouts[b].host_size) - 1)
        k = self.layouts[a].host_size[-1]
        per_stick = elems_per_stick(self.layouts[a].dtype)
        if k % per_stick:
            b = self.pad_rows(b, -(-k // per_stick) * per_stick)
        return (a, b)

    def pointwise_operands(self, node: Node) -> tuple[tuple, tuple[int, ...] | None]:
        rank = len(node.shape)
        main = next((a for a in node.value_inputs
                     if self.layouts[a].host_size == node.shape), None)
        out_stick = self.layouts[main].stick_dim if main is not None and rank else rank - 1
        inputs = []
        for arg in node.inputs:
            if isinstance(arg, str) and rank:
                layout = self.layouts[arg]
                offset = rank - len(layout.host_size)
                if layout.host_size and layout.host_size[layout.stick_dim] > 1 \
                        and layout.stick_dim + offset != out_stick:
                    arg = self.stick_on(arg, out_stick - offset) if out_stick >= offset else arg
            inputs.append(arg)
        order = _order_with_stick(rank, out_stick) if rank else None
        return tuple(inputs), order

    def view(self, loop_node: LoopNode) -> None:
        node = loop_node.node
        source = self.layouts[node.value_input(0)]
        attrs = node.attr
        if node.op == "permute":
            self.add(node, "view", permuted_layout(source, tuple(attrs["dims"])))
            return
        per_stick = elems_per_stick(source.dtype)
        last_in = source.host_size[-1] if source.host_size else 1
        last_out = node.shape[-1] if node.shape else 1
        stick_last = not source.host_size or source.stick_dim == len(source.host_size) - 1
        if node.op == "expand":
            free, order = True, source.dim_order if source.host_size else None
        elif node.op == "slice":
            on_stick = attrs["dim"] == source.stick_dim
            free = not on_stick or (attrs["start"] % per_stick == 0 and attrs["step"] == 1)
            order = source.dim_order
        else:
            free = stick_last and (last_in == last_out or
                                   (last_in % per_stick == 0 and last_out % per_stick == 0))
            order = None
        self.add(node, "view", stick_layout(node.shape, node.dtype, order if free else None))
        if not free:
            self.copy_of_view[node.name] = self.restickify(node.name, tuple(range(len(node.shape))))

    def visit(self, loop_node: LoopNode) -> None:
        node = loop_node.node
        node = Node(name=node.name, op=node.op,
                    inputs=tuple(self.copy_of_view.get(a, a) if isinstance(a, str) else a
                                 for a in node.inputs),
                    attrs=node.attrs, shape=node.shape, dtype=node.dtype, placement=node.placement)
        if loop_node.kind == "view":
            self.view(LoopNode(node, loop_node.kind, loop_node.ranges))
            return
        order = None
        if loop_node.kind == "matmul":
            node = _with_inputs(node, self.matmul_operands(node))
        elif loop_node.kind == "pointwise" and node.op != "cat":
            inputs, order = self.pointwise_operands(node)
            node = _with_inputs(node, inputs)
        elif node.op == "cat":
            last = len(node.shape) - 1
            node = _with_inputs(node, tuple(self.stick_on(a, last) for a in node.value_inputs))
        self.nodes.append(LoopNode(node, loop_node.kind, loop_node.ranges,
                                   loop_node.reduction_ranges))
        self.layouts[node.name] = stick_layout(node.shape, node.dtype, order)


def _with_inputs(node: Node, inputs: tuple) -> Node:
    return Node(name=node.name, op=node.op, inputs=inputs, attrs=node.attrs, shape=node.shape,
                dtype=node.dtype, placement=node.placement)


def _regroup(loop: LoopGraph, nodes: list[LoopNode]) -> list[FusionGroup]:
    """Original groups plus one kernel per inserted node; split a group if one feeds it inside."""
    original = {n.name for n in loop.nodes}
    by_name = {n.name: n for n in nodes}
    groups: list[FusionGroup] = []
    for group in loop.groups:
        current: list[str] = []
        for name in group.nodes:
            inserted_inputs = [a for a in by_name[name].node.value_inputs if a not in original]
            feeds_inside = any(by_name[a].node.value_inputs[0] in current
                               for a in inserted_inputs if a in by_name)
            if feeds_inside and current:
                groups.append(FusionGroup(f"{group.name}.{len(groups)}", group.kind,
                                          tuple(current)))
                current = []
            current.append(name)
        groups.append(FusionGroup(group.name, group.kind, tuple(current)))
    for node in nodes:
        if node.name not in original:
            groups.append(FusionGroup(f"r_{node.name}", "restickify", (node.name,)))
    return groups


def run(loop: LoopGraph, config: Config) -> LayoutGraph:
    propagation = _Propagation(loop, config)
    orders = propagation.prepacked_orders()
    for value in loop.inputs:
        propagation.layouts[value.name] = stick_layout(value.shape, value.dtype,
                                                       orders.get(value.name))
    for loop_node in loop.nodes:
        propagation.visit(loop_node)
    nodes = propagation.nodes
    outputs = tuple(propagation.copy_of_view.get(o, o) if o else o for o in loop.outputs)
    groups = _regroup(loop, nodes)
    inserted = len(nodes) - len(loop.nodes)
    log.info("layout: %d buffers, %d restickify/padding node(s), %d prepacked parameter(s)",
             len(propagation.layouts), inserted, len(orders))
    laid_out = LoopGraph(index=loop.index, inputs=loop.inputs, nodes=tuple(nodes),
                         groups=tuple(groups), outputs=outputs,
                         output_host_dtypes=loop.output_host_dtypes, constants=loop.constants)
    names = [v.name for v in loop.inputs] + [n.name for n in nodes]
    return LayoutGraph(laid_out, tuple((name, propagation.layouts[name]) for name in names))
