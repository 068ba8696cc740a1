"""Stage 1 — dynamo: capture Python into ATen graphs with TorchDynamo and AOTAutograd.

Mirrors the stock front end torch-spyre uses (torch-spyre
docs/source/compiler/architecture.md): Dynamo traces the program into FX graphs split at graph
breaks, AOTAutograd functionalizes each into ATen ops. The stage records what an engineer
checks first — how many graphs, why it broke, which guards.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal

import torch
import torch._dynamo
from torch._dynamo.backends.common import aot_autograd
from torch._dynamo.utils import counters

from spyre_sim.config import Config
from spyre_sim.ir import CapturedGraph, DynamoArtifact

log = logging.getLogger("spyre_sim.dynamo")

GraphCompiler = Callable[[CapturedGraph], Callable[[list], list]]


def _placeholders(captured: CapturedGraph) -> Callable[[list], list]:
    """Capture only: zero outputs of the right shapes, so capturing costs no forward pass."""
    output = next(n for n in captured.graph_module.graph.nodes if n.op == "output")
    results = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    metas = [r.meta.get("val") if isinstance(r, torch.fx.Node) else r for r in results]

    def run(args: list) -> list:
        return [torch.zeros(m.shape, dtype=m.dtype) if isinstance(m, torch.Tensor) else m
                for m in metas]

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def _eager_backward(graph_module: torch.fx.GraphModule, _inputs: Sequence) -> Callable:
    """Backward graphs run eagerly on the CPU: the simulator models inference only."""
    log.info("backward graph runs eagerly on the CPU (not simulated)")

    def run(args: list) -> list:
        return list(graph_module(*args))

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


def aot_backend(compile_graph: GraphCompiler, captured: list[CapturedGraph] | None = None):
    """A Dynamo backend: AOTAutograd to ATen, then `compile_graph` on each forward graph."""
    graph_ids = itertools.count()

    def backend(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]):
        kinds: tuple[Literal["input", "parameter"], ...] = tuple(
            "parameter" if isinstance(x, torch.nn.Parameter) else "input" for x in example_inputs
        )
        index = next(graph_ids)

        def forward_compiler(aten_module: torch.fx.GraphModule, _inputs: Sequence) -> Callable:
            graph = CapturedGraph(index, aten_module, kinds, tuple(example_inputs))
            if captured is not None:
                captured.append(graph)
            return compile_graph(graph)

        return aot_autograd(fw_compiler=forward_compiler, bw_compiler=_eager_backward)(
            graph_module, example_inputs
        )

    return backend


def _guard_text(guard: Any) -> str:
    kind = guard.create_fn_name() if hasattr(guard, "create_fn_name") else type(guard).__name__
    return f"{kind}({guard.name})" if getattr(guard, "name", "") else kind


def _break_reasons(before: dict[str, int]) -> list[str]:
    reasons = []
    for reason, count in counters["graph_break"].items():
        first_line = reason.strip().splitlines()[0] if reason.strip() else "unknown"
        reasons += [first_line] * (count - before.get(reason, 0))
    return sorted(reasons)


def run(
    fn: Callable,
    example_inputs: Sequence[Any],
    config: Config,
    compile_graph: GraphCompiler | None = None,
) -> tuple[DynamoArtifact, Callable, float]:
    """Capture `fn` by calling it once on `example_inputs` under Dynamo.

    Returns the artifact, the Dynamo-optimized callable (which runs each graph through what
    `compile_graph` returned; without one, graphs return zeros: capture only) and the seconds
    spent in Dynamo + AOT alone: time inside `compile_graph` and inside the graphs' first
    executions is excluded.
    """
    del config  # capture does not depend on compiler decisions
    captured: list[CapturedGraph] = []
    guards: list[str] = []
    excluded = [0.0]
    inner = compile_graph or _placeholders

    def timed_compile(graph: CapturedGraph) -> Callable[[list], list]:
        start = time.perf_counter()
        compiled = inner(graph)
        excluded[0] += time.perf_counter() - start

        def first_call_timed(args: list) -> list:
            start = time.perf_counter()
            try:
                return compiled(args)
            finally:
                if capturing[0]:
                    excluded[0] += time.perf_counter() - start

        first_call_timed._boxed_call = True  # type: ignore[attr-defined]
        return first_call_timed

    def export_guards(guard_set: Any) -> None:
        guards.extend(_guard_text(g) for g in guard_set)

    backend = aot_backend(timed_compile, captured)
    optimized = torch._dynamo.optimize(backend, guard_export_fn=export_guards)(fn)
    breaks_before = dict(counters["graph_break"])
    capturing = [True]
    start = time.perf_counter()
    try:
        with torch.no_grad():
            optimized(*example_inputs)
    except torch._dynamo.exc.BackendCompilerFailed as failure:
        raise failure.inner_exception from None
    finally:
        capturing[0] = False
    seconds = time.perf_counter() - start - excluded[0]
    artifact = DynamoArtifact(
        graphs=tuple(captured),
        guards=tuple(sorted(guards)),
        graph_breaks=tuple(_break_reasons(breaks_before)),
    )
    log.info("dynamo: %d graph(s), %d graph break(s)", len(captured), len(artifact.graph_breaks))
    return artifact, optimized, seconds
