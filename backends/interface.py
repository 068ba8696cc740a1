"""What the measuring layer asks of a compiler under test: the backend interface.

A backend module (`backends/spyre.py`, `backends/inductor.py`) answers it with module-level
names, structurally, the way asv finds a benchmark by its name: probes load a backend by file
path inside the commit under test, next to that commit's compiler, so a backend imports only
the standard library, torch and its compiler, never this package. These Protocols say what
the names are; `tests/test_backends.py` holds both implementations to them on one workload.

- `NAME`, `STAGES` (pipeline order), `DEVICE_CLOCK` (whether a run reports device time, or
  only the host's clock, as Inductor's CPU code does);
- `SCOPES_KNOBS`: whether a knob can be limited to its first n applications (spyre_sim's
  `Config.knob_scope`); where not, the knob probe skips that narrowing. Where it can, the
  backend also has `decisions_logged()`, a context manager listing the decisions
  (`decision <knob>#<n> ...`) its compiles log meanwhile: the knob probe tries only the
  knobs a compile consults;
- `QUIET` and `INDEPENDENT`: config values for a noise-free measurement and for samples
  whose noise is drawn afresh per compile (a simulator's; empty for a real clock);
- `knobs()`: the compiler's decisions that can be switched, each with the stage that makes it
  (the knob search tries each non-default choice; a knob named by its stage narrows a stage
  regression to a workaround);
- `compile(program, inputs, values)`: a `Compiled` with seconds per stage, `values` a dict
  of knob values (and, for spyre_sim, any other Config field);
- `graph(program, inputs)`: the ATen graph the compiler starts from and its example inputs,
  which the minimizer cuts down (`regressions.bisection.minimize.from_graph`);
- `reference(program, inputs)`: the outputs numerics are measured against, computed in
  float64 (spyre_sim returns them in the program's own output dtypes, as Dynamo guarded);
- `capture(program, inputs, values, out_dir)`: the stage capture (the protocol of
  `regressions.records.captures`: a `compile-NNN` directory of canonical stage texts);
- `settings(values)`: the whole configuration a compile with `values` applies, as JSON
  values (spyre_sim's `Config.to_dict()`, Inductor's knobs): what a report records beside its
  figures, so a reader can apply it again;
- `known_settings(values)`: the part of recorded settings this build's compiler knows, and
  the names it does not (a reproducer applies one build's settings to the other build);
- `environment()`: the versions a reproducer's environment records; `build_path()`: where
  this process imported the compiler from (a reproducer prints it, so its user sees which
  checkout ran; never recorded in a report);
- `WORK_REGIONS` and `compile_in_regions(program, inputs, values, region)`: one compile with
  each region inside the caller's `region(name)` context, so a reproducer under callgrind
  counts instructions per region (spyre_sim: per stage; Inductor: the whole compile;
  torch-spyre: per stage and pass, a stage entered once per slice of it);
- `EXECUTES` (optional, True when absent): whether a compiled program can run here at all
  (torch-spyre's needs a card: its compile is measured, its outputs and host time are not);
- `COMPANIONS` (optional): modules of this folder the backend loads beside it by name (the
  reproducer embeds them with it);
- `GRAPH_PROGRAMS` (optional, True when absent): whether a program given as its ATen graph
  (`graph`: the minimizer's candidates, a report's program) compiles as the workload it came
  from; where not (torch-spyre), the investigation measures the catalogue's own program and
  does not minimize.

A reproducer embeds the backend module's source and loads it as a module, so the module is
also what a maintainer runs: it imports nothing of this project at module level.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, NamedTuple, Protocol


class Knob(Protocol):
    """One switchable decision: its name in the backend's config, the stage that makes it,
    its choices and its default."""

    name: str
    stage: str
    choices: tuple[Any, ...]
    default: Any


class Execution(Protocol):
    """One call of a compiled program: its outputs, the host's seconds, and the device's
    microseconds where the backend has a device clock (None where it has not); where it
    models a device, its kernels and a Chrome trace; where it checks its outputs, which
    kernel first produced a NaN or inf (as text).

    `kernels` are the compiler's own records, each with the fields of the probe protocol's
    `KernelTime` (`name`, `time_us`, `bound`, `cores`; regressions/probing/protocol.py),
    which the probe reads them into: a backend module imports nothing of this tool. A kernel
    the backend's model cannot time has a NaN `time_us` and a name that says why."""

    outputs: tuple[Any, ...]
    host_s: float
    device_us: float | None
    kernels: Sequence[Any]
    trace: dict | None
    nonfinite: str | None


