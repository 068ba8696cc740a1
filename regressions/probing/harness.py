"""The measurement every probe and every reproducer.py runs, kept as a module so it is linted.

Probes load this file by path (`regressions.probing.suite.harness_path`) inside the commit under
test, and `reports.reproducer` copies the code between the two marker comments into each
reproducer, after the program, its SETTINGS and the compiler's backend module
(`backends/`, embedded as text). So the code imports only the standard library and torch,
reaches the compiler under test only through the backend interface (`backends.interface`),
takes everything it needs as arguments, and must run against old builds as well as new ones
(a setting one build lacks is dropped and reported, never fatal). A reproducer run with the
recorded settings repeats the report's numbers: one cold compile, one warm-up call, then
synchronized iterations (each call returns when the compiled code is done: on spyre_sim, the
simulated device).
"""

# --- reproducer harness begins ---
import argparse
import contextlib
import dataclasses
import gc
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import torch

REPRODUCER_OUTPUT_VERSION = 2


def settings_for(backend, recorded, overrides):
    """This build's settings from recorded ones, plus `--set` overrides.

    Returns (values, dropped): names this build's compiler does not know are dropped, so
    settings recorded at the bad commit still run on the good one.
    """
    values, dropped = backend.known_settings(recorded)
    for name, value in overrides.items():
        if backend.known_settings({name: value})[1]:
            raise SystemExit(f"--set {name}=...: this build's {backend.NAME} has no setting "
                             f"{name!r}; known: {sorted(backend.settings())}")
        values[name] = value
    return values, dropped


def output_errors(output, reference, eager, eager_fp16=None):
    """max abs, max rel and RMSE vs float64; RMSE relative to eager's in the device format
    (torch same()), and to eager IEEE fp16's when given (older reports' baseline). max rel is
    max |out - ref| / max |ref|, as the numerics benchmarks define it (relative to the
    output's scale, so elements near zero do not dominate)."""
    out, ref = output.double(), reference.double()
    diff = (out - ref).abs()
    rmse = diff.pow(2).mean().sqrt().item()
    scale = ref.abs().max().item()

    def ratio_to(baseline):
        rmse_eager = (baseline.double() - ref).pow(2).mean().sqrt().item()
        if rmse_eager > 0:
            return rmse / rmse_eager
        return 0.0 if rmse == 0 else math.inf

    max_abs = diff.max().item()
    errors = {"max_abs": max_abs, "max_rel": max_abs / scale if scale else max_abs,
              "rmse": rmse, "rmse_ratio": ratio_to(eager)}
    if eager_fp16 is not None:
        errors["rmse_ratio_fp16"] = ratio_to(eager_fp16)
    return errors


def failures(errors, tolerance):
    """Why `errors` fail `tolerance` (empty: pass)."""
    reasons = []
    if not (math.isfinite(errors["max_abs"]) and math.isfinite(errors["rmse"])):
        reasons.append("non-finite output (NaN or inf)")
    if not errors["rmse_ratio"] <= tolerance["rmse_ratio"]:
        reasons.append(f"RMSE ratio {errors['rmse_ratio']:.3g} > {tolerance['rmse_ratio']:g}")
    if not errors["max_abs"] <= tolerance["max_abs"]:
        reasons.append(f"max abs {errors['max_abs']:.3g} > {tolerance['max_abs']:g}")
    return reasons


@dataclasses.dataclass(kw_only=True)
class Summary:
    """A series of timings: n, median, quartiles (numpy's linear interpolation), geometric
    mean, min and max."""

    n: int
    median: float
    q1: float
    q3: float
    geomean: float
    min: float
    max: float


def summarize(values):
    if len(values) > 1:
        q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    else:
        q1 = median = q3 = values[0]
    geomean = math.exp(statistics.fmean(math.log(v) for v in values)) \
        if all(v > 0 for v in values) else math.nan
    return Summary(n=len(values), median=median, q1=q1, q3=q3, geomean=geomean,
                   min=min(values), max=max(values))


@dataclasses.dataclass(kw_only=True)
class Measured:
    """One build's measurement (`measure`): the median seconds of each compile stage, and
    of the whole compile call ("total"); each synchronized call's host seconds (the
    backend's own clock, `Execution.host_s`) and device microseconds (where it has a device
    clock); the warm-up call's errors against float64, its kernels and where inf/NaN first
    appeared. Where the program cannot run here: the compiles, and the device's model once
    where there is one."""

    compile_s: dict
    host_s: list
    device_us: list
    errors: dict | None
    kernels: list
    nonfinite: str | None


