"""The compile pipeline: the eight stages in order, and the program they produce.

`compile_graph` is the one place the stages are called, in order and by name. Dynamo drives
it: each graph it captures goes through stages 2-8 and comes back as a callable that runs the
compiled binary. `compile` wraps a whole Python program (graph breaks included) into a
`Program` with per-stage artifacts and compile times; `spyre_backend` is the same pipeline as
a `torch.compile` backend (registered as "spyre" through the `torch_dynamo_backends` entry
point).
"""

from __future__ import annotations

import contextvars
import logging
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import torch
import torch._dynamo
from torch._subclasses.fake_tensor import unset_fake_temporarily
from torch.utils import _pytree

from spyre_sim import debug_capture
from spyre_sim.config import Config
from spyre_sim.dlfloat import DLFloat16Format, round_dlfloat16
from spyre_sim.errors import NonFinite, NonFiniteWarning
from spyre_sim.executor import Executor
from spyre_sim.ir import CapturedGraph, DynamoArtifact
from spyre_sim.stages import (
    EXECUTABLE_STAGES,
    STAGES,
    backend,
    decompose,
    dynamo,
    kernel,
    layout,
    lower,
    runtime,
    sdsc,
)
from spyre_sim.timeline import KernelRecord, RunRecord

log = logging.getLogger("spyre_sim")


@dataclass
class CompiledGraph:
    captured: CapturedGraph
    artifacts: dict[str, Any]  # stage -> artifact, decompose..runtime
    compile_times: dict[str, float]
    _interpreters: dict[str, Executor] = field(default_factory=dict)

    @property
    def executable(self) -> runtime.Executable:
        return self.artifacts["runtime"]

    def interpreter(self, stage: str) -> Executor:
        if stage not in self._interpreters:
            self._interpreters[stage] = Executor(self.artifacts[stage].to_plan(), stage,
                                                 self.captured.index)
        return self._interpreters[stage]


def compile_graph(captured: CapturedGraph, config: Config) -> CompiledGraph:
    """Stages 2-8 on one captured graph, each timed on its own."""
    times: dict[str, float] = {}

    def timed(stage: str, run: Callable, artifact: Any) -> Any:
        start = time.perf_counter()
        result = run(artifact, config)
        times[stage] = time.perf_counter() - start
        return result

    # AOTAutograd calls us under its fake-tensor mode; the compiler works on real data.
    with unset_fake_temporarily():
        decomposed = timed("decompose", decompose.run, captured)
        lowered = timed("lower", lower.run, decomposed)
        laid_out = timed("layout", layout.run, lowered)
        kernels = timed("kernel", kernel.run, laid_out)
        descriptors = timed("sdsc", sdsc.run, kernels)
        binary = timed("backend", backend.run, descriptors)
        executable = timed("runtime", runtime.run, binary)
    artifacts = {"decompose": decomposed, "lower": lowered, "layout": laid_out,
                 "kernel": kernels, "sdsc": descriptors, "backend": binary,
                 "runtime": executable}
    return CompiledGraph(captured, artifacts, times)


# Single-stage entry points, for benchmarks that time one stage alone (order: compile_graph).
_STAGE_RUNNERS: dict[str, Callable[[Any, Config], Any]] = {
    "decompose": decompose.run, "lower": lower.run, "layout": layout.run, "kernel": kernel.run,
    "sdsc": sdsc.run, "backend": backend.run, "runtime": runtime.run,
}


def capture(fn: Callable, example_inputs: Sequence[Any],
            config: Config | None = None) -> DynamoArtifact:
    """Stage 1 alone: Dynamo + AOTAutograd capture of `fn`. The capture call computes no
    values (graphs return zeros), so Python branching on data between graph breaks sees
    zeros."""
    torch._dynamo.reset()
    artifact, _, _ = dynamo.run(fn, tuple(example_inputs), config or Config())
    return artifact


