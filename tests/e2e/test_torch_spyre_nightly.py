"""The nightly on torch-spyre's own history with planted changes and decoys
(regressions/groundtruth/torch_spyre_history.py): the suite this tool ships for torch-spyre,
written out for a scratch clone of the history, as a user runs it - the installed script,
real asv, the checkout's own torch-spyre installed without its C++ build.

Each planted change must be reported at its commit with its kind and the stage or pass that
shows it first - the slower matmuls at the pass that divides work, with its IR diff; the
layout that restickifies at the first pass whose IR shows the stick optimizer's choice, with
the restickify kernels it adds and the knob that undoes it; the quadratic pass named as
torch-spyre names it; the broken lowering with its error - and nothing for the decoy
(provenance text only); the bundle's reproducer must run on a CPU with torch-spyre and the
stand-in.

Needs torch-spyre's history (SPYRE_REGRESS_TORCH_SPYRE_BUNDLE; tests/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SCRIPT, run_cli, user_environment

from regressions.groundtruth import torch_spyre_history
from regressions.records import alert_store

pytestmark = pytest.mark.slow

# The compile clocks and the modelled device time on the small grid (mlp and swiglu at seq
# 128, one and two blocks): instruction counts are checked on their own
# (tests/e2e/test_torch_spyre.py), since a valgrind run per commit would double the night.
BENCH = r"bench_compile\.|bench_execute\.ExecuteDeviceTime"


@pytest.fixture(scope="module")
def night(tmp_path_factory, torch_spyre_checkout):
    root = tmp_path_factory.mktemp("torch-spyre-night")
    records = torch_spyre_history.build(root / "torch-spyre", torch_spyre_checkout)
    suite = root / "bench"
    written = subprocess.run([str(SCRIPT), "suite", "torch_spyre", "--repo",
                              str(root / "torch-spyre"), "--out", str(suite)], cwd=root,
                             env=user_environment(), capture_output=True, text=True,
                             timeout=300, check=False)
    assert written.returncode == 0, written.stderr
    # from the planted history's base on (the clone holds torch-spyre's whole history), with
    # 10 samples a side: a compile clock sample costs seconds here, and the planted changes
    # are large. The timeout leaves room for a slower runner.
    command = [str(SCRIPT), "nightly", "--repo", str(suite), "--stride", "1", "--bench", BENCH,
               "--since", records[0].sha, "--samples", "10",
               "--state", str(root / "state"), "--reports", str(root / "reports")]
    done = subprocess.run(command, cwd=root, env=user_environment(SPYRE_REGRESS_GRID="demo"),
                          capture_output=True, text=True, timeout=2700, check=False)
    database = alert_store.AlertStore(root / "state" / "alerts.sqlite")
    reported = [(r, database.extras()[r.id]) for r in database.records()
                if r.status == "reported"]
    database.close()
    return root, records, done, reported


def _detection(root: Path) -> str:
    """What detection makes of the night's results, for a failure's message: a change that
    was never reported shows here with its series' ratio and p, or by its absence."""
    done = run_cli("detect", "--results", str(root / "bench" / ".asv" / "results"),
                   "--repo", str(root / "torch-spyre"), cwd=root, timeout=300)
    return done.stdout[-6000:] + done.stderr[-2000:]


def _injected(records) -> dict[str, str]:
    return {r.injection: r.sha for r in records if r.injection}


def test_each_planted_change_is_reported_at_its_commit_with_its_kind_and_stage(night):
    root, records, done, reported = night
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    for name, sha in _injected(records).items():
        injection = torch_spyre_history.INJECTIONS[name]
        at_commit = [(record, extras) for record, extras in reported if record.culprit == sha]
        assert at_commit, (f"{name}: no report at {sha[:10]}\n{done.stdout[-3000:]}\n"
                           f"{_detection(root)}")
        kinds = {record.kind for record, _ in at_commit}
        assert injection.kind in kinds, (name, kinds)
        if injection.kind != "failure":
            stages = {extras["stage"] for record, extras in at_commit
                      if record.kind == injection.kind}
            assert stages == {injection.stage}, (name, stages)


def test_no_decoy_and_nothing_else_is_reported(night):
    root, records, _, reported = night
    assert {record.culprit for record, _ in reported} == set(_injected(records).values()), \
        _detection(root)


def _bundle(root: Path, records, name: str) -> Path:
    sha = _injected(records)[name]
    (bundle,) = (root / "reports").glob(f"culprit-{sha[:12]}/*/")
    return bundle