class Compiled(Protocol):
    """A compiled program: what each stage took to compile it, a way to call it, and what
    its numerics are judged against."""

    compile_s: Mapping[str, float]

    def run(self, *inputs: Any) -> Execution: ...

    def baselines(self, *inputs: Any) -> tuple[Any, Any, Any]:
        """The first output in float64, eagerly in the backend's storage format, and in IEEE
        fp16 (None where the backend has no such baseline)."""

    def stage_outputs(self, *inputs: Any) -> dict[str, tuple[Any, ...]]:
        """Outputs of each stage whose artifact can execute on its own (per-stage numerics);
        empty where only the final code runs."""


class Backend(Protocol):
    """A compiler under test, as a module (see the module text)."""

    NAME: str
    STAGES: tuple[str, ...]
    DEVICE_CLOCK: bool
    SCOPES_KNOBS: bool
    QUIET: Mapping[str, Any]
    INDEPENDENT: Mapping[str, Any]

    def knobs(self) -> Sequence[Knob]: ...

    def compile(self, program: Any, inputs: Sequence[Any],
                values: Mapping[str, Any] | None = None) -> Compiled: ...

    def graph(self, program: Any, inputs: Sequence[Any]) -> tuple[Any, list[Any]]: ...

    def reference(self, program: Any, inputs: Sequence[Any]) -> tuple[Any, ...]: ...

    def capture(self, program: Any, inputs: Sequence[Any], values: Mapping[str, Any] | None,
                out_dir: Path) -> Path: ...

    def settings(self, values: Mapping[str, Any] | None = None) -> dict[str, Any]: ...

    def known_settings(self, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]: ...

    def environment(self) -> dict[str, str]: ...

    def build_path(self) -> str: ...

    WORK_REGIONS: tuple[str, ...]

    def compile_in_regions(self, program: Any, inputs: Sequence[Any],
                           values: Mapping[str, Any] | None,
                           region: Callable[[str], AbstractContextManager[Any]]) -> None: ...


# The backends this tree ships, by the name a request gives, as file names in this package.
MODULES = {"spyre_sim": "spyre.py", "inductor": "inductor.py", "torch_spyre": "torch_spyre.py"}


def load(name: str) -> Backend:
    """Backend `name` imported in this process (the tool's own compiler, not a commit's):
    for what the tools do with a program before any probe runs, like the minimizer's start."""
    import importlib

    return importlib.import_module(f"backends.{module_path(name).stem}")


class Wording(NamedTuple):
    """How a report names a backend's baselines and settings. Kept here, beside `MODULES`,
    so a report renders without importing the backend (and torch with it)."""

    eager: str  # what numerics' RMSE ratio divides by, short: "× eager DLFloat16's RMSE"
    eager_run: str  # the same, as a definition says it
    config: str  # where the backend's knobs live
    setting: str  # one knob set as a user writes it, a format of `name` and `value`

    def knob_setting(self, name: str, value: Any) -> str:
        return self.setting.format(name=name, value=value)


WORDING: dict[str, Wording] = {
    "spyre_sim": Wording("eager DLFloat16", "the program run eagerly in DLFloat16, the "
                         "device's format", "Config", "Config({name}={value!r})"),
    # Inductor's RMSE ratio is against eager in the program's own dtypes (backends/inductor.py
    # `Compiled.baselines`); its knobs are `torch._inductor.config` entries.
    "inductor": Wording("eager PyTorch", "the program run eagerly by PyTorch in its own "
                        "dtypes", "torch._inductor.config",
                        "torch._inductor.config.{name} = {value!r}"),
    # torch-spyre's programs do not run here (no card): no eager baseline is ever quoted
    "torch_spyre": Wording("eager PyTorch", "the program run eagerly by PyTorch in its own "
                           "dtypes", "torch_spyre._inductor.config",
                           "torch_spyre._inductor.config.{name} = {value!r}"),
}


def wording(name: str) -> Wording:
    """How reports name backend `name`'s baselines and settings."""
    module_path(name)  # an unknown name fails here, with the known ones
    return WORDING[name]


def companion_paths(name: str) -> dict[str, Path]:
    """The modules backend `name` loads beside it (`COMPANIONS`), by module name: read from
    its source, so nothing is imported."""
    import ast

    for node in ast.parse(module_path(name).read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "COMPANIONS"
                                                for t in node.targets):
            names = ast.literal_eval(node.value)
            return {n: module_path(name).with_name(f"{n}.py") for n in names}
    return {}


def load_file(name: str, path: Path) -> Any:
    """The module at `path`, imported under the bare `name` and registered in `sys.modules`:
    a backend's companions import one another by bare name, as they do beside a suite's
    benchmarks, and a dataclass under future annotations looks its module up there."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"no Python module at {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def module_path(name: str) -> Path:
    """The file of backend `name`, for a probe to load by path; a clear error otherwise."""
    if name not in MODULES:
        raise ValueError(f"unknown backend {name!r}; known: {', '.join(sorted(MODULES))}")
    return Path(__file__).with_name(MODULES[name])