def run_stage(stage: str, artifact: Any, config: Config | None = None) -> Any:
    """One compile stage alone on the previous stage's artifact (a graph of `capture(...)`
    for "decompose"). Returns that stage's artifact."""
    if stage not in _STAGE_RUNNERS:
        raise ValueError(f"stage {stage!r} takes no single artifact; choose one of "
                         f"{list(_STAGE_RUNNERS)} (use capture() for 'dynamo')")
    with unset_fake_temporarily():
        return _STAGE_RUNNERS[stage](artifact, config or Config())


# --- executing compiled graphs --------------------------------------------------------------

_device_clock_us = [0.0]


def device_clock() -> float:
    """Simulated device seconds elapsed in this process (a timer for asv's `timer` attribute)."""
    return _device_clock_us[0] / 1e6


# runtime, capture, reference, or a stage of EXECUTABLE_STAGES whose artifact runs
ExecutionMode = Literal["runtime", "capture", "reference", "decompose", "lower", "layout",
                        "kernel"]


@dataclass
class _Execution:
    mode: ExecutionMode = "runtime"
    reference_dtype: torch.dtype | DLFloat16Format = torch.float64
    label_graphs: bool = False
    records: list[RunRecord] = field(default_factory=list)
    nonfinite: list[NonFinite] = field(default_factory=list)


_EXECUTION: contextvars.ContextVar[_Execution | None] = contextvars.ContextVar(
    "spyre_sim_execution", default=None)


def _round_ieee_fp16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float16).to(torch.float32)


def _round_dlfloat16(t: torch.Tensor) -> torch.Tensor:
    # An eager baseline models rounding error: infinities (a -inf mask) stay infinite.
    return round_dlfloat16(t, keep_infinities=True)


class _RoundingInterpreter(torch.fx.Interpreter):
    """Eager ATen execution with every floating result stored in a 16-bit format (an eager
    IEEE fp16 or DLFloat16 baseline)."""

    def __init__(self, module: torch.fx.GraphModule, rounding: Callable) -> None:
        super().__init__(module)
        self.rounding = rounding

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        return _pytree.tree_map(
            lambda t: self.rounding(t)
            if isinstance(t, torch.Tensor) and t.is_floating_point() else t, result)


def _output_dtypes(graph_module: torch.fx.GraphModule) -> list[torch.dtype | None]:
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    results = output.args[0] if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    return [r.meta["val"].dtype if isinstance(r, torch.fx.Node)
            and isinstance(r.meta.get("val"), torch.Tensor) else None for r in results]


def reference_outputs(captured: CapturedGraph, args: Sequence[Any],
                      dtype: torch.dtype | DLFloat16Format) -> list:
    """The captured ATen graph run eagerly on the CPU in `dtype` (float64: the accuracy oracle).

    torch.float16 and `spyre_sim.dlfloat16` compute each op in fp32 and store its result in
    that 16-bit format (inputs too): the eager IEEE fp16 and eager DLFloat16 baselines.
    Results go back in the graph's own output dtypes, so values crossing a graph break keep the
    dtypes Dynamo guarded on (a float32 rounding, 2^-24 relative: far below 16-bit rounding).
    """
    if isinstance(dtype, DLFloat16Format) or dtype == torch.float16:
        rounding = _round_dlfloat16 if isinstance(dtype, DLFloat16Format) else _round_ieee_fp16
        cast = [rounding(a) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args]
        results = list(_RoundingInterpreter(captured.graph_module, rounding).run(*cast))
    else:
        cast = [a.to(dtype) if isinstance(a, torch.Tensor) and a.is_floating_point() else a
                for a in args]
        results = list(captured.graph_module(*cast))
    return [r.to(d) if isinstance(r, torch.Tensor) and d is not None else r
            for r, d in zip(results, _output_dtypes(captured.graph_module), strict=True)]


