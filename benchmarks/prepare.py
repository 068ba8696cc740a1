"""What the benchmark families share: API checks, thread pinning, workloads and programs.

asv runs the suite in the working tree against the compiler code of *older* commits too, so
every benchmark first asks `require(...)` for the public spyre_sim API it needs. A missing name
raises NotImplementedError, which asv records as "skipped" (NaN). Any other exception in either
commit makes `asv continuous` exit 2 without printing its comparison table.

asv_runner >= 0.3 re-runs `setup` before every timed sample (every call when `number > 1`).
Setups that only fetch something use the per-process caches below, so a re-run costs nothing.
Setups that must start cold (the compile family) rebuild what they need on purpose.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import torch

from benchmarks import workloads

# The spyre_sim of the commit under test: its API is that commit's, which `require` checks
# where a benchmark runs, so the type checker holds it to none.
spyre_sim: Any
try:
    import spyre_sim
except ImportError:  # a commit from before the package existed: every benchmark skips
    spyre_sim = None

# Literal copies of spyre_sim.STAGES and EXECUTABLE_STAGES. The parameter grid must not depend
# on the commit under test, or asv could not compare two commits' results.
STAGES = ("dynamo", "decompose", "lower", "layout", "kernel", "sdsc", "backend", "runtime")
EXECUTABLE_STAGES = ("decompose", "lower", "layout", "kernel", "runtime")

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt() parameters, glibc's malloc.h

# What torch 2.13 imports lazily on a process's first compile and run (70 modules, found by
# comparing sys.modules before and after one `spyre_sim.compile` + `Program.run`); these roots
# pull in all of them. asv's forkserver imports the suite once per commit and round and forks
# every benchmark process from it, so importing them here pays for them once instead of in
# each of the ~95 timed processes per commit and round: the first compile of a process then
# took 0.20 s instead of 0.45 s (softmax), a device-time setup 0.15 s instead of 0.50 s.
LAZY_TORCH_MODULES = (
    "functorch.compile", "torch._dynamo.backends.cudagraphs", "torch._dynamo.backends.debugging",
    "torch._dynamo.backends.distributed", "torch._dynamo.backends.inductor",
    "torch._dynamo.backends.onnxrt", "torch._dynamo.backends.tensorrt",
    "torch._dynamo.backends.torchxla", "torch._dynamo.backends.tvm",
    "torch._dynamo.dce_extra_outputs", "torch._dynamo.repro.after_aot",
    "torch._dynamo.repro.after_dynamo", "torch._dynamo.testing", "torch._export.db.logging",
    "torch._export.passes._node_metadata_hook",
    "torch._functorch._activation_checkpointing.remat_using_tags_for_fwd_loss_bwd_graph_pass",
    "torch._functorch._aot_autograd.subclass_codegen",
    "torch._higher_order_ops.passes.inline_invoke_subgraph", "torch._inductor.compiler_bisector",
    "torch._inductor.debug", "torch._inductor.fx_passes.dedupe_symint_uses",
    "torch._inductor.scheduler", "torch._subclasses.schema_check_mode",
    "torch.distributed.tensor.experimental", "torch.export._trace",
    "torch.fx.experimental.validator", "torch.nn.attention.flex_attention",
)


def preload_lazy_modules() -> None:
    """Import LAZY_TORCH_MODULES (a name this torch lacks is skipped). Imports only: no torch
    op runs, so the forkserver still holds a single thread when it forks."""
    for name in LAZY_TORCH_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


preload_lazy_modules()

# Host-clock benchmarks (compile CPU time, warm-call wall time) hand asv one sample per
# benchmark process (benchmarks/clocks.py). asv starts one benchmark process per row, commit
# and round, and `asv continuous` interleaves the rounds between the two commits (A B, B A,
# A B, ...), so each side has CLOCK_ROUNDS independent samples from as many stretches of
# time. Measured (docs/benchmarks.md, "Seven rounds, one sample per benchmark process"):
# processes forked from one benchmark process agree with each other 1.3-2.0x more closely
# than independent draws would, because they share what it built and its moment; counting
# each of them as a sample made asv's Mann-Whitney test read one round's luck as a change.
# Seven is the fewest samples a side with which that test can reach asv's p < 0.002 at all
# (7 + 7: p >= 0.00058; 6 + 6: p >= 0.0022). The simulated device clock draws its noise per
# run, not per process: one round.
CLOCK_ROUNDS = 7
ROUNDS = 1

# SPYRE_REGRESS_GRID=demo picks the small grid `spyre-regress demo` benchmarks in its nightly
# (asv passes the environment on to discovery and to every benchmark process).
GRID = os.environ.get("SPYRE_REGRESS_GRID", "full")


def grid(full: list, demo: list) -> list:
    """A parameter list: the full one, or the demo's subset under SPYRE_REGRESS_GRID=demo."""
    return demo if GRID == "demo" else full


