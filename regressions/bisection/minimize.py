"""Minimization: delta debugging over the probe's ATen graph, keeping the regression alive.

The program is the ATen graph Dynamo + AOTAutograd capture from the probe (stock torch, so
the same at every commit). A candidate keeps a subset of its ops: a removed op's result
becomes a fresh input of the same shape, dtype and scale, and ops nothing needs are dropped —
the moves of torch's fx_minifier (truncate suffix, replace nodes with placeholders, drop
unused inputs). The predicate asks two workers, one per commit, for the metric and keeps a
candidate only while the bad/good ratio stays above the threshold ("minimize without
removing the cause"). The result is a standalone module (torch + spyre_sim only).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MINIMIZED_VERSION = 1


@dataclass(frozen=True)
class Op:
    name: str
    target: str  # "aten.mm.default" or "getitem"
    args: Any  # JSON: refs are {"ref": name}
    kwargs: Any


@dataclass(frozen=True, kw_only=True)
class Input:
    name: str
    shape: tuple[int, ...]
    dtype: str
    mean: float = 0.0
    std: float = 1.0
    high: int = 0  # integer inputs: values in [0, high)


@dataclass(frozen=True)
class Candidate:
    inputs: tuple[Input, ...]
    ops: tuple[Op, ...]
    outputs: tuple[str, ...]
    # per op result: (shape, dtype, mean, std), so a replaced op's input keeps its scale
    shapes: dict[str, tuple[tuple[int, ...], str, float, float]] = field(
        default_factory=dict, compare=False, hash=False)

    @property
    def op_count(self) -> int:
        return sum(1 for op in self.ops if op.target != "getitem")


def _encode(value: Any) -> Any:
    import torch

    if isinstance(value, torch.fx.Node):
        return {"ref": value.name}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).replace("torch.", "")}
    if isinstance(value, (torch.device, torch.layout, torch.memory_format)):
        return {"drop": True}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    return value


def _moments(graph_module, example_inputs) -> dict[str, tuple[float, float]]:
    """Each float result's mean and std, from one fp32 run of the graph."""
    import torch

    moments: dict[str, tuple[float, float]] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n: torch.fx.Node) -> Any:
            result = super().run_node(n)
            if isinstance(result, torch.Tensor) and result.is_floating_point() \
                    and result.numel():
                value = result.detach().float()
                std = float(value.std()) if value.numel() > 1 else 1.0
                moments[n.name] = (float(value.mean()), std if std > 0 else 1.0)
            return result

    with torch.no_grad():
        Recorder(graph_module).run(*example_inputs)
    return moments


def from_graph(graph_module, example_inputs) -> Candidate:
    """The captured ATen graph (a torch.fx.GraphModule) as a candidate; value statistics keep
    activations in range. torch is imported here only: the rest of minimization is data."""
    import torch

    moments = _moments(graph_module, example_inputs)
    inputs, ops, shapes = [], [], {}
    tensors = iter(example_inputs)
    outputs: tuple[str, ...] = ()
    for node in graph_module.graph.nodes:
        val = node.meta.get("val")
        if isinstance(val, torch.Tensor):
            mean, std = moments.get(node.name, (0.0, 1.0))
            shapes[node.name] = (tuple(int(s) for s in val.shape),
                                 str(val.dtype).replace("torch.", ""), mean, std)
        if node.op == "placeholder":
            real = next(tensors)
            floating = real.is_floating_point()
            inputs.append(Input(
                name=node.name, shape=tuple(real.shape),
                dtype=str(real.dtype).replace("torch.", ""),
                mean=float(real.float().mean()) if floating else 0.0,
                std=float(real.float().std()) if floating and real.numel() > 1 else 1.0,
                high=0 if floating else int(real.max()) + 1))
        elif node.op == "call_function":
            target = "getitem" if node.target is operator.getitem else str(node.target)
            ops.append(Op(node.name, target, _encode(list(node.args)),
                          {k: _encode(v) for k, v in node.kwargs.items()}))
        elif node.op == "output":
            results = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            outputs = tuple(r.name for r in results if isinstance(r, torch.fx.Node))
    return Candidate(tuple(inputs), tuple(ops), outputs, shapes)


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        return {value["ref"]} if "ref" in value else set()
    if isinstance(value, list):
        return set().union(*(_refs(v) for v in value)) if value else set()
    return set()


def _prune(candidate: Candidate) -> Candidate:
    """Drop ops and inputs nothing (transitively) needed by the outputs."""
    live = set(candidate.outputs)
    kept = []
    for op in reversed(candidate.ops):
        if op.name in live:
            kept.append(op)
            live |= _refs(op.args) | _refs(op.kwargs)
    inputs = tuple(i for i in candidate.inputs if i.name in live)
    return Candidate(inputs, tuple(reversed(kept)), candidate.outputs, candidate.shapes)


def replace_with_inputs(candidate: Candidate, names: set[str]) -> Candidate:
    """Ops in `names` become inputs of their own shape, mean and spread."""
    new_inputs = list(candidate.inputs)
    ops = []
    for op in candidate.ops:
        if op.name in names and op.name in candidate.shapes:
            shape, dtype, mean, std = candidate.shapes[op.name]
            new_inputs.append(Input(name=op.name, shape=shape, dtype=dtype, mean=mean, std=std,
                                    high=0 if dtype.startswith("float") else 2))
        else:
            ops.append(op)
    return _prune(Candidate(tuple(new_inputs), tuple(ops), candidate.outputs, candidate.shapes))