def graph_runner(compiled: CompiledGraph) -> Callable[[list], list]:
    """The boxed callable Dynamo calls for one graph; what it executes depends on the mode."""

    def run(args: list) -> list:
        execution = _EXECUTION.get()
        mode = execution.mode if execution else "runtime"
        if mode == "capture":
            return compiled.executable.placeholder_outputs()
        if mode == "reference" and execution is not None:
            return reference_outputs(compiled.captured, args, execution.reference_dtype)
        if mode == "runtime":
            label = f"g{compiled.captured.index}" if execution and execution.label_graphs else ""
            outputs, record, note = compiled.executable(list(args), label)
            _device_clock_us[0] += record.device_time_us
            if execution is not None:
                execution.records.append(record)
        else:
            outputs, note = compiled.interpreter(mode)(list(args))
        if note is not None:
            if execution is not None:
                execution.nonfinite.append(note)
            warnings.warn(NonFiniteWarning(note), stacklevel=2)
        return outputs

    run._boxed_call = True  # type: ignore[attr-defined]
    return run


@dataclass(frozen=True)
class RunResult:
    """One run: outputs, simulated device time, per-kernel records, the Chrome trace, and
    `nonfinite`: where the run first turned finite values into inf/NaN (None when clean)."""

    outputs: tuple[torch.Tensor, ...]
    device_time_us: float
    kernels: tuple[KernelRecord, ...]
    trace: dict = field(compare=False, repr=False)
    nonfinite: NonFinite | None = None


def _merge(records: list[RunRecord], outputs: tuple,
           nonfinite: NonFinite | None = None) -> RunResult:
    events: list[dict] = []
    offset = 0.0
    seen_meta: set[tuple] = set()
    for record in records:
        for event in record.trace["traceEvents"]:
            if event["ph"] == "M":
                key = (event["pid"], event.get("tid"), event["args"]["name"])
                if key not in seen_meta:
                    seen_meta.add(key)
                    events.append(event)
            else:
                events.append({**event, "ts": event["ts"] + offset})
        offset += record.device_time_us
    trace = {"traceEvents": events, "displayTimeUnit": "ms",
             "otherData": {"generator": "spyre_sim", "version": 1}}
    kernels = tuple(k for r in records for k in r.kernels)
    return RunResult(outputs, offset, kernels, trace, nonfinite=nonfinite)


class Program:
    """A compiled Python program: per-stage artifacts and compile times, and `run`."""

    def __init__(self, config: Config, dynamo_artifact: DynamoArtifact, optimized: Callable,
                 graphs: list[CompiledGraph], dynamo_seconds: float) -> None:
        self.config = config
        self.dynamo = dynamo_artifact
        self.graphs = graphs
        self._optimized = optimized
        self._dynamo_seconds = dynamo_seconds

    @property
    def artifacts(self) -> dict[str, str]:
        texts = {"dynamo": self.dynamo.to_text()}
        for stage in STAGES[1:]:
            texts[stage] = "".join(g.artifacts[stage].to_text() for g in self.graphs)
        return texts

    @property
    def compile_times(self) -> dict[str, float]:
        times = {"dynamo": self._dynamo_seconds}
        for stage in STAGES[1:]:
            times[stage] = sum(g.compile_times[stage] for g in self.graphs)
        return times

    def _call(self, execution: _Execution, inputs: Sequence[Any]) -> tuple[torch.Tensor, ...]:
        execution.label_graphs = len(self.graphs) > 1
        token = _EXECUTION.set(execution)
        try:
            with torch.no_grad():
                result = self._optimized(*inputs)
        finally:
            _EXECUTION.reset(token)
        return tuple(leaf for leaf in _pytree.tree_leaves(result)
                     if isinstance(leaf, torch.Tensor))

    def run(self, *inputs: Any) -> RunResult:
        """Execute the compiled binary on the simulated device. Inf/NaN produced from finite
        values is reported in `RunResult.nonfinite` and as a `NonFiniteWarning`."""
        execution = _Execution("runtime")
        outputs = self._call(execution, inputs)
        return _merge(execution.records, outputs,
                      execution.nonfinite[0] if execution.nonfinite else None)

    def run_stage(self, stage: str, *inputs: Any) -> tuple[torch.Tensor, ...]:
        """Execute one stage's artifact instead of the binary (for per-stage numerics). Inf/NaN
        produced from finite values raises a `NonFiniteWarning` whose `.location` says where."""
        if stage not in EXECUTABLE_STAGES:
            raise ValueError(f"stage {stage!r} is not executable; choose one of "
                             f"{list(EXECUTABLE_STAGES)}")
        return self._call(_Execution(cast(ExecutionMode, stage)), inputs)  # checked above

    def reference(self, *inputs: Any,
                  dtype: torch.dtype | DLFloat16Format = torch.float64) -> tuple:
        """The captured program run eagerly on the CPU in `dtype`: torch.float64 is the accuracy
        oracle; torch.float16 (IEEE) and `spyre_sim.dlfloat16` store every op's result in that
        format, the eager baselines a compiled program is compared with."""
        return self._call(_Execution("reference", reference_dtype=dtype), inputs)


