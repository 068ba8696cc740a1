"""Investigation documents without git: one program, two builds emulated in one process.

Tests, scripts/screenshot_report.py and the docs need realistic investigations, and a real
one needs two commits and a bisection. Here a build is a `Config` (two builds that differ in
one knob emulate a commit that changed a default) plus an optional patch (a context manager
that, e.g., slows one stage down: a compile-time regression no knob can express). Each build
is measured the way regressions/probe.py measures a commit: cold compiles with per-stage
times and artifacts, one warm-up call, synchronized iterations, errors against float64 after
every executable stage, and a Chrome trace. The result follows docs/formats.md exactly.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

import spyre_sim
from regressions import minimize, stats
from reports.harness import output_errors
from reports.investigation import INVESTIGATION_VERSION
from spyre_sim.capture import compile_log

ALERT_KINDS = {"device_time": "time", "compile_time": "compile", "numerics": "numerics"}
NUMERICS_TOLERANCE = 0.10  # a stage's error must grow by 10% to count as the first drift


@dataclass(frozen=True)
class EmulatedBuild:
    subject: str
    config: spyre_sim.Config = field(default_factory=spyre_sim.Config)
    patch: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext

    @property
    def sha(self) -> str:
        return hashlib.sha1(self.subject.encode()).hexdigest()


@dataclass(frozen=True)
class ProbeProgram:
    workload: str
    seq: int
    width: int | None
    source: str  # a module defining program(*inputs) and make_inputs()
    benchmark: str
    params: str


def captured_source(fn: Callable, inputs: Sequence[Any], header: str) -> str:
    """`fn`'s captured ATen graph as a standalone module (regressions.minimize.to_source)."""
    artifact = spyre_sim.capture(fn, inputs)
    graph = artifact.graphs[0]
    return minimize.to_source(minimize.from_graph(graph.graph_module, graph.example_inputs),
                              header)


def load_program(source: str) -> tuple[Callable, tuple]:
    namespace: dict = {"__name__": "emulated_program"}
    exec(compile(source, "<program>", "exec"), namespace)  # noqa: S102 (our own source)
    torch.manual_seed(0)
    return namespace["program"], tuple(namespace["make_inputs"]())


def measure_build(build: EmulatedBuild, program: Callable, inputs: tuple, iterations: int,
                  compile_repeats: int, trace_path: Path) -> dict:
    """The probe's timing document for one build, plus what stage bisection needs."""
    log_lines: list[str] = []
    with build.patch():
        compiles = []
        for attempt in range(compile_repeats):
            last = attempt == compile_repeats - 1  # the compile log of the last compile
            with compile_log(last) as lines:
                compiled = spyre_sim.compile(program, inputs, build.config)
            if last:
                log_lines = lines
            compiles.append(compiled.compile_times)
        first = compiled.run(*inputs)
        host, device = [], []
        for _ in range(iterations):
            start = time.perf_counter()
            result = compiled.run(*inputs)
            host.append(time.perf_counter() - start)
            device.append(result.device_time_us)
        reference = compiled.reference(*inputs)[0]
        eager16 = compiled.reference(*inputs, dtype=torch.float16)[0]
        stage_errors = {stage: output_errors(compiled.run_stage(stage, *inputs)[0], reference,
                                             eager16)
                        for stage in spyre_sim.EXECUTABLE_STAGES}
        quiet = spyre_sim.compile(program, inputs, build.config.replace(noise_cv=0.0))
        quiet_run = quiet.run(*inputs)
    trace_path.write_text(json.dumps(first.trace))
    timing = {
        "version": 1, "status": "ok", "host_s": host, "device_us": device,
        "errors": output_errors(first.outputs[0], reference, eager16),
        "kernels": [{"name": k.name, "time_us": k.time_us, "bound": k.bound, "cores": k.cores}
                    for k in first.kernels],
        "compile_times": compiles[-1],
        "environment": {"torch": torch.__version__, "spyre_sim": spyre_sim.__version__,
                        "python": sys.version.split()[0], "cores": build.config.cores},
        "config": build.config.to_dict()}
    return {"timing": timing, "texts": compiled.artifacts, "compiles": compiles,
            "stage_errors": stage_errors, "log": "\n".join(log_lines),
            "quiet_us": quiet_run.device_time_us,
            "quiet_kernels": {k.name: k.time_us for k in quiet_run.kernels}}