def truncate(candidate: Candidate, last: int) -> Candidate:
    """Keep ops[:last + 1] with ops[last] as the only output."""
    op = candidate.ops[last]
    if op.name not in candidate.shapes:
        return candidate
    return _prune(Candidate(candidate.inputs, candidate.ops[:last + 1], (op.name,),
                            candidate.shapes))


def _source_value(value: Any) -> str:
    if isinstance(value, dict):
        if "ref" in value:
            return value["ref"]
        if "dtype" in value:
            return f"torch.{value['dtype']}"
        return "None"
    if isinstance(value, list):
        return "[" + ", ".join(_source_value(v) for v in value) + "]"
    return repr(value)


def catalogue_source(catalogue: str, workload: str, seq: int, width: int | None) -> str:
    """A standalone module of the benchmark's own program: the workload catalogue's text (it
    imports only torch) and the workload it builds, as `program` and `make_inputs()`."""
    return (f"# The benchmark's own program: {workload} at seq {seq}, as the suite's "
            "catalogue builds it (the catalogue follows, whole).\n" + catalogue.rstrip("\n")
            + f"\n\n\nprogram, _inputs = build({workload!r}, {seq}, {width!r})\n\n\n"
            "def make_inputs():\n    return _inputs\n")


def to_source(candidate: Candidate, header: str = "") -> str:
    """A standalone module: `program(*inputs)`, `make_inputs()`, runnable with torch alone."""
    lines = [f'"""{header or "A minimized program."}"""', "", "import torch", "",
             "aten = torch.ops.aten", "", ""]
    names = ", ".join(i.name for i in candidate.inputs)
    lines.append(f"def program({names}):")
    for op in candidate.ops:
        if op.target == "getitem":
            lines.append(f"    {op.name} = {_source_value(op.args[0])}[{op.args[1]!r}]")
            continue
        args = ", ".join(_source_value(a) for a in op.args)
        kwargs = "".join(f", {k}={_source_value(v)}" for k, v in op.kwargs.items()
                         if not (isinstance(v, dict) and v.get("drop")))
        lines.append(f"    {op.name} = {op.target}({args}{kwargs})")
    outputs = ", ".join(candidate.outputs)
    lines.append(f"    return ({outputs},)")
    lines += ["", "", "def make_inputs():", "    generator = torch.Generator().manual_seed(0)",
              "    return ("]
    for item in candidate.inputs:
        shape = list(item.shape)
        if item.dtype.startswith("float") or item.dtype.startswith("bfloat"):
            lines.append(f"        torch.randn({shape}, generator=generator) * {item.std!r}"
                         f" + {item.mean!r},")
        elif item.dtype == "bool":
            lines.append(f"        torch.rand({shape}, generator=generator) > 0.5,")
        else:
            lines.append(f"        torch.randint(0, {max(item.high, 1)}, {shape}, "
                         f"generator=generator, dtype=torch.{item.dtype}),")
    lines += ["    )", ""]
    return "\n".join(lines)


@dataclass(kw_only=True)
class MinimizeResult:
    source: str
    ops_before: int
    ops_after: int
    queries: int
    ratio_before: float
    ratio_after: float
    steps: list[str]

    def to_dict(self) -> dict:
        return {"version": MINIMIZED_VERSION, "ops_before": self.ops_before,
                "ops_after": self.ops_after, "queries": self.queries,
                "ratio_before": self.ratio_before, "ratio_after": self.ratio_after,
                "steps": self.steps}


Predicate = Callable[[str], float | None]  # source -> bad/good ratio (None: not a repro)


def minimize(candidate: Candidate, ratio_of: Predicate, threshold: float,
             progress: Callable[[str], None] = lambda _: None) -> MinimizeResult:
    """Shrink `candidate` while `ratio_of(source) >= threshold` holds."""
    queries = [0]
    steps: list[str] = []

    def holds(c: Candidate) -> float | None:
        queries[0] += 1
        ratio = ratio_of(to_source(c))
        return ratio if ratio is not None and ratio >= threshold else None

    start_ratio = holds(candidate)
    if start_ratio is None:
        raise ValueError("the full program does not show the regression above the threshold")
    best, best_ratio = candidate, start_ratio
    # 1. truncate the suffix: the earliest op whose value still shows the regression
    computing = [i for i, op in enumerate(best.ops)
                 if op.name in best.shapes and op.target != "getitem"]
    for index in computing:
        trial = truncate(best, index)
        ratio = holds(trial)
        if ratio is not None:
            steps.append(f"truncate after {best.ops[index].name}: {trial.op_count} ops")
            best, best_ratio = trial, ratio
            progress(steps[-1])
            break
    # 2. replace ops with inputs, halving the chunk size (ddmin over the op list)
    chunk = max(1, len(best.ops) // 2)
    while chunk >= 1:
        changed = False
        index = 0
        while index < len(best.ops):
            names = {op.name for op in best.ops[index:index + chunk]} - set(best.outputs)
            trial = replace_with_inputs(best, names) if names else best
            ratio = holds(trial) if trial.ops != best.ops else None
            if ratio is not None:
                steps.append(f"replace {sorted(names)} with inputs: {trial.op_count} ops")
                progress(steps[-1])
                best, best_ratio, changed = trial, ratio, True
            else:
                index += chunk
        if not changed:
            chunk //= 2
    return MinimizeResult(source=to_source(best, "A minimized program."),
                          ops_before=candidate.op_count,
                          ops_after=best.op_count, queries=queries[0], ratio_before=start_ratio,
                          ratio_after=best_ratio, steps=steps)

