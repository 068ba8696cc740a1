"""`spyre-regress demo` end to end: the project's integration test (slow; runs in CI)."""

import json
import tarfile
from pathlib import Path

import pytest
from conftest import run_cli

pytestmark = pytest.mark.slow

BUNDLE_FILES = ("report.md", "report.html", "reproducer.py", "environment.json",
                "investigation.json", "summary.json", "timing_samples.csv", "timing.png",
                "trace_good.json", "trace_bad.json")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    user = tmp_path_factory.mktemp("user")  # the installed script, run from outside the repo
    out = user / "out"
    done = run_cli("demo", "--out", "out", cwd=user, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out, done


def test_every_injected_regression_is_found_with_culprit_and_stage(demo):
    out, _ = demo
    truth = json.loads((out / "ground_truth.json").read_text())["regressions"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["version"] == 2 and len(truth) >= 3
    assert len({t["kind"] for t in truth}) == 3 and len({t["stage"] for t in truth}) == 3
    found = {(r["commit"], r["stage"], r["kind"]) for r in summary["regressions"]}
    assert found == {(t["commit"], t["stage"], t["kind"]) for t in truth}
    assert summary["alerts"] == len(truth) and not summary["failures"]  # nothing else
    for regression in summary["regressions"]:
        assert regression["bisect"]["commits_measured"] <= regression["bisect"][
            "commits_in_range"] + 1


def test_every_bundle_is_complete(demo):
    out, done = demo
    summary = json.loads((out / "summary.json").read_text())
    for regression in summary["regressions"]:
        bundle = Path(regression["report"])
        for name in BUNDLE_FILES:
            assert (bundle / name).stat().st_size > 0, (bundle, name)
        assert list(bundle.glob("*.diff")) or regression["kind"] == "compile_time"
        with tarfile.open(f"{bundle}.tar.gz") as archive:
            assert any(n.endswith("report.md") for n in archive.getnames())
        assert regression["commit"][:12] in (bundle / "report.md").read_text()
        # the demo's table, the title and the causal statement quote one figure
        bundle_summary = json.loads((bundle / "summary.json").read_text())
        assert regression["measured"] in bundle_summary["title"]
        assert regression["measured"] in bundle_summary["causal_statement"]
        assert regression["measured"] in done.stdout


def test_asv_results_dashboard_and_progress(demo):
    out, done = demo
    assert (out / "asv-html" / "index.html").exists()
    assert list((out / "asv-results").glob("*/*.json"))
    assert "asv [" in done.stderr and "bisecting" in done.stderr  # progress on long steps
    assert "culprit" in done.stdout and "report" in done.stdout  # the final table
