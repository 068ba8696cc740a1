"""PyTorch Inductor (CPU) as a compiler under test: its debug trace read into the
stage-capture protocol, in canonical texts that diff honestly between two builds.

With its trace on (`TORCH_COMPILE_DEBUG=1`, or `torch._inductor.config.trace.enabled`),
Inductor writes one folder per compiled graph, `torchinductor/<aot graph name>.<n>/` under
`trace.debug_dir`, through `DebugFormatter` in `torch/_inductor/debug.py`. The folder name
carries process-wide counters (`model__0_inference_0.0`), and a run's folder carries a
timestamp and a pid; none of that reaches a capture. Dynamo's graph has no file of its own
there, so `capture` records it from the graph Dynamo hands to the backend.

Stages in pipeline order, and where each text comes from:

- `dynamo`: the FX graph Dynamo traced (`GraphModule.print_readable()`), recorded by the
  capture's backend wrapper just before it calls Inductor's `compile_fx`.
- `aot`: `fx_graph_readable.py`, AOT Autograd's graph with decompositions applied, as
  Inductor receives it (`DebugFormatter.fx_graph`).
- `post_grad`: `fx_graph_transformed.py`, the same graph after the post-grad passes (pattern
  matching, reinplacing, reordering; `DebugFormatter.fx_graph_transformed`).
- `pre_fusion`: `ir_pre_fusion.txt`, the scheduler nodes lowered from the graph, each node's
  `debug_str()`, before fusion (`DebugFormatter.ir_pre_fusion`).
- `fusion`: `ir_post_fusion.txt`, the same after the scheduler fused them: which nodes became
  one kernel (`DebugFormatter.ir_post_fusion`).
- `codegen`: `output_code.py`, the generated wrapper and C++ kernels (`output_code`).

`fx_graph_runnable.py` is left out: it is a repro script holding config and version dumps,
not a stage's result.

The module is also a backend (`backends.interface`): `compile`, `reference`, `capture`,
`knobs` and `environment` at module level. Inductor's CPU code has no device clock: a run
reports the host's seconds only (`DEVICE_CLOCK`).

An Inductor-based project (torch-spyre is one) puts its own module in `compile_fx`'s place:
`COMPILER` names it (the repository's catalogue says which; the probe and the reproducer set
it). Such a module has `CONFIG`, its `torch._inductor.config` defaults, and
`compile_graph(graph_module, example_inputs)`, Inductor's `compile_fx` with its own
decompositions and passes under whatever config the caller set. Every compile here applies
`CONFIG`, then the knob values under test, then calls `compile_graph`: so a knob the project
sets can still be tried the other way, and the captures show what the project's changes do
to Inductor's stages.
"""

from __future__ import annotations

import copy
import importlib
import re
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

NAME = "inductor"
# The module of an Inductor-based project that takes `compile_fx`'s place (see the module
# text); None: Inductor itself.
COMPILER: str | None = None
STAGES = ("dynamo", "aot", "post_grad", "pre_fusion", "fusion", "codegen")
DEVICE_CLOCK = False
SCOPES_KNOBS = False  # a config switch applies to the whole compile
# A real clock: no simulated noise to switch off or to draw afresh.
QUIET: dict[str, Any] = {}
INDEPENDENT: dict[str, Any] = {}
# The Inductor debug file each stage is read from; `dynamo` is recorded by the capture itself.
STAGE_FILES: dict[str, str | None] = {
    "dynamo": None,
    "aot": "fx_graph_readable.py",
    "post_grad": "fx_graph_transformed.py",
    "pre_fusion": "ir_pre_fusion.txt",
    "fusion": "ir_post_fusion.txt",
    "codegen": "output_code.py",
}
# Every cache that can skip a stage off, so each capture runs every stage: a hit in the FX
# graph cache would load the compiled module without lowering, scheduling or writing these
# files (AOT Autograd's cache is bypassed with it: `autograd_cache.py` needs `fx_graph_cache`).
# The C++ kernel cache stays on: it is keyed by the kernel's source, which codegen has written
# by then, so a hit skips only the C++ compiler's build of that source (measured on a small
# MLP: the same six texts, byte for byte, and a capture of 9 s instead of 15 s).
CAPTURE_CONFIG: dict[str, Any] = {
    "trace.enabled": True,
    "fx_graph_cache": False,
    "fx_graph_remote_cache": False,
    "autotune_local_cache": False,
    "autotune_remote_cache": False,
    "bundled_autotune_remote_cache": False,
}
# Approximate per-stage compile times from `torch._dynamo.utils.compilation_time_metrics`
# (the functions Inductor times with `dynamo_timed`); diagnostic only, never diffed.
STAGE_TIMERS: dict[str, tuple[str, ...]] = {
    "dynamo": ("bytecode_tracing",),
    "aot": ("aot_collect_metadata", "_recursive_joint_graph_passes"),
    "post_grad": ("_recursive_post_grad_passes",),
    "pre_fusion": ("GraphLowering.run",),
    "fusion": ("Scheduler.__init__",),
    "codegen": ("Scheduler.codegen", "PythonWrapperCodegen.generate", "async_compile.wait"),
}
MISSING = "# (Inductor wrote no such file for this graph)\n"


