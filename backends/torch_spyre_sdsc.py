"""torch-spyre's compiled program read for spyre_sim's timing model: the SDSC of every kernel
as the kernel description the cost model prices, and the generated wrapper as the timeline.

A torch-spyre compile hands its backend compiler one directory per kernel (a bundle):
`sdsc_N.json`, one op each, and `bundle.mlir`, which executes them in order, some inside
`scf.for` loops (coarse tiling). The wrapper Inductor generates (`output_code.py`) launches
the bundles in order, with CPU fallbacks between them. This module reads the three texts
into plain records, standard library only (`read_bundle`, `read_wrapper`), and prices them
with spyre_sim's one cost model (`spyre_sim.cost.kernel_cost` with `DeviceParams`) and its
timeline (`spyre_sim.timeline.run_record`), imported where a price is asked for (`price`):
spyre_sim is this tool's own package, installed with spyre-regress; a written-out suite
carries a copy of it (`spyre-regress suite`), so the backend module still imports nothing
of the tool at module level.

What each SDSC field becomes, and what is guessed, is docs/torch-spyre-device-time.md's
subject. An op the reader cannot describe is never priced at zero: it is a row named
"unmodelled kernel: <op> (<reason>)", counted, with no time.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

READER_VERSION = 1  # what an SDSC becomes; recorded beside every figure priced from it
SDSC_FILE = re.compile(r"^sdsc_(?P<index>\d+)\.json$")
EXECUTE = re.compile(r'sdscbundle\.sdsc_execute\b.*?sdsc_filename="(?P<file>[^"]+)"')
LOOP = re.compile(r"\bscf\.for\s+%\S+\s*=\s*\S+\s+to\s+%(?P<bound>[\w.]+)")
BOUND = re.compile(r"%(?P<name>[\w.]+)\s*=\s*arith\.constant\s+(?P<value>\d+)\s*:\s*index")
FALLBACK_SUFFIXES = ("_cpu", "_fallback")  # torch-spyre's spyre::*_cpu and *_int64_fallback
STICK_BYTES = 128  # torch-spyre's BYTES_IN_STICK: host<->device copies move whole sticks
GUESSED_ELEMENT_BYTES = 2  # a fallback buffer the wrapper gives no dtype for: float16 (GUESS)


class Unmodelled(Exception):
    """The reader cannot describe an op for the cost model; `reason` says why."""

    def __init__(self, op: str, reason: str) -> None:
        super().__init__(f"unmodelled kernel: {op} ({reason})")
        self.op, self.reason = op, reason


# --- reading an SDSC --------------------------------------------------------------------------

@dataclass(frozen=True)
class Tensor:
    """One labeled data structure of an op: its role (`dsType_`: INPUT, KERNEL, OUTPUT), where
    it lives (`component_`: hbm or lx), bytes per element (`wordLength`) and its extent per
    dim in elements, whole sticks included (the product of its `coordInfo` folds)."""

    role: str
    memory: str
    word_bytes: int
    extents: tuple[tuple[str, int], ...]
    output: bool

    @property
    def elements(self) -> int:
        return math.prod(size for _, size in self.extents)

    @property
    def nbytes(self) -> int:
        return self.elements * self.word_bytes


@dataclass(frozen=True, kw_only=True)
class SdscOp:
    """One `sdsc_N.json`: the op (`opFuncName`), its execution unit (`exUnit`: pt, the PE
    array, or sfp, the vector unit), cores (`numCoresUsed_`), iteration space (`N_`), work
    slices per dim (`numWkSlicesPerDim_`) and tensors; `symbolic` when a dim's size is bound
    at run time (`dimToSymbolMapping_`)."""

    file: str
    op: str
    unit: str
    cores: int
    dims: tuple[tuple[str, int], ...]
    splits: tuple[tuple[str, int], ...]
    tensors: tuple[Tensor, ...]
    symbolic: bool = False

    @property
    def volume(self) -> int:
        return math.prod(size for _, size in self.dims)


def _extent(coordinate: Mapping[str, Any]) -> int:
    return math.prod(int(a["factor_"]) for a in coordinate["folds"]["dim_prop_attr"])


def _indices(names: Iterable[str]) -> set[int]:
    return {int(re.findall(r"\d+", name)[0]) for name in names}


def read_sdsc(document: Mapping[str, Any], file: str) -> SdscOp:
    """One SDSC document as an `SdscOp`. Raises Unmodelled naming the missing key."""
    try:
        ((key, entry),) = document.items()
        ((opfunc, body),) = entry["dscs_"][0].items()
        compute = body["computeOp_"][0]
        outputs = _indices(compute["outputLabeledDs"])
        nodes = {node["ldsIdx_"]: node for node in body["scheduleTree_"]
                 if node.get("nodeType_") == "allocate"}
        tensors = tuple(Tensor(
            role=str(ds["dsType_"]), memory=str(nodes[ds["ldsIdx_"]]["component_"]),
            word_bytes=int(ds["wordLength"]),
            extents=tuple((str(dim), _extent(info)) for dim, info in
                          nodes[ds["ldsIdx_"]]["coordinates_"]["coordInfo"].items()),
            output=ds["ldsIdx_"] in outputs) for ds in body["labeledDs_"])
        dims = tuple((name[:-1], int(size)) for name, size in body["N_"].items()
                     if name.endswith("_") and name != "name_" and isinstance(size, int))
        return SdscOp(
            file=file, op=str(compute.get("opFuncName", opfunc)), unit=str(compute["exUnit"]),
            cores=int(entry["numCoresUsed_"]), dims=dims,
            splits=tuple((str(d), int(n)) for d, n in entry["numWkSlicesPerDim_"].items()),
            tensors=tensors, symbolic="dimToSymbolMapping_" in body)
    except (KeyError, IndexError, TypeError, ValueError) as error:
        name = next(iter(document), file) if isinstance(document, Mapping) else file
        raise Unmodelled(str(name), f"unreadable SDSC, {type(error).__name__}: {error}") \
            from error


def execution_order(mlir: str) -> list[tuple[str, int]]:
    """`bundle.mlir`'s SDSC files in execution order, each with how many times it runs (the
    product of the trip counts of the `scf.for` loops around it)."""
    bounds = {m["name"]: int(m["value"]) for m in BOUND.finditer(mlir)}
    order, trips = [], [1]
    for line in mlir.splitlines():
        loop = LOOP.search(line)
        if loop:
            trips.append(trips[-1] * bounds.get(loop["bound"], 1))
        elif line.strip() == "}" and len(trips) > 1:
            trips.pop()
        executed = EXECUTE.search(line)
        if executed:
            order.append((executed["file"], trips[-1]))
    return order


@dataclass(frozen=True)
class Executed:
    """One execution of an SDSC in a kernel: the op read (None where it could not be), how
    many times the bundle runs it, and why it is unmodelled where it is."""

    kernel: str
    key: str  # the SDSC's own key, `<index>_<op>`
    op: SdscOp | None
    repeats: int = 1
    reason: str | None = None

    @property
    def name(self) -> str:
        return f"{self.kernel}/{self.key}"


def read_bundle(directory: Path, kernel: str) -> tuple[Executed, ...]:
    """Every SDSC execution of one kernel directory, in `bundle.mlir`'s order (the files'
    index order where the bundle names none)."""
    files = {p.name: p for p in Path(directory).glob("sdsc_*.json") if SDSC_FILE.match(p.name)}
    mlir = Path(directory, "bundle.mlir")
    order = execution_order(mlir.read_text()) if mlir.is_file() else []
    if not order:
        order = [(n, 1) for n in sorted(files, key=lambda n: int(re.sub(r"\D", "", n)))]
    executed = []
    for name, repeats in order:
        if name not in files:
            executed.append(Executed(kernel, name, None, repeats,
                                     reason="not in the kernel directory"))
            continue
        try:
            document = json.loads(files[name].read_text())
        except ValueError as error:
            executed.append(Executed(kernel, name, None, repeats,
                                     reason=f"unreadable JSON: {error}"))
            continue
        key = next(iter(document), name) if isinstance(document, dict) else name
        try:
            executed.append(Executed(kernel, str(key), read_sdsc(document, name), repeats))
        except Unmodelled as missing:
            executed.append(Executed(kernel, str(key), None, repeats, reason=missing.reason))
    return tuple(executed)


# --- the wrapper ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Launch:
    """A kernel launch (`<kernel>.run(...)`); `unimplemented` names the op torch-spyre
    compiled to a runtime exception instead of a bundle."""

    kernel: str
    unimplemented: str | None = None


@dataclass(frozen=True)
class HostCall:
    """An op the wrapper calls outside a kernel: a CPU fallback (its inputs copied to the host,
    the op run there, its result copied back) or an op torch-spyre runs eagerly on the device,
    with no SDSC in the compile (`on_cpu` False)."""

    op: str
    input_bytes: tuple[int, ...]
    output_bytes: int
    elements: int
    on_cpu: bool


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Statements in execution order, nested blocks (`with`, `if`) flattened."""
    for statement in body:
        nested = [b for name in ("body", "orelse") for b in getattr(statement, name, [])
                  if isinstance(b, ast.stmt)]
        if nested and not isinstance(statement, ast.FunctionDef | ast.ClassDef):
            yield from _statements(nested)
        else:
            yield statement


