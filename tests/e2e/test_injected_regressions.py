"""End to end on scratch git repositories built from the project's own sources.

Each history holds one injected regression among harmless commits
(regressions/groundtruth/scenarios.py). Commit bisection must name the injected commit and
stage bisection its stage; the probes run the real asv benchmarks in subprocesses at each
commit, on the demo's small grid.
"""

import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import run_cli

from regressions.bisection.stages import StageReport
from regressions.groundtruth import scenarios, scratch
from regressions.investigation import investigator
from regressions.investigation.investigator import measured_regression, target_for
from regressions.investigation.model import Target
from spyre_regress.prober import GitHistory, SubprocessProber

pytestmark = pytest.mark.slow

GRID = {"SPYRE_REGRESS_GRID": "demo"}
DEVICE = ("bench_execute.ExecuteDeviceTime.time_device", ("workload", "seq"))
NUMERICS = ("bench_numerics.NumericsStageError.track_rmse_vs_eager_fp16",
            ("workload", "seq", "stage"))
COMPILE = ("bench_compile.CompileStage.time_stage", ("stage", "workload", "seq"))
BLOCKED = ("bench_compile.CompileStage.time_stage_blocked", ("stage", "workload", "seq"))
CHILDREN = ("bench_compile.CompileStage.time_stage_children_cpu", ("stage", "workload", "seq"))
WORK = ("bench_compile_work.CompileWork.track_instructions", ("workload", "seq", "stage"))
CASES = {
    "workdiv_m127": (DEVICE, ("'mlp'", "127")),
    "fusion_off": (DEVICE, ("'mlp'", "128")),
    "restickify_a": (DEVICE, ("'mlp'", "128")),
    "fp16_reduction": (NUMERICS, ("'layernorm'", "128", "'runtime'")),
    "quadratic_verify": (COMPILE, ("'decompose'", "'attention'", "128")),
    "gelu_fallback": (DEVICE, ("'mlp'", "128")),
    # a few-percent compile regression no clock sees: counted instructions, one per build
    "lower_fusion_check": (WORK, ("'attention'", "128", "'lower'")),
    # waits the compiling process's CPU clock cannot see (benchmarks/waits.py): a stage that
    # sleeps, a stage whose child process burns CPU; the full grid has their stages' rows
    "sdsc_wait": (BLOCKED, ("'sdsc'", "'mlp'", "128")),
    "backend_child": (CHILDREN, ("'backend'", "'mlp'", "128")),
}
FULL_GRID = {"sdsc_wait", "backend_child"}


def _investigator(repo: Path, work: Path, env: dict | None = None
                  ) -> investigator.Investigator:
    return investigator.Investigator(GitHistory(repo),
                                     SubprocessProber(repo, work, env=GRID if env is None else env))


def _scenario(tmp_path: Path, name: str):
    records = scratch.build(tmp_path / "repo", [None, name, None])
    investigator = _investigator(tmp_path / "repo", tmp_path / "work",
                                 {} if name in FULL_GRID else None)
    (benchmark, names), params = CASES[name]
    target = target_for(benchmark, params, names, {"layernorm": 512}, stage_width=1024)
    return records, investigator, target


@dataclass(frozen=True, kw_only=True)
class Workdiv:
    """The workdiv_m127 history, its investigator and its stage report, shared."""

    records: list
    investigator: investigator.Investigator
    target: Target
    injected: str
    good: str
    report: StageReport


@pytest.fixture(scope="module")
def workdiv(tmp_path_factory) -> Workdiv:
    """One workdiv_m127 history and one stage report of its injection, for the three tests
    that read it (its bisection and stage, its knob search, its minimization): built and
    measured once instead of once per test. The probes measure afresh on every call (the
    prober keeps checkouts, not measurements), so the tests do not see each other's
    samples."""
    records, investigator, target = _scenario(tmp_path_factory.mktemp("workdiv"),
                                              "workdiv_m127")
    injected = next(r.sha for r in records if r.injection == "workdiv_m127")
    good = investigator.history.parent(injected)
    return Workdiv(records=records, investigator=investigator, target=target, injected=injected,
                   good=good,
                   report=investigator.stages(good, injected, target))


