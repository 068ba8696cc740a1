"""The probe: measurements taken inside one commit's compiler, in a subprocess of its own.

Run as a script with `python -P probe.py COMMAND REQUEST.json RESULT.json`, with PYTHONPATH
set to a checkout of the commit under test. It imports torch, that checkout's compiler through
a backend module (`backends/spyre.py`, `backends/inductor.py`: the backend interface, loaded
by path from the current tree, as are `asv_runner`'s suite, the workload catalogue and the
probe protocol) and nothing of the checkout's `regressions`, so the tools measure historical
compilers with today's benchmarks and workloads, as asv does. `sample`, `knobs`, `stages`
and `worker` measure through the backend interface, as does `timing`; `work` runs the suite's
own compile_work module. Commands:

  discover list the suite's benchmarks and their parameter names (asv_runner discovery)
  bench    run one asv benchmark (one param combination) through asv_runner
  sample   the target metric's samples measured directly, without asv (in-process probers)
  stages   compile a workload with stage capture; compile times, per-kernel device time (and
           the noise-free run's Chrome trace, when asked), per-stage error against float64
  knobs    the probe metric under each alternative value of each Config knob
  timing   synchronized iterations for a report: host and device time, correctness
  work     instructions per compile stage of one program, counted under callgrind by the
           suite's compile_work module (valgrind missing: untestable, with the install hint)
  worker   a persistent minimization worker: metric of each candidate program (JSON lines)

The request and every answer are the dataclasses of `protocol.py` (loaded by path, with the
codec that reads the request back); the output is one JSON document with a "version" field,
and any failure writes `protocol.Failed`.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import json
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent


def _load(path: str, name: str) -> Any:
    """A module of the current tree, by file path (never the checkout's own copy)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


if TYPE_CHECKING or __package__:  # imported by the tool (the in-process emulation)
    from regressions import codec
    from regressions.probing import asv_commands, protocol
else:  # the probe child: this tree's protocol and codec, by path
    protocol = _load(str(HERE / "protocol.py"), "spyre_regress_protocol")
    codec = _load(str(HERE.parent / "codec.py"), "spyre_regress_codec")
    asv_commands = _load(str(HERE / "asv_commands.py"), "spyre_regress_asv_commands")

Request = protocol.ProbeRequest
# The backend a request that names none measures: spyre_sim's, beside this file in the tree.
DEFAULT_BACKEND = HERE.parents[1] / "backends" / "spyre.py"


def _backend(request: Request) -> Any:
    """The compiler under test: the backend module the request names by path (its compiler
    is the checkout's, on PYTHONPATH), spyre_sim's when it names none (a request written by
    a spyre-regress from before backends)."""
    backend = _load(request.backend or str(DEFAULT_BACKEND), "spyre_regress_backend")
    if request.compiler:  # the checkout's module in the backend's compiler's place
        backend.COMPILER = request.compiler
    return backend


def _harness(request: Request) -> Any:
    """regressions/probing/harness.py: the reproducers' measurement, so probes and reports agree."""
    return _load(request.harness, "spyre_regress_harness")


def _program(request: Request) -> tuple[Any, Any]:
    if request.source:
        namespace: dict = {}
        exec(compile(request.source, "<minimized>", "exec"), namespace)  # noqa: S102
        return namespace["program"], namespace["make_inputs"]()
    workloads = _load(str(request.workloads), "spyre_regress_workloads")
    return workloads.build(request.workload, request.seq, request.width)


def _width(request: Request) -> int | None:
    """The width the catalogue builds the workload at (its default when none is asked)."""
    if request.width:
        return request.width
    if request.source or not request.workloads:
        return None  # a program given as source: its shapes are its own
    workloads = _load(request.workloads, "spyre_regress_workloads")
    workload = getattr(workloads, "WORKLOADS", {}).get(request.workload)
    return getattr(workload, "default_width", None)


def _or(value: int | None, default: int) -> int:
    """A request's count, or the command's default where it gives none."""
    return default if value is None else value


def _values(request: Request, **overrides: Any) -> dict:
    """The build's config values for a backend's `compile`: the request's, then `overrides`."""
    return {**request.config, **overrides}


def cmd_work(request: Request) -> protocol.WorkAnswer | protocol.Failed:
    """Instructions per stage: the suite's own measurement (benchmarks/compile_work.py), so
    probes and the CompileWork benchmark count the same way."""
    work = _load(request.compile_work, "spyre_regress_compile_work")
    point = (request.workload, request.seq, request.width)
    # spyre_sim's stages are counted as its suite's compile-work family counts them; any other
    # compiler's through its backend module's regions
    backend = None if _backend(request).NAME == "spyre_sim" else request.backend
    try:
        measured = work.measure([point], config=dict(request.config) or None, backend=backend)
    except work.ValgrindUnavailable as missing:
        return protocol.Failed("untestable", str(missing))
    if measured.missing:
        return protocol.Failed("untestable", measured.missing)
    counts = next(iter(measured.counts.values()), None)
    if counts is None:
        return protocol.Failed("failed", next(iter(measured.errors.values()), "no count"))
    return protocol.WorkAnswer("ok", {stage: int(n) for stage, n in counts.items()})


def cmd_sample(request: Request) -> protocol.BenchAnswer:
    """The metric's samples measured directly: what the benchmark measures, without asv."""
    backend = _backend(request)
    program, inputs = _program(request)
    samples, deterministic = SAMPLES[request.metric](backend, request, program, inputs,
                                                     count=_or(request.samples, 20))
    return protocol.BenchAnswer(status="ok", samples=tuple(samples), deterministic=deterministic)


def _error_samples(backend, request, program, inputs, count):
    return [_metric(backend, request, program, inputs, values=_values(request))], True


def _compile_samples(backend, request, program, inputs, count):
    return _compile_seconds(backend, request, program, inputs, values=_values(request),
                            count=count), False


def _run_samples(clock):
    """Warm calls of the compiled program, each read on `clock` (an Execution) -> seconds;
    each compile draws its own run-to-run noise where the backend simulates it."""
    def samples(backend, request, program, inputs, count):
        compiled = backend.compile(program, inputs, _values(request, **backend.INDEPENDENT))
        compiled.run(*inputs)  # warm-up: uploads the weights, builds the executor
        return [clock(backend, compiled.run(*inputs)) for _ in range(count)], False
    return samples


def _host_samples(backend, request, program, inputs, count):
    """Warm calls' host seconds: one value per forked process where the suite has its clocks
    module (as its host-time benchmark's samples are), else one per call in this process."""
    values = _values(request, **backend.INDEPENDENT)
    return _host_seconds(backend, request, program, inputs, values=values, count=count), False


def _device_s(backend: Any, execution: Any) -> float:
    if execution.device_us is None:
        raise ValueError(f"{backend.NAME} has no device clock: measure host_time instead")
    return execution.device_us / 1e6


# How each probe method (the metric table's `probe`) samples its metric.
SAMPLES = {"numerics": _error_samples, "compile_time": _compile_samples,
           "device_time": _run_samples(_device_s),
           "host_time": _host_samples}


def _kernels(execution: Any) -> tuple[protocol.KernelTime, ...]:
    """The run's kernels (`backends.interface.Execution.kernels`) in the protocol's record."""
    return tuple(protocol.KernelTime.of(kernel) for kernel in execution.kernels)


def cmd_stages(request: Request) -> protocol.StageAnswer:
    """A compile with stage capture, then `compile_repeats` compiles for their seconds per
    stage, a noise-free run (device time, kernels and trace where the backend models a
    device), each executable stage's error against float64, and, when the request asks for
    the host clock, the median warm call's host seconds."""
    backend = _backend(request)
    program, inputs = _program(request)
    values = _values(request)
    backend.capture(program, inputs, values, Path(request.capture_dir))
    compiled = backend.compile(program, inputs, values)
    compiles = _compile_processes(backend, request, program, inputs, values=values,
                                  count=_or(request.compile_repeats, 4))
    run = _quiet_run(backend, program, inputs, request)
    if request.trace and run is not None and run.trace is not None:
        with open(request.trace, "w") as handle:
            json.dump(run.trace, handle)
    stage_errors = {}
    if request.numerics and executes(backend):
        harness = _harness(request)
        references = compiled.baselines(*inputs)
        stage_errors = {stage: harness.output_errors(outputs[0], *references)
                        for stage, outputs in compiled.stage_outputs(*inputs).items()}
    return protocol.StageAnswer(
        status="ok",
        compile_times=tuple({s: c.seconds[s] for s in backend.STAGES} for c in compiles),
        device_time_us=None if run is None else run.device_us,
        kernels=() if run is None else _kernels(run),
        stages=tuple(backend.STAGES), stage_errors=stage_errors,
        width=_width(request), backend=backend.environment(),
        host_s=(_warm_call_seconds(compiled, request, inputs) if request.host_clock
                else None),
        compile_waits=tuple(c.waits for c in compiles))


def executes(backend: Any) -> bool:
    """Whether the backend's compiled programs run here (`backends.interface`: torch-spyre's
    need a card)."""
    return bool(getattr(backend, "EXECUTES", True))


def _quiet_run(backend: Any, program: Any, inputs: Any, request: Request) -> Any:
    """A noise-free run for the device's figures; None where nothing runs and no device is
    modelled (its compile is then all there is to measure)."""
    if not (executes(backend) or backend.DEVICE_CLOCK):
        return None
    return backend.compile(program, inputs, _values(request, **backend.QUIET)).run(*inputs)


def _metric(backend: Any, request: Request, program: Any, inputs: Any, values: dict) -> float:
    """One value of the target's metric (noise-free where the values say so)."""
    return METRIC[request.metric](backend, request, program, inputs, values=values)


def _compile_seconds(backend, request, program, inputs, values, count) -> list[float]:
    """The stage's own compile time when one is named (a stage regression hides in the
    total), else the whole compile, of `count` cold compiles, each its own process's where
    the suite has its clocks module. For a part of the compile's wait other than its CPU
    (`wait_part`), that part's seconds."""
    return [_seconds_of(measured, request)
            for measured in _compile_processes(backend, request, program, inputs,
                                               values=values, count=count)]


@dataclasses.dataclass(frozen=True)
class CompileMeasured:
    """One cold compile in one process: its seconds per stage and in total ("total"), as
    the backend's compile reports them, and the parts of its wall time (`waits.Wait`'s
    fields) per region of `compile_in_regions` and for the whole `compile` call ("total")."""

    seconds: dict[str, float]
    waits: dict[str, dict[str, float]]


def _seconds_of(measured: CompileMeasured, request: Request) -> float:
    """The request's figure of one compile: its stage's (else the total's) seconds, or that
    region's part of the wait when the request names a part other than the CPU."""
    where = request.stage or "total"
    if request.wait_part in (None, "cpu"):
        return measured.seconds[where]
    return measured.waits.get(where, {}).get(request.wait_part, 0.0)


def _clocks(request: Request) -> Any:
    """The suite's clocks module (benchmarks/clocks.py), or None: time in this process."""
    return _clocks_module(request.clocks) if request.clocks else None


@functools.cache
def _clocks_module(path: str) -> Any:
    """Loaded once per probe: a command that times compiles and warm calls reads it twice."""
    return _load(path, "spyre_regress_clocks")


@functools.cache
def _waits_module(clocks_path: str) -> Any:
    """The suite's waits module (beside its clocks module, which loads it), else this
    tree's own: how the parts of a compile's wall time are read."""
    if clocks_path:
        return _clocks_module(clocks_path).waits
    return _load(str(HERE.parents[1] / "benchmarks" / "waits.py"), "spyre_regress_waits")


def _compile_processes(backend, request, program, inputs, values, count
                       ) -> list[CompileMeasured]:
    """`count` cold compiles: the backend's compile, timed, with the parts of its whole wall
    time; and, for a request on a part other than the CPU (`wait_part`), the same compile
    once more region by region (`compile_in_regions`) for the parts of each region's wall
    time. With the suite's clocks module, each is one forked process's, after a discarded
    compile, its seconds timed between two runs of the reference workload and scaled by it,
    as the suite's compile benchmarks are (benchmarks/clocks.py); else `count` compiles in
    this process."""
    clocks = _clocks(request)
    waits = _waits_module(request.clocks)
    by_region = request.wait_part not in (None, "cpu")

    def regions_of() -> dict[str, dict[str, float]]:
        if not by_region:
            return {}
        regions = waits.Regions()
        backend.compile_in_regions(program, inputs, values, regions.region)
        return {name: wait._asdict() for name, wait in regions.waits.items()}

    def compile_once() -> dict:
        (compiled, wait) = waits.measure(lambda: backend.compile(program, inputs, values))
        return {"seconds": {**compiled.compile_s, "total": wait.wall},
                "waits": {**regions_of(), "total": wait._asdict()}}

    if clocks is None:
        return [CompileMeasured(**compile_once()) for _ in range(count)]

    def in_process() -> dict:
        backend.compile(program, inputs, values)  # the forked process's first-write costs
        (compiled, wait), took, reference_s = clocks.between_references(
            lambda: waits.measure(lambda: backend.compile(program, inputs, values)),
            time.perf_counter)
        scale = clocks.REFERENCE_S / reference_s
        return {"seconds": {**{s: v * scale for s, v in compiled.compile_s.items()},
                            "total": took * scale},
                "waits": {**regions_of(), "total": wait._asdict()}}

    backend.compile(program, inputs, values)  # first-use costs, paid before the forks
    return [CompileMeasured(**clocks.in_child(in_process)) for _ in range(count)]


def _device_us(backend, request, program, inputs, values) -> float:
    return _device_s(backend, backend.compile(program, inputs, values).run(*inputs)) * 1e6


def _host_seconds(backend, request, program, inputs, values, count) -> list[float]:
    """`count` host-second values of warm calls (`_warm_calls`)."""
    return _warm_calls(backend.compile(program, inputs, values), request, inputs, count)


def _warm_call_seconds(compiled: Any, request: Request, inputs: Any) -> float:
    """The median host seconds of warm calls of a compiled program: of HOST_PROCESSES
    processes' values where the suite has its clocks module, else of `calls` calls."""
    return statistics.median(_warm_calls(compiled, request, inputs, _host_count(request)))


def _host_count(request: Request) -> int:
    return HOST_PROCESSES if request.clocks else _or(request.calls, 21)


# Forked processes per warm-call figure where the suite has its clocks module.
HOST_PROCESSES = 6


def _warm_calls(compiled: Any, request: Request, inputs: Any, count: int) -> list[float]:
    """`count` host-second values of warm calls, after a warm-up call: with the suite's
    clocks module each is one forked process's median call relative to the reference (as
    the suite's host-time benchmark samples are), else one call in this process."""
    compiled.run(*inputs)  # warm-up: uploads the weights, builds the executor
    clocks = _clocks(request)
    if clocks is None:
        return [compiled.run(*inputs).host_s for _ in range(count)]
    # as ExecuteHostTime samples them (a clocks module older than the warm-call settings
    # samples as that suite did)
    settings = {"min_calls": clocks.WARM_CALL_MIN_CALLS,
                "discarded": clocks.WARM_CALL_DISCARDED} if hasattr(
                    clocks, "WARM_CALL_DISCARDED") else {}
    return [clocks.sample(lambda: None, lambda: compiled.run(*inputs), time.perf_counter,
                          **settings) for _ in range(count)]


def _output_error(backend, request, program, inputs, values) -> float:
    """The output's error against float64 and the backend's eager baselines, computed as the
    reproducers compute it (the harness's `output_errors`)."""
    compiled = backend.compile(program, inputs, values)
    errors = _harness(request).output_errors(compiled.run(*inputs).outputs[0],
                                             *compiled.baselines(*inputs))
    return errors[request.error]


@dataclasses.dataclass(frozen=True)
class Clock:
    """A metric read on a clock of this host, which moves with the machine's load: one value
    is the median of `count(request)` readings; `reading(backend, request, program, inputs,
    values, count)` takes `count` of them (the knob probe's screen takes a few first)."""

    reading: Any
    count: Any

    def __call__(self, backend, request, program, inputs, values) -> float:
        return statistics.median(self.reading(backend, request, program, inputs,
                                              values=values, count=self.count(request)))


# How each probe method (the metric table's `probe`) measures one value of its metric: on a
# `Clock`, or noise-free, (backend, request, program, inputs, values) -> the value.
METRIC: dict[str, Any] = {
    "compile_time": Clock(_compile_seconds, lambda request: _or(request.compile_repeats, 5)),
    "device_time": _device_us,
    "host_time": Clock(_host_seconds, _host_count),
    "numerics": _output_error}
# A clock's best knob values are measured again this many times each, alternating with the
# defaults (`_confirmed`), at most CONFIRMED_TRIALS of them.
CONFIRMATIONS = 2
CONFIRMED_TRIALS = 2
# On a clock, with the level below which a knob value restores the metric (the request's
# `restoring_share` of the defaults), a trial is first read SCREEN_READINGS times; when even
# the faster reading is SCREEN_MARGIN times that level, no load could have hidden a
# restoring value in it and the trial is read no further, nor confirmed (`_trial`).
SCREEN_READINGS = 2
SCREEN_MARGIN = 2.0


def cmd_knobs(request: Request) -> protocol.KnobsAnswer:
    """The metric, noise-free, under each other choice of each of the backend's knobs (this
    probe's `part` of them); with `scope`, only the one knob applied to its first N decisions
    (spyre_sim's `Config.knob_scope`, its decisions logged by name): the search that chose
    the knob is not run again, and a backend that cannot scope a knob measures nothing."""
    backend = _backend(request)
    if request.scope and not backend.SCOPES_KNOBS:  # a switch of the whole compile: no
        return protocol.KnobsAnswer("ok", 0.0, ())  # decision to name, nothing to build
    program, inputs = _program(request)
    if request.scope:
        scoped = _scoped(backend, request, request.scope, program, inputs=inputs)
        nowhere = [entry.metric for entry in scoped if entry.limit == 0]
        return protocol.KnobsAnswer("ok", nowhere[0] if nowhere else 0.0, (), scoped)
    quiet = backend.QUIET
    consulted = _consulted_knobs(backend, request, program, inputs)  # before any timing
    baseline = _metric(backend, request, program, inputs, values=_values(request, **quiet))
    trials: list = []
    screened_out: set[int] = set()
    first, every = request.part or (0, 1)  # this probe's share of the knobs
    for index, knob in enumerate(backend.knobs()):
        if index % every != first or (consulted is not None and knob.name not in consulted):
            continue
        for value in knob.choices:
            if value == knob.default:
                continue
            metric, screened = _trial(backend, request, program, inputs, baseline=baseline,
                                      values=_values(request, **quiet, **{knob.name: value}))
            trials.append(protocol.KnobTrialAnswer(knob.name, knob.stage, value, metric,
                                                   index=index))
            if screened:
                screened_out.add(len(trials) - 1)
    if isinstance(METRIC[request.metric], Clock):
        baseline, trials = _confirmed(backend, request, program, inputs, baseline=baseline,
                                      trials=trials, screened_out=screened_out)
    return protocol.KnobsAnswer("ok", baseline, tuple(trials))


def _trial(backend: Any, request: Request, program: Any, inputs: Any, baseline: float,
           values: dict) -> tuple[float, bool]:
    """The metric under one knob value, and whether the screen ruled it out. A clock's
    figure takes several cold compiles (warm-call processes); a trial that is nowhere near
    restoring needs only the screen's few to show it (on torch-spyre, where a compile takes
    seconds, seven of a x467 regression's eight knob values)."""
    method = METRIC[request.metric]
    if not (isinstance(method, Clock) and request.restoring_share):
        return _metric(backend, request, program, inputs, values=values), False
    count = method.count(request)
    readings = method.reading(backend, request, program, inputs, values=values,
                              count=min(SCREEN_READINGS, count))
    if min(readings) >= SCREEN_MARGIN * request.restoring_share * baseline:
        return statistics.median(readings), True
    if count > len(readings):
        readings += method.reading(backend, request, program, inputs, values=values,
                                   count=count - len(readings))
    return statistics.median(readings), False


def _confirmed(backend: Any, request: Request, program: Any, inputs: Any, baseline: float,
               trials: list, screened_out: set[int]) -> tuple[float, list]:
    """The defaults and the best trial measured again side by side, alternately, each then
    the median of its values; until the best trial is a confirmed one, or one the screen
    ruled out (then no trial can restore the metric). On a clock the
    defaults were measured first and the trials one after another, so a machine that grew
    quieter in between made every later trial look faster: a CI run named
    prepack_weights=False the workaround of a decompose stage doing its work three times."""
    quiet = backend.QUIET
    baselines, confirmed = [baseline], set[int]()
    while trials and len(confirmed) < CONFIRMED_TRIALS:
        best = min(range(len(trials)), key=lambda i: trials[i].metric)
        if best in confirmed or best in screened_out:
            break
        trial, values = trials[best], [trials[best].metric]
        for _ in range(CONFIRMATIONS):
            baselines.append(_metric(backend, request, program, inputs,
                                     values=_values(request, **quiet)))
            values.append(_metric(backend, request, program, inputs,
                                  values=_values(request, **quiet, **{trial.knob: trial.value})))
        trials[best] = dataclasses.replace(trial, metric=statistics.median(values))
        confirmed.add(best)
    return statistics.median(baselines), trials


def _scoped(backend: Any, request: Request, scope: protocol.KnobScope, program: Any,
            inputs: Any) -> tuple[protocol.ScopedAnswer, ...]:
    """The metric with `scope.knob` at `scope.value` for its first `limit` decisions only,
    per limit, and the decisions the compile logged."""
    counts = []
    for limit in scope.limits:
        values = _values(request, **backend.QUIET, **{scope.knob: scope.value},
                         knob_scope=[[scope.knob, limit]])
        with backend.decisions_logged() as records:
            metric = _metric(backend, request, program, inputs, values=values)
        applications = tuple(r for r in records if r.startswith(f"decision {scope.knob}#"))
        counts.append(protocol.ScopedAnswer(limit, metric, applications))
    return tuple(counts)


def _consulted_knobs(backend: Any, request: Request, program: Any, inputs: Any
                     ) -> set[str] | None:
    """The knobs a compile at the defaults consulted, from its logged decisions; None for a
    backend that does not log them (`SCOPES_KNOBS`). A knob the compile never consults (cse
    in a graph with no common subexpression) cannot change it, so its trial could only
    measure noise: on a clock under load, such a trial once read as the workaround of a
    decompose stage doing its work four times."""
    if not backend.SCOPES_KNOBS:
        return None
    with backend.decisions_logged() as records:
        backend.compile(program, inputs, _values(request, **backend.QUIET))
    return {r.split("#", 1)[0].removeprefix("decision ") for r in records}


def cmd_timing(request: Request) -> protocol.TimingAnswer:
    """Synchronized iterations for a report, measured by the reproducers' own loop
    (`harness.measure`): one cold compile, one warm-up call (its output is the one checked
    against float64), then `iterations` calls, each timed on the host clock and, where the
    backend has one, on the device clock; where the program cannot run here, the device's
    model alone."""
    backend = _backend(request)
    program, inputs = _program(request)
    values = _values(request)
    measured = _harness(request).measure(backend, program, inputs, values,
                                         iterations=_or(request.iterations, 100),
                                         compile_repeats=1)
    return protocol.TimingAnswer(
        status="ok", host_s=tuple(measured.host_s), device_us=tuple(measured.device_us),
        errors=measured.errors,
        kernels=tuple(protocol.KernelTime.of(kernel) for kernel in measured.kernels),
        compile_times={k: v for k, v in measured.compile_s.items() if k != "total"},
        environment={**backend.environment(), "python": sys.version.split()[0]},
        config=backend.settings(values), nonfinite=measured.nonfinite,
        width=None if request.source else _width(request))


def cmd_worker(request: Request) -> protocol.Done:
    """Answer candidate programs, one JSON `protocol.Candidate` per stdin line, until stdin
    closes: a `MetricAnswer` (or `Failed`) per line."""
    backend = _backend(request)
    for line in sys.stdin:
        candidate = codec.from_json(protocol.Candidate, json.loads(line))
        answer: protocol.MetricAnswer | protocol.Failed
        try:
            asked = dataclasses.replace(request, source=candidate.source)
            program, inputs = _program(asked)
            answer = protocol.MetricAnswer("ok", _metric(backend, asked, program, inputs,
                                                         values=_values(asked, **backend.QUIET)))
        except Exception as error:  # a candidate the compiler rejects is just not a repro
            answer = protocol.Failed("failed", f"{type(error).__name__}: {error}")
        sys.stdout.write(json.dumps(dataclasses.asdict(answer)) + "\n")
        sys.stdout.flush()
    return protocol.Done()


COMMANDS = {"discover": asv_commands.discover, "bench": asv_commands.bench,
            "sample": cmd_sample,
            "stages": cmd_stages, "knobs": cmd_knobs, "timing": cmd_timing,
            "worker": cmd_worker, "work": cmd_work}


def answer(command: str, request: Request) -> Any:
    """What `command` answers to `request`: its answer, or `Failed` (the compiler under test
    does not import: untestable; the command raised: failed, with the traceback)."""
    try:  # an import failure of the compiler under test makes the commit untestable
        if command != "discover":  # discovery imports the suite, which names its compiler
            _backend(request)
    except Exception as error:
        return protocol.Failed("untestable", f"the compiler under test does not import "
                               f"({Path(request.backend or DEFAULT_BACKEND).name}): {error}")
    try:
        return COMMANDS[command](request)
    except Exception as error:
        return protocol.Failed("failed", str(error) if getattr(error, "stage", None) else
                               f"{type(error).__name__}: {error}",
                               traceback.format_exc(limit=8), getattr(error, "stage", None))


def main(argv: list[str]) -> int:
    command, request_path, result_path = argv
    warnings.simplefilter("ignore")
    try:
        with open(request_path) as handle:
            request = codec.from_json(protocol.ProbeRequest, json.load(handle), "request")
    except codec.RecordError as error:  # a tool of another version wrote it
        answered: Any = protocol.Failed("failed", f"the probe cannot read its request: {error}")
    else:
        answered = answer(command, request)
    outcome = dataclasses.asdict(answered)
    outcome["version"] = protocol.PROBE_ANSWER_VERSION
    with open(result_path, "w") as handle:
        json.dump(outcome, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
