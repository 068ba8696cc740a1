"""Compile work's valgrind-side child: one share of the grid counted under callgrind.

Run as a script by the parent (`compile_work.py` beside this file, `measure`), inside
valgrind, with the compiler under test on its path: it imports torch and that compiler,
builds its share's workloads from the catalogue `workloads.py` beside it and runs one
discarded compile of each, uninstrumented; then switches callgrind's instrumentation on with
a client request of its own, counts each point's compile region by region (one dump per
region, labelled in the manifest it writes) and switches it off. The compile is spyre_sim's
eight stages, or, when the request names a backend module (`backends.interface`), that
backend's `compile_in_regions`: a stage that runs in several slices (torch-spyre's codegen,
interrupted by the passes it calls) is dumped once per slice and summed by the parent.

What the child pins, because it made counts vary or would (the parent's pins: its docstring):
- one intra-op thread (OpenMP threads spinning inside a measured region are counted too), and
  glibc's malloc thresholds, as `prepare.steady_process` sets them;
- the cyclic garbage collector: off inside each measured stage, since a collection costs in
  proportion to the whole heap and would charge a stage for objects it does not own;
- Dynamo's caches (reset before each capture) and the process's one-time costs (a discarded
  capture + pipeline of every workload of the share before its first counted point).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

# what the parent and the child hand each other (the manifest's version, the error), by path:
# this file runs as a script, with `-P`, so the folder it is in is not on the path
_spec = importlib.util.spec_from_file_location(
    "compile_work_compile_work_manifest", Path(__file__).with_name("compile_work_manifest.py"))
assert _spec is not None and _spec.loader is not None
exchange = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(exchange)
COMPILE_WORK_VERSION = exchange.COMPILE_WORK_VERSION
CompileWorkError = exchange.CompileWorkError
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt() parameters, glibc's malloc.h


def _steady_child() -> None:
    """One intra-op thread and fixed malloc thresholds, as prepare.steady_process pins them."""
    import ctypes

    import torch

    torch.set_num_threads(1)
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)
        libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    except (OSError, AttributeError):  # not glibc: nothing to pin
        pass


# valgrind.h's client request on amd64, as a function `uint64 request(uint64 args[6])`: the
# special-instruction preamble (`rolq` of %rdi by 3, 13, 61 and 51 bits: 128, a no-op) then
# `xchgq %rbx,%rbx`, with %rax pointing at the arguments and the result in %rdx, whose default
# (0) is what a program gets when it runs natively. Bytes checked with GNU as and objdump.
_AMD64_CLIENT_REQUEST = bytes.fromhex(
    "4889f8" "31d2" "48c1c703" "48c1c70d" "48c1c73d" "48c1c733" "4887db" "4889d0" "c3")
_RUNNING_ON_VALGRIND = 0x1001  # valgrind.h
_CALLGRIND_BASE = ord("C") << 24 | ord("T") << 16  # callgrind.h: VG_USERREQ_TOOL_BASE('C','T')
CALLGRIND_START_INSTRUMENTATION = _CALLGRIND_BASE + 4
CALLGRIND_STOP_INSTRUMENTATION = _CALLGRIND_BASE + 5


@functools.cache
def _request_function():
    """`_AMD64_CLIENT_REQUEST` in an executable page, callable through ctypes.

    torch exposes only callgrind's collection toggle and dump (`torch._C._valgrind_toggle*`),
    not CALLGRIND_START_INSTRUMENTATION, so the child issues that request itself.
    """
    import ctypes
    import mmap

    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(_AMD64_CLIENT_REQUEST)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    return page, ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)(address)


def client_request(request: int, *args: int) -> int:
    """Issue one valgrind client request from Python (amd64 only); 0 when not under valgrind."""
    import ctypes

    if platform.machine() not in ("x86_64", "AMD64"):
        raise CompileWorkError(f"no valgrind client request from Python on {platform.machine()}")
    _, function = _request_function()
    return int(function((ctypes.c_uint64 * 6)(request, *args)))


class _Counted:
    """A measured region: callgrind collects inside it, the cyclic GC stays off; on leaving,
    the region's instructions are dumped (one dump per region, in order) and labelled."""

    def __init__(self, labels: list, label: tuple) -> None:
        import gc

        import torch

        self.labels, self.label = labels, label
        self.gc_disable, self.gc_enable = gc.disable, gc.enable
        self.start = torch._C._valgrind_toggle
        self.stop = torch._C._valgrind_toggle_and_dump_stats

    def __enter__(self) -> None:
        self.gc_disable()
        self.start()

    def __exit__(self, kind, error, _traceback) -> Literal[False]:
        self.stop()
        self.gc_enable()
        self.labels.append([*self.label, None if error is None else f"{kind.__name__}: {error}"])
        return False


class _Uncounted:
    def __enter__(self) -> None:
        pass

    def __exit__(self, *_exc) -> Literal[False]:
        return False


Regions = Callable[[Any, Any, Callable[[str], Any]], None]  # (fn, inputs, region) -> None


def _pipeline(spyre_sim, config) -> Regions:
    """spyre_sim's compile: capture, then stages 2-8 over every captured graph; `region(stage)`
    wraps each stage."""
    def compile_regions(fn, inputs, region) -> None:
        import torch

        torch._dynamo.reset()
        with region("dynamo"):
            artifacts = list(spyre_sim.capture(fn, inputs).graphs)
        for stage in spyre_sim.STAGES[1:]:
            with region(stage):
                artifacts = [spyre_sim.run_stage(stage, artifact, config)
                             for artifact in artifacts]
    return compile_regions