@pytest.mark.parametrize("name", sorted(CASES))
def test_culprit_and_first_divergent_stage(tmp_path, request, name):
    shared = request.getfixturevalue("workdiv") if name == "workdiv_m127" else None
    records, investigator, target = (shared.records, shared.investigator, shared.target) \
        if shared else _scenario(tmp_path, name)
    injected = next(r.sha for r in records if r.injection == name)
    result = investigator.bisect(records[0].sha, records[-1].sha, target)
    assert result.culprit == injected, [s.__dict__ for s in result.steps]
    assert result.commits_measured <= result.commits_in_range + 1
    report = shared.report if shared else investigator.stages(
        investigator.history.parent(injected), injected, target)
    assert report.first_divergent_stage == scenarios.INJECTIONS[name].stage, report
    if target.metric == "numerics":
        assert report.numerics_first_divergent_stage == "kernel"
    if target.metric == "compile_work":  # one exact count per build: the good end plus
        # ceil(log2(N + 1)) for N commits after it (N = 3 here: 3 builds, ceil(log2 N) + 1)
        assert result.deterministic and result.commits_measured <= math.ceil(
            math.log2(result.commits_in_range + 1)) + 1
        assert report.basis == "instructions"
        lower = next(d for d in report.stages if d.stage == "lower")
        assert 0.02 <= lower.work_growth <= 0.06, lower
    if target.measures.wait_part not in (None, "cpu"):  # named on the part that grew
        assert (report.basis, report.wait_part) == ("wait", target.measures.wait_part)
        grown = next(d for d in report.stages if d.stage == report.first_divergent_stage)
        added = {"sdsc_wait": 0.05, "backend_child": 0.2}[name]
        assert 0.8 * added <= grown.compile_s_bad - grown.compile_s_good <= 3 * added, grown


def test_knob_bisection_finds_the_work_division_workaround(workdiv):
    workaround = workdiv.investigator.knobs(workdiv.injected, workdiv.target,
                                            measured_regression(workdiv.report, workdiv.target))
    assert workaround.knob == "work_division" and workaround.value == "output_first"
    assert workaround.recovered >= 0.75
    assert workaround.decisive_application.startswith("decision work_division#")


def test_minimize_shrinks_mlp_and_attention_to_three_ops(tmp_path, workdiv):
    investigator = workdiv.investigator
    target = Target(benchmark="", params=(), workload="block", seq=127, width=None,
                    metric="device_time")
    candidate = investigator.prober.full_candidate(target)
    assert candidate.op_count > 20
    result = investigator.minimize(workdiv.good, workdiv.injected, target, candidate)
    assert result is not None and result.ops_after <= 3, result.steps
    assert result.ratio_after > 1.2
    module = tmp_path / "minimized.py"
    module.write_text(result.source)
    run = subprocess.run([sys.executable, "-c", "import runpy; m = runpy.run_path("
                          f"{str(module)!r}); print(len(m['program'](*m['make_inputs']())))"],
                         capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "1"


def test_cli_stages_writes_json(tmp_path, outside):
    records = scratch.build(tmp_path / "repo", [None, "fusion_off"])
    out = tmp_path / "stages.json"
    done = run_cli("stages", "--repo", str(tmp_path / "repo"), "--good", records[1].sha,
                   "--bad", records[2].sha, "--workload", "mlp", "--shape", "seq128",
                   "--width", "256", "--json", str(out), cwd=outside)
    assert done.returncode == 0, done.stderr
    data = json.loads(out.read_text())
    assert data["version"] == 4 and data["first_divergent_stage"] == "lower"
    assert data["stage_diff_lines"] > 0 and "first divergent stage: lower" in done.stdout


def test_cli_rejects_option_like_refs(tmp_path, outside):
    records = scratch.build(tmp_path / "repo", [])
    done = run_cli("stages", "--repo", str(tmp_path / "repo"), "--good=--output=x", "--bad",
                   records[0].sha, "--workload", "mlp", "--shape", "8", cwd=outside)
    assert done.returncode == 2 and "must not start with '-'" in done.stderr
