"""Example investigations without git: the real Investigator on builds emulated in-process.

Tests, scripts/screenshot_report.py and the docs need realistic investigations of a known
change. Here the commits are `spyre_regress.emulated.EmulatedBuild`s (a changed Config
default, or a patch that slows a stage down) and the measurements are the probe commands run
in this process, so the investigation, from bisection to timing, is the one the nightly
runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import spyre_sim
from regressions import stats
from regressions.bisection import minimize
from regressions.detection.alerts import Alert
from regressions.detection.detect import Regression
from regressions.investigation.investigator import Investigator
from regressions.investigation.model import Investigation, Target
from spyre_regress.emulated import EmulatedBuild, InProcessProber, ListHistory


def captured_source(fn: Callable, inputs: Sequence[Any], header: str) -> str:
    """`fn`'s captured ATen graph as a standalone module
    (regressions.bisection.minimize.to_source)."""
    graph = spyre_sim.capture(fn, inputs).graphs[0]
    return minimize.to_source(minimize.from_graph(graph.graph_module, graph.example_inputs),
                              header)


def detected_alert(prober: InProcessProber, history: ListHistory, target: Target,
                   params: str) -> Alert:
    """The alert detection would raise: the benchmark's samples at both ends, compared."""
    good, bad = history.order[0], history.order[-1]
    before, after = (prober.bench(commit, target).samples for commit in (good, bad))
    interval = stats.ratio_interval(before, after)
    p = None if len(before) == 1 else stats.mann_whitney(before, after, "greater").pvalue
    member = Regression(machine="emulated", env="in-process", benchmark=target.benchmark,
                        params=params, kind=target.measures.name,
                        good_commit=good, bad_commit=bad, good_position=0,
                        bad_position=len(history.order) - 1, ratio=interval.ratio,
                        ci=(interval.low, interval.high), p=p, q=p, baseline=float(min(before)))
    return Alert(target.measures.name, good, bad, (member,), probe=member)


def investigate(target: Target, params: str, source: str, builds: Sequence[EmulatedBuild],
                work_dir: Path, progress: Callable[[str], None] = lambda _: None
                ) -> Investigation:
    """The investigation of the change from `builds[0]` to `builds[-1]` on `source`."""
    work_dir.mkdir(parents=True, exist_ok=True)
    history = ListHistory(builds)
    prober = InProcessProber(history, source, work_dir)
    alert = detected_alert(prober, history, target, params)
    return Investigator(history, prober, progress).investigate(alert, target, work_dir)


def fusion_example(work_dir: Path, progress: Callable[[str], None] = lambda _: None
                   ) -> tuple[Investigation, EmulatedBuild]:
    """A device-time regression: among harmless commits, one turns pointwise fusion off by
    default; the MLP block at [127, 512] pays for it. Returns the investigation and the
    changing commit (what bisection must name)."""
    import torch
    import torch.nn.functional as F

    def mlp(x, w1, b1, w2, b2):
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)

    generator = torch.Generator().manual_seed(0)
    inputs = (torch.randn(127, 512, generator=generator),
              torch.randn(512, 512, generator=generator) * 0.04, torch.zeros(512),
              torch.randn(512, 512, generator=generator) * 0.04, torch.zeros(512))
    source = captured_source(mlp, inputs, "MLP block (Linear -> GELU -> Linear) at [127, 512].")
    target = Target(benchmark="bench_execute.ExecuteDeviceTime.time_device",
                    params=("'mlp'", "127"), workload="mlp",
                    seq=127, width=512, metric="device_time")
    change = EmulatedBuild("config: turn pointwise fusion off by default", {"fusion": False})
    history = [EmulatedBuild("lower: name the fusion groups"),
               EmulatedBuild("docs: explain sticks"), change,
               EmulatedBuild("sdsc: comment the core-to-slice map")]
    return investigate(target, "('mlp', 127)", source, history, work_dir=work_dir,
                       progress=progress), change
