"""The Investigator's verdicts on emulated builds: what it refuses to report."""

import random

import pytest
import torch

from regressions import metrics
from regressions.bisection import knobs, stages
from regressions.bisection.commits import Measurement
from regressions.investigation import model
from regressions.investigation.evidence import evidence_of, not_reproduced
from regressions.investigation.investigator import (
    Investigator,
    NotReproduced,
    measured_regression,
)
from regressions.investigation.model import Target
from regressions.records import lifecycle
from spyre_regress import example
from spyre_regress.emulated import EmulatedBuild, InProcessProber, ListHistory

COUNTS = {"dynamo": 330_000_000, "decompose": 8_200_000, "lower": 860_000, "layout": 3_400_000,
          "kernel": 35_000_000, "sdsc": 57_000_000, "backend": 37_800_000, "runtime": 5_600_000}


class LoadedMachine(InProcessProber):
    """The builds are identical, but the stage's clock read 30% slower at the newest one
    (a busy neighbour), while callgrind counts the same instructions at every build."""

    def __init__(self, *args):
        super().__init__(*args)
        self.runs: dict[str, int] = {}

    def bench(self, commit, target, samples=None):
        slower = 1.3 if commit == self.history.order[-1] else 1.0
        self.runs[commit] = self.runs.get(commit, 0) + 1
        noise = random.Random(f"{commit}-{self.runs[commit]}")
        return Measurement(commit=commit, status="ok", samples=tuple(
            1e-3 * slower * noise.gauss(1.0, 0.02) for _ in range(max(samples or 0, 20))))

    def work(self, commits, target):
        return [dict(COUNTS) for _ in commits]


def test_a_compile_time_rise_without_more_work_is_refuted_not_reported(tmp_path):
    def mlp(x, w):
        return torch.nn.functional.gelu(x @ w)

    inputs = (torch.randn(8, 64), torch.randn(64, 64))
    source = example.captured_source(mlp, inputs, "A small MLP.")
    builds = [EmulatedBuild("import"), EmulatedBuild("docs: a note"),
              EmulatedBuild("ops: a comment")]
    history = ListHistory(builds)
    prober = LoadedMachine(history, source, tmp_path)
    target = Target(benchmark="bench_compile.CompileStage.time_stage",
                    params=("'decompose'", "'mlp'", "8"),
                    workload="mlp", seq=8, width=64, metric="compile_time", stage="decompose")
    alert = example.detected_alert(prober, history, target, "('decompose', 'mlp', 8)")
    with pytest.raises(NotReproduced, match="machine's load") as refused:
        Investigator(history, prober).investigate(alert, target, tmp_path / "out")
    assert refused.value.refuted and refused.value.bisection.culprit == builds[-1].sha
    clock_only = evidence_of(alert, refused.value.bisection, builds[-2].sha,
                             refused.value.confirmation)
    assert lifecycle.publishable(clock_only)  # the clock alone would have published it
    outcome = not_reproduced(alert, refused.value, builds[-2].sha)
    assert outcome.culprit == builds[-1].sha and not lifecycle.publishable(outcome.evidence)
    assert outcome.evidence is not None and outcome.evidence.refuted is not None
    assert "executes more instructions" in outcome.evidence.refuted


def test_a_host_clocks_knob_baseline_is_the_confirmations_ratio_not_one_stage_probe():
    """The stage probe measured the culprit's warm call faster than its parent's (a neighbour
    started between the two builds): the confirmation's medians, from the bisection's samples,
    are the levels the knob search works from; on the simulated device clock the stage probe's
    noise-free values stay."""
    report = stages.StageReport(good="g", bad="b", workload="mlp", seq=256, width=512,
                                first_divergent_stage="codegen", basis="artifact",
                                stage_diff_lines=0, diff="", stages=[], kernels=[],
                                device_time_us={"good": 10.0, "bad": 17.0}, host_s={"good": 7.5e-3,
                                                                     "bad": 5.6e-3})
    program = model.Program("mlp", 256, 512, "benchmark")
    host = Target(benchmark="bench_execute.ExecuteHostTime.time_call", params=("'mlp'", "256"),
                  workload="mlp", seq=256, width=512,
                  metric="host_time")
    confirmed = model.confirmation(program, metrics.by_name("host_time"),
                                   [3.4e-3 + 1e-5 * i for i in range(30)],
                                   [5.6e-3 + 1e-5 * i for i in range(30)], floor=0.10)
    assert confirmed.confirmed
    assert measured_regression(report, host) == knobs.Regression(7.5e-3, 5.6e-3)
    regression = measured_regression(report, host, confirmed)
    assert regression is not None
    assert regression.good_share == pytest.approx(confirmed.good_median / confirmed.bad_median)
    device = Target(benchmark="bench_execute.ExecuteDeviceTime.time_device",
                    params=("'mlp'", "256"), workload="mlp",
                    seq=256, width=512, metric="device_time")
    assert measured_regression(report, device, confirmed) == knobs.Regression(10.0, 17.0)
    generic = Target(benchmark="bench.Suite.time_other", params=("1",), workload="mlp", seq=256,
                     width=512, metric="time")
    assert measured_regression(report, generic, confirmed) is None  # no knob search for it


def test_an_emulated_build_changes_configs_defaults_only_while_it_is_active():
    """A build that edits config.py, emulated: Config's defaults (keyword-only) change while
    the build is active, an explicit value still wins, and everything is as it was after."""
    import spyre_sim

    build = EmulatedBuild("config: turn pointwise fusion off by default", {"fusion": False})
    with build.active():
        assert spyre_sim.Config().fusion is False and spyre_sim.Config(fusion=True).fusion
    assert spyre_sim.Config().fusion is True
    with pytest.raises(ValueError, match="no field 'fuson'"):
        with EmulatedBuild("config: a typo", {"fuson": False}).active():
            pass


def test_a_build_whose_program_runs_only_on_the_device_is_not_judged_a_failure():
    """torch-spyre compiles here and runs nowhere: its correctness is "not measured", and a
    build whose compile failed still "did not run"."""
    from regressions.investigation import model

    compiled = model.judge("good", model.BuildRun(status="ok"), model.Tolerance())
    assert compiled.verdict == "not measured" and compiled.status == model.UNMEASURED
    run = model.BuildRun(status="failed", detail="torch-spyre failed in lowering: X")
    failed = model.judge("bad", run, model.Tolerance())
    assert failed.verdict == "FAIL"
    assert failed.reasons == ("the build did not run: torch-spyre failed in lowering: X",)
