"""`spyre-regress demo`: the whole system on a history with known regressions.

A scratch repository is built from the installed sources: 13 commits, three of which inject
a regression of a different kind in a different stage (`regressions.groundtruth.scenarios`).
The real nightly then benchmarks every fourth commit with asv, detects, bisects commit, stage
and knob, minimizes and writes a report bundle per alert; `summary.json` sets what it found
beside `ground_truth.json`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from regressions.errors import SpyreRegressError
from regressions.groundtruth import scenarios, scratch
from regressions.records import files
from reports.narrative import confirmation_figure
from spyre_regress import nightly

DEMO_SUMMARY_VERSION = 3  # 3: "as_planted"; 2: "ratio" is the confirmation, "measured" its text
# One commit per entry after the import: None is a harmless change. The nightly benchmarks
# every STRIDE-th commit (0, 4, 8, 12) and each regression lands between two benchmarked
# commits, so bisection has commits of the stride window to search. A noisy series needs two
# benchmarked commits on each side of a change inside it (detection's minimum): the compile
# and device time regressions share the window 4..8, each in its own series; a numerical
# error is exact, so the first window serves.
PLAN: list[str | None] = [
    None, "sdsc_fp16_accumulate",  # commit 2: numerics, sdsc (outputs drift at runtime)
    None, None, None, "quadratic_verify",  # 6: compile time, decompose
    "workdiv_m127",  # 7: device time at seq 127 only, kernel
    None, None, None, None, None,
]
STRIDE = 4
# The demo's nightly measures nothing again (its regressions are many times the noise) and
# confirms each culprit on 30 samples a side, timing 30 iterations per build for its report
# (a real nightly: up to 3 rounds of re-measurement, 100 and 100).
REMEASURE_ROUNDS = 0
SAMPLES = 30
# The benchmark classes the demo's nightly runs, on the smaller grid benchmarks/ define for
# SPYRE_REGRESS_GRID=demo (a real nightly runs the full suite).
BENCH = "ExecuteDeviceTime|CompileStage|NumericsStageError"
ASV_ENV = {"SPYRE_REGRESS_GRID": "demo"}

Progress = Callable[[str], None]


def ground_truth(records: list[scratch.CommitRecord]) -> dict:
    found = []
    for record in records:
        if record.injection:
            injection = scenarios.INJECTIONS[record.injection]
            found.append({"commit": record.sha, "subject": record.subject,
                          "stage": injection.stage, "kind": injection.kind,
                          "injection": injection.name, "description": injection.description,
                          "workaround": injection.workaround})
    return {"version": DEMO_SUMMARY_VERSION, "regressions": found}


def summarize(run: nightly.NightlyRun) -> dict:
    regressions = []
    for outcome in run.published:
        found = outcome.investigation
        culprit, confirmation = found.commits.culprit, found.confirmation
        assert culprit is not None and found.bisect is not None  # a published culprit
        regressions.append({
            "commit": culprit.sha,
            "subject": culprit.subject,
            "stage": found.stages.first_divergent_stage,
            "kind": found.target.metric,
            "benchmarks": sorted({m.name for m in found.alert.members}),
            "probe": found.target.label,
            # the investigation's own measurement, the figure the report's title quotes
            "ratio": confirmation.ratio if confirmation else None,
            "measured": headline(found),
            "report": str(outcome.bundle),
            "workaround": found.workaround.knob if found.workaround else None,
            "bisect": {"commits_in_range": found.bisect.commits_in_range,
                       "commits_measured": found.bisect.commits_measured},
            "stage_diff_lines": found.stages.stage_diff_lines,
        })
    statuses = [r.status for r in run.records]
    return {"version": DEMO_SUMMARY_VERSION, "regressions": regressions,
            "alerts": len(run.records), "reported": sum(s == "reported" for s in statuses),
            "not_reproduced": statuses.count("not-reproduced"),
            "transients": len(run.transients), "failures": run.failures,
            "commits_benchmarked": len(run.commits_benchmarked)}


def headline(found) -> str:
    """The confirmation figure as the report's title states it (`reports.narrative`)."""
    return confirmation_figure(found.confirmation) if found.confirmation else "-"


def run(out_dir: Path, progress: Progress) -> dict:
    out_dir = Path(out_dir).resolve()
    if out_dir.exists() and any(out_dir.iterdir()):
        raise SpyreRegressError(f"{out_dir} is not empty; pass a new --out directory")
    repo = out_dir / "repo"
    started = time.monotonic()
    progress(f"building a {len(PLAN) + 1}-commit history in {repo}")
    records = scratch.build(repo, PLAN)
    phases = {"build the history": time.monotonic() - started}
    truth = ground_truth(records)
    files.write_json(out_dir / "ground_truth.json", truth)
    options = nightly.NightlyOptions(
        repo=repo, state_dir=out_dir / "state", reports_dir=out_dir / "reports",
        stride=STRIDE, bench=BENCH, machine="demo", asv_env=dict(ASV_ENV),
        remeasure_rounds=REMEASURE_ROUNDS, samples=SAMPLES)
    outcome = nightly.run(options, progress)
    phases.update(outcome.phases)
    copying = time.monotonic()
    summary = summarize(outcome)
    summary["ground_truth"] = truth["regressions"]
    results = repo / ".asv" / "results"
    if results.exists():
        shutil.copytree(results, out_dir / "asv-results", dirs_exist_ok=True)
    if outcome.dashboard is not None and outcome.dashboard.exists():
        shutil.copytree(outcome.dashboard, out_dir / "asv-html", dirs_exist_ok=True)
        summary["dashboard"] = str(out_dir / "asv-html" / "index.html")
    summary["as_planted"] = as_planted(summary)
    phases["copy the results"] = time.monotonic() - copying
    # where the wall time went, in the order the steps ran (docs/measurements/quick-start.md)
    summary["seconds"] = {"phases": [{"phase": name, "seconds": round(s, 1)}
                                     for name, s in phases.items()],
                          "total": round(time.monotonic() - started, 1)}
    files.write_json(out_dir / "summary.json", summary)
    return summary


def as_planted(summary: dict) -> bool:
    """Whether the demo found exactly what it planted: each injected regression reported at
    its commit, stage and kind, nothing else reported, and no investigation failed. This is
    the demo's exit code: it checks the tool on a known answer."""
    found = {(r["commit"], r["stage"], r["kind"]) for r in summary["regressions"]}
    planted = {(t["commit"], t["stage"], t["kind"]) for t in summary["ground_truth"]}
    return found == planted and summary["reported"] == len(planted) \
        and not summary["failures"]
