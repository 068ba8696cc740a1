"""Stage 5 — kernel: one kernel spec per fusion group, like torch-spyre's OpSpec.

A spec names its ops, its tensors (with layouts, in DRAM or kept in the LX scratchpad), its
iteration space, how that space is divided across the cores (`SENCORES`), the per-core tile,
the data format and the accumulation precision. Work division follows
torch_spyre/_inductor/work_division.py: pointwise and reduction kernels split their output
dims largest first, counting the stick dim in whole sticks (`core_split`); matmuls search the
divisors of (b, m, n, k) for the split the cost model prices lowest (knob `work_division`:
`cost_model`), or give cores to output dims first and K last (`output_first`). Splits divide
evenly, so a prime M such as 127 cannot be split on M.
"""

from __future__ import annotations

import itertools
import logging
import math
from typing import Literal

from spyre_sim.config import Config, Decisions
from spyre_sim.cost import (
    REDUCING_OPS,
    KernelKind,
    OpWork,
    derive_work,
    divisors,
    kernel_cost,
    op_work,
)
from spyre_sim.executor import HostStep, KernelStep, ViewStep
from spyre_sim.ir import KernelProgram, KernelSpec, LayoutGraph, Node, TensorArg
from spyre_sim.layouts import DEVICE_DTYPE_NAMES, TensorLayout, elems_per_stick

log = logging.getLogger("spyre_sim.kernel")
STAGE = "kernel"
ACCUMULATING_OPS = ("sum", "mean", "softmax", "layernorm")


def core_split(sizes: list[tuple[str, int]], cores: int) -> dict[str, int]:
    """work_division.py core_split: largest dims first, each the largest divisor that fits."""
    splits: dict[str, int] = {}
    left = cores
    for label, size in sorted(sizes, key=lambda item: (-item[1], item[0])):
        split = max(d for d in divisors(size) if d <= left)
        splits[label] = split
        left //= split
    return splits


def _kernel_kind(nodes: list[Node]) -> KernelKind:
    ops = {n.op for n in nodes}
    if ops & {"restickify", "pad_rows"}:
        return "restickify"
    for op in ("mm", "bmm"):
        if op in ops:
            return "matmul"
    if "softmax" in ops:
        return "softmax"
    if "layernorm" in ops:
        return "layernorm"
    if ops & set(REDUCING_OPS):
        return "reduction"
    if ops == {"full"}:
        return "constant"
    return "pointwise"


def _data_format(nodes: list[Node]) -> str:
    """The format a kernel computes in: IEEE_FP32 when its ops produce fp32 (the program
    widened a 16-bit float and every op is in SPYRE_FP32_OPS), IEEE_INT32 for integer-only
    kernels, SEN169_FP16 (DLFloat16) otherwise."""
    dtypes = {n.dtype for n in nodes}
    if dtypes == {"i32"}:
        return DEVICE_DTYPE_NAMES["i32"]
    if "f32" in dtypes and dtypes <= {"f32", "i32"}:
        return DEVICE_DTYPE_NAMES["f32"]
    return DEVICE_DTYPE_NAMES["f16"]


