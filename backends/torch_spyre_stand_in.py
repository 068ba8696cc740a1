"""A pure-Python stand-in for torch-spyre's closed C extension, `torch_spyre._C`.

torch-spyre's compiler front half - Dynamo, AOT Autograd, its FX and pre-scheduling passes,
scheduling and SDSC codegen - is Python, but its modules import `torch_spyre._C`, which
`setup.py` always builds against closed runtime libraries. This module provides what a
compile calls, so the front half runs on a CPU with no Spyre card; it is written for this
tool from the extension's public interface (`torch_spyre/_C.pyi`, the open C++ that binds
it), and copies none of it.

It is installed only where the real extension is absent (`install`): a finder at the end of
`sys.meta_path` answers `import torch_spyre._C` when no built extension sits in the package.

What it provides, and how faithfully:
- **No device.** `device_count()` is 0: with one device, Inductor's pattern set-up
  allocates a real `spyre` tensor, and FakeTensorMode avoids device allocation only when the
  backend reports none.
- **The data model** (`torch_spyre_layout.py`, beside this file): the enums
  `DataFormats`, `ElementArrangement`, `SymbolicArgKind`, with pybind11's spelling (`str()` is
  `DataFormats.SEN169_FP16`: generated code embeds it) and a hash of the value, so set order
  does not change with the interpreter's string-hash seed; `SpyreTensorLayout`, the open
  layout logic of `csrc/spyre_tensor_impl.cpp` with its three constructors, equality, hash,
  pickling and the `repr` that generated code evaluates; the dtype tables of the open
  `csrc/types_mapping.h`; the layout a tensor records.
- **GUESSED values** (closed headers, marked `GUESS` where defined and listed in `GUESSED`):
  the stick size of each data format but IEEE_INT32, the constant encoding of
  `encode_constant` for 16-bit formats, `AIUPTI_ACTIVITY_NAME_MAX_BYTES`.
- **No-op runtime calls** a compile makes: `start_runtime`, `set_device`, the logging
  configuration, `prepare_kernel` (a plan that cannot launch), kernel provenance records.
- **Compile-time device ops**: `aten::empty.memory_format` and `aten::empty_strided` on the
  device return host tensors (a graph's constant folding fills one at compile time), and
  `fill_tensor`/`copy_tensor` work on those.
- **`spyre::` op schemas** that trees near torch 2.13's upgrade expected the C++ to define
  (`broadcast_async`, `wait_work`, `all_gather_async`, `all_reduce_async`), defined only
  when nothing defined them.

Anything else - streams, device copies, RNG, collectives, launching a kernel - needs the
device runtime and raises an error naming the symbol (`NeedsDevice`); a name the stand-in
does not have at all is an AttributeError naming it, so `from torch_spyre._C import X`
fails as it would against an old build.
"""

from __future__ import annotations

import ast
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
# torch is imported where the stand-in is used, never at import: a `.pth` line imports this
# module in every interpreter of an environment torch-spyre is installed in (pip's included).
try:  # installed beside this module (a wheel, a .pth install) or embedded with it
    import torch_spyre_layout as layout
except ImportError:  # loaded by path from spyre-regress's backends/ folder
    _spec = importlib.util.spec_from_file_location(
        "torch_spyre_layout", Path(__file__).with_name("torch_spyre_layout.py"))
    assert _spec is not None and _spec.loader is not None
    layout = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = layout
    _spec.loader.exec_module(layout)

VERSION = 1  # what a failure's class and the names check record beside a result
MODULE_NAME = "torch_spyre._C"

# Values that stand in for closed ones: each is a guess, marked where it is defined.
GUESSED = {
    "DataFormats.elems_per_stick": "128-byte sticks divided by the element size of each "
                                   "format (the closed dataFormatToStickSize); IEEE_INT32's "
                                   "32 is open code",
    "encode_constant": "16-bit formats as DLFloat16 (1 sign, 6 exponent bits with bias 31, "
                       "9 mantissa bits, round to nearest even; the closed FloatToFp16Bin)",
    "AIUPTI_ACTIVITY_NAME_MAX_BYTES": "256 (a closed header's constant)",
}


class NeedsDevice(RuntimeError):
    """A `_C` call that only the Spyre device runtime can answer."""


