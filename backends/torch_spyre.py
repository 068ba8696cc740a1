"""torch-spyre as a compiler under test: its real front half, compiled on a CPU with no card.

torch-spyre (github.com/torch-spyre/torch-spyre) is IBM's Inductor backend for Spyre. Its
front half - Dynamo, AOT Autograd, its FX passes, its pre-scheduling passes (layout
propagation, restickify, work division, LX planning), scheduling and SDSC codegen - is
Python; what it needs of its closed C extension `torch_spyre._C` is answered by
`torch_spyre_stand_in` (beside this file) where no built extension exists, and its backend
compiler `dxp_standalone` by a stub where none is on PATH. A checkout's `torch_spyre` package
is what gets compiled: put the checkout on the path (the probes' PYTHONPATH; asv installs it
without its C++ build, see `torch_spyre_install`).

Stages, in pipeline order, each one region of a compile's time and one canonical text:

- `dynamo`: Dynamo's FX graph; its time is the compile's outside the compiler (tracing,
  guards).
- `aot`: AOT Autograd's graph as Inductor receives it (`fx_graph_readable.py`); its time is
  AOT Autograd's, decompositions and joint-graph passes included.
- `post_grad`: the graph after the post-grad passes, torch-spyre's custom ones among them
  (`fx_graph_transformed.py`).
- `lowering`: Inductor's lowering to loop-level IR (`GraphLowering.run`): the operations
  before torch-spyre's pre-scheduling passes, as its own `format_operations` prints them.
- one stage per entry of `CustomPreSchedulingPasses.passes`, named as torch-spyre names it
  (`_get_pass_name`): the operations after that pass.
- `scheduling`: the scheduler's nodes after fusion (`ir_post_fusion.txt`).
- `codegen`: the generated wrapper and, per kernel, its SDSC files and `bundle.mlir`,
  without source locations (`debug_handle_`) and generated directory names.

The passes differ between commits (17 at torch 2.13's upgrade, 20 at the bundle's head), so
`STAGES` is read from the checkout found on the path, without importing it; a capture lists
its own, and a pass added in a range starts a new series.

A compile is timed by region as self time: the innermost region that is running is charged,
so the regions add up to the whole compile. The compiled program never runs here (there is
no device: `EXECUTES` is False). A run is spyre_sim's timing model's: `Compiled.run` prices
the device program the compile wrote (every kernel's SDSC and the generated wrapper, read by
`torch_spyre_sdsc` and priced by `torch_spyre_timing`, beside this file) on a modelled card,
noise-free: its device time, kernels and trace, and no outputs.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import math
import os
import shutil
import stat
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

NAME = "torch_spyre"
COMPILER: str | None = None  # the interface's name for a project's own module: unused here
# spyre_sim's timing model prices what the compile wrote (`Compiled.run`): device time
# without a device, deterministic (no noise to switch off or draw afresh)
DEVICE_CLOCK = True
EXECUTES = False  # no device: the compiled program is never run, its outputs never compared
# A program given as its ATen graph (a minimizer's candidate) does not compile as the module it
# came from: torch-spyre rewrites ops at Dynamo's and AOT's level, and a multi-output ATen op
# left in a graph (native_layer_norm) fails its split_multi_ops ("No FX node for buf...").
GRAPH_PROGRAMS = False
SCOPES_KNOBS = False
QUIET: dict[str, Any] = {}
INDEPENDENT: dict[str, Any] = {}
HEAD = ("dynamo", "aot", "post_grad", "lowering")
TAIL = ("scheduling", "codegen")
# Modules this one loads from its own folder (the reproducer embeds them beside it, in this
# order): the `_C` stand-in and its data model, the device program's reader and its pricing
# by the timing model, and Inductor's backend for the float64 reference and the minimizer's
# graph.
COMPANIONS = ("torch_spyre_layout", "torch_spyre_stand_in", "torch_spyre_sdsc",
              "torch_spyre_timing", "inductor")
PASSES_FILE = ("torch_spyre", "_inductor", "passes.py")


def checkout_passes(root: Path | None = None) -> tuple[str, ...]:
    """The names of `CustomPreSchedulingPasses.passes` in the torch-spyre found on the path
    (or under `root`), read from its source without importing it; () when there is none."""
    if root is None:
        spec = importlib.util.find_spec("torch_spyre")
        if spec is None or not spec.submodule_search_locations:
            return ()
        root = Path(list(spec.submodule_search_locations)[0]).parent
    path = Path(root).joinpath(*PASSES_FILE)
    if not path.is_file():
        return ()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef) and node.name == "CustomPreSchedulingPasses":
            for inner in ast.walk(node):
                if (isinstance(inner, ast.Assign) and isinstance(inner.value, ast.List)
                        and any(getattr(t, "attr", None) == "passes" for t in inner.targets)):
                    return tuple(e.id for e in inner.value.elts if isinstance(e, ast.Name))
    return ()


STAGES: tuple[str, ...] = (*HEAD, *checkout_passes(), *TAIL)
WORK_REGIONS: tuple[str, ...] = STAGES


def companion(name: str) -> Any:
    """A module of this folder by name: already loaded (a reproducer embeds it), or loaded
    by path beside this file."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# --- torch-spyre on a CPU -------------------------------------------------------------------