def measure(backend, program, inputs, values, *, iterations, compile_repeats):
    """Cold compiles, a warm-up call, `iterations` synchronized calls, and the errors; where
    the compiled program cannot run here (`EXECUTES` False: a card's), the compiles and the
    device's model alone, with no host time and no errors. The probes' `timing` command
    measures with this function too, so a report's figures and its reproducer's agree."""
    compiles = []
    for _ in range(max(1, compile_repeats)):
        start = time.perf_counter()
        compiled = backend.compile(program, inputs, values)
        took = time.perf_counter() - start
        compiles.append({**{k: v for k, v in compiled.compile_s.items() if k != "total"},
                         "total": took})
    compile_s = {stage: statistics.median(c[stage] for c in compiles) for stage in compiles[0]}
    if not getattr(backend, "EXECUTES", True):
        try:
            modelled = compiled.run(*inputs) if backend.DEVICE_CLOCK else None
        except ImportError as missing:  # the device's model is spyre-regress's spyre_sim
            print(f"device time not modelled here: {missing}", file=sys.stderr)
            modelled = None
        return Measured(compile_s=compile_s, host_s=[],
                        device_us=[modelled.device_us] if modelled else [], errors=None,
                        kernels=list(modelled.kernels) if modelled else [],
                        nonfinite=None)
    first = compiled.run(*inputs)  # uploads the weights, as the probe's warm-up does
    host, device = [], []
    for _ in range(iterations):
        result = compiled.run(*inputs)  # returns once the compiled code is done
        host.append(result.host_s)
        if result.device_us is not None:
            device.append(result.device_us)
    return Measured(compile_s=compile_s, host_s=host, device_us=device,
                    errors=output_errors(first.outputs[0], *compiled.baselines(*inputs)),
                    kernels=list(first.kernels), nonfinite=first.nonfinite)


def kernel_rows(kernels):
    """Each kernel's record as JSON values; a kernel the model could not time (its name says
    why, its time is NaN) has no time."""
    return [{"name": k.name, "time_us": None if math.isnan(k.time_us) else k.time_us,
             "bound": k.bound, "cores": getattr(k, "cores", None)} for k in kernels]


@dataclasses.dataclass
class Build:
    """The compiler a reproducer ran: its backend's name, versions and folder, and Python's
    version."""

    backend: str
    versions: dict
    path: str
    python: str


@dataclasses.dataclass
class Correctness:
    """The warm-up call's errors against float64 (`output_errors`), and why they fail the
    recorded tolerance (none: a pass)."""

    errors: dict
    reasons: list

    def to_json(self):
        return {**self.errors, "pass": not self.reasons, "reasons": self.reasons}


@dataclasses.dataclass
class Instructions:
    """`--instructions`: instructions per compile region, or None and why not."""

    counts: dict | None
    note: str


@dataclasses.dataclass(kw_only=True)
class Outcome:
    """What a reproducer prints (`--json`: version REPRODUCER_OUTPUT_VERSION, the keys
    docs/formats.md lists): the build, the settings it ran with, the compile's seconds, the
    timings' summaries (None where nothing was timed on that clock), the correctness (None
    where the program cannot run here), the kernels, and the counts when asked for."""

    build: Build
    config: str
    overrides: dict
    dropped: list
    compile_s: dict
    device_us: Summary | None
    host_s: Summary | None
    correctness: Correctness | None
    kernels: list
    instructions: Instructions | None = None

    def to_json(self):
        document = {
            "version": REPRODUCER_OUTPUT_VERSION, "build": dataclasses.asdict(self.build),
            "config": self.config, "overrides": self.overrides, "dropped": self.dropped,
            "compile_s": self.compile_s,
            "device_us": None if self.device_us is None else dataclasses.asdict(self.device_us),
            "host_s": None if self.host_s is None else dataclasses.asdict(self.host_s),
            "correctness": None if self.correctness is None else self.correctness.to_json(),
            "kernels": self.kernels}
        if self.instructions is not None:
            document.update(compile_instructions=self.instructions.counts,
                            compile_instructions_note=self.instructions.note)
        return document


