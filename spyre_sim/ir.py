"""The typed artifacts the stages pass along, and their canonical text forms.

Each stage takes the previous artifact and returns the next; none reaches into another
stage's module. Canonical text has stable names, sorted keys and no addresses or timestamps,
so the artifacts of two commits can be diffed line by line (the stage bisector does).
Artifacts of decompose, lower, layout and kernel turn into an `ExecPlan` that the shared
executor runs, so the numerical error after each stage can be measured.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from spyre_sim.cost import KernelWork
from spyre_sim.executor import Binding, ExecPlan, HostStep, KernelStep, ViewStep
from spyre_sim.layouts import TensorLayout

Arg = str | float | int | bool | None  # a str names a value; anything else is a literal
Placement = Literal["device", "cpu"]  # cpu: a fallback
DeviceDtype = Literal["f16", "i32", "bool"]
LoopKind = Literal["pointwise", "reduction", "matmul", "view", "constant", "fallback"]


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def canonical_json(value: Any, indent: int = 0) -> str:
    """Sorted-key JSON, one key per line, lists of scalars kept on one line: diff-friendly."""
    pad, inner = " " * indent, " " * (indent + 1)
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(str(k))}: {canonical_json(v, indent + 1)}"
                 for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, (list, tuple)):
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            return json.dumps(list(value))
        items = [inner + canonical_json(v, indent + 1) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + pad + "]"
    return json.dumps(value)


def format_shape(dtype: str, shape: tuple[int, ...]) -> str:
    return f"{dtype}[{', '.join(str(s) for s in shape)}]"


@dataclass(frozen=True)
class Value:
    """A graph input or constant as the device sees it."""

    name: str
    shape: tuple[int, ...]
    dtype: DeviceDtype
    host_dtype: str  # torch dtype name of the host tensor
    kind: Literal["input", "parameter", "constant"]

    def to_text(self) -> str:
        return f"input %{self.name} {format_shape(self.dtype, self.shape)} {self.kind} " \
               f"(host {self.host_dtype})"


@dataclass(frozen=True, kw_only=True)
class Node:
    """One op: `name = op(inputs; attrs)` producing a tensor of `shape` and `dtype`."""

    name: str
    op: str
    inputs: tuple[Arg, ...]
    attrs: tuple[tuple[str, Any], ...]
    shape: tuple[int, ...]
    dtype: str
    placement: Placement = "device"

    @property
    def attr(self) -> dict[str, Any]:
        return dict(self.attrs)

    def value_input(self, index: int) -> str:
        """The name of input `index`, where the op takes a value (a matmul's operands, a
        view's or a reduction's source): a literal there is a malformed graph."""
        name = self.inputs[index]
        if not isinstance(name, str):
            raise TypeError(f"%{self.name} = {self.op}: input {index} is the literal {name!r}, "
                            "not a value")
        return name

    @property
    def value_inputs(self) -> tuple[str, ...]:
        return tuple(a for a in self.inputs if isinstance(a, str))

    def to_text(self) -> str:
        args = ", ".join(f"%{a}" if isinstance(a, str) else repr(a) for a in self.inputs)
        if self.attrs:
            args += "; " + ", ".join(f"{k}={_json(v)}" for k, v in self.attrs)
        where = " @cpu" if self.placement == "cpu" else ""
        return f"%{self.name} = {self.op}({args}) : {format_shape(self.dtype, self.shape)}{where}"


class UniqueNames:
    """Value names not yet taken in a graph: base, base_1, base_2, ... (stable across runs)."""

    def __init__(self, taken: Any = ()) -> None:
        self.taken = set(taken)

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name


def make_attrs(**attrs: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((k, v) for k, v in attrs.items() if v is not None))


def _constant_text(name: str, tensor: torch.Tensor) -> str:
    digest = hashlib.sha256(tensor.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
    return f"constant %{name} {list(tensor.shape)} sha256={digest[:16]}"


def _outputs_text(outputs: tuple[str | None, ...]) -> str:
    return "output " + ", ".join("None" if o is None else f"%{o}" for o in outputs)


@dataclass(frozen=True)
class CapturedGraph:
    """Stage 1 (dynamo): one Dynamo graph after AOTAutograd, as ATen ops."""

    index: int
    graph_module: torch.fx.GraphModule = field(compare=False)
    input_kinds: tuple[Literal["input", "parameter"], ...]  # per placeholder
    # the real tensors Dynamo passed, in placeholder order (for minimizers and references)
    example_inputs: tuple = field(compare=False, default=(), repr=False)

    def to_text(self) -> str:
        lines = [f"graph {self.index}"]
        kinds = iter(self.input_kinds)
        for node in self.graph_module.graph.nodes:
            meta = node.meta.get("val")
            typ = f" : {str(meta.dtype).replace('torch.', '')}{list(meta.shape)}" \
                if isinstance(meta, torch.Tensor) else ""
            if node.op == "placeholder":
                lines.append(f"  input %{node.name}{typ} {next(kinds, 'input')}")
            elif node.op == "output":
                outs = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
                lines.append("  output " + ", ".join(
                    f"%{o.name}" if isinstance(o, torch.fx.Node) else repr(o) for o in outs))
            else:
                args = ", ".join(
                    f"%{a.name}" if isinstance(a, torch.fx.Node) else repr(a) for a in node.args)
                lines.append(f"  %{node.name} = {node.target}({args}){typ}")
        return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class DynamoArtifact:
    """Stage 1 for a whole program: every captured graph, its guards and graph breaks."""

    graphs: tuple[CapturedGraph, ...]
    guards: tuple[str, ...]
    graph_breaks: tuple[str, ...]

    def to_text(self) -> str:
        head = [
            f"dynamo: {len(self.graphs)} graph(s), {len(self.graph_breaks)} graph break(s), "
            f"{len(self.guards)} guard(s)",
        ]
        head += [f"graph break: {reason}" for reason in self.graph_breaks]
        head += [f"guard: {guard}" for guard in self.guards]
        return "\n".join(head) + "\n" + "".join(g.to_text() for g in self.graphs)


@dataclass(frozen=True, kw_only=True)
class Graph:
    """Stage 2 (decompose): Spyre ops only; ops without a device kernel placed on the CPU."""

    index: int
    inputs: tuple[Value, ...]
    nodes: tuple[Node, ...]
    outputs: tuple[str | None, ...]
    output_host_dtypes: tuple[str | None, ...]
    constants: tuple[tuple[str, torch.Tensor], ...] = field(compare=False, default=())

    def to_text(self) -> str:
        lines = [f"graph {self.index}"]
        lines += ["  " + v.to_text() for v in self.inputs]
        lines += ["  " + _constant_text(n, t) for n, t in self.constants]
        lines += ["  " + n.to_text() for n in self.nodes]
        lines.append("  " + _outputs_text(self.outputs))
        return "\n".join(lines) + "\n"

    def to_plan(self) -> ExecPlan:
        steps: list[HostStep | ViewStep | KernelStep] = []
        for node in self.nodes:
            if node.placement == "cpu":
                steps.append(HostStep(node, (None,) * len(node.value_inputs), None))
            elif node.op in ("view", "permute", "expand", "slice"):
                steps.append(ViewStep(node))
            else:
                steps.append(KernelStep(node.name, (node,), "fp32"))
        return _plan(self.inputs, self.constants, steps, self.outputs,
                     output_host_dtypes=self.output_host_dtypes, layouts={})


@dataclass(frozen=True)
class LoopNode:
    """A loop-level IR node: iteration `ranges`, and `reduction_ranges` for reductions/matmul."""

    node: Node
    kind: LoopKind
    ranges: tuple[int, ...]
    reduction_ranges: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return self.node.name

    def to_text(self) -> str:
        text = f"{self.kind:9} {self.node.to_text()} ranges={list(self.ranges)}"
        return text + (f" reduce={list(self.reduction_ranges)}" if self.reduction_ranges else "")


@dataclass(frozen=True)
class FusionGroup:
    """Nodes that become one kernel; intermediates between them never leave the LX scratchpad."""

    name: str
    kind: str
    nodes: tuple[str, ...]

    def to_text(self) -> str:
        return f"group {self.name} {self.kind}: " + " ".join(f"%{n}" for n in self.nodes)


@dataclass(frozen=True, kw_only=True)
class LoopGraph:
    """Stage 3 (lower): loop-level IR with fusion groups."""

    index: int
    inputs: tuple[Value, ...]
    nodes: tuple[LoopNode, ...]
    groups: tuple[FusionGroup, ...]
    outputs: tuple[str | None, ...]
    output_host_dtypes: tuple[str | None, ...]
    constants: tuple[tuple[str, torch.Tensor], ...] = field(compare=False, default=())

    def node(self, name: str) -> LoopNode:
        return next(n for n in self.nodes if n.name == name)

    def to_text(self) -> str:
        lines = [f"graph {self.index}"]
        lines += ["  " + v.to_text() for v in self.inputs]
        lines += ["  " + _constant_text(n, t) for n, t in self.constants]
        lines += ["  " + n.to_text() for n in self.nodes]
        lines += ["  " + g.to_text() for g in self.groups]
        lines.append("  " + _outputs_text(self.outputs))
        return "\n".join(lines) + "\n"

    def plan_steps(self) -> list:
        """Kernels in program order: a group runs where its last node sits."""
        by_name = {n.name: n for n in self.nodes}
        group_of = {name: g for g in self.groups for name in g.nodes}
        steps: list[HostStep | ViewStep | KernelStep] = []
        for loop_node in self.nodes:
            node = loop_node.node
            if loop_node.kind == "fallback":
                steps.append(HostStep(node, (None,) * len(node.value_inputs), None))
            elif loop_node.kind == "view":
                steps.append(ViewStep(node))
            elif group_of[node.name].nodes[-1] == node.name:
                group = group_of[node.name]
                steps.append(KernelStep(group.name, tuple(by_name[n].node for n in group.nodes),
                                        "fp32"))
        return steps

    def to_plan(self) -> ExecPlan:
        return _plan(self.inputs, self.constants, self.plan_steps(), self.outputs,
                     output_host_dtypes=self.output_host_dtypes, layouts={})


@dataclass(frozen=True)
class LayoutGraph:
    """Stage 4 (layout): a stick layout for every buffer, restickify/padding nodes inserted."""

    loop: LoopGraph
    layouts: tuple[tuple[str, TensorLayout], ...]

    def layout(self, name: str) -> TensorLayout:
        return dict(self.layouts)[name]

    def to_text(self) -> str:
        lines = [self.loop.to_text().rstrip("\n")]
        lines += [f"  layout %{name} {layout.to_text()}" for name, layout in self.layouts]
        return "\n".join(lines) + "\n"

    def to_plan(self) -> ExecPlan:
        layouts = dict(self.layouts)
        steps = []
        for step in self.loop.plan_steps():
            if isinstance(step, HostStep):
                node = step.node
                step = HostStep(node, tuple(layouts[a] for a in node.value_inputs),
                                layouts[node.name])
            steps.append(step)
        loop = self.loop
        return _plan(loop.inputs, loop.constants, steps, loop.outputs,
                     output_host_dtypes=loop.output_host_dtypes,
                     layouts=layouts)


@dataclass(frozen=True)
class TensorArg:
    name: str
    role: Literal["input", "output", "intermediate"]
    layout: TensorLayout
    memory: Literal["hbm", "lx"]
    nbytes: int  # DRAM bytes this kernel moves for the tensor (a view moves its source's)

    def to_text(self) -> str:
        return f"arg %{self.name} {self.role} {self.memory} {self.nbytes}B {self.layout.to_text()}"


@dataclass(frozen=True, kw_only=True)
class KernelSpec:
    """Stage 5 (kernel): one device kernel, like torch-spyre's OpSpec."""

    name: str
    kind: str
    ops: tuple[Node, ...]
    args: tuple[TensorArg, ...]
    iteration_space: tuple[tuple[str, int], ...]
    splits: tuple[tuple[str, int], ...]
    tiling: tuple[tuple[str, int], ...]  # per-core extent of each dim
    accumulation: str
    data_format: str
    work: KernelWork

    def to_text(self) -> str:
        lines = [
            f"kernel {self.name} {self.kind} cores={self.work.cores_used} "
            f"space={_json(dict(self.iteration_space))} split={_json(dict(self.splits))} "
            f"tile={_json(dict(self.tiling))} acc={self.accumulation} format={self.data_format}",
        ]
        lines += ["  op " + op.to_text() for op in self.ops]
        lines += ["  " + arg.to_text() for arg in self.args]
        work = self.work
        lines.append(
            f"  work macs={work.macs} read={work.hbm_read_bytes} write={work.hbm_write_bytes} "
            f"transcendental={work.transcendental_elems} simple={work.simple_elems} "
            f"reduce={work.reduce_elems}"
        )
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True)
class KernelProgram:
    """Stage 5 (kernel) for one graph: kernels, host fallbacks and views in program order."""

    index: int
    inputs: tuple[Value, ...]
    steps: tuple[KernelSpec | HostStep | ViewStep, ...]
    outputs: tuple[str | None, ...]
    output_host_dtypes: tuple[str | None, ...]
    layouts: tuple[tuple[str, TensorLayout], ...]
    constants: tuple[tuple[str, torch.Tensor], ...] = field(compare=False, default=())

    @property
    def kernels(self) -> tuple[KernelSpec, ...]:
        return tuple(s for s in self.steps if isinstance(s, KernelSpec))

    def to_text(self) -> str:
        lines = [f"graph {self.index}"]
        lines += ["  " + v.to_text() for v in self.inputs]
        for step in self.steps:
            if isinstance(step, KernelSpec):
                lines += ["  " + line for line in step.to_text().splitlines()]
            elif isinstance(step, HostStep):
                lines.append("  host " + step.node.to_text())
            else:
                lines.append("  view " + step.node.to_text())
        lines.append("  " + _outputs_text(self.outputs))
        lines += [f"  layout %{name} {layout.to_text()}" for name, layout in self.layouts
                  if name in {v.name for v in self.inputs} or name in self.outputs]
        return "\n".join(lines) + "\n"

    def to_plan(self) -> ExecPlan:
        steps = [
            KernelStep(s.name, s.ops, s.accumulation) if isinstance(s, KernelSpec) else s
            for s in self.steps
        ]
        return _plan(self.inputs, self.constants, steps, self.outputs,
                     output_host_dtypes=self.output_host_dtypes,
                     layouts=dict(self.layouts))