STUB = """#!{python} -I
'''dxp_standalone as spyre-regress stands it in: torch-spyre's closed backend compiler is
not on this machine, so the SDSC bundle is only checked to be there and to parse.'''
import json, pathlib, sys
args = sys.argv[1:]
if len(args) != 2 or args[0] != "-d":
    sys.exit("usage: dxp_standalone -d BUNDLE_DIR")
bundle = pathlib.Path(args[1])
files = sorted(bundle.glob("sdsc_*.json"))
if not files or not (bundle / "bundle.mlir").is_file():
    sys.exit(f"dxp_standalone (stub): no SDSC bundle in {{bundle}}")
for path in files:
    json.loads(path.read_text())
"""


def backend_compiler() -> str:
    """The `dxp_standalone` a compile runs: the one on PATH, else this tool's stub (written
    once per process into a temporary folder put first on PATH)."""
    found = shutil.which("dxp_standalone")
    if found:
        return found
    folder = Path(tempfile.mkdtemp(prefix="spyre-regress-dxp-"))
    stub = folder / "dxp_standalone"
    stub.write_text(STUB.format(python=sys.executable))
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    os.environ["PATH"] = f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
    return str(stub)


def load_compiler() -> Any:
    """torch-spyre loaded as its autoload entry point loads it, with the `_C` stand-in behind
    a built extension and the backend compiler (or its stub) on PATH; the package."""
    companion("torch_spyre_stand_in").install()
    backend_compiler()
    import torch_spyre

    torch_spyre._autoload()
    return torch_spyre


def uses_stand_in() -> bool:
    """Whether this process's `torch_spyre._C` is the stand-in (no real build)."""
    return companion("torch_spyre_stand_in").is_stand_in(sys.modules.get("torch_spyre._C"))


def on_device(program: Any, inputs: Sequence[Any]) -> tuple[Any, list[Any]]:
    """`program` and `inputs` on the `spyre` device as storage-less tensors of the same
    shapes, dtypes and strides: real tensors (so torch-spyre reads their layouts, as it reads a
    card's) that no compile touches the data of. A module's parameters and buffers move too."""
    def device(value: Any) -> Any:
        if not isinstance(value, torch.Tensor):
            return value
        made = torch._C._acc.create_empty_tensor(tuple(value.shape), value.dtype)
        if not value.is_contiguous():
            made = made.as_strided(value.shape, value.stride())
        return made

    if isinstance(program, torch.nn.Module):
        for module in program.modules():
            for name, parameter in list(module._parameters.items()):
                if parameter is not None:
                    module._parameters[name] = torch.nn.Parameter(device(parameter.data),
                                                                  requires_grad=False)
            for name, buffer in list(module._buffers.items()):
                if buffer is not None:
                    module._buffers[name] = device(buffer)
    return program, [device(x) for x in inputs]