def require(*names: str) -> None:
    """Skip (NotImplementedError) unless spyre_sim has every dotted name, e.g. "Program.run"."""
    for name in names:
        target: Any = spyre_sim
        for part in name.split("."):
            target = getattr(target, part, None)
        if target is None:
            raise NotImplementedError(f"spyre_sim.{name} is missing at this commit")


def require_stage(stage: str, attribute: str = "STAGES") -> None:
    """Skip a stage that this commit's spyre_sim does not have (in STAGES or EXECUTABLE_STAGES)."""
    require(attribute)
    if stage not in getattr(spyre_sim, attribute):
        raise NotImplementedError(f"stage {stage!r} is not in spyre_sim.{attribute} here")


@functools.cache
def steady_process() -> None:
    """Quiet this benchmark process, once: one intra-op thread and no allocator page faults.

    One thread: on a shared 2-core machine a second one mostly adds noise (asv.conf.json also
    sets OMP_NUM_THREADS=1, so the forkserver holds no thread pool when it forks).

    Fixed malloc thresholds: glibc serves large blocks (a [128, 4096] activation) with mmap
    and raises its threshold as blocks are freed, so whether a call page-faults depends on
    the process's history. Measured on softmax and layernorm at seq 128: whole processes ran
    at 7.5-8.1 ms with 1700-2500 minor faults per call, others at 3.3 ms with almost none.
    Pinning the thresholds (as MALLOC_MMAP_THRESHOLD_/MALLOC_TRIM_THRESHOLD_ would) keeps
    freed blocks in the heap and removes that mode.
    """
    torch.set_num_threads(1)
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # glibc's maximum on 64-bit
        libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to pin
        pass


def reset_compile_caches() -> None:
    """Forget every compiled frame, so the next compile starts cold.

    No `gc.collect()` here: with torch loaded it takes ~150 ms, more than most samples, and
    asv's timer disables the garbage collector while it times a call anyway.
    """
    torch._dynamo.reset()


@functools.cache
def workload(name: str, seq: int, width: int | None = None) -> tuple[Any, tuple]:
    """The workload's callable and inputs, built once per process (weights are seeded)."""
    return workloads.build(name, seq, width)


@functools.cache
def program(name: str, seq: int, width: int | None = None, **config: Any) -> Any:
    """A compiled `spyre_sim.Program` for the workload, compiled once per process."""
    fn, inputs = workload(name, seq, width)
    return spyre_sim.compile(fn, inputs, spyre_sim.Config(**config))


@functools.cache
def captured_graphs(name: str, seq: int, width: int | None = None) -> tuple:
    """The workload's stage-1 capture (its graphs, ready for `decompose`), once per process.

    Later stages only read a captured graph, so one capture serves every sample; capturing
    again per sample would cost ~70 ms, far more than the stages after it.
    """
    fn, inputs = workload(name, seq, width)
    return spyre_sim.capture(fn, inputs).graphs


def artifacts_before(stage: str, name: str, seq: int, width: int | None = None) -> list:
    """Fresh input artifacts of `stage`, one per captured graph of the workload.

    Runs every stage between the capture and `stage` again, so the timed stage never sees an
    artifact that an earlier sample already worked on.
    """
    artifacts = list(captured_graphs(name, seq, width))
    config = spyre_sim.Config()
    for earlier in STAGES[1:STAGES.index(stage)]:
        artifacts = [spyre_sim.run_stage(earlier, artifact, config) for artifact in artifacts]
    return artifacts


def warm_up_forkserver() -> tuple[str, ...]:
    """Compile and run every workload once at a tiny shape: in asv's forkserver only.

    asv forks every benchmark process from a server that imported the suite, one per commit
    and round. A child's first compile pays first-use costs (caches filled, code specialised,
    tables built on first lookup) that its discarded warm-up sample then absorbs, ~0.1-0.2 s
    of CPU in each of ~150 processes per commit. Paid once in the server, every child starts
    without them. Nothing here starts a thread (one intra-op thread: OMP_NUM_THREADS=1 in
    asv.conf.json), so the server still forks with one (tests/test_asv_suite.py); Dynamo's
    caches are reset afterwards, so no child finds a compiled frame. Returns the workloads
    that compiled and ran.
    """
    if spyre_sim is None or not all(hasattr(spyre_sim, n) for n in ("compile", "Config")):
        return ()
    warmed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the server's output goes to asv's log
        for name in workloads.SUITE:
            try:
                fn, inputs = workloads.build(name, 3, 64)
                spyre_sim.compile(fn, inputs, spyre_sim.Config()).run(*inputs)
                warmed.append(name)
            except Exception:  # noqa: S112 (a commit that cannot: its children pay as before)
                continue
    reset_compile_caches()
    return tuple(warmed)


# asv_runner's forkserver, importing the suite: the workloads it warmed up (none elsewhere)
WARMED_UP = warm_up_forkserver() if sys.argv[1:2] == ["run_server"] else ()


def asv_attributes(benchmark: Callable[..., Any], **attributes: Any) -> None:
    """Set what asv reads off a benchmark's function (`unit`, `timeout`, ...): its own
    attributes, which asv's discovery looks up by name."""
    vars(benchmark).update(attributes)
