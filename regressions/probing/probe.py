"""The probe: measurements taken inside one commit's compiler, in a subprocess of its own.

Run as a script with `python -P probe.py COMMAND REQUEST.json RESULT.json`, with PYTHONPATH
set to a checkout of the commit under test. It imports torch, that checkout's compiler through
a backend module (`backends/spyre.py`, `backends/inductor.py`: the backend interface, loaded
by path from the current tree, as are `asv_runner`'s suite and the workload catalogue) and
nothing from `regressions`, so the tools measure historical compilers with today's benchmarks
and workloads, as asv does. `sample`, `knobs`, `stages` and `worker` measure through the
backend interface, as does `timing`; `work` runs the suite's own compile_work module. Commands:

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

Output is one JSON document with a "version" field; any failure writes {"status": ...}.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

PROBE_ANSWER_VERSION = 1


def _load(path: str, name: str):
    """A module of the current tree, by file path (never the checkout's own copy)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


# The backend a request that names none measures: spyre_sim's, beside this file in the tree.
DEFAULT_BACKEND = Path(__file__).resolve().parents[2] / "backends" / "spyre.py"


def _backend(request: dict):
    """The compiler under test: the backend module the request names by path (its compiler
    is the checkout's, on PYTHONPATH), spyre_sim's when it names none (a request written by
    a spyre-regress from before backends)."""
    backend = _load(request.get("backend") or str(DEFAULT_BACKEND), "spyre_regress_backend")
    if request.get("compiler"):  # the checkout's module in the backend's compiler's place
        backend.COMPILER = request["compiler"]
    return backend


def _harness(request: dict):
    """regressions/probing/harness.py: the reproducers' measurement, so probes and reports agree."""
    return _load(request["harness"], "spyre_regress_harness")


def _program(request: dict):
    if request.get("source"):
        namespace: dict = {}
        exec(compile(request["source"], "<minimized>", "exec"), namespace)  # noqa: S102
        return namespace["program"], namespace["make_inputs"]()
    workloads = _load(request["workloads"], "spyre_regress_workloads")
    return workloads.build(request["workload"], int(request["seq"]), request.get("width"))


def _width(request: dict) -> int | None:
    """The width the catalogue builds the workload at (its default when none is asked)."""
    if request.get("width"):
        return int(request["width"])
    if request.get("source") or not request.get("workloads"):
        return None  # a program given as source: its shapes are its own
    workloads = _load(request["workloads"], "spyre_regress_workloads")
    workload = getattr(workloads, "WORKLOADS", {}).get(request["workload"])
    return getattr(workload, "default_width", None)


def cmd_discover(request: dict) -> dict:
    """The suite's benchmarks, as asv discovers them (imports the suite: a probe's job)."""
    from asv_runner.discovery import disc_benchmarks

    sys.path.insert(0, os.path.dirname(request["suite"]))
    listed = list(disc_benchmarks(request["suite"]))
    found = {b.name: list(b.param_names) for b in listed}
    # each parameter's values as asv's repr strings, the form detect prints and bench takes
    params = {b.name: [list(values) for values in b.params] for b in listed}
    return {"status": "ok", "benchmarks": found, "params": params}


def _values(request: dict, **overrides) -> dict:
    """The build's config values for a backend's `compile`: the request's, then `overrides`."""
    return {**(request.get("config") or {}), **overrides}


def cmd_work(request: dict) -> dict:
    """Instructions per stage: the suite's own measurement (benchmarks/compile_work.py), so
    probes and the CompileWork benchmark count the same way."""
    work = _load(request["compile_work"], "spyre_regress_compile_work")
    point = (request["workload"], int(request["seq"]), request.get("width"))
    try:
        measured = work.measure([point], config=request.get("config") or None)
    except work.ValgrindUnavailable as missing:
        return {"status": "untestable", "detail": str(missing)}
    if measured.missing:
        return {"status": "untestable", "detail": measured.missing}
    counts = next(iter(measured.counts.values()), None)
    if counts is None:
        return {"status": "failed", "detail": next(iter(measured.errors.values()), "no count")}
    return {"status": "ok", "instructions": {stage: int(n) for stage, n in counts.items()}}


def cmd_bench(request: dict) -> dict:
    """One asv benchmark, exactly as asv's own runner executes it."""
    from asv_runner.discovery import get_benchmark_from_name

    benchmark = get_benchmark_from_name(request["suite"], request["benchmark"])
    # asv_runner keeps params as repr strings, the form asv writes into results files
    combos = [tuple(combo) for combo in itertools.product(*benchmark.params)] \
        if benchmark.params else [()]
    wanted = tuple(request.get("params") or ())
    if wanted not in combos:
        return {"status": "untestable", "detail": f"params {wanted} not in {combos[:4]}..."}
    index = combos.index(wanted)
    benchmark = get_benchmark_from_name(request["suite"], f"{request['benchmark']}-{index}"
                                        if benchmark.params else request["benchmark"])
    started = time.time()
    if benchmark.setup_cache_key is not None:  # asv runs this in a process of its own first
        benchmark.set_cache(benchmark.do_setup_cache())
    else:
        benchmark.set_cache(None)
    skip = benchmark.do_setup()
    samples: list[float] = []
    try:
        if skip:
            return {"status": "untestable", "detail": "benchmark skipped (setup)"}
        result = benchmark.do_run()
        # more rounds in this process until `samples` are in, as asv's `rounds` add them
        while isinstance(result, dict):
            samples += [float(s) for s in result["samples"]]
            if len(samples) >= int(request.get("samples") or 0):
                break
            result = benchmark.do_run()
    finally:
        benchmark.do_teardown()
    described = {"started_at": started, "param_index": index, "combos": len(combos),
                 "param_lists": [list(values) for values in benchmark.params],
                 "benchmark_version": getattr(benchmark, "version", None)}
    if samples:
        return {"status": "ok", "samples": samples, "deterministic": False, **described}
    if result is None or (isinstance(result, float) and math.isnan(result)):
        return {"status": "untestable", "detail": "benchmark skipped (NaN)"}
    return {"status": "ok", "samples": [float(result)], "deterministic": True, **described}


def cmd_sample(request: dict) -> dict:
    """The metric's samples measured directly: what the benchmark measures, without asv."""
    backend = _backend(request)
    program, inputs = _program(request)
    count = int(request.get("samples", 20))
    samples, deterministic = SAMPLES[request["metric"]](backend, request, program, inputs,
                                                        count)
    return {"status": "ok", "samples": samples, "deterministic": deterministic}


def _error_samples(backend, request, program, inputs, count):
    return [_metric(backend, request, program, inputs, _values(request))], True


def _compile_samples(backend, request, program, inputs, count):
    values = _values(request)
    return [_metric(backend, {**request, "compile_repeats": 1}, program, inputs, values)
            for _ in range(count)], False


def _run_samples(clock):
    """Warm calls of the compiled program, each read on `clock` (an Execution) -> seconds;
    each compile draws its own run-to-run noise where the backend simulates it."""
    def samples(backend, request, program, inputs, count):
        compiled = backend.compile(program, inputs, _values(request, **backend.INDEPENDENT))
        compiled.run(*inputs)  # warm-up: uploads the weights, builds the executor
        return [clock(backend, compiled.run(*inputs)) for _ in range(count)], False
    return samples


def _device_s(backend, execution) -> float:
    if execution.device_us is None:
        raise ValueError(f"{backend.NAME} has no device clock: measure host_time instead")
    return execution.device_us / 1e6


# How each probe method (the metric table's `probe`) samples its metric.
SAMPLES = {"numerics": _error_samples, "compile_time": _compile_samples,
           "device_time": _run_samples(_device_s),
           "host_time": _run_samples(lambda _, execution: execution.host_s)}


def _kernels(execution) -> list[dict]:
    return [{"name": name, "time_us": time_us, "bound": bound, "cores": cores}
            for name, time_us, bound, cores in execution.kernels]


def cmd_stages(request: dict) -> dict:
    """A compile with stage capture, then `compile_repeats` compiles for their seconds per
    stage, a noise-free run (device time, kernels and trace where the backend models a
    device), each executable stage's error against float64, and, when the request asks for
    the host clock, the median warm call's host seconds."""
    backend = _backend(request)
    program, inputs = _program(request)
    values = _values(request)
    backend.capture(program, inputs, values, Path(request["capture_dir"]))
    compiled = [backend.compile(program, inputs, values)
                for _ in range(int(request.get("compile_repeats", 4)))]
    run = backend.compile(program, inputs, _values(request, **backend.QUIET)).run(*inputs)
    if request.get("trace") and run.trace is not None:
        with open(request["trace"], "w") as handle:
            json.dump(run.trace, handle)
    stage_errors = {}
    if request.get("numerics", True):
        harness = _harness(request)
        references = compiled[0].baselines(*inputs)
        stage_errors = {stage: harness.output_errors(outputs[0], *references)
                        for stage, outputs in compiled[0].stage_outputs(*inputs).items()}
    return {"status": "ok",
            "compile_times": [{s: c.compile_s[s] for s in backend.STAGES} for c in compiled],
            "device_time_us": run.device_us,
            "kernels": _kernels(run),
            "stage_errors": stage_errors, "stages": list(backend.STAGES),
            "width": _width(request), "backend": backend.environment(),
            "host_s": (_warm_call_seconds(compiled[0], request, inputs)
                       if request.get("host_clock") else None)}


def _metric(backend, request: dict, program, inputs, values: dict) -> float:
    """One value of the target's metric (noise-free where the values say so)."""
    return METRIC[request["metric"]](backend, request, program, inputs, values)


def _compile_seconds(backend, request, program, inputs, values) -> float:
    """The stage's own compile time when one is named (a stage regression hides in the
    total), else the whole compile; the median of a few cold compiles."""
    stage = request.get("stage")
    times = []
    for _ in range(int(request.get("compile_repeats", 5))):
        start = time.perf_counter()
        compiled = backend.compile(program, inputs, values)
        total = time.perf_counter() - start
        times.append(compiled.compile_s[stage] if stage else total)
    return statistics.median(times)


def _device_us(backend, request, program, inputs, values) -> float:
    return _device_s(backend, backend.compile(program, inputs, values).run(*inputs)) * 1e6


def _host_seconds(backend, request, program, inputs, values) -> float:
    """The median wall time of warm calls, in seconds."""
    return _warm_call_seconds(backend.compile(program, inputs, values), request, inputs)


def _warm_call_seconds(compiled, request, inputs) -> float:
    """The median wall time of `calls` calls of a compiled program after a warm-up call."""
    compiled.run(*inputs)
    return statistics.median(compiled.run(*inputs).host_s
                             for _ in range(int(request.get("calls", 21))))


def _output_error(backend, request, program, inputs, values) -> float:
    """The output's error against float64 and the backend's eager baselines, computed as the
    reproducers compute it (the harness's `output_errors`)."""
    compiled = backend.compile(program, inputs, values)
    errors = _harness(request).output_errors(compiled.run(*inputs).outputs[0],
                                             *compiled.baselines(*inputs))
    return errors[request["error"]]


# How each probe method (the metric table's `probe`) measures one value of its metric.
METRIC = {"compile_time": _compile_seconds, "device_time": _device_us,
          "host_time": _host_seconds, "numerics": _output_error}


def cmd_knobs(request: dict) -> dict:
    """The metric, noise-free, under each other choice of each of the backend's knobs (this
    probe's `part` of them); with `scope`, one knob applied to its first N decisions only
    (spyre_sim's `Config.knob_scope`, its decisions logged by name)."""
    import logging

    backend = _backend(request)
    program, inputs = _program(request)
    quiet = backend.QUIET
    baseline = _metric(backend, request, program, inputs, _values(request, **quiet))
    trials = []
    first, every = request.get("part") or (0, 1)  # this probe's share of the knobs
    for index, knob in enumerate(backend.knobs()):
        if index % every != first:
            continue
        for value in knob.choices:
            if value == knob.default:
                continue
            values = _values(request, **quiet, **{knob.name: value})
            trials.append({"knob": knob.name, "stage": knob.stage, "value": value,
                           "metric": _metric(backend, request, program, inputs, values),
                           "index": index})
    result = {"status": "ok", "baseline": baseline, "trials": trials}
    scope = request.get("scope")
    if scope and backend.SCOPES_KNOBS:  # a compiler that logs its decisions
        knob, value = scope["knob"], scope["value"]
        records: list[str] = []

        class Collect(logging.Handler):
            def emit(self, record):
                records.append(record.getMessage())

        logger = logging.getLogger("spyre_sim")
        handler = Collect()
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        counts = []
        for limit in scope["limits"]:
            records.clear()
            values = _values(request, **quiet, **{knob: value}, knob_scope=[[knob, limit]])
            metric = _metric(backend, request, program, inputs, values)
            applications = [r for r in records if r.startswith(f"decision {knob}#")]
            counts.append({"limit": limit, "metric": metric, "applications": applications})
        logger.removeHandler(handler)
        result["scoped"] = counts
    return result


def cmd_timing(request: dict) -> dict:
    """Synchronized iterations for a report, through the backend, as the reproducers run
    them (harness.measure): one cold compile, one warm-up call (its output is the one
    checked against float64), then `iterations` calls, each timed on the host clock and, where
    the backend has one, on the device clock."""
    backend = _backend(request)
    program, inputs = _program(request)
    values = _values(request)
    compiled = backend.compile(program, inputs, values)
    first = compiled.run(*inputs)  # uploads the weights, as the reproducer's warm-up does
    runs = [compiled.run(*inputs) for _ in range(int(request.get("iterations", 100)))]
    errors = _harness(request).output_errors(first.outputs[0], *compiled.baselines(*inputs))
    return {"status": "ok", "host_s": [run.host_s for run in runs],
            "device_us": [run.device_us for run in runs] if backend.DEVICE_CLOCK else [],
            "errors": errors, "nonfinite": first.nonfinite, "kernels": _kernels(first),
            "compile_times": {k: v for k, v in compiled.compile_s.items() if k != "total"},
            "width": None if request.get("source") else _width(request),
            "environment": {**backend.environment(), "python": sys.version.split()[0]},
            "config": backend.settings(values)}


def cmd_worker(request: dict) -> dict:
    """Answer candidate programs, one JSON request per stdin line, until stdin closes."""
    backend = _backend(request)
    for line in sys.stdin:
        candidate = json.loads(line)
        try:
            program, inputs = _program({**request, **candidate})
            answer = {"status": "ok", "metric": _metric(backend, request, program, inputs,
                                                         _values(request, **backend.QUIET))}
        except Exception as error:  # a candidate the compiler rejects is just not a repro
            answer = {"status": "failed", "detail": f"{type(error).__name__}: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return {"status": "ok"}


COMMANDS = {"discover": cmd_discover, "bench": cmd_bench, "sample": cmd_sample,
            "stages": cmd_stages, "knobs": cmd_knobs, "timing": cmd_timing,
            "worker": cmd_worker, "work": cmd_work}


def main(argv: list[str]) -> int:
    command, request_path, result_path = argv
    with open(request_path) as handle:
        request = json.load(handle)
    warnings.simplefilter("ignore")
    try:  # an import failure of the compiler under test makes the commit untestable
        if command != "discover":  # discovery imports the suite, which names its compiler
            _backend(request)
    except Exception as error:
        outcome = {"status": "untestable", "detail": f"the compiler under test does not "
                   f"import ({Path(request.get('backend') or DEFAULT_BACKEND).name}): {error}"}
    else:
        try:
            outcome = COMMANDS[command](request)
        except Exception as error:
            outcome = {"status": "failed", "detail": f"{type(error).__name__}: {error}",
                       "traceback": traceback.format_exc(limit=8)}
    outcome["version"] = PROBE_ANSWER_VERSION
    with open(result_path, "w") as handle:
        json.dump(outcome, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