# --- regions: a compile's time, charged to the innermost running stage ----------------------

def clock_now() -> dict[str, float]:
    """The cumulative counters a region's time is the difference of: this process's CPU, its
    reaped children's CPU (the backend compiler) and the wall clock."""
    times = os.times()
    return {"cpu": time.process_time(), "children_cpu": times.children_user +
            times.children_system, "wall": time.perf_counter()}


class Timeline:
    """Self time per region of one compile: entering a region closes the running one's slice;
    leaving it reopens its parent's. `on_slice(ended, starting)` is called at every boundary
    with the region whose slice ended and the one whose slice starts (None at either end of
    the compile): a counting caller dumps an instruction count there."""

    def __init__(self, clock: Callable[[], dict[str, float]] = clock_now,
                 on_slice: Callable[[str | None, str | None], None] | None = None) -> None:
        self.clock, self.on_slice = clock, on_slice
        self.stack: list[str] = []
        self.spent: dict[str, dict[str, float]] = {}
        self.mark: dict[str, float] = {}
        self.failed: str | None = None  # the innermost region an exception left

    def _boundary(self, starting: str | None) -> None:
        now = self.clock()
        ended = self.stack[-1] if self.stack else None
        if ended is not None:
            spent = self.spent.setdefault(ended, {})
            for part, value in now.items():
                spent[part] = spent.get(part, 0.0) + value - self.mark[part]
        if self.on_slice is not None:
            self.on_slice(ended, starting)
            now = self.clock()  # the boundary's own work is nobody's
        self.mark = now

    @contextlib.contextmanager
    def region(self, name: str) -> Iterator[None]:
        self._boundary(name)
        self.stack.append(name)
        try:
            yield
        except BaseException:
            self.failed = self.failed or name
            raise
        finally:
            self._boundary(self.stack[-2] if len(self.stack) > 1 else None)
            self.stack.pop()

    def wrap(self, name: str, function: Callable) -> Callable:
        """`function` run inside region `name`, under its own name (torch-spyre names a pass
        by its function's `__name__`)."""
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self.region(name):
                return function(*args, **kwargs)
        for attribute in ("__name__", "__qualname__", "__doc__", "__module__"):
            if hasattr(function, attribute):
                setattr(wrapped, attribute, getattr(function, attribute))
        wrapped.__wrapped__ = function  # type: ignore[attr-defined]
        return wrapped

    def seconds(self, part: str = "cpu") -> dict[str, float]:
        return {stage: spent.get(part, 0.0) for stage, spent in self.spent.items()}


@contextlib.contextmanager
def patched(owner: Any, name: str, value: Any) -> Iterator[None]:
    saved = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


@contextlib.contextmanager
def instrumented(timeline: Timeline, after_pass: Callable[[str, Any], None] | None = None,
                 before_passes: Callable[[Any], None] | None = None) -> Iterator[None]:
    """Inductor's and torch-spyre's stage boundaries wrapped into `timeline`'s regions for the
    duration; `before_passes(graph)` and `after_pass(name, graph)` see the loop-level IR
    around torch-spyre's pre-scheduling passes (a capture reads it there)."""
    import torch._inductor.compile_fx as compile_fx
    from torch._inductor.graph import GraphLowering
    from torch_spyre._inductor import passes

    original_init = passes.CustomPreSchedulingPasses.__init__

    def init(self: Any) -> None:
        original_init(self)
        self.passes = [timed_pass(function, index == 0)
                       for index, function in enumerate(self.passes)]

    def timed_pass(function: Callable, first: bool) -> Callable:
        name = passes._get_pass_name(function)

        def run(graph: Any) -> None:
            if first and before_passes is not None:
                before_passes(graph)
            function(graph)
            if after_pass is not None:
                after_pass(name, graph)
        return timeline.wrap(name, run)

    with contextlib.ExitStack() as stack:
        stack.enter_context(patched(passes.CustomPreSchedulingPasses, "__init__", init))
        stack.enter_context(patched(compile_fx, "_recursive_post_grad_passes", timeline.wrap(
            "post_grad", compile_fx._recursive_post_grad_passes)))
        for method, region in (("run", "lowering"), ("_update_scheduler", "scheduling"),
                               ("compile_to_module", "codegen")):
            stack.enter_context(patched(GraphLowering, method, timeline.wrap(
                region, GraphLowering.__dict__[method])))
        yield