def _needs_device(name: str):
    def call(*args: Any, **kwargs: Any) -> Any:
        raise NeedsDevice(f"torch_spyre._C.{name} needs the Spyre device runtime; this is "
                          "spyre-regress's CPU stand-in for torch-spyre's C extension, which "
                          "compiles without a card but runs nothing (install a real "
                          "torch-spyre build on a machine with a card to run it)")
    call.__name__ = name
    return call


AIUPTI_ACTIVITY_NAME_MAX_BYTES = 256  # GUESS: a closed header's constant

_DOWNCAST_WARNING = [True]


def get_downcast_warning() -> bool:
    return _DOWNCAST_WARNING[0]


def set_downcast_warning(enabled: bool) -> None:
    _DOWNCAST_WARNING[0] = bool(enabled)


def device_count() -> int:
    return 0


def current_device() -> int:
    return 0


def set_device(index: int) -> None:
    """No device to select; the index is accepted and ignored."""


def start_runtime() -> None:
    """No runtime to start: compiling needs none."""


def free_runtime() -> None:
    """No runtime to free."""


def synchronize(device: Any = None) -> None:
    """Nothing runs, so there is nothing to wait for."""


class JobPlan:
    """What `prepare_kernel` returns: the kernel's directory, with no steps to launch."""

    __module__ = MODULE_NAME

    def __init__(self, spyrecode_dir: str) -> None:
        self.spyrecode_dir = spyrecode_dir

    def num_steps(self) -> int:
        return 0

    def job_allocation_size(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"JobPlan(stand-in, {self.spyrecode_dir!r})"


def prepare_kernel(spyrecode_dir: str, stream: Any = None, profiler_name: str | None = None
                   ) -> JobPlan:
    return JobPlan(spyrecode_dir)


_PROVENANCE: dict[str, list[str]] = {}


def register_kernel_provenance(event_base_name: str, debug_handle_ids: Sequence[str]) -> bool:
    _PROVENANCE[event_base_name] = list(debug_handle_ids)
    return True


def lookup_kernel_provenance(key: str) -> list[str] | None:
    return _PROVENANCE.get(key)


def kernel_provenance_registry_stats() -> dict[str, int]:
    return {"entries": len(_PROVENANCE), "hits": 0, "misses": 0, "conflicts": 0}


def fill_tensor(tensor: torch.Tensor, value: float) -> torch.Tensor:
    """Fill a tensor the stand-in's device allocation returned (a host tensor)."""
    return tensor.fill_(value)


def copy_tensor(source: torch.Tensor, destination: torch.Tensor,
                non_blocking: bool = False) -> None:
    destination.copy_(source.to(destination.device))


class _Logging:
    """`_C._logging`: the C++ side's log configuration, kept and never used."""

    class LogLevel(layout._PybindEnum):
        NOTSET = 0
        DEBUG = 10
        INFO = 20
        WARNING = 30
        ERROR = 40
        CRITICAL = 50

    class LoggingConfig:
        _instance: Any = None

        def __init__(self) -> None:
            self.levels: dict[str, Any] = {}
            self.path = ""

        @classmethod
        def instance(cls) -> Any:
            if cls._instance is None:
                cls._instance = cls()
            return cls._instance

        def initialize_from_python(self, config: dict) -> None:
            self.levels = dict(config)

        def get_log_level(self, component: str) -> Any:
            return self.levels.get(component, _Logging.LogLevel.WARNING)

        def set_log_level(self, component: str, level: Any) -> None:
            self.levels[component] = level

        def is_enabled(self, component: str, level: Any) -> bool:
            return False

        def get_components(self) -> list[str]:
            return sorted(self.levels)

        def set_log_file(self, path: str) -> None:
            self.path = path

    @staticmethod
    def log_level_to_string(level: Any) -> str:
        return getattr(level, "name", str(level))

    @staticmethod
    def string_to_log_level(level_str: str) -> Any:
        return getattr(_Logging.LogLevel, level_str.upper())


_logging = _Logging


class NativePermutationLayoutSolver:
    """The scratchpad layout packer's C++ accelerator, answered by the checkout's own Python
    `PermutationBasedLayoutSolver`, which upstream keeps canonical and says the native one
    reproduces bit for bit (only the `simulated_annealing` layout solver uses it)."""

    __module__ = MODULE_NAME

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from torch_spyre._inductor.scratchpad.permutation_layout import (
            PermutationBasedLayoutSolver,
        )

        return PermutationBasedLayoutSolver(*args, **kwargs)

# What generated code and eager paths import by name, which only the device can run.
DEVICE_ONLY = ("empty_with_layout", "spyre_empty_with_layout", "as_strided_with_layout",
              "reinterpret_tensor", "reinterpret_tensor_with_layout", "to_with_layout",
              "launch_jobplan", "get_stream_from_pool", "current_stream", "default_stream",
              "set_current_stream", "_get_default_generator", "createSpyreCCLBackend",
              "extract_kernel_provenance_key", "get_device_state")
globals().update({name: _needs_device(name) for name in DEVICE_ONLY})


# The spyre:: op schemas some trees expected the extension to define (their C++
# TORCH_LIBRARY(spyre, ...)); defined here only when no one else did.
_SCHEMAS = {
    "broadcast_async": "broadcast_async(Tensor input, int src_rank, str group_name) -> Tensor",
    "wait_work": "wait_work(Tensor(a!) tensor) -> Tensor(a)",
    "all_gather_async": 'all_gather_async(Tensor input, SymInt group_size=1, '
                        'str group_name="default") -> Tensor',
    "all_reduce_async": 'all_reduce_async(Tensor(a!) input, str reduce_op="sum", '
                        'str group_name="default") -> Tensor(a)',
}
_LIBRARIES: list[Any] = []  # a torch.library.Library unregisters itself when collected


def _define_missing_schemas() -> None:
    import torch

    missing = [name for name in _SCHEMAS if not _schema_exists(f"spyre::{name}")]
    if missing:
        library = torch.library.Library("spyre", "FRAGMENT")
        for name in missing:
            library.define(_SCHEMAS[name])
        _LIBRARIES.append(library)


def _schema_exists(qualified: str) -> bool:
    import torch

    try:
        torch._C._dispatch_find_schema_or_throw(qualified, "")
    except RuntimeError:
        return False
    return True


def _register_device() -> None:
    """The PrivateUse1 hooks and device guard the extension registers in C++: built, but no
    device available. Without a guard any op on a `spyre` tensor fails ("PyTorch is not
    linked with support for spyre devices")."""
    import torch

    class NoDeviceHooks(torch._C._acc.PrivateUse1Hooks):
        def is_available(self) -> bool:
            return False

        def has_primary_context(self, device_index: int) -> bool:
            return False

        def is_built(self) -> bool:
            return True

    class DeviceGuard(torch._C._acc.DeviceGuard):
        def type_(self) -> Any:
            return torch._C._autograd.DeviceType.PrivateUse1

    hooks, guard = NoDeviceHooks(), DeviceGuard()
    torch._C._acc.register_python_privateuseone_hook(hooks)
    torch._C._acc.register_python_privateuseone_device_guard(guard)
    _LIBRARIES.extend((hooks, guard))  # kept alive for the process


def _register_host_allocation() -> None:
    """`aten::empty.memory_format` and `aten::empty_strided` on the device, as host tensors:
    a graph's constant folding (a uniform `full`) allocates at compile time."""
    import torch

    library = torch.library.Library("aten", "IMPL")

    def empty(size, dtype=None, layout=None, device=None, pin_memory=None,
              memory_format=None):
        return torch.empty(size, dtype=dtype)

    def empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
        return torch.empty_strided(size, stride, dtype=dtype)

    for op, kernel in (("empty.memory_format", empty), ("empty_strided", empty_strided)):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{op}", "PrivateUse1"):
            library.impl(op, kernel, "PrivateUse1")
    _LIBRARIES.append(library)


# Every name the stand-in's `torch_spyre._C` answers: what the names check compares with a
# checkout's imports.
PROVIDED = (
    "DataFormats", "ElementArrangement", "SymbolicArgKind", "SymbolicArg", "SpyreTensorLayout",
    "JobPlan", "get_device_dtype", "get_elem_in_stick", "encode_constant",
    "get_spyre_tensor_layout", "set_spyre_tensor_layout", "AIUPTI_ACTIVITY_NAME_MAX_BYTES",
    "get_downcast_warning", "set_downcast_warning", "device_count", "current_device",
    "set_device", "start_runtime", "free_runtime", "synchronize", "prepare_kernel",
    "register_kernel_provenance", "lookup_kernel_provenance",
    "kernel_provenance_registry_stats", "fill_tensor", "copy_tensor", "_logging",
    "NativePermutationLayoutSolver",
    *DEVICE_ONLY,
)


def _missing(name: str) -> Any:
    raise AttributeError(f"module 'torch_spyre._C' (spyre-regress's CPU stand-in for "
                         f"torch-spyre's C extension) has no attribute {name!r}")


# --- which `_C` names a checkout uses -------------------------------------------------------

# generated code imports from the extension in strings: `from torch_spyre._C import a, b`
_IMPORT_TEXT = re.compile(r"from torch_spyre\._C import ([\w ,]+?)(?: as \w+)?(?:[\"'\\]|$)",
                          re.M)


def imported_names(package: Path) -> dict[str, list[str]]:
    """Each `torch_spyre._C` name the Python of `package` (a checkout's `torch_spyre/`) uses,
    with the files that use it: names imported from the extension (also inside strings,
    as generated code does), and attributes read from a name bound to it (`_C.x`,
    `self._C.x`; torch's own `torch._C` excluded)."""
    used: dict[str, set[str]] = {}

    def note(name: str, path: Path) -> None:
        used.setdefault(name, set()).add(str(path.relative_to(package.parent)))

    for path in sorted(package.rglob("*.py")):
        text = path.read_text(errors="replace")
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        module = path.relative_to(package.parent).with_suffix("").parts
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and _imported_from(node, module) == MODULE_NAME:
                for alias in node.names:
                    note(alias.name, path)
            elif isinstance(node, ast.Attribute) and _names_extension(node.value):
                note(node.attr, path)
        for found in _IMPORT_TEXT.finditer(text):
            for name in found.group(1).split(","):
                if name.strip():
                    note(name.strip().split()[0], path)
    return {name: sorted(files) for name, files in sorted(used.items())}


def _imported_from(node: ast.ImportFrom, module: tuple[str, ...]) -> str:
    """The absolute name of the module a `from ... import` in `module` reads from (a
    relative import resolved against the module's package)."""
    if not node.level:
        return node.module or ""
    package = module[:-1]  # a module's package; a package's own __init__ is in it too
    base = package[:len(package) - node.level + 1]
    return ".".join([*base, *([node.module] if node.module else [])])


def _names_extension(value: ast.expr) -> bool:
    """`_C` or `<something but torch>._C`: a name the extension was bound to."""
    if isinstance(value, ast.Name):
        return value.id == "_C"
    return (isinstance(value, ast.Attribute) and value.attr == "_C"
            and not (isinstance(value.value, ast.Name) and value.value.id == "torch"))


def missing_names(package: Path) -> dict[str, list[str]]:
    """The names of `imported_names` this stand-in does not provide, with their files."""
    return {n: files for n, files in imported_names(package).items() if n not in PROVIDED}


def is_stand_in(module: Any) -> bool:
    """Whether `module` (an imported `torch_spyre._C`) is this stand-in, not a real build."""
    return bool(getattr(module, "IS_STAND_IN", False))


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers `import torch_spyre._C` with the stand-in, after every other finder."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != MODULE_NAME:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, origin=globals().get(
            "__file__", "spyre-regress stand-in"))

    def create_module(self, spec: Any) -> Any:
        return None  # the default module object

    def exec_module(self, module: Any) -> None:
        module.__doc__ = __doc__
        namespace = {**vars(layout), **globals()}
        for name in PROVIDED:
            setattr(module, name, namespace[name])
        module.IS_STAND_IN = True
        module.__getattr__ = _missing
        _register_device()
        _define_missing_schemas()
        _register_host_allocation()


def install() -> None:
    """Put the stand-in behind every other finder, once: a built `_C` in the torch_spyre
    package is found first and used."""
    if not any(isinstance(finder, _StandInFinder) for finder in sys.meta_path):
        sys.meta_path.append(_StandInFinder())