def parse_value(text):
    """`--set` values: JSON when they parse (true, 3, "x"), else the plain string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def compile_line(compile_s):
    """Per-stage compile times, then the whole call: its "total" times all of the
    backend's compile, of which the stages are a part. The rest is outside the stage timers:
    Dynamo's cache reset, which in a process's first compile also pays torch's lazy imports
    and first-use initialisation (7.2 s of an 11.0 s first compile of mlp at seq 127, width
    1024 on a loaded 2-core machine; 0.3 ms in the compiles after it)."""
    stages = {k: v for k, v in compile_s.items() if k != "total"}
    line = ("compile (s, median of cold compiles): "
            + ", ".join(f"{k} {v:.4f}" for k, v in stages.items()))
    if "total" in compile_s:
        line += (f"; the stages sum to {sum(stages.values()):.4f}, the whole "
                 f"compile call took {compile_s['total']:.4f} (the rest is outside the stages' "
                 "timers: in a process's first compile it also pays torch's lazy imports)")
    return line


def describe(outcome, settings):
    device, host = outcome.device_us, outcome.host_s
    correctness, build = outcome.correctness, outcome.build
    versions = ", ".join(f"{k} {v}" for k, v in build.versions.items() if k != "python")
    counted = outcome.instructions
    lines = [
        f"{build.backend} from {build.path} ({versions}, python {build.python})",
        f"settings: recorded '{outcome.config}'" + "".join(
            f", {k}={v!r}" for k, v in outcome.overrides.items())
        + (f"; dropped (unknown to this build): {', '.join(outcome.dropped)}"
           if outcome.dropped else ""),
        compile_line(outcome.compile_s),
        *(["compile instructions (millions, counted in this process: compare the two builds "
           "here): " + ", ".join(f"{k} {v / 1e6:.3f}" for k, v in counted.counts.items())]
          if counted is not None and counted.counts else
          [f"compile instructions: {counted.note}"] if counted is not None else []),
        *([f"device time: median {device.median:.2f} us, IQR {device.q1:.2f}-"
           f"{device.q3:.2f} us, geomean {device.geomean:.2f} us (n={device.n})"]
          if device else []),
        *([f"host time:   median {host.median * 1e3:.3f} ms, IQR "
           f"{host.q1 * 1e3:.3f}-{host.q3 * 1e3:.3f} ms (n={host.n})"] if host else []),
        *(["correctness vs float64: " + ", ".join(
            f"{k} {correctness.errors[k]:.3g}" for k in ("max_abs", "max_rel", "rmse",
                                                          "rmse_ratio"))
           + (" -> FAIL (" + "; ".join(correctness.reasons) + ")" if correctness.reasons
              else " -> PASS"), f"tolerance: {settings['tolerance_text']}"]
          if correctness is not None else
          ["host time and correctness: not measured (the compiled program runs only on the "
           "device; this build compiles it)"]),
    ]
    expected = settings.get("expected") or {}
    if expected:
        lines.append("when the report was written: " + expected.get("summary", ""))
    return "\n".join(lines)


# valgrind.h's client request on amd64 as machine code (preamble of four rotates, then
# `xchgq %rbx,%rbx`; arguments at %rax, result in %rdx), the same bytes as
# benchmarks/compile_work_child.py: a reproducer runs with torch alone, so it carries its own copy.
CLIENT_REQUEST = bytes.fromhex(
    "4889f8" "31d2" "48c1c703" "48c1c70d" "48c1c73d" "48c1c733" "4887db" "4889d0" "c3")
CALLGRIND_START_INSTRUMENTATION = (ord("C") << 24 | ord("T") << 16) + 4  # callgrind.h


def can_start_instrumentation():
    """Whether this machine can ask callgrind to start instrumenting from Python (amd64)."""
    import platform

    return platform.machine() in ("x86_64", "AMD64")


def start_instrumentation():
    """CALLGRIND_START_INSTRUMENTATION: callgrind ran this process uninstrumented (at native
    speed, the imports included) until now. A no-op outside valgrind."""
    import ctypes
    import mmap

    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(CLIENT_REQUEST)
    function = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p)(
        ctypes.addressof(ctypes.c_char.from_buffer(page)))
    function((ctypes.c_uint64 * 6)(CALLGRIND_START_INSTRUMENTATION))  # the rest zeroed


def counted_compile(backend, program, inputs, values):
    """Under callgrind: one discarded compile (lazy imports, first-use init), then the
    backend's regions (spyre_sim: each stage) with collection on and each count dumped, as
    torch.utils.benchmark collects callgrind. The cyclic collector is off inside a region: a
    collection costs in proportion to the heap. Instrumentation starts after the discarded
    compile where it can: the imports then run at native speed, and the counted regions are
    the same (one attention reproducer on spyre_sim: 43 s instead of 103 s, every stage's
    count within 0.61% of counting from the start)."""
    backend.compile(program, inputs, values)
    if can_start_instrumentation():
        start_instrumentation()

    @contextlib.contextmanager
    def region(name):
        gc.enable()
        gc.collect()
        gc.disable()
        torch._C._valgrind_toggle()
        try:
            yield
        finally:
            torch._C._valgrind_toggle_and_dump_stats()

    try:
        backend.compile_in_regions(program, inputs, values, region)
    finally:
        gc.enable()


def compile_instructions(backend, argv):
    """Instructions per compile region (spyre_sim: per stage): this script again under
    valgrind's callgrind, or a line saying why not. Counts repeat across runs (unlike a clock)
    with a pinned hash seed."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None, "valgrind is not installed (Debian/Ubuntu: apt-get install valgrind)"
    with tempfile.TemporaryDirectory(prefix="reproducer-cg-") as scratch:
        out = os.path.join(scratch, "cg")
        done = subprocess.run(
            [valgrind, "--tool=callgrind", "--collect-atstart=no",
             f"--instr-atstart={'no' if can_start_instrumentation() else 'yes'}",
             f"--callgrind-out-file={out}", f"--log-file={out}.log", sys.executable,
             os.path.abspath(sys.argv[0]), *argv, "--count-child"],
            env={**os.environ, "PYTHONHASHSEED": "0"}, capture_output=True, text=True)
        if done.returncode != 0:
            return None, f"the counted run failed (exit {done.returncode})"
        counts = {}
        try:
            for index, name in enumerate(backend.WORK_REGIONS, 1):
                with open(f"{out}.{index}") as dump:
                    totals = [line.split()[1] for line in dump
                              if line.startswith(("totals:", "summary:"))]
                counts[name] = int(totals[0])
        except (OSError, IndexError, ValueError) as error:
            return None, f"callgrind's counts could not be read ({error})"
        return counts, ""