# --- the compile ------------------------------------------------------------------------------

class CompiledOnly(Exception):
    """Raised in place of running the compiled program: there is no device to run it on."""


class CompileFailure(Exception):
    """A compile that failed, with its class: `stand-in` (spyre-regress's `_C` stand-in lacks
    a name, or a compile needed the device), `torch-spyre` (torch-spyre's own error, in stage
    `stage`) or `install` (the checkout's torch-spyre does not import)."""

    WORDS = {"stand-in": "the _C stand-in (not torch-spyre) failed",
             "torch-spyre": "torch-spyre failed", "install": "torch-spyre does not import"}

    def __init__(self, kind: str, stage: str | None, detail: str) -> None:
        super().__init__(kind, stage, detail)
        self.kind, self.stage, self.detail = kind, stage, detail

    def __str__(self) -> str:
        where = f" in {self.stage}" if self.stage else ""
        return f"{self.WORDS[self.kind]}{where}: {self.detail}"


def classify(error: BaseException, stage: str | None) -> CompileFailure:
    """What a compile's exception says about the commit: the stand-in's gap, torch-spyre's
    own failure in a stage, or an install that does not import. The detail is the error's
    first paragraph (Inductor appends advice on its own flags after a blank line)."""
    text = f"{type(error).__name__}: {error}".split("\n\n")[0].strip()
    chain = [error, *_causes(error)]
    if any("torch_spyre._C" in str(e) or type(e).__name__ == "NeedsDevice" for e in chain):
        return CompileFailure("stand-in", stage, text)
    if stage is None and any(isinstance(e, ImportError) for e in chain):
        return CompileFailure("install", stage, text)
    return CompileFailure("torch-spyre", stage, text)


