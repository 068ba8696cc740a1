"""`spyre-regress demo` end to end: the project's integration test (slow; runs in CI)."""

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import asv
import pytest
from doc_commands import ROOT

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
    assert summary["version"] == 3 and len(truth) >= 3 and summary["as_planted"]
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
    from reports.narrative import confirmation_figure, metric_value, wording

    out, done = demo
    for regression in json.loads((out / "summary.json").read_text())["regressions"]:
        bundle = Path(regression["report"])
        found = load(json.loads((bundle / "investigation.json").read_text()))
        report, html = (bundle / "report.md").read_text(), (bundle / "report.html").read_text()
        statement = json.loads((bundle / "summary.json").read_text())["causal_statement"]
        c, error, metric = found.confirmation, found.target.error, found.target.measures
        culprit = found.commits.culprit
        assert c is not None and found.bisect is not None and culprit is not None  # each found
        figure = confirmation_figure(c)
        assert figure in done.stdout and figure in statement and figure in html
        good, bad = (metric_value(v, c.unit, metric, error, words=wording(found))
                     for v in (c.good_median, c.bad_median))
        assert f"at the parent and {bad}" in statement and f"measured {good}" in statement
        assert c.program.width is not None  # the width it ran at, as every other quote says
        for step in [s for s in found.bisect.steps if s.commit == culprit.sha]:
            if step.n == c.bad_n:  # the same samples: the same median in the bisection table
                median = metric_value(step.median, c.unit, metric, error, words=wording(found))
                assert f"| **{median}** |" in report
        reproducer = " ".join((bundle / "reproducer.py").read_text().split())  # unwrapped
        device = found.timing.device
        if device.ratio is not None:
            for side in (device.good, device.bad):
                assert side is not None  # a ratio is of two sides
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
            assert error is not None  # a numerics benchmark names its error
            stage = found.stages.numerics["bad"]["runtime"][error]
            assert f"{stage:.4g}" == f"{c.bad_median:.4g}"
            assert f"→ {stage:.4g}× eager DLFloat16's" in statement


def test_the_dashboard_draws_its_graphs_with_no_network(demo, tmp_path):
    """Headless Chromium in a network namespace with loopback only: the published dashboard
    draws the device-time graph; asv's own page, which loads its scripts from CDNs, does not
    (the check can tell the two apart)."""
    out, _ = demo
    script = ROOT / "scripts" / "screenshot_dashboard.py"
    original = tmp_path / "asv-html-as-asv-wrote-it"
    shutil.copytree(out / "asv-html", original)
    shutil.copy(Path(asv.__file__).parent / "www" / "index.html", original / "index.html")
    seen = {}
    for name, html in (("offline", out / "asv-html"), ("original", original)):
        done = subprocess.run([sys.executable, str(script), str(html), "--out",
                               str(tmp_path / f"{name}.png"), "--graph",
                               "bench_execute.ExecuteDeviceTime.time_device"],
                              capture_output=True, text=True, timeout=600)
        if done.returncode in (2, 3):  # no chromium, or no network namespace here
            pytest.skip(done.stderr.strip())
        assert done.returncode == 0, done.stderr
        seen[name] = json.loads(done.stdout)
    assert seen["offline"]["network"] == "own network namespace, interfaces ['lo']"
    assert seen["offline"]["graphs"] >= 1 and not seen["offline"]["load_error"]
    assert seen["original"]["graphs"] == 0 and seen["original"]["load_error"]


def test_each_bundle_names_every_figure_it_quotes_once(demo):
    """A bundle of each kind, read as rendered: the statements quote only figures the
    Figures table lists with their program, clock and statistic, none named twice; the
    per-stage error table is in pipeline order."""
    from rendered import named_twice, quoted, statements, tables, unexplained

    out, _ = demo
    kinds = set()
    for regression in json.loads((out / "summary.json").read_text())["regressions"]:
        bundle = Path(regression["report"])
        report = (bundle / "report.md").read_text()
        kinds.add(regression["kind"])
        assert quoted(statements(report)), bundle  # there are figures to check
        assert unexplained(report) == [], bundle
        assert named_twice(report) == [], bundle
        assert len(tables(report)["Figures"]) > 4  # header, rule and the figures
        lines = report.splitlines()
        if "| stage output |" in report:  # the error after each stage: in pipeline order
            start = next(i for i, line in enumerate(lines) if line.startswith("| stage output"))
            listed = [line.split("|")[1].strip(" *") for line in lines[start + 2:]
                      if line.startswith("| ")][:5]
            assert listed == ["decompose", "lower", "layout", "kernel", "runtime"], listed
    assert kinds == {"device_time", "compile_time", "numerics"}