@dataclass(frozen=True)
class Traced:
    """What one traced compile produced: its graphs, per-stage seconds and graph breaks."""

    graphs: list[TracedGraph]
    wall_s: dict[str, float]
    graph_breaks: int


@dataclass(frozen=True)
class TracedGraph:
    """One graph Dynamo handed to Inductor: its Dynamo text and, per Inductor debug folder
    its compile wrote (one for inference; forward and backward when training), the folder's
    name and the stage files' raw texts."""

    dynamo: str
    folders: tuple[tuple[str, Mapping[str, str]], ...]


# --- canonical texts --------------------------------------------------------------------------

Rule = tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]


def _cache_path(match: re.Match[str]) -> str:
    """A path in Inductor's cache keeps its shape, not its user, temp dirs or hashes: the
    hash is of the source, already diffed where the source is."""
    rest = re.sub(r"(?<=/)[0-9a-z]{2}(?=/)", "<shard>", match.group("rest"))
    rest = re.sub(r"(?<=/)tmp[0-9a-z_]{6,}(?=/|$)", "<tmp>", rest)
    return "<inductor-cache>" + re.sub(r"[0-9a-z]{20,}", "<hash>", rest)


# Applied in order to every stage: what differs between two builds of the same code and is not
# the compiler's decision.
COMMON_RULES: tuple[Rule, ...] = (
    # glog-style log lines (`W1202 08:55:13.685000 6497 torch/...:545] ...`) printed mid-compile
    (re.compile(r"^[IWEDV]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\n]*\n?", re.M), ""),
    # Inductor's cache: `/tmp/torchinductor_<user>/<xx>/<hash>.py`
    (re.compile(r"(?:/[^/\s'\"]+)*/torchinductor_[^/\s'\"]+(?P<rest>(?:/[^/\s'\"]+)*)"),
     _cache_path),
    # any other absolute path keeps its file name only
    (re.compile(r"(?<![\w)\].>/])/(?:[\w.+-]+/)+(?=[\w.+-]+)"), "<path>/"),
    (re.compile(r"(?<!\d)\d{4}([-_/])\d\d\1\d\d[ T_]\d\d[:_]\d\d[:_]\d\d(?:[._]\d+)?"),
     "<time>"),
    (re.compile(r"\b(pid[_=: ]+)\d+"), r"\1<pid>"),
    (re.compile(r"\bat 0x[0-9a-fA-F]+"), "at 0x<addr>"),
    # AOT graph names count graphs process-wide: `model__3_inference_3` is the 4th compile
    (re.compile(r"\b(\w+?)__\d+_(inference|forward|backward)_\d+\b"), r"\1__<n>_\2_<n>"),
)
# `# File: /abs/model.py:12 in forward, code: y = f(x)`: the code stays, path and line go.
SOURCE_RULES: tuple[Rule, ...] = (
    (re.compile(r"# File: [^\n]*?:\d+ in (\w+), code: "), r"# in \1, code: "),
    (re.compile(r"\b(torch_dynamo_resume_in_\w+?_at_)\d+\b"), r"\1<line>"),
)
CODE_RULES: tuple[Rule, ...] = (
    # OpenMP thread counts follow the machine's cores (`cpp.threads = -1`), not the compiler
    (re.compile(r"\bnum_threads\(\d+\)"), "num_threads(<threads>)"),
    (re.compile(r"# AOT ID: \['\d+_(\w+)'\]"), r"# AOT ID: ['<n>_\1']"),
)
STAGE_RULES: dict[str, tuple[Rule, ...]] = {
    "dynamo": SOURCE_RULES + COMMON_RULES,
    "aot": SOURCE_RULES + COMMON_RULES,
    "post_grad": SOURCE_RULES + COMMON_RULES,
    "pre_fusion": SOURCE_RULES + COMMON_RULES,
    "fusion": SOURCE_RULES + COMMON_RULES,
    "codegen": SOURCE_RULES + CODE_RULES + COMMON_RULES,
}