def _literal(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


@dataclass
class _Buffers:
    """What the wrapper says of each buffer: its device bytes where it allocates it with a
    layout (`spyre_empty_with_layout`), else its shape (`assert_size_stride`)."""

    nbytes: dict[str, int] = field(default_factory=dict)
    elements: dict[str, int] = field(default_factory=dict)

    def note(self, call: ast.Call, target: str | None) -> None:
        name = _dotted(call.func).rsplit(".", 1)[-1]
        if name == "assert_size_stride" and len(call.args) >= 2:
            buffer, shape = _dotted(call.args[0]), _literal(call.args[1])
            if buffer and isinstance(shape, tuple) and buffer not in self.nbytes:
                self.elements[buffer] = math.prod(shape)
                self.nbytes[buffer] = _stick_bytes(shape, GUESSED_ELEMENT_BYTES)
        elif name == "spyre_empty_with_layout" and target and len(call.args) >= 4:
            shape = _literal(call.args[0])
            itemsize = 4 if _dotted(call.args[2]).endswith(("float32", "int32")) else 2
            device = [k.value for a in call.args[3:] if isinstance(a, ast.Call)
                      for k in a.keywords if k.arg == "device_size"]
            sizes = _literal(device[0]) if device else None
            if isinstance(shape, tuple):
                self.elements[target] = math.prod(shape)
            self.nbytes[target] = (math.prod(sizes) * itemsize if isinstance(sizes, list)
                                   else _stick_bytes(shape or (1,), itemsize))


def _stick_bytes(shape: Sequence[int], itemsize: int) -> int:
    rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
    row_bytes = (shape[-1] if shape else 1) * itemsize
    return rows * -(-row_bytes // STICK_BYTES) * STICK_BYTES


def _defined_kernels(tree: ast.Module) -> dict[str, str | None]:
    """Kernels the wrapper defines (`X = async_compile.sdsc('X', [...])`), each with the op of
    an `UnimplementedOp` in it, if any."""
    kernels: dict[str, str | None] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) \
                and _dotted(node.value.func).endswith(".sdsc"):
            unimplemented = [k.value for c in ast.walk(node.value) if isinstance(c, ast.Call)
                             and _dotted(c.func).endswith("UnimplementedOp")
                             for k in c.keywords if k.arg == "op"]
            op = _literal(unimplemented[0]) if unimplemented else None
            for target in node.targets:
                kernels[_dotted(target)] = None if op is None else str(op)
    return kernels


def read_wrapper(text: str, fallbacks: Iterable[str] = ()) -> tuple[Launch | HostCall, ...]:
    """The device program of one generated wrapper, in order: kernel launches and the ops it
    calls outside kernels. `fallbacks` are the ops torch-spyre runs on the CPU (its
    `fallback_ops`, as `aten.sin.default`); spyre:: ops named `*_cpu` or `*_fallback` are too.
    A host call's result size is the shape the wrapper asserts for its result buffer."""
    tree = ast.parse(text)
    kernels = _defined_kernels(tree)
    on_cpu = set(fallbacks)
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "call"]
    buffers, steps = _Buffers(), list[Launch | HostCall]()
    results: dict[str, int] = {}  # buffer -> the host call (index in steps) that made it
    for statement in _statements(calls[0].body if calls else []):
        value = getattr(statement, "value", None)
        target = (_dotted(statement.targets[0]) if isinstance(statement, ast.Assign)
                  and statement.targets else "")
        if isinstance(value, ast.Name) and value.id in results and target:
            results[target] = results[value.id]  # `buf1 = buf0`: the same result
        if not isinstance(value, ast.Call):
            continue
        function = _dotted(value.func)
        buffers.note(value, target)
        if function.endswith(".run") and function[:-4] in kernels:
            steps.append(Launch(function[:-4], kernels[function[:-4]]))
        elif function.startswith("torch.ops."):
            op = function.removeprefix("torch.ops.")
            args = [_dotted(a) for a in value.args if _dotted(a) in buffers.nbytes]
            cpu = op in on_cpu or op.rsplit(".", 1)[0].endswith(FALLBACK_SUFFIXES)
            steps.append(HostCall(op, tuple(buffers.nbytes[a] for a in args), 0, 0,
                                  on_cpu=cpu))
            if target:
                results[target] = len(steps) - 1
        elif function.endswith("assert_size_stride") and value.args:
            buffer = _dotted(value.args[0])
            made = steps[results[buffer]] if buffer in results else None
            if isinstance(made, HostCall) and buffer in buffers.nbytes:
                steps[results[buffer]] = replace(made, output_bytes=buffers.nbytes[buffer],
                                                 elements=buffers.elements[buffer])
    return tuple(steps)


