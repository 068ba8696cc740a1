"""`spyre-regress demo` end to end: the project's integration test (slow; runs in CI)."""

import json
import tarfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BUNDLE_FILES = ("report.md", "report.html", "reproducer.py", "environment.json",
                "investigation.json", "summary.json", "timing_samples.csv", "timing.png",
                "trace_good.json", "trace_bad.json")


@pytest.fixture(scope="module")
def demo(demo_run):
    return demo_run  # the README's command, run once per session (conftest.demo_run)


def test_every_injected_regression_is_found_with_culprit_and_stage(demo):
    out, _ = demo
    truth = json.loads((out / "ground_truth.json").read_text())["regressions"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["version"] == 2 and len(truth) >= 3
    assert len({t["kind"] for t in truth}) == 3 and len({t["stage"] for t in truth}) == 3
    found = {(r["commit"], r["stage"], r["kind"]) for r in summary["regressions"]}
    assert found == {(t["commit"], t["stage"], t["kind"]) for t in truth}
    assert summary["reported"] == len(truth) and not summary["failures"]  # nothing else
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


def test_each_figure_has_one_value_wherever_it_is_quoted(demo):
    """For one build and one program, every quote of a figure is the same string; two probes
    measuring the same build and program noise-free agree."""
    from regressions.investigation.model import load
    from reports.narrative import confirmation_figure, metric_value

    out, done = demo
    for regression in json.loads((out / "summary.json").read_text())["regressions"]:
        bundle = Path(regression["report"])
        found = load(json.loads((bundle / "investigation.json").read_text()))
        report, html = (bundle / "report.md").read_text(), (bundle / "report.html").read_text()
        statement = json.loads((bundle / "summary.json").read_text())["causal_statement"]
        c, error, metric = found.confirmation, found.target.error, found.target.measures
        figure = confirmation_figure(c)
        assert figure in done.stdout and figure in statement and figure in html
        good, bad = (metric_value(v, c.unit, metric, error)
                     for v in (c.good_median, c.bad_median))
        assert f"at the parent and {bad}" in statement and f"measured {good}" in statement
        assert c.program.width is not None  # the width it ran at, as every other quote says
        for step in [s for s in found.bisect.steps if s.commit == found.commits.culprit.sha]:
            if step.n == c.bad_n:  # the same samples: the same median in the bisection table
                assert f"| **{metric_value(step.median, c.unit, metric, error)}** |" in report
        reproducer = " ".join((bundle / "reproducer.py").read_text().split())  # unwrapped
        device = found.timing.device
        if device.ratio is not None:
            for side in (device.good, device.bad):
                if c.metric != "numerics":  # a numerics statement quotes the errors instead
                    assert f"{side.median:.1f} us" in statement
                assert f"{side.median:.1f} (IQR" in report
                assert f"{side.median:.1f} us" in reproducer  # what it printed for the report
        if found.workaround is not None and c.metric == "device_time":
            # the knob probe and the stage probe ran the same program at the culprit, noise-free
            noise_free = found.stages.device_time_us["bad"]
            assert f"{found.workaround.metric_bad:.1f}" == f"{noise_free:.1f}"
            assert f"from {found.workaround.metric_bad:.1f} us" in report
        if c.metric == "numerics":
            # the benchmark and the stage probe computed the same error of the same output
            stage = found.stages.numerics["bad"]["runtime"][error]
            assert f"{stage:.4g}" == f"{c.bad_median:.4g}"
            assert f"→ {stage:.4g}× eager DLFloat16's" in statement