def canonical(stage: str, text: str) -> str:
    """`text` of `stage` without what two builds of the same code write differently and the
    compiler did not decide (paths, pids, timestamps, cache hashes, thread counts, source
    locations, addresses, printouts); ops, fusion groups, kernel bodies, loop structure and
    vector widths stay. The source-comment rules run before the path rule, which would
    otherwise leave `# File: <path>/model.py:12` with its line number."""
    if stage not in STAGE_RULES:
        raise ValueError(f"unknown Inductor stage {stage!r}; stages are {', '.join(STAGES)}")
    for pattern, replacement in STAGE_RULES[stage]:
        text = pattern.sub(replacement, text)
    return text


# --- stage texts from traced graphs -----------------------------------------------------------

def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key reading digit runs as numbers (`model__10_…` after `model__9_…`): folders are
    ordered by the compile counter in their names, never by directory listing order."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part)
                 for part in re.split(r"(\d+)", name) if part)


def graph_kind(folder: str) -> str:
    """`inference`, `forward` or `backward` from an AOT folder name, else the name itself with
    its counters replaced."""
    found = re.search(r"__\d+_(\w+?)_\d+(?:\.\d+)?$", folder)
    return found.group(1) if found else re.sub(r"\d+", "<n>", folder)


def ordered(graphs: Sequence[TracedGraph]) -> list[TracedGraph]:
    """Graphs by the name of their first Inductor folder (its counter is the compile order),
    folders within a graph by name; a graph Inductor wrote nothing for keeps its call order,
    after the others."""
    def key(item: tuple[int, TracedGraph]) -> tuple:
        index, graph = item
        first = min((natural_key(name) for name, _ in graph.folders), default=None)
        return (first is None, first or (), index)

    return [TracedGraph(g.dynamo, tuple(sorted(g.folders, key=lambda f: natural_key(f[0]))))
            for _, g in sorted(enumerate(graphs), key=key)]


def header(index: int, kind: str) -> str:
    return f"# ==== graph {index} ({kind}) ====\n"


def stage_text(stage: str, graphs: Sequence[TracedGraph]) -> str:
    """One stage's capture: every graph's canonical text, in order, each under a header naming
    the graph by its place in the capture (not by process-wide counters)."""
    sections = []
    for index, graph in enumerate(graphs):
        if stage == "dynamo":
            sections.append(header(index, "dynamo") + canonical(stage, graph.dynamo))
            continue
        for folder, files in graph.folders:
            text = files.get(STAGE_FILES[stage] or "", MISSING)
            sections.append(header(index, graph_kind(folder)) + canonical(stage, text))
    return "\n".join(s if s.endswith("\n") else s + "\n" for s in sections)


def stage_texts(graphs: Sequence[TracedGraph]) -> dict[str, str]:
    graphs = ordered(graphs)
    return {stage: stage_text(stage, graphs) for stage in STAGES}