def _causes(error: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    seen = {id(error)}
    cause = error.__cause__ or error.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        found.append(cause)
        cause = cause.__cause__ or cause.__context__
    return found


def compile_traced(program: Any, inputs: Sequence[Any], values: Mapping[str, Any] | None,
                   timeline: Timeline, *, graph_texts: Callable[[Any], None] | None = None,
                   before_passes: Callable[[Any], None] | None = None,
                   after_pass: Callable[[str, Any], None] | None = None,
                   inductor_config: Mapping[str, Any] | None = None,
                   finished: Callable[[], None] | None = None,
                   collector: Any = None) -> None:
    """One cold compile of `program` through torch-spyre, every region charged to `timeline`;
    `graph_texts(gm)` sees each graph Dynamo hands over, `before_passes`/`after_pass` the IR
    (`instrumented`), and `finished()` runs while the compile's cache directory (its kernels)
    still exists, after `collector` (a `torch_spyre_sdsc.Collector`, entered around the
    compile) read the device program. Raises CompileFailure."""
    try:
        load_compiler()
    except Exception as error:
        raise CompileFailure("install", None, f"{type(error).__name__}: {error}") from error
    import torch._inductor.compile_fx as compile_fx
    from torch._inductor import config

    program, device_inputs = on_device(program, inputs)

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        if graph_texts is not None:
            graph_texts(gm)
        with timeline.region("aot"):
            compile_fx.compile_fx(gm, example_inputs)

        def compiled_only(*args: Any) -> Any:
            raise CompiledOnly
        return compiled_only

    with tempfile.TemporaryDirectory(prefix="torch-spyre-cache-") as cache, \
            _environment(TORCHINDUCTOR_CACHE_DIR=cache), warnings.catch_warnings(), \
            config.patch({"force_disable_caches": True, **(inductor_config or {})}), \
            spyre_config(values), instrumented(timeline, after_pass, before_passes), \
            collector if collector is not None else contextlib.nullcontext(), torch.no_grad():
        # torch says once per compile that disabling caches disables its profile-guided
        # dynamism too: true and expected here
        warnings.filterwarnings("ignore", message="dynamo_pgo force disabled")
        torch._dynamo.reset()
        try:
            with timeline.region("dynamo"):
                torch.compile(program, backend=backend, dynamic=False)(*device_inputs)
        except CompiledOnly:
            pass
        except Exception as error:
            raise classify(error, timeline.failed) from error
        finally:
            torch._dynamo.reset()
        if collector is not None:
            collector.read()
        if finished is not None:
            finished()


@contextlib.contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def spyre_config(values: Mapping[str, Any] | None) -> Iterator[None]:
    """torch-spyre's own config (`torch_spyre._inductor.config`) patched with the entries of
    `values` it has."""
    from torch_spyre._inductor import config

    known = known_settings(values or {})[0]
    with config.patch(known) if known else contextlib.nullcontext():
        yield


# --- the backend interface --------------------------------------------------------------------

# torch-spyre's own decisions (`torch_spyre._inductor.config`, each read from an environment
# variable of the same meaning), the stage whose artifact each changes, and the choices to try
# besides the default (read from the checkout's config, so a commit with other defaults is
# measured against its own; a knob a commit lacks is not offered).
KNOB_TABLE: tuple[tuple[str, str, tuple[Any, ...]], ...] = (
    ("lx_planning", "_maybe_scratchpad_planning", (True, False)),
    ("sencores", "_distribute_work", (32, 16, 8)),
    ("ignore_work_division_hints", "_distribute_work", (False, True)),
    ("ignore_wsr_hints", "_maybe_coarse_tile_hints", (False, True)),
    ("enable_reduction_tiling", "_maybe_coarse_tile_hints", (True, False)),
    ("global_stick_optimizer", "optimize_restickify_locations", (True, False)),
    ("hbm_pool_planning", "codegen", (True, False)),
)


@dataclass(frozen=True)
class Knob:
    name: str
    stage: str
    choices: tuple[Any, ...]
    default: Any


@dataclass(frozen=True, kw_only=True)
class Execution:
    """One modelled call: no outputs and no host time (nothing runs: `host_s` is NaN), the
    device time and kernels spyre_sim's timing model gives the compiled program, its trace,
    and how many of its kernels the model could not time (each is a kernel row of its own,
    named "unmodelled kernel: <op> (<reason>)", with no time)."""

    outputs: tuple[Any, ...]
    host_s: float
    device_us: float | None
    kernels: tuple[Any, ...] = ()
    trace: dict | None = None
    nonfinite: str | None = None
    unmodelled: int = 0


class Compiled:
    """A torch-spyre compile: CPU seconds per stage (self time, see `Timeline`) and `total`,
    and the device program it wrote (`torch_spyre_sdsc.DeviceProgram`), which `run` prices.
    Nothing of it runs here: torch-spyre's runtime needs a card."""

    def __init__(self, compile_s: Mapping[str, float], timeline: Timeline,
                 collector: Any = None) -> None:
        self.compile_s = dict(compile_s)
        self.timeline = timeline
        self.program = getattr(collector, "program", None)
        self.program_error = getattr(collector, "error", None)

    def run(self, *inputs: Any) -> Execution:
        """The compiled program on spyre_sim's modelled card, noise-free: the same figures on
        every call (`torch_spyre_timing.price`). Raises RuntimeError when the compile's
        device program could not be read."""
        if self.program is None:
            raise RuntimeError("torch-spyre's device program was not read from this compile"
                               + (f": {self.program_error}" if self.program_error else ""))
        priced = companion("torch_spyre_timing").price(self.program)
        return Execution(outputs=(), host_s=math.nan, device_us=priced.device_us,
                         kernels=priced.kernels, trace=priced.trace,
                         unmodelled=len(priced.unmodelled))

    def baselines(self, *inputs: Any) -> Any:
        raise NotImplementedError("torch-spyre's outputs exist only on a Spyre card")

    def stage_outputs(self, *inputs: Any) -> dict[str, tuple[Any, ...]]:
        return {}


def compile(program: Any, inputs: Sequence[Any],
            values: Mapping[str, Any] | None = None) -> Compiled:
    """A cold compile of `program` through the checkout's torch-spyre (no cache; one fresh
    inductor cache directory, removed after). Raises CompileFailure."""
    timeline = Timeline()
    collector = companion("torch_spyre_sdsc").Collector()
    compile_traced(program, inputs, values, timeline, collector=collector)
    seconds = timeline.seconds("cpu")
    return Compiled({**{stage: seconds.get(stage, 0.0) for stage in STAGES},
                     **seconds, "total": sum(seconds.values())}, timeline, collector)


def compile_in_regions(program: Any, inputs: Sequence[Any],
                       values: Mapping[str, Any] | None,
                       region: Callable[[str], AbstractContextManager[Any]]) -> None:
    """One compile with every slice of it inside `region(stage)` (the caller counts each
    slice; a stage interrupted by another, as codegen is by the passes it calls, is counted in
    several slices under its name)."""
    active: list[AbstractContextManager[Any]] = []

    def on_slice(ended: str | None, starting: str | None) -> None:
        if active:
            active.pop().__exit__(None, None, None)
        if starting is not None:
            context = region(starting)
            context.__enter__()
            active.append(context)

    try:
        compile_traced(program, inputs, values, Timeline(on_slice=on_slice))
    finally:
        while active:
            active.pop().__exit__(None, None, None)


def knobs() -> list[Knob]:
    load_compiler()
    from torch_spyre._inductor import config

    defaults = config.get_config_copy()
    return [Knob(name, stage, choices, defaults[name]) for name, stage, choices in KNOB_TABLE
            if name in defaults]


def known_settings(values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The entries of `values` this checkout's torch-spyre config has, and the names of the
    rest (a setting renamed or added between the two commits of a comparison)."""
    load_compiler()
    from torch_spyre._inductor import config

    known = set(config.get_config_copy())
    return ({k: v for k, v in values.items() if k in known},
            sorted(k for k in values if k not in known))


def settings(values: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every knob at its value for a compile with `values`, then the other entries applied."""
    return {**{knob.name: knob.default for knob in knobs()}, **known_settings(values or {})[0]}


def reference(program: Any, inputs: Sequence[Any]) -> tuple[Any, ...]:
    """The program run eagerly in float64 on the CPU."""
    return tuple(companion("inductor").reference(program, inputs))


def graph(program: Any, inputs: Sequence[Any]) -> tuple[Any, list[Any]]:
    """AOT Autograd's forward graph of the program on the CPU, before any decomposition: what
    the minimizer cuts down (each build compiles a candidate its own way)."""
    return companion("inductor").graph(program, inputs)


def environment() -> dict[str, str]:
    import platform

    load_compiler()
    try:
        version = importlib.import_module("torch_spyre.version").__version__
    except (ImportError, AttributeError):
        version = "unknown"
    return {"torch": torch.__version__, "torch_spyre": str(version),
            "python": platform.python_version(),
            "torch_spyre._C": "stand-in (spyre-regress)" if uses_stand_in() else "built",
            "dxp_standalone": "stub (spyre-regress)" if "spyre-regress-dxp-" in
            backend_compiler() else "on PATH"}


def build_path() -> str:
    """Where this process imported torch-spyre from: the checkout under test."""
    return str(Path(str(load_compiler().__file__)).parent)


def capture(program: Any, inputs: Sequence[Any], values: Mapping[str, Any] | None,
            out_dir: Path) -> Path:
    """One compile with every stage's canonical text written under `out_dir` in the
    stage-capture protocol (`torch_spyre_texts`); the `compile-NNN` directory written."""
    return companion("torch_spyre_texts").capture(sys.modules[__name__], program, inputs,
                                                  values, out_dir=Path(out_dir))