def stage_document(good: Mapping, bad: Mapping, shas: tuple[str, str], workload: str,
                   shape: str) -> dict:
    """What stage bisection reports: artifact diffs, stage compile times, kernels, numerics."""
    rows, diffs = [], {}
    for stage in spyre_sim.STAGES:
        diff = "".join(difflib.unified_diff(
            good["texts"][stage].splitlines(keepends=True),
            bad["texts"][stage].splitlines(keepends=True),
            fromfile=f"good/{stage}", tofile=f"bad/{stage}"))
        diffs[stage] = diff
        before = [c[stage] for c in good["compiles"]]
        after = [c[stage] for c in bad["compiles"]]
        rows.append({"stage": stage, "changed": bool(diff),
                     "diff_lines": sum(1 for line in diff.splitlines() if line[:1] in "+-"
                                       and not line.startswith(("+++", "---"))),
                     "compile_s_good": statistics.median(before),
                     "compile_s_bad": statistics.median(after),
                     "compile_ratio": statistics.median(after) / statistics.median(before),
                     "compile_p": stats.mann_whitney(before, after).pvalue})
    first = next((r["stage"] for r in rows if r["changed"]), None)
    basis = "artifact" if first else None
    if first is None:
        # of the significantly slower stages, the one that added the most time: a ratio alone
        # lets a sub-millisecond stage's scheduling noise outrank a real slowdown
        slower = [r for r in rows if r["compile_ratio"] >= 1.5 and r["compile_p"] < 0.05]
        if slower:
            worst = max(slower, key=lambda r: r["compile_s_bad"] - r["compile_s_good"])
            first, basis = worst["stage"], "compile_time"
    drift = next((s for s in spyre_sim.EXECUTABLE_STAGES
                  if bad["stage_errors"][s]["rmse_ratio"]
                  > good["stage_errors"][s]["rmse_ratio"] * (1 + NUMERICS_TOLERANCE) + 1e-12),
                 None)
    names = list(dict.fromkeys([*good["quiet_kernels"], *bad["quiet_kernels"]]))
    diff = diffs[first] if basis == "artifact" else ""
    log = [line for line in bad["log"].splitlines() if first
           and line.startswith(f"spyre_sim.{first} ")]
    return {"version": 1, "good": shas[0], "bad": shas[1], "workload": workload,
            "shape": shape, "first_divergent_stage": first, "basis": basis,
            "stage_diff_lines": next((r["diff_lines"] for r in rows if r["stage"] == first), 0)
            if basis == "artifact" else 0,
            "diff": diff, "stages": rows,
            "kernels": [{"name": n, "good_us": good["quiet_kernels"].get(n),
                         "bad_us": bad["quiet_kernels"].get(n)} for n in names],
            "device_time_us": {"good": good["quiet_us"], "bad": bad["quiet_us"]},
            "numerics_first_divergent_stage": drift,
            "numerics": {"good": good["stage_errors"], "bad": bad["stage_errors"]},
            "log_excerpt": "\n".join(log[:40])}


def _metric_value(metric: str, measured: Mapping) -> float:
    if metric == "device_time":
        return measured["quiet_us"]
    if metric == "numerics":
        return measured["timing"]["errors"]["rmse_ratio"]
    return sum(statistics.median(c[s] for c in measured["compiles"])
               for s in measured["compiles"][0])