def stage_wall_s(before: Mapping[str, int], after: Mapping[str, Sequence[float]]
                 ) -> dict[str, float]:
    """Seconds each stage's timers gained since `before` (each timer's count of entries)."""
    return {stage: sum(sum(after.get(t, ())[before.get(t, 0):]) for t in timers)
            for stage, timers in STAGE_TIMERS.items()}


# --- the compile ------------------------------------------------------------------------------

def _folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()


def _read_folder(folder: Path) -> dict[str, str]:
    return {name: (folder / name).read_text() for name in STAGE_FILES.values()
            if name and (folder / name).is_file()}


def _graph_breaks() -> int:
    from torch._dynamo.utils import counters
    return sum(counters["graph_break"].values())


def _timer_counts() -> dict[str, int]:
    from torch._dynamo.utils import compilation_time_metrics
    return {name: len(times) for name, times in compilation_time_metrics.items()}


def project_defaults() -> dict[str, Any]:
    """The project's `torch._inductor.config` defaults (`COMPILER`'s `CONFIG`); none for
    Inductor itself."""
    return dict(getattr(importlib.import_module(COMPILER), "CONFIG", {})) if COMPILER else {}


def applied(values: Mapping[str, Any] | None) -> dict[str, Any]:
    """The config a compile with `values` patches: the project's defaults, then the entries
    of `values` this torch's config has (others, such as spyre_sim's `numerics`, are ignored,
    as spyre_sim's backend ignores Config fields a build lacks)."""
    return {**project_defaults(), **known_settings(values or {})[0]}


def graph_compiler() -> Callable:
    """What compiles one Dynamo graph: the project's `compile_graph`, or `compile_fx`."""
    if COMPILER:
        return importlib.import_module(COMPILER).compile_graph
    from torch._inductor.compile_fx import compile_fx
    return compile_fx


def compile_traced(fn_or_module: Callable, example_inputs: Sequence[Any], trace_dir: Path,
                   inductor_config: Mapping[str, Any] | None = None
                   ) -> Traced:
    """Compile and run `fn_or_module` once with Inductor, its trace on into `trace_dir`, no
    cache, no grad (inference graphs) and static shapes; the graphs and per-stage seconds.
    `inductor_config` patches `torch._inductor.config` on top (a knob under test)."""
    from torch._dynamo.utils import compilation_time_metrics
    from torch._inductor import config

    compile_graph = graph_compiler()
    graphs: list[TracedGraph] = []
    root = trace_dir / "torchinductor"

    def backend(gm: torch.fx.GraphModule, inputs: list) -> Callable:
        dynamo = gm.print_readable(print_output=False)
        before = _folders(root)
        compiled = compile_graph(gm, inputs)
        written = sorted(_folders(root) - before, key=natural_key)
        graphs.append(TracedGraph(dynamo, tuple((n, _read_folder(root / n)) for n in written)))
        return compiled

    patches = {**CAPTURE_CONFIG, "trace.debug_dir": str(trace_dir), **applied(inductor_config)}
    torch._dynamo.reset()
    timers, breaks = _timer_counts(), _graph_breaks()
    try:
        with config.patch(patches), torch.no_grad():
            torch.compile(fn_or_module, backend=backend, dynamic=False)(*example_inputs)
        # read before the reset below, which clears Dynamo's timers and counters
        return Traced(graphs, stage_wall_s(timers, compilation_time_metrics),
                      _graph_breaks() - breaks)
    finally:
        torch._dynamo.reset()


def capture(fn_or_module: Callable, example_inputs: Sequence[Any],
            inductor_config: Mapping[str, Any] | None, out_dir: Path | str) -> Path:
    """Compile with Inductor on the CPU and write the stage capture under `out_dir` (a fresh
    `compile-NNN` directory, as spyre_sim's TORCH_COMPILE_DEBUG writes, so
    `regressions.records.captures` reads either); the directory written. Inductor's own trace
    goes to a temporary directory, removed afterwards."""
    # the stage-capture protocol's writer; only a capture needs it, so a reproducer that
    # embeds this module runs with torch alone
    from spyre_sim import debug_capture

    with tempfile.TemporaryDirectory(prefix="inductor-trace-") as trace_dir:
        traced = compile_traced(fn_or_module, example_inputs, Path(trace_dir), inductor_config)
    summary = {"backend": "inductor", "compiler": COMPILER or "compile_fx",
               "torch": torch.__version__, "graphs": len(traced.graphs),
               "graph_breaks": traced.graph_breaks,
               "inductor_config": dict(sorted((inductor_config or {}).items()))}
    return debug_capture.write(Path(out_dir), STAGES, stage_texts(traced.graphs), traced.wall_s,
                               binaries=[], log_lines=[], summary=summary)