def main(argv, backend, program, make_inputs, settings):
    parser = argparse.ArgumentParser(
        description="Reproduce the regression: run once with each build and compare.")
    parser.add_argument("--config", choices=sorted(settings["configs"]),
                        default=settings["default_config"],
                        help="which recorded settings to apply (default: %(default)s)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                        help="override one setting, e.g. a workaround knob")
    parser.add_argument("--iterations", type=int, default=settings["iterations"])
    parser.add_argument("--compile-repeats", type=int, default=settings["compile_repeats"])
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument("--instructions", action="store_true",
                        help="also count the compile's instructions under valgrind "
                             "(callgrind; per stage where the compiler has seams)")
    parser.add_argument("--count-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    overrides = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set {item!r}: expected FIELD=VALUE")
        overrides[name.strip()] = parse_value(value.strip())
    warnings.filterwarnings("ignore", message="spyre_sim: (float32|int64) tensors")
    torch.manual_seed(settings["seed"])
    inputs = make_inputs()
    values, dropped = settings_for(backend, settings["configs"][args.config], overrides)
    if args.count_child:
        counted_compile(backend, program, inputs, values)
        return 0
    measured = measure(backend, program, inputs, values, iterations=args.iterations,
                       compile_repeats=args.compile_repeats)
    errors = measured.errors
    outcome = Outcome(
        build=Build(backend.NAME, backend.environment(), backend.build_path(),
                    sys.version.split()[0]),
        config=args.config, overrides=overrides, dropped=dropped, compile_s=measured.compile_s,
        device_us=summarize(measured.device_us) if measured.device_us else None,
        host_s=summarize(measured.host_s) if measured.host_s else None,
        correctness=None if errors is None else Correctness(
            errors, failures(errors, settings["tolerance"])),
        kernels=kernel_rows(measured.kernels))
    if args.instructions:
        outcome.instructions = Instructions(*compile_instructions(
            backend, [a for a in argv if a not in ("--json", "--instructions")]))
    print(json.dumps(outcome.to_json(), indent=1) if args.json else describe(outcome, settings))
    return 0
# --- reproducer harness ends ---
