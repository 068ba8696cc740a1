"""Compile work: instructions executed by each compile stage, counted under valgrind's callgrind.

Wall-clock compile stages take milliseconds and spread by several percent on a shared machine;
the number of instructions a stage executes does not depend on the neighbours. PyTorch's own
compile-time benchmarks for pull requests count instructions for the same reason
(`torch._C._instruction_counter`, or callgrind through `torch.utils.benchmark`'s
`Timer.collect_callgrind`, whose valgrind options and client requests are used here).

A grid of (workload, seq, width) points is dealt into shares (`shares_of`), each measured by a
valgrind process of its own, side by side on separate cores. A process starts with
callgrind's instrumentation off, so torch's import runs at valgrind's uninstrumented speed
(~20 s instead of ~120 s here), builds its share's workloads and runs one discarded compile
of each, still uninstrumented; then it switches instrumentation on with a client request of
its own (`client_request`: torch exposes only the collection toggle), counts its points and
switches it off before exiting. Translation is valgrind's work, not the program's
instructions, so the discarded compiles need not be instrumented: they pay torch's lazy
first-use costs, which are program instructions. (Forking one process per share after a
single import was tried: counts then moved between runs by up to 0.85%, in the parent's share
too, against 0.13% for the same shares measured in one process.) `instrument="from_start"`
instruments from the first instruction instead.

Three files, by role, all loaded by path where no package holds them: this one, the parent,
deals the grid and launches the processes (standard library only); the child,
`compile_work_child.py`, runs as a script under valgrind and imports torch, the `spyre_sim`
found on its path and the workload catalogue `workloads.py` beside this file; and
`compile_work_manifest.py` is what the two hand each other (requests, manifests, dumps). So a
probe can copy the current `benchmarks/` directory and measure a historical commit's compiler
by putting that commit's checkout on PYTHONPATH, as asv does.

Public API: `measure(points, ...) -> Measurement`, `points` being (workload, seq, width)
tuples (width None for the workload's default); it raises ValgrindUnavailable (a
NotImplementedError, so asv records "skipped") without valgrind, and CompileWorkError when a
child fails as a whole. `Measurement.counts[point][stage]` is the instructions,
`.errors[point]` a failed point's "Type: message", `.missing` why nothing was measured at
this commit; `to_json`/`from_json` give it a versioned JSON form. `valgrind_missing()` is the
install hint or None, `parse_dump(text)` one callgrind dump's total.

What the parent pins, because it made counts vary or would (the child's pins: its docstring):
- address-space randomisation (off: `setarch -R`, see `no_aslr_prefix`);
- PYTHONHASHSEED (string hashes order sets and dicts of names);
- the interpreter's path: the child runs with `-P`, so no directory whose listing changes
  between runs (a scratch directory) is scanned by imports; such a directory moved the small
  stages by up to 1%.
What remains is measured in docs/benchmarks.md. Counts depend on what ran before in the same
process (warm caches, specialised bytecode): compare counts of the same grid dealt the same
way, e.g. one probe point against the same probe point at another commit.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

# The valgrind-side child, a script beside this module, and what the two hand each other.
CHILD = Path(__file__).resolve().with_name("compile_work_child.py")
EXCHANGE = Path(__file__).resolve().with_name("compile_work_manifest.py")


def _beside(path: Path) -> ModuleType:
    """A module of this folder, loaded by path: this file also runs as a copy in a suite's
    folder or a probe's, where no package holds it (the child loads the exchange so too)."""
    spec = importlib.util.spec_from_file_location(f"compile_work_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING:  # the same file, as the type checker finds it
    from benchmarks import compile_work_manifest as exchange
else:
    exchange = _beside(EXCHANGE)
COMPILE_WORK_VERSION = exchange.COMPILE_WORK_VERSION
CompileWorkError = exchange.CompileWorkError
parse_dump, dump_totals, merged = exchange.parse_dump, exchange.dump_totals, exchange.merged
# Literal copy of spyre_sim.STAGES: the grid must not depend on the commit under test.
STAGES = ("dynamo", "decompose", "lower", "layout", "kernel", "sdsc", "backend", "runtime")
# Nothing is counted until the first CALLGRIND_TOGGLE_COLLECT client request, as in
# torch.utils.benchmark's Timer.collect_callgrind. Instrumentation (what makes callgrind slow)
# is off at the start too and switched on by the child once torch and spyre_sim are imported
# ("after_imports"); "from_start" instruments from the first instruction, as Timer does.
# --demangle=no: only the dumps' totals are read, never a function name, and demangling the
# C++ symbols of torch's libraries as they load cost ~4 of the ~22 CPU seconds of importing
# torch under valgrind here.
VALGRIND_OPTIONS = ("--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                    "--demangle=no")
INSTRUMENT_MODES = {"after_imports": "--instr-atstart=no", "from_start": "--instr-atstart=yes"}
INSTALL_HINT = ("valgrind is not installed, so compile work (instructions per stage) is not "
                "measured; install it (Debian/Ubuntu: `apt-get install valgrind`) and re-run")
# Measured on a 2-core VM (docs/benchmarks.md): importing torch and spyre_sim takes ~20 s
# under valgrind uninstrumented (~120 s instrumented), the asv grid's 14 points ~100 s more
# instrumented; wall time grows with the machine's load.
DEFAULT_TIMEOUT_S = 1800
PINNED_ENV = {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
              "OPENBLAS_NUM_THREADS": "1", "TORCH_COMPILE_DEBUG": "0"}
# Variables that would make torch log, trace or change what it compiles.
DROPPED_ENV_PREFIXES = ("TORCH_LOGS", "TORCH_TRACE", "TORCHDYNAMO_", "TORCHINDUCTOR_")

Point = exchange.Point
Item = TypeVar("Item")


class ValgrindUnavailable(NotImplementedError):
    """valgrind is not installed: asv records the family as skipped, and the message says how
    to install it."""


@dataclass(frozen=True, kw_only=True)
class Measurement:
    """Instructions per stage for each point of one valgrind run."""

    counts: dict[Point, dict[str, int]] = field(default_factory=dict)
    errors: dict[Point, str] = field(default_factory=dict)
    stages: tuple[str, ...] = ()  # the measured commit's spyre_sim.STAGES
    missing: str | None = None
    seconds: float = 0.0  # wall time of the valgrind process (load-dependent, unlike counts)
    cpu_seconds: float = 0.0  # its user + system CPU time (what a quiet machine would take)
    # each process's own wall seconds, per share: "imports" (torch, spyre_sim and the modules
    # torch imports lazily), "prepare" (builds and discarded compiles) and "counted"
    phases: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"version": COMPILE_WORK_VERSION, "unit": "instructions",
                "stages": list(self.stages),
                "missing": self.missing, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds, "phases": self.phases,
                "points": [{"workload": p[0], "seq": p[1], "width": p[2],
                            "instructions": self.counts.get(p), "error": self.errors.get(p)}
                           for p in sorted(set(self.counts) | set(self.errors), key=str)]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Measurement:
        if doc.get("version") != COMPILE_WORK_VERSION:
            raise CompileWorkError(f"compile-work document version {doc.get('version')!r}, "
                                   f"expected {COMPILE_WORK_VERSION}; re-measure with this suite")
        counts, errors = {}, {}
        for entry in doc["points"]:
            point = (entry["workload"], entry["seq"], entry["width"])
            if entry.get("instructions") is not None:
                counts[point] = dict(entry["instructions"])
            if entry.get("error") is not None:
                errors[point] = entry["error"]
        return cls(counts=counts, errors=errors, stages=tuple(doc["stages"]),
                   missing=doc.get("missing"), seconds=doc["seconds"],
                   cpu_seconds=doc.get("cpu_seconds", 0.0), phases=dict(doc.get("phases", {})))


# --- parent side: pure helpers ----------------------------------------------------------------

def valgrind_missing() -> str | None:
    """The install hint when `valgrind` is not on PATH, else None."""
    return None if shutil.which("valgrind") else INSTALL_HINT


def deal(weights: Mapping[Item, float], shares: int) -> list[list[Item]]:
    """`weights`' items dealt into `shares` shares, heaviest first to the lightest share (the
    first of equally light ones), equally heavy items in `weights`' order: the greedy
    longest-first deal, which keeps the heaviest share near the mean. It depends only on its
    arguments. The one dealing function of the project: the grid's valgrind processes here
    (`shares_of`), and the CI shards of a suite (`spyre_regress.scaleout.shard_of`)."""
    dealt: list[list[Item]] = [[] for _ in range(shares)]
    loads = [0.0] * shares
    for item in sorted(weights, key=lambda k: -weights[k]):  # stable: ties keep their order
        lightest = loads.index(min(loads))
        dealt[lightest].append(item)
        loads[lightest] += weights[item]
    return dealt


def shares_of(points: Sequence[Point], shares: int,
              weights: Mapping[str, float] | None = None) -> list[list[Point]]:
    """The grid dealt into at most `shares` shares, one valgrind process each: a workload's points
    stay together (they share its build and its discarded compile), heaviest workload first to
    the lightest share (`deal`). `weights` estimates a workload's cost per point (default 1). The
    deal depends only on its arguments, so a grid is always counted in the same processes and
    in the same order, which its counts depend on."""
    by_workload: dict[str, list[Point]] = {}
    for point in points:
        by_workload.setdefault(point[0], []).append(point)
    cost = {name: len(group) * (weights or {}).get(name, 1.0)  # grid order breaks ties
            for name, group in by_workload.items()}
    dealt = deal(cost, max(1, min(shares, len(by_workload))))
    return [[p for p in points if p[0] in names] for names in dealt if names]


def child_env(base: Mapping[str, str]) -> dict[str, str]:
    """The measuring process's environment: `base` with the pinned variables set and torch's
    logging/tracing/compile switches removed."""
    env = {k: v for k, v in base.items() if not k.startswith(DROPPED_ENV_PREFIXES)}
    env.update(PINNED_ENV)
    return env


# Byte-compiles the compiler under test and this folder before a count, where they are
# writable. A module compiled from source on import leaves the heap in another state than one
# loaded from its .pyc, and the small stages' counts moved by up to 1.04% between the first
# run after an edit and the next ones (softmax seq 127 `decompose`: 336,668 and 340,164).
# asv's installs byte-compile the package already; a checkout being edited or probed does not.
COMPILE_SOURCES = (
    "import compileall, importlib.util, sys\n"
    "for name in ('spyre_sim', 'torch_spyre'):  # the compilers a count may import\n"
    "    spec = importlib.util.find_spec(name)\n"
    "    for folder in (spec and spec.submodule_search_locations) or ():\n"
    "        compileall.compile_dir(folder, quiet=2)\n"
    "for folder in sys.argv[1:]:\n"
    "    compileall.compile_dir(folder, quiet=2)\n")


def compile_sources(python: str, environment: Mapping[str, str]) -> None:
    """Write the .pyc files the measuring processes would otherwise write on import."""
    subprocess.run([python, "-P", "-c", COMPILE_SOURCES, str(Path(__file__).resolve().parent)],
                   env=dict(environment), capture_output=True, timeout=300, check=False)


def valgrind_command(python: str, request: Path, manifest: Path, dumps: Path,
                     instrument: str = "after_imports") -> list[str]:
    """The valgrind invocation: callgrind's dumps go to `<dumps>.1`, `<dumps>.2`, ..."""
    options = [INSTRUMENT_MODES[instrument] if o.startswith("--instr-atstart=") else o
               for o in VALGRIND_OPTIONS]
    # %p: every process writes dumps and log of its own, named by its pid
    return [*no_aslr_prefix(), "valgrind", *options, f"--callgrind-out-file={dumps}.%p",
            f"--log-file={dumps}.%p.valgrind.log", python, "-P", str(CHILD), str(request),
            str(manifest)]


def assemble(manifest: Mapping[str, Any], totals: Mapping[int, Sequence[int]],
             seconds: float = 0.0, cpu_seconds: float = 0.0) -> Measurement:
    """The processes' `manifest` and their dumps' `totals` as one Measurement
    (`compile_work_manifest.paired`)."""
    counts, errors, phases = exchange.paired(manifest, totals)
    return Measurement(counts=counts, errors=errors, stages=tuple(manifest.get("stages", ())),
                       missing=manifest.get("missing"), seconds=seconds, cpu_seconds=cpu_seconds,
                       phases=phases)


# --- parent side: the valgrind run ------------------------------------------------------------

def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@functools.cache
def no_aslr_prefix() -> tuple[str, ...]:
    """`setarch <machine> -R`, which starts valgrind without address-space randomisation,
    when it exists and works here (a sandbox may refuse the personality call); else ().

    Addresses reach instruction counts through CPython's type-attribute cache (indexed by the
    attribute name's address) and id()-hashed sets and dicts: with randomisation, two runs of
    the softmax pipeline differed by up to 1% in the small stages (lower, layout, kernel).
    """
    command = ("setarch", platform.machine(), "-R")
    if not shutil.which("setarch"):
        return ()
    try:
        works = subprocess.run([*command, "true"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    return command if works.returncode == 0 else ()


def default_instrument() -> str:
    """"after_imports" where the child can issue client requests (amd64), else "from_start"."""
    return "after_imports" if platform.machine() in ("x86_64", "AMD64") else "from_start"


CATALOGUE = Path(__file__).resolve().with_name("workloads.py")  # the suite's, beside this


def _points(points: Iterable[Point]) -> list[Point]:
    return [(str(w), int(s), None if width is None else int(width)) for w, s, width in points]


def _run(commands: Sequence[list[str]], manifests: Sequence[Path], env, timeout: float,
         work: Path) -> tuple[list[dict], float, float]:
    """Run the processes side by side; their manifests, the wall and CPU seconds of all of
    them (CompileWorkError if one failed; the others are then stopped)."""
    started, cpu_before = time.monotonic(), _children_cpu()
    environment = child_env(os.environ if env is None else env)
    running = [subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True) for command in commands]
    try:
        errors = [process.communicate(timeout=max(1.0, started + timeout - time.monotonic()))[1]
                  for process in running]
    except subprocess.TimeoutExpired:
        raise CompileWorkError(f"compile-work measurement exceeded {timeout:.0f} s") from None
    finally:
        for process in running:
            if process.poll() is None:
                process.kill()
                process.wait()
    seconds, cpu = time.monotonic() - started, _children_cpu() - cpu_before
    for process, manifest, stderr in zip(running, manifests, errors, strict=True):
        if process.returncode != 0 or not manifest.exists():
            logs = sorted(work.glob("cg.*.valgrind.log"))
            tail = (stderr or "".join(log.read_text() for log in logs))[-2000:]
            raise CompileWorkError(f"compile-work child exited {process.returncode}: {tail}")
    return ([json.loads(manifest.read_text()) for manifest in manifests], round(seconds, 1),
            round(cpu, 1))


def _requests(work: Path, shares: Sequence[Sequence[Point]], config, stages, instrument,
              preload, backend: str | None = None, workloads: Path = CATALOGUE
              ) -> list[tuple[Path, Path]]:
    """One request file per share, and where its process writes its manifest."""
    pairs = []
    for index, share in enumerate(shares or [[]]):
        request, manifest = work / f"request-{index}.json", work / f"manifest-{index}.json"
        exchange.write_request(request, share, config=config, stages=stages,
                               instrument=instrument, preload=preload, backend=backend,
                               workloads=workloads)
        pairs.append((request, manifest))
    return pairs


def measure(points: Iterable[Point], *, config: Mapping[str, Any] | None = None,
            python: str | None = None, env: Mapping[str, str] | None = None,
            timeout: float = DEFAULT_TIMEOUT_S, stages: Sequence[str] | None = None,
            instrument: str | None = None, shares: int = 1,
            weights: Mapping[str, float] | None = None,
            preload: Sequence[str] = (), backend: str | None = None,
            workloads: Path = CATALOGUE) -> Measurement:
    """Instructions per stage for every (workload, seq, width) point, in one valgrind run.

    `workloads` is the catalogue the points are built from (the one beside this module by
    default: a suite's own); `backend` names a backend module by path (`backends.interface`)
    whose `compile_in_regions` is counted, with `config` as its values; without it, spyre_sim's
    stages are counted and `config` is passed to `spyre_sim.Config` (defaults when None);
    `python` defaults to this
    interpreter and `env` to this process's environment (PYTHONPATH picks the spyre_sim under
    test); `stages` limits the measured stages (the pipeline still runs all of them);
    `instrument` is a key of INSTRUMENT_MODES (default: `default_instrument()`); `shares` and
    `weights` deal the grid into processes (`deal`); `preload` names modules the child
    imports with the rest, before anything is instrumented (torch's lazily imported ones).
    """
    missing = valgrind_missing()
    if missing:
        raise ValgrindUnavailable(missing)
    instrument = instrument or default_instrument()
    with tempfile.TemporaryDirectory(prefix="compile-work-") as scratch:
        work, dumps = Path(scratch), Path(scratch) / "cg"
        pairs = _requests(work, shares_of(_points(points), shares, weights), config, stages,
                          instrument=instrument, preload=preload, backend=backend,
                          workloads=workloads)
        commands = [valgrind_command(python or sys.executable, request, manifest, dumps,
                                     instrument=instrument) for request, manifest in pairs]
        compile_sources(python or sys.executable, child_env(os.environ if env is None else env))
        found, seconds, cpu = _run(commands, [m for _, m in pairs], env, timeout, work=work)
        labels = merged(found)
        if instrument == "after_imports" and labels.get("running_on_valgrind") == 0:
            raise CompileWorkError("the child's client requests did not reach valgrind, so "
                                   "nothing was instrumented; measure with "
                                   "instrument='from_start'")
        return assemble(labels, dump_totals(dumps, labels), seconds, cpu)


def run_natively(points: Iterable[Point], *, config: Mapping[str, Any] | None = None,
                 python: str | None = None, env: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT_S, shares: int = 1,
                 weights: Mapping[str, float] | None = None,
                 preload: Sequence[str] = (), backend: str | None = None) -> dict[str, Any]:
    """The measuring child's work without valgrind (same imports, builds, discarded and
    counted compiles): what the grid costs natively, the yardstick of `measure`'s wall time
    (in one process unless `shares` says otherwise). Returns "seconds" and "cpu_seconds" of
    the whole run and the child's own "phases"."""
    with tempfile.TemporaryDirectory(prefix="compile-work-") as scratch:
        work = Path(scratch)
        pairs = _requests(work, shares_of(_points(points), shares, weights), config, None,
                          instrument="from_start", preload=preload, backend=backend)
        commands = [[python or sys.executable, "-P", str(CHILD), str(request), str(manifest)]
                    for request, manifest in pairs]
        found, seconds, cpu = _run(commands, [m for _, m in pairs], env, timeout, work=work)
    counted = merged(found)["shares"]
    return {"seconds": seconds, "cpu_seconds": cpu,
            "phases": {"shares": [share["seconds"] for share in counted]},
            "failed_points": [p for share in counted for p in share["failed_points"]]}