# --- the backend interface --------------------------------------------------------------------

# Inductor's decisions that can be switched (`torch._inductor.config`), the stage whose text
# each one changes, and the choice to try besides the default (read from the config at run
# time, so a torch with other defaults is measured against its own).
KNOB_TABLE: tuple[tuple[str, str, tuple[Any, ...]], ...] = (
    ("freezing", "aot", (False, True)),
    ("pattern_matcher", "post_grad", (True, False)),
    ("split_reductions", "pre_fusion", (True, False)),
    ("unroll_reductions_threshold", "pre_fusion", (8, 1)),
    ("max_fusion_size", "fusion", (64, 1)),
    ("epilogue_fusion", "fusion", (True, False)),
    ("aggressive_fusion", "fusion", (False, True)),
    ("loop_ordering_after_fusion", "fusion", (True, False)),
    ("cpp.max_horizontal_fusion_size", "fusion", (16, 1)),
    ("cpp.simdlen", "codegen", (None, 1)),
    ("cpp.min_chunk_size", "codegen", (512, 1)),
)
# Compiles measured cold, as captures run: a hit in the FX graph cache would skip the stages
# being timed; the C++ kernel cache's hits leave compile time to Inductor's own work, not the
# C++ compiler's.
NO_CACHE = {k: v for k, v in CAPTURE_CONFIG.items() if k != "trace.enabled"}


@dataclass(frozen=True)
class Knob:
    name: str
    stage: str
    choices: tuple[Any, ...]
    default: Any


@dataclass(frozen=True, kw_only=True)
class Execution:
    outputs: tuple[Any, ...]
    host_s: float
    device_us: float | None
    kernels: tuple[Any, ...] = ()  # C++ kernels are not timed one by one
    trace: dict | None = None
    nonfinite: str | None = None


def _tuple(result: Any) -> tuple[Any, ...]:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


class Compiled:
    """An Inductor-compiled program: seconds per stage (Dynamo's own timers, see
    `STAGE_TIMERS`, plus `total`) and calls of the generated CPU code, timed on the host."""

    def __init__(self, program: Callable, function: Callable, compile_s: Mapping[str, float]
                 ) -> None:
        self.program, self.function = program, function
        self.compile_s = dict(compile_s)

    def run(self, *inputs: Any) -> Execution:
        with torch.no_grad():
            start = time.perf_counter()
            result = self.function(*inputs)
            took = time.perf_counter() - start
        return Execution(outputs=_tuple(result), host_s=took, device_us=None)

    def baselines(self, *inputs: Any) -> tuple[Any, Any, None]:
        """The first output in float64, and eager in the program's own precision (what the
        generated code computes in); no 16-bit baseline."""
        with torch.no_grad():
            eager = _tuple(self.program(*inputs))[0]
        return reference(self.program, inputs)[0], eager, None

    def stage_outputs(self, *inputs: Any) -> dict[str, tuple[Any, ...]]:
        """None of Inductor's stages executes on its own: only the generated code runs."""
        return {}


def knobs() -> list[Knob]:
    from torch._inductor import config

    defaults = {**config.get_config_copy(), **project_defaults()}
    return [Knob(name, stage, choices, defaults[name]) for name, stage, choices in KNOB_TABLE
            if name in defaults]


