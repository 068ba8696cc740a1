"""The probe's asv commands: the suite's benchmarks discovered and run by asv_runner itself,
inside the probe child of one commit (`probe.py`), so a bisection step measures a benchmark
exactly as `asv run` does.

Loaded by path like the protocol it answers in: the probe child has no `regressions` package
on its path, only the commit's checkout.
"""

from __future__ import annotations

import itertools
import math
import os
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:  # imported by the tool (the in-process emulation)
    from regressions.probing import protocol
else:  # the probe child, which loaded this tree's protocol by path before this module
    protocol = sys.modules["spyre_regress_protocol"]


def discover(request: protocol.ProbeRequest) -> protocol.DiscoverAnswer:
    """The suite's benchmarks, as asv discovers them (imports the suite: a probe's job)."""
    from asv_runner.discovery import disc_benchmarks

    sys.path.insert(0, os.path.dirname(request.suite))
    listed = list(disc_benchmarks(request.suite))
    # each parameter's values as asv's repr strings, the form detect prints and bench takes
    return protocol.DiscoverAnswer(
        "ok", {b.name: tuple(b.param_names) for b in listed},
        {b.name: tuple(tuple(values) for values in b.params) for b in listed})


def bench(request: protocol.ProbeRequest) -> protocol.BenchAnswer | protocol.Failed:
    """One asv benchmark, exactly as asv's own runner executes it."""
    from asv_runner.discovery import get_benchmark_from_name

    benchmark = get_benchmark_from_name(request.suite, request.benchmark)
    # asv_runner keeps params as repr strings, the form asv writes into results files
    combos: list[tuple[str, ...]] = [tuple(combo) for combo in itertools.product(
        *benchmark.params)] if benchmark.params else [()]
    if request.params not in combos:
        return protocol.Failed("untestable", f"params {request.params} not in {combos[:4]}...")
    index = combos.index(request.params)
    benchmark = get_benchmark_from_name(request.suite, f"{request.benchmark}-{index}"
                                        if benchmark.params else request.benchmark)
    started = time.time()
    if benchmark.setup_cache_key is not None:  # asv runs this in a process of its own first
        benchmark.set_cache(benchmark.do_setup_cache())
    else:
        benchmark.set_cache(None)
    skip = benchmark.do_setup()
    samples: list[float] = []
    try:
        if skip:
            return protocol.Failed("untestable", "benchmark skipped (setup)")
        result = benchmark.do_run()
        # more rounds in this process until `samples` are in, as asv's `rounds` add them
        while isinstance(result, dict):
            samples += [float(s) for s in result["samples"]]
            if len(samples) >= (request.samples or 0):
                break
            result = benchmark.do_run()
    finally:
        benchmark.do_teardown()
    if not samples and (result is None or (isinstance(result, float) and math.isnan(result))):
        return protocol.Failed("untestable", "benchmark skipped (NaN)")
    return protocol.BenchAnswer(
        status="ok", samples=tuple(samples) if samples else (float(result),),
        deterministic=not samples,
        param_index=index, combos=len(combos),
        param_lists=tuple(tuple(values) for values in benchmark.params),
        benchmark_version=getattr(benchmark, "version", None), started_at=started)