class _KernelBuilder:
    def __init__(self, layout_graph: LayoutGraph, config: Config) -> None:
        self.graph = layout_graph.loop
        self.layouts = dict(layout_graph.layouts)
        self.config = config
        self.decisions = Decisions(config, STAGE)
        self.producers = {n.name: n for n in self.graph.nodes}
        self.consumers: dict[str, set[str]] = {}
        for n in self.graph.nodes:
            for a in n.node.value_inputs:
                self.consumers.setdefault(a, set()).add(n.name)
        self.graph_outputs = {o for o in self.graph.outputs if o}
        self.count = 0

    def storage(self, name: str) -> str:
        """The buffer a value lives in: views read their source's memory."""
        while name in self.producers and self.producers[name].kind == "view":
            name = self.producers[name].node.value_input(0)
        return name

    def args(self, nodes: list[Node]) -> tuple[TensorArg, ...]:
        members = {n.name for n in nodes}
        args: list[TensorArg] = []
        seen: set[str] = set()
        for node in nodes:
            for a in node.value_inputs:
                if a not in members and a not in seen:
                    seen.add(a)
                    # a view reads its source's memory: all of it for a broadcast, only the
                    # selected part for a slice
                    nbytes = min(self.layouts[self.storage(a)].nbytes, self.layouts[a].nbytes)
                    args.append(TensorArg(a, "input", self.layouts[a], "hbm", nbytes=nbytes))
        for node in nodes:
            escapes = node.name in self.graph_outputs or bool(self.consumers.get(node.name, set())
                                                              - members)
            role: Literal["output", "intermediate"] = "output" if escapes else "intermediate"
            memory: Literal["hbm", "lx"] = "hbm" if escapes else "lx"
            layout = self.layouts[node.name]
            args.append(TensorArg(node.name, role, layout, memory, nbytes=layout.nbytes))
        return tuple(args)

    @staticmethod
    def traffic(args: tuple[TensorArg, ...]) -> tuple[int, int]:
        read = sum(a.nbytes for a in args if a.role == "input" and a.memory == "hbm")
        write = sum(a.nbytes for a in args if a.role == "output" and a.memory == "hbm")
        return read, write

    def op_work(self, nodes: list[Node]) -> tuple[OpWork, ...]:
        shapes = {**{v.name: v.shape for v in self.graph.inputs},
                  **{n.name: n.node.shape for n in self.graph.nodes}}
        return tuple(op_work(n.op, n.shape, tuple(shapes[a] for a in n.value_inputs))
                     for n in nodes)

    def iteration_space(self, kind: str, nodes: list[Node]) -> tuple[tuple, str, int]:
        """Named dims with sizes (the stick dim padded to whole sticks), the stick dim's name,
        and elements per stick."""
        if kind == "matmul":
            mm = next(n for n in nodes if n.op in ("mm", "bmm"))
            per_stick = elems_per_stick(self.layouts[mm.value_input(0)].dtype)
            k = self.layouts[mm.value_input(0)].host_size[-1]
            m, n = mm.shape[-2], mm.shape[-1]
            space = (("b", math.prod(mm.shape[:-2])), ("m", m),
                     ("n", -(-n // per_stick) * per_stick), ("k", -(-k // per_stick) * per_stick))
            return space, "n", per_stick
        anchor = next((n for n in nodes if n.op in REDUCING_OPS), nodes[-1])
        layout = self.layouts[anchor.name]
        per_stick = elems_per_stick(layout.dtype)
        dims = []
        for d, size in enumerate(anchor.shape):
            if d == layout.stick_dim:
                size = -(-size // per_stick) * per_stick
            dims.append((f"d{d}", size))
        if anchor.op in REDUCING_OPS:
            source = self.layouts[anchor.value_input(0)].host_size
            if anchor.op == "softmax":
                reduced = [anchor.shape[anchor.attr["dim"]]]
            elif anchor.op == "layernorm":
                reduced = list(anchor.shape[-anchor.attr["ndims"]:])
            else:
                reduced = [source[d] for d in anchor.attr["dims"]]
            dims.append(("r", math.prod(reduced)))
        stick = f"d{layout.stick_dim}" if anchor.shape else ""
        if anchor.op in REDUCING_OPS and anchor.op != "layernorm" and anchor.op != "softmax":
            source_layout = self.layouts[anchor.value_input(0)]
            if source_layout.host_size and source_layout.stick_dim in anchor.attr["dims"]:
                # reducing along the stick leaves one element per stick (torch-spyre's
                # "sparse" layout): the output's rows are not packed into sticks
                stick = ""
        return tuple(dims), stick, per_stick

    def split(self, kind: str, name: str, space: tuple[tuple[str, int], ...], stick: str,
              per_stick: int, price) -> tuple[tuple[str, int], ...]:
        cores = self.config.cores
        sizes = dict(space)
        if kind != "matmul":
            # output dims first, the stick dim counted in whole sticks; cores left over go to
            # the reduced dim (work_division.py work_distribution: at most one reduction dim)
            splittable = [(label, size // per_stick if label == stick else size)
                          for label, size in space if label != "r"]
            splits = core_split(splittable, cores)
            left = cores // math.prod(splits.values())
            if "r" in sizes and left > 1:
                splits["r"] = max(d for d in divisors(sizes["r"]) if d <= left)
            return tuple((label, splits.get(label, 1)) for label, _ in space)
        policy = self.decisions.use("work_division", lambda: f"{name} {sizes}")
        sticks = {"b": sizes["b"], "m": sizes["m"], "n": sizes["n"] // per_stick,
                  "k": sizes["k"] // per_stick}
        if policy == "output_first":
            splits = core_split([(d, sticks[d]) for d in ("b", "m", "n")], cores)
            left = cores // math.prod(splits.values())
            splits["k"] = max(d for d in divisors(sticks["k"]) if d <= left)
            return tuple((label, splits[label]) for label in ("b", "m", "n", "k"))
        best = None
        for b, m, n, k in itertools.product(*(divisors(sticks[d]) for d in "bmnk")):
            if b * m * n * k > cores:
                continue
            candidate = (("b", b), ("m", m), ("n", n), ("k", k))
            cost = price(candidate)
            if best is None or cost < best[0] - 1e-9:
                best = (cost, candidate)
        assert best is not None  # one core per dim, (1, 1, 1, 1), always fits
        return best[1]

    def kernel(self, group_name: str, nodes: list[Node]) -> KernelSpec:
        kind = _kernel_kind(nodes)
        short = "_".join(dict.fromkeys(n.op for n in nodes))[:40]
        name = f"k{self.count}_{short}"
        self.count += 1
        args = self.args(nodes)
        read, write = self.traffic(args)
        ops = self.op_work(nodes)
        data_format = _data_format(nodes)
        accumulation = "fp32"
        sixteen_bit = data_format != DEVICE_DTYPE_NAMES["f32"]  # fp32 kernels keep fp32 sums
        if sixteen_bit and kind == "matmul":
            accumulation = self.decisions.use("matmul_accumulation", lambda: name)
        elif sixteen_bit and any(n.op in ACCUMULATING_OPS for n in nodes):
            accumulation = self.decisions.use("reduction_accumulation", lambda: name)
        space, stick, per_stick = self.iteration_space(kind, nodes)

        def price(splits):
            work = derive_work(name, kind, space, splits, read_bytes=read, write_bytes=write,
                               ops=ops, accumulation=accumulation)
            return kernel_cost(work, self.config.device).total_us

        splits = self.split(kind, name, space, stick, per_stick=per_stick, price=price)
        work = derive_work(name, kind, space, splits, read_bytes=read, write_bytes=write, ops=ops,
                           accumulation=accumulation)
        tiling = tuple((label, size // dict(splits).get(label, 1)) for label, size in space)
        return KernelSpec(name=name, kind=kind, ops=tuple(nodes), args=args, iteration_space=space,
                          splits=splits, tiling=tiling, accumulation=accumulation,
                          data_format=data_format, work=work)


def run(layout_graph: LayoutGraph, config: Config) -> KernelProgram:
    builder = _KernelBuilder(layout_graph, config)
    layouts: dict[str, TensorLayout] = builder.layouts
    steps: list = []
    for step in layout_graph.loop.plan_steps():
        if isinstance(step, HostStep):
            node = step.node
            steps.append(HostStep(node, tuple(layouts[a] for a in node.value_inputs),
                                  layouts[node.name]))
        elif isinstance(step, ViewStep):
            steps.append(step)
        else:
            assert isinstance(step, KernelStep)
            steps.append(builder.kernel(step.name, list(step.ops)))
    graph = layout_graph.loop
    kernels = [s for s in steps if isinstance(s, KernelSpec)]
    log.info("kernel: %d kernels, %d host ops", len(kernels),
             sum(isinstance(s, HostStep) for s in steps))
    for spec in kernels:
        log.debug("kernel %s %s split=%s", spec.name, spec.kind, dict(spec.splits))
    return KernelProgram(index=graph.index, inputs=graph.inputs, steps=tuple(steps),
                         outputs=graph.outputs,
                         output_host_dtypes=graph.output_host_dtypes, layouts=layout_graph.layouts,
                         constants=graph.constants)