def compile(program: Callable, inputs: Sequence[Any],
            values: Mapping[str, Any] | None = None) -> Compiled:
    """A cold Inductor compile of `program` (no FX graph cache, static shapes, inference),
    with `applied(values)` patched into `torch._inductor.config`; Inductor compiles on the
    first call, which this makes."""
    from torch._dynamo.utils import compilation_time_metrics
    from torch._inductor import config

    torch._dynamo.reset()
    timers = _timer_counts()
    function = torch.compile(program, backend=graph_compiler(), dynamic=False)
    patches = {**NO_CACHE, **applied(values)}
    start = time.perf_counter()
    with config.patch(patches), torch.no_grad():
        function(*inputs)
    total = time.perf_counter() - start
    return Compiled(program, function, {**stage_wall_s(timers, compilation_time_metrics),
                                        "total": total})


def reference(program: Callable, inputs: Sequence[Any]) -> tuple[Any, ...]:
    """The program run eagerly in float64 (a module's parameters too): numerics' oracle."""
    def wide(value: Any) -> Any:
        return value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() \
            else value

    program = copy.deepcopy(program).double() if isinstance(program, torch.nn.Module) \
        else program
    with torch.no_grad():
        result = program(*(wide(x) for x in inputs))
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def graph(program: Callable, inputs: Sequence[Any]) -> tuple[Any, list[Any]]:
    """The ATen graph Inductor starts from (AOT Autograd's forward of the first graph Dynamo
    traced, before any decomposition: each build compiling a candidate applies its own table,
    so a decomposition a commit changes still shows on the minimizer's candidates) and real
    example inputs in its placeholders' order (any parameters Dynamo did not lift first, as
    AOT Autograd lifts them): what the minimizer cuts down."""
    from torch._functorch.aot_autograd import aot_module_simplified

    graphs: list[tuple[Any, list[Any]]] = []

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        lifted = {**dict(gm.named_parameters(remove_duplicate=False)),
                  **dict(gm.named_buffers(remove_duplicate=False))}
        real = [*lifted.values(), *example_inputs]

        def forward(module: torch.fx.GraphModule, _: list) -> Callable:
            graphs.append((module, real))
            return module
        return aot_module_simplified(gm, example_inputs,
                                     fw_compiler=forward)  # type: ignore[arg-type]

    torch._dynamo.reset()
    try:
        with torch.no_grad():
            torch.compile(program, backend=backend, dynamic=False)(*inputs)
    finally:
        torch._dynamo.reset()
    return graphs[0]


def settings(values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every knob of `KNOB_TABLE` as a compile with `values` sets it (the project's default,
    else this torch's, where `values` leaves it), then the project's other defaults and any
    other config entry `values` patch."""
    return {**{knob.name: knob.default for knob in knobs()}, **applied(values)}


def environment() -> dict[str, str]:
    """What the generated code depends on besides the program: torch (Inductor ships in it),
    Python and the CPU architecture its C++ is vectorized for."""
    import platform
    found = {"torch": torch.__version__, "python": platform.python_version(),
             "machine": platform.machine()}
    if COMPILER:
        package = importlib.import_module(COMPILER.split(".")[0])
        found["compiler"] = f"{COMPILER} {getattr(package, '__version__', 'unknown')}"
    return found


def build_path() -> str:
    """Where this process imported the compiler from: the project's module (the checkout
    under test), else torch (and so Inductor)."""
    module = importlib.import_module(COMPILER) if COMPILER else torch
    return str(Path(str(module.__file__)).parent)


def known_settings(values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The entries of `values` this torch's `torch._inductor.config` has, and the names it
    has not (a knob renamed or removed between the two torches of a comparison)."""
    from torch._inductor import config

    known = set(config.get_config_copy())
    return ({k: v for k, v in values.items() if k in known},
            sorted(k for k in values if k not in known))


# One region: Inductor's stages run interleaved inside `compile_fx`, with no seam to count
# between; the C++ build runs in a subprocess that callgrind does not follow.
WORK_REGIONS: tuple[str, ...] = ("compile",)


def compile_in_regions(program: Callable, inputs: Sequence[Any],
                       values: Mapping[str, Any] | None,
                       region: Callable[[str], AbstractContextManager[Any]]) -> None:
    """One cold compile inside `region("compile")` (the caller counts it)."""
    with region(WORK_REGIONS[0]):
        compile(program, inputs, values)