def test_the_failure_is_reported_with_torch_spyres_error(night):
    root, records, _, _ = night
    report = (_bundle(root, records, "silu_loader") / "report.md").read_text()
    assert "make\\_loader" in report or "make_loader" in report


def test_the_quadratic_pass_is_named_and_its_bundle_says_so(night):
    root, records, _, _ = night
    bundle = _bundle(root, records, "quadratic_span_reduction")
    investigation = json.loads((bundle / "investigation.json").read_text())
    assert investigation["backend"] == "torch_spyre"
    report = (bundle / "report.md").read_text()
    assert "span\\_reduction" in report
    assert [w for w in ("DLFloat16", "SENCORES", "Config(") if w in report] == []


def test_the_slower_matmuls_are_an_sdsc_divergence_with_its_diff(night):
    """The work division's change shows in the pass that divides work: its IR differs, and
    the report carries the diff and the kernels' modelled times."""
    root, records, _, _ = night
    bundle = _bundle(root, records, "quarter_cores_matmul")
    investigation = json.loads((bundle / "investigation.json").read_text())
    stages = investigation["stages"]
    assert (stages["first_divergent_stage"], stages["basis"]) == ("_distribute_work",
                                                                  "artifact")
    assert stages["stage_diff_lines"] > 0 and stages["diff"]
    slower = [k for k in stages["kernels"] if k["good_us"] and k["bad_us"]
              and k["bad_us"] > k["good_us"]]
    assert slower, stages["kernels"]


def _investigation(root: Path, records, reported, name: str) -> dict:
    """The nightly's investigation of the planted change's alert of its own kind (a change
    may raise alerts of two kinds; its commit's bundle leads with one of them)."""
    sha, kind = _injected(records)[name], torch_spyre_history.INJECTIONS[name].kind
    (record,) = [record for record, _ in reported if record.culprit == sha
                 and record.kind == kind]
    saved = root / "state" / "investigations" / f"alert-{record.id:03d}.json"
    return json.loads(saved.read_text())


def test_the_restickifying_layout_names_its_kernels_and_the_knob_that_undoes_it(night):
    """The stick optimizer's worse choice shows where the layouts enter the IR; the device
    time's investigation names the restickify kernels the bad build adds and the optimizer's
    knob (the greedy optimizer restores the device time), and the commit's report names
    both. The change also slows insert_restickify's compile, which has restickifies to
    insert now: a second alert at the same commit, in the same bundle."""
    root, records, _, reported = night
    investigation = _investigation(root, records, reported, "costliest_stick_state")
    stages = investigation["stages"]
    assert (stages["first_divergent_stage"], stages["basis"]) == ("finalize_layouts",
                                                                  "artifact")
    added = [k["name"] for k in stages["kernels"] if k["good_us"] is None and k["bad_us"]]
    assert [name for name in added if name.endswith("_ReStickifyOpHBM")], stages["kernels"]
    workaround = investigation["workaround"]
    assert (workaround["knob"], workaround["value"]) == ("global_stick_optimizer", False), \
        workaround
    report = (_bundle(root, records, "costliest_stick_state") / "report.md").read_text()
    assert "ReStickifyOpHBM" in report
    assert "global_stick_optimizer" in report.replace("\\_", "_")


def test_the_reproducer_runs_on_a_cpu_with_torch_spyre_and_the_stand_in(night, tmp_path):
    """The compile bundle's reproducer, at the culprit's checkout on the path: it compiles
    through torch-spyre with the embedded stand-in and prints the per-stage compile times."""
    root, records, _, _ = night
    bundle = _bundle(root, records, "quadratic_span_reduction")
    checkout = tmp_path / "bad"
    subprocess.run(["git", "clone", "-q", str(root / "torch-spyre"), str(checkout)], check=True)
    subprocess.run(["git", "-C", str(checkout), "checkout", "-q",
                    _injected(records)["quadratic_span_reduction"]], check=True)
    environment = {key: value for key, value in os.environ.items()
                   if key in ("PATH", "HOME", "LANG", "TMPDIR")}
    environment["PYTHONPATH"] = str(checkout)
    done = subprocess.run([sys.executable, str(bundle / "reproducer.py"), "--config", "bad",
                           "--json", "--compile-repeats", "1"], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    assert outcome["build"]["backend"] == "torch_spyre"
    assert outcome["build"]["versions"]["torch_spyre._C"] == "stand-in (spyre-regress)"
    assert outcome["compile_s"]["span_reduction"] > 0 and outcome["correctness"] is None