def _count_share(compile_regions: Regions, workloads, points: Sequence[tuple], wanted: set,
                 late: bool) -> dict[str, Any]:
    """One share: build its workloads and run one discarded compile of each, uninstrumented;
    then instrument and count every point. A point that fails is reported and skipped."""
    started = time.monotonic()
    labels: list[list] = []  # [workload, seq, width, stage, error], one per dump
    failed: list[list] = []  # [workload, seq, width, error]
    built = {}
    for point in points:
        try:
            built[point] = workloads.build(*point)
        except Exception as error:  # this point fails; the others are still measured
            failed.append([*point, f"{type(error).__name__}: {error}"])
    warm_up_failed: dict[tuple, str] = {}
    for point, (fn, inputs) in built.items():
        workload = (point[0], point[2])
        if workload not in warm_up_failed:
            try:
                compile_regions(fn, inputs, lambda stage: _Uncounted())
                warm_up_failed[workload] = ""
            except Exception as error:  # the workload's points fail; the others are measured
                warm_up_failed[workload] = f"{type(error).__name__}: {error}"
    for point in [p for p in built if warm_up_failed[p[0], p[2]]]:
        failed.append([*point, warm_up_failed[point[0], point[2]]])
        del built[point]
    prepared = time.monotonic()
    if late:
        client_request(CALLGRIND_START_INSTRUMENTATION)
    for point, (fn, inputs) in built.items():

        def region(stage: str, point=point):
            return _Counted(labels, (*point, stage)) if stage in wanted else _Uncounted()

        try:
            compile_regions(fn, inputs, region)
        except Exception as error:
            failed.append([*point, f"{type(error).__name__}: {error}"])
    if late:  # the interpreter's shutdown need not be instrumented either
        client_request(CALLGRIND_STOP_INSTRUMENTATION)
    return {"pid": os.getpid(), "labels": labels, "failed_points": failed,
            "seconds": {"prepare": prepared - started, "counted": time.monotonic() - prepared}}


def _load_workloads(path: str):
    """The workload catalogue beside this file, by path (never the tree under test's copy)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("compile_work_workloads", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


def _compiler(request: dict) -> tuple[Regions | None, tuple[str, ...], str | None]:
    """(how a point is compiled region by region, the compiler's stages, why nothing can be
    measured at this commit or None): the backend module the request names, else spyre_sim."""
    if request.get("backend"):
        spec = importlib.util.spec_from_file_location("compile_work_backend", request["backend"])
        assert spec is not None and spec.loader is not None
        backend = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = backend  # dataclasses look their module up here
        try:
            spec.loader.exec_module(backend)
            if hasattr(backend, "load_compiler"):
                backend.load_compiler()
        except Exception as error:  # the compiler does not import at this commit
            return None, (), f"{type(error).__name__}: {error}"
        values = request["config"]
        return (lambda fn, inputs, region: backend.compile_in_regions(fn, inputs, values, region),
                tuple(backend.STAGES), None)
    try:
        import spyre_sim
    except ImportError as error:  # a commit from before the package existed
        return None, (), f"spyre_sim is not importable here: {error}"
    absent = [n for n in ("capture", "run_stage", "Config", "STAGES") if not hasattr(spyre_sim, n)]
    if absent:
        return None, (), f"spyre_sim.{absent[0]} is missing at this commit"
    return (_pipeline(spyre_sim, spyre_sim.Config(**request["config"])),
            tuple(spyre_sim.STAGES), None)


def child_main(request_path: str, manifest_path: str) -> int:
    """Measure the requested points (one share); write the labels of its dumps, in dump
    order, as the manifest's one share.

    With `"instrument": "after_imports"` callgrind instruments nothing until the share's
    workloads are built and compiled once (see `_count_share`); the counted runs translate
    the grid's code again, instrumented, which is valgrind's time and not a counted
    instruction.
    """
    import importlib
    import warnings

    started = time.monotonic()
    warnings.simplefilter("ignore")  # FallbackWarning and friends: no output, same work
    request = json.loads(Path(request_path).read_text())
    manifest: dict[str, Any] = {"version": COMPILE_WORK_VERSION, "shares": [], "stages": [],
                                "missing": None}
    compile_regions, stages, manifest["missing"] = _compiler(request)
    if compile_regions is not None:
        _steady_child()
        for name in request.get("preload") or ():
            try:  # torch imports these on a first compile; a name this torch lacks is skipped
                importlib.import_module(name)
            except ImportError:
                pass
        workloads = _load_workloads(request["workloads"])
        manifest["stages"] = list(stages)
        wanted = set(request["stages"] or stages)
        late = request.get("instrument") == "after_imports"
        if late:
            manifest["running_on_valgrind"] = client_request(_RUNNING_ON_VALGRIND)
        imports = time.monotonic() - started
        share = _count_share(compile_regions, workloads, [tuple(p) for p in request["points"]],
                             wanted, late=late)
        share["seconds"] = {"imports": imports, **share["seconds"]}
        manifest["shares"] = [share]
    Path(manifest_path).write_text(json.dumps(manifest))
    return 0


if __name__ == "__main__":
    sys.exit(child_main(*sys.argv[1:]))