def _probe_member(metric: str, probe: ProbeProgram, good: Mapping, bad: Mapping) -> dict:
    if metric == "device_time":
        before, after = good["timing"]["device_us"], bad["timing"]["device_us"]
    elif metric == "compile_time":
        before = [sum(c.values()) for c in good["compiles"]]
        after = [sum(c.values()) for c in bad["compiles"]]
    else:
        before = [good["timing"]["errors"]["rmse_ratio"]]
        after = [bad["timing"]["errors"]["rmse_ratio"]]
    interval = stats.ratio_interval(before, after)
    p = stats.mann_whitney(before, after).pvalue if len(before) > 1 else 0.0
    return {"benchmark": probe.benchmark, "params": probe.params, "ratio": interval.ratio,
            "ci": [interval.low, interval.high], "p": p, "q": p, "machine": "emulated",
            "env": "in-process"}


def emulate_investigation(metric: str, probe: ProbeProgram, good: EmulatedBuild,
                          bad: EmulatedBuild, workdir: Path, *, iterations: int = 100,
                          compile_repeats: int = 5,
                          extra_members: Sequence[dict] = ()) -> dict:
    """A complete investigation document for `metric`, measured in this process."""
    program, inputs = load_program(probe.source)
    workdir.mkdir(parents=True, exist_ok=True)
    traces = {"good": workdir / "probe_trace_good.json", "bad": workdir / "probe_trace_bad.json"}
    measured = {name: measure_build(build, program, inputs, iterations, compile_repeats,
                                    traces[name])
                for name, build in (("good", good), ("bad", bad))}
    shape = f"[{probe.seq}, {probe.width}]" if probe.width else f"[{probe.seq}]"
    changed = [k for k in spyre_sim.KNOBS if getattr(good.config, k.name)
               != getattr(bad.config, k.name)]
    workaround = None
    if len(changed) == 1:
        knob = changed[0]
        fixed = EmulatedBuild(bad.subject, bad.config.replace(
            **{knob.name: getattr(good.config, knob.name)}), bad.patch)
        with_knob = measure_build(fixed, program, inputs, 1, 1, workdir / "knob_trace.json")
        values = [_metric_value(metric, m) for m in (measured["bad"], with_knob,
                                                     measured["good"])]
        loss = values[0] - values[2]
        workaround = {"knob": knob.name, "value": getattr(good.config, knob.name),
                      "stage": knob.stage, "metric_bad": values[0],
                      "metric_with_knob": values[1], "metric_good": values[2],
                      "recovered": (values[0] - values[1]) / loss if loss else 1.0,
                      "decisive_application": None}
    member = _probe_member(metric, probe, measured["good"], measured["bad"])
    commits = {side: {"sha": build.sha, "subject": build.subject, "date": "2025-01-01T00:00:00Z"}
               for side, build in (("good", good), ("bad", bad))}
    steps = [{"commit": build.sha, "n": iterations,
              "median": statistics.median(measured[side]["timing"]["device_us"]),
              "reference": "-", "pvalue": None, "verdict": side, "note": "emulated build"}
             for side, build in (("good", good), ("bad", bad))]
    ops = sum(1 for line in probe.source.splitlines() if " = aten." in line) or None
    return {
        "version": INVESTIGATION_VERSION,
        "alert": {"good_commit": good.sha, "bad_commit": bad.sha, "kind": ALERT_KINDS[metric],
                  "members": [member, *extra_members],
                  "probe": {"benchmark": probe.benchmark, "params": probe.params}},
        "metric": metric,
        "commits": {**commits, "culprit": commits["bad"]},
        "bisect": {"version": 1, "culprit": bad.sha, "good": good.sha, "bad": bad.sha,
                   "commits_in_range": 1, "commits_measured": 2, "reproduced": True,
                   "candidates": [], "kind": "performance", "steps": steps},
        "stages": stage_document(measured["good"], measured["bad"], (good.sha, bad.sha),
                                 probe.workload, shape),
        "workaround": workaround,
        "minimized": {"source": probe.source, "ops_before": ops, "ops_after": ops,
                      "queries": 0, "ratio_before": member["ratio"],
                      "ratio_after": member["ratio"]},
        "probe": {"workload": probe.workload, "seq": probe.seq, "width": probe.width,
                  "config": bad.config.to_dict()},
        "timing": {side: measured[side]["timing"] for side in ("good", "bad")},
        "traces": {side: str(path) for side, path in traces.items()},
    }