def _plan(inputs, constants, steps, outputs, output_host_dtypes, layouts) -> ExecPlan:
    constant_names = {name for name, _ in constants}
    return ExecPlan(
        inputs=tuple(
            Binding(v.name, layouts.get(v.name), v.host_dtype, v.dtype, kind=v.kind)
            for v in inputs if v.name not in constant_names
        ),
        constants=tuple(
            (Binding(v.name, layouts.get(v.name), v.host_dtype, v.dtype, kind=v.kind),
             dict(constants)[v.name])
            for v in inputs if v.name in constant_names
        ),
        steps=tuple(steps),
        outputs=tuple(
            None if name is None else Binding(name, layouts.get(name), dtype, "", kind="output")
            for name, dtype in zip(outputs, output_host_dtypes, strict=True)
        ),
    )


def node_to_dict(node: Node) -> dict[str, Any]:
    return {
        "name": node.name, "op": node.op,
        "inputs": [{"ref": a} if isinstance(a, str) else a for a in node.inputs],
        "attrs": {k: v for k, v in node.attrs}, "shape": list(node.shape),
        "dtype": node.dtype, "placement": node.placement,
    }


def node_from_dict(data: dict[str, Any]) -> Node:
    inputs = tuple(a["ref"] if isinstance(a, dict) else a for a in data["inputs"])
    return Node(name=data["name"], op=data["op"], inputs=inputs,
                attrs=tuple(sorted(data["attrs"].items())),
                shape=tuple(data["shape"]), dtype=data["dtype"], placement=data["placement"])


@dataclass(frozen=True)
class SdscBundle:
    """Stage 6 (sdsc): SuperDSC-like JSON descriptors, one per kernel, plus the bundle order."""

    index: int
    document: str  # canonical JSON (sorted keys)

    def data(self) -> dict[str, Any]:
        return json.loads(self.document)

    def to_text(self) -> str:
        return self.document + "\n"


@dataclass(frozen=True)
class Binary:
    """Stage 7 (backend): the compiled program as CBOR, what the runtime loads."""

    index: int
    payload: bytes
    summary: str  # canonical text of the decoded program

    def to_text(self) -> str:
        digest = hashlib.sha256(self.payload).hexdigest()
        return f"binary {len(self.payload)} bytes sha256={digest}\n{self.summary}"