# --- the device program and its price ---------------------------------------------------------

@dataclass(frozen=True)
class DeviceProgram:
    """What one compile produced for the device: the wrapper's steps in order, and each
    launched kernel's SDSC executions, by kernel name."""

    steps: tuple[Launch | HostCall, ...]
    kernels: Mapping[str, tuple[Executed, ...]]


def joined(programs: Sequence[DeviceProgram]) -> DeviceProgram:
    """The programs of a compile's graphs (Dynamo splits a program at graph breaks) run one
    after another; kernel names are prefixed with their graph's place when there are several."""
    if len(programs) == 1:
        return programs[0]
    steps: list[Launch | HostCall] = []
    kernels: dict[str, tuple[Executed, ...]] = {}
    for index, program in enumerate(programs):
        def named(kernel: str, index: int = index) -> str:
            return f"graph{index}/{kernel}"
        steps += [replace(s, kernel=named(s.kernel)) if isinstance(s, Launch) else s
                  for s in program.steps]
        kernels.update({named(k): tuple(replace(e, kernel=named(k)) for e in ex)
                        for k, ex in program.kernels.items()})
    return DeviceProgram(tuple(steps), kernels)


# --- collecting a compile's texts -------------------------------------------------------------

class Collector:
    """While entered (inside a torch-spyre compile's process, its package imported), notes the
    kernel directories each graph's code generation writes (torch-spyre's
    `async_compile.get_output_dir`) and the graph whose wrapper they belong to (Inductor's
    `GraphLowering.compile_to_module`); `read()`, called while the compile's cache directory
    still exists, reads them into `program`. A program that cannot be read keeps the error,
    and the compile itself goes on."""

    def __init__(self) -> None:
        self.graphs: list[tuple[Any, list[tuple[str, Path]]]] = []
        self.program: DeviceProgram | None = None
        self.error: str | None = None
        self._saved: tuple[Any, Any] | None = None

    def __enter__(self) -> Collector:
        from torch._inductor.graph import GraphLowering
        from torch_spyre.execution import async_compile

        made: list[tuple[str, Path]] = []
        output_dir, compile_to_module = (async_compile.get_output_dir,
                                         GraphLowering.__dict__["compile_to_module"])

        def get_output_dir(kernel: str) -> str:
            path = output_dir(kernel)
            made.append((kernel, Path(path)))
            return path

        def compile_graph(graph: Any) -> Any:
            start = len(made)
            module = compile_to_module(graph)
            self.graphs.append((graph, made[start:]))
            return module

        async_compile.get_output_dir = get_output_dir
        GraphLowering.compile_to_module = compile_graph  # type: ignore[method-assign,assignment]
        self._saved = (output_dir, compile_to_module)
        return self

    def __exit__(self, *exc: object) -> None:
        from torch._inductor.graph import GraphLowering
        from torch_spyre.execution import async_compile

        if self._saved is not None:
            async_compile.get_output_dir = self._saved[0]
            GraphLowering.compile_to_module = self._saved[1]  # type: ignore[method-assign]

    def read(self) -> None:
        try:
            from torch_spyre.ops.fallbacks import fallback_ops

            fallbacks = {str(op) for op in fallback_ops}
            self.program = joined([DeviceProgram(
                read_wrapper(Path(graph.cache_path).read_text(), fallbacks),
                {kernel: read_bundle(path, kernel) for kernel, path in kernels})
                for graph, kernels in self.graphs])
        except (OSError, SyntaxError, ValueError, ImportError) as error:
            self.error = f"{type(error).__name__}: {error}"