def _capture_summary(dynamo_artifact: DynamoArtifact | None, graphs: int) -> dict:
    return {"graphs": graphs,
            "graph_breaks": len(dynamo_artifact.graph_breaks) if dynamo_artifact else 0}


def compile(fn: Callable, example_inputs: Sequence[Any], config: Config | None = None) -> Program:
    """Compile `fn` for the simulated Spyre card; a cold compile (Dynamo's caches are reset)."""
    config = config or Config()
    torch._dynamo.reset()
    graphs: list[CompiledGraph] = []
    root = debug_capture.debug_root()

    def compile_one(captured: CapturedGraph) -> Callable[[list], list]:
        # Dynamo re-captures when its cache was reset by a later compile(); an identical graph
        # reuses the compiled one, so artifacts, kernel names and noise streams stay put.
        text = captured.to_text().split("\n", 1)[1]
        for compiled in graphs:
            if compiled.captured.to_text().split("\n", 1)[1] == text:
                return graph_runner(compiled)
        compiled = compile_graph(captured, config)
        graphs.append(compiled)
        return graph_runner(compiled)

    # The capture call does not execute the graphs: uploading weights and computing values
    # belong to the first run, not to the compile.
    token = _EXECUTION.set(_Execution("capture"))
    try:
        with debug_capture.compile_log(root is not None) as log_lines:
            artifact, optimized, dynamo_seconds = dynamo.run(fn, tuple(example_inputs), config,
                                                             compile_one)
    finally:
        _EXECUTION.reset(token)
    program = Program(config, artifact, optimized, graphs, dynamo_seconds=dynamo_seconds)
    if root is not None:
        debug_capture.write(root, STAGES, program.artifacts, program.compile_times,
                            binaries=[g.artifacts["backend"].payload for g in graphs],
                            log_lines=log_lines, summary=_capture_summary(artifact, len(graphs)))
    return program


# --- torch.compile(backend="spyre") ---------------------------------------------------------

_BACKEND: list[Callable] = []


def _compile_for_torch(captured: CapturedGraph) -> Callable[[list], list]:
    config = Config()
    root = debug_capture.debug_root()
    start = time.perf_counter()
    with debug_capture.compile_log(root is not None) as log_lines:
        compiled = compile_graph(captured, config)
    if root is not None:
        texts = {"dynamo": captured.to_text()}
        texts.update({s: compiled.artifacts[s].to_text() for s in STAGES[1:]})
        times = {"dynamo": 0.0, **compiled.compile_times}
        debug_capture.write(root, STAGES, texts, times,
                            binaries=[compiled.artifacts["backend"].payload],
                            log_lines=log_lines, summary={"graphs": 1, "graph_breaks": 0,
                                                          "wall_s": time.perf_counter() - start})
    return graph_runner(compiled)


def spyre_backend(graph_module: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> Callable:
    """The "spyre" torch.compile backend (entry point `torch_dynamo_backends`)."""
    if not _BACKEND:
        _BACKEND.append(dynamo.aot_backend(_compile_for_torch))
    return _BACKEND[0](graph_module, example_inputs)
