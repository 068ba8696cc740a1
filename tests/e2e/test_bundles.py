"""Bundles from real investigations: a device-time, a numerical and a compile-time alert.

Each is the real `Investigator` run on builds emulated in-process (spyre_regress.example): a
harmless commit, then a commit that changes a Config default (or slows the decompose stage
down: a compile-time regression no knob expresses), then another harmless one. Bisection must
find the changing commit among them; the reproducers then run in fresh subprocesses and must
repeat the report's numbers.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import spyre_sim
from regressions.investigation.model import Target
from reports import write_bundle
from reports.markdown import inline
from spyre_regress import example
from spyre_regress.emulated import EmulatedBuild

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def _layernorm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps=1e-5)


def _attention(x, w_qkv, b_qkv, w_out, b_out):
    q, k, v = F.linear(x, w_qkv, b_qkv).split(x.shape[-1], dim=-1)
    heads = [t.view(1, x.shape[1], 8, -1).transpose(1, 2) for t in (q, k, v)]
    q, k, v = heads
    attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.linear(attended.transpose(1, 2).reshape(x.shape), w_out, b_out)


def _randn(*shape, scale=1.0, shift=0.0, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale + shift


@contextlib.contextmanager
def slow_decompose(times: int = 4):
    """A compile-time regression: decompose re-runs itself (`times` x the work, same output)."""
    from spyre_sim.stages import decompose

    original = decompose.run

    def rerun(artifact, config):
        for _ in range(times - 1):
            original(artifact, config)
        return original(artifact, config)

    decompose.run = rerun
    try:
        yield
    finally:
        decompose.run = original


def builds(change: EmulatedBuild) -> list[EmulatedBuild]:
    """A history around one change: harmless commits before and after it."""
    return [EmulatedBuild("lower: name the fusion groups"), EmulatedBuild("docs: explain sticks"),
            change, EmulatedBuild("sdsc: comment the core-to-slice map")]


def investigate(work, target: Target, params: str, source: str, change: EmulatedBuild):
    found = example.investigate(target, params, source, builds(change), work_dir=work / "probe")
    assert found.commits.culprit is not None  # bisection found a culprit: the change
    assert found.commits.culprit.sha == change.sha
    return found, write_bundle(found, work / "out")


@pytest.fixture(scope="module")
def device_bundle(tmp_path_factory):
    work = tmp_path_factory.mktemp("device")
    found, change = example.fusion_example(work / "probe")
    assert found.commits.culprit is not None  # bisection found a culprit: the change
    assert found.commits.culprit.sha == change.sha
    return found, write_bundle(found, work / "out")


@pytest.fixture(scope="module")
def numerics_bundle(tmp_path_factory):
    work = tmp_path_factory.mktemp("numerics")
    # activations with a DC offset: fp16 partial sums of the mean and variance lose digits
    inputs = (_randn(128, 4096, shift=4.0), torch.ones(4096), torch.zeros(4096))
    source = example.captured_source(_layernorm, inputs,
                                     "LayerNorm over 4096 offset activations.")
    target = Target(benchmark="bench_numerics.NumericsStageErrorDLFloat16."
                              "track_rmse_vs_eager_dlfloat16",
                    params=("'layernorm'", "128", "'runtime'"), workload="layernorm", seq=128,
                    width=4096, metric="numerics",
                    stage=None, error="rmse_ratio")
    return investigate(work, target, "('layernorm', 128, 'runtime')", source, change=EmulatedBuild(
        "config: accumulate reductions in fp16 (faster norms)",
        {"reduction_accumulation": "fp16"}))


@pytest.fixture(scope="module")
def compile_bundle(tmp_path_factory):
    work = tmp_path_factory.mktemp("compile")
    inputs = (_randn(1, 128, 256), _randn(768, 256, scale=0.05, seed=1), torch.zeros(768),
              _randn(256, 256, scale=0.05, seed=2), torch.zeros(256))
    source = example.captured_source(_attention, inputs, "Causal attention, [1, 128, 256].")
    target = Target(benchmark="bench_compile.CompileStage.time_stage",
                    params=("'decompose'", "'attention'", "128"), workload="attention", seq=128,
                    width=256,
                    metric="compile_time", stage="decompose")
    return investigate(work, target, "('decompose', 'attention', 128)", source,
                       change=EmulatedBuild("decompose: re-verify the decomposition",
                                            patch=slow_decompose))


def run_reproducer(folder: Path, *args: str, path: str | None = None) -> dict:
    """reproducer.py in a fresh interpreter that sees only torch and this tree's spyre_sim."""
    environment = {key: value for key, value in os.environ.items()
                   if key in ("PATH", "HOME", "LANG", "TMPDIR")}
    environment["PYTHONPATH"] = str(ROOT)
    if path is not None:
        environment["PATH"] = path
    completed = subprocess.run([sys.executable, "reproducer.py", "--json", *args], cwd=folder,
                               env=environment, capture_output=True, text=True, timeout=300,
                               check=True)
    return json.loads(completed.stdout)


def check_common_parts(found, folder: Path) -> tuple[str, str, dict]:
    md, html = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    summary = json.loads((folder / "summary.json").read_text())
    environment = json.loads((folder / "environment.json").read_text())
    culprit = found.commits.culprit
    statement = summary["causal_statement"]
    assert culprit.sha[:12] in statement and culprit.subject in statement
    assert f"the benchmark {found.target.label}" in statement
    # one figure for the regression, quoted alike in the title and the statement
    figure = f"×{found.confirmation.ratio:.3f}"
    assert figure in summary["title"] and figure in statement and figure in md
    for member in found.alert.members:
        assert member.params in md and member.params.replace("'", "&#39;") in html
    assert environment["version"] == 1 and environment["torch"] == torch.__version__
    assert environment["config"] == json.loads(json.dumps(dict(found.timing.bad.config)))
    assert environment["commits"]["culprit"]["sha"] == culprit.sha
    for side in ("good", "bad"):
        trace = json.loads((folder / f"trace_{side}.json").read_text())
        names = {event["name"] for event in trace["traceEvents"] if event.get("cat") == "kernel"}
        assert names, side
    assert (folder / "timing.png").read_bytes()[:4] == b"\x89PNG"
    assert len(md) < 65_000
    return md, html, summary


def test_device_time_bundle(device_bundle):
    found, folder = device_bundle
    md, html, summary = check_common_parts(found, folder)
    assert summary["first_divergent_stage"] == "lower" and summary["basis"] == "artifact"
    device = summary["device_time"]
    assert 1.4 < device["ratio"] < 1.8 and device["ci"][0] < device["ratio"] < device["ci"][1]
    assert "lower (first divergent)" not in md  # the table highlights, it does not rename
    diff = (folder / "lower.diff").read_text()
    assert diff.startswith("--- good/lower") and "group g1 pointwise" in diff
    # the changed kernels named in the report are the ones in the bad trace
    bad_trace = (folder / "trace_bad.json").read_text()
    for kernel in found.stages.kernels:
        if kernel.good_us is None:
            assert inline(kernel.name) in md and f'"{kernel.name}"' in bad_trace
    # the workaround is stated apart from the cause
    assert "Config(fusion=True)" in summary["workaround_statement"]
    assert "Workaround" not in summary["causal_statement"]
    assert "--set fusion=true" in (folder / "reproducer.py").read_text()
    assert "No executable stage's output is further from float64" in md  # nothing drifts


def test_device_time_reproducer_repeats_the_ratio(device_bundle):
    _, folder = device_bundle
    summary = json.loads((folder / "summary.json").read_text())
    device = summary["device_time"]
    good = run_reproducer(folder, "--config", "good")
    bad = run_reproducer(folder, "--config", "bad")
    # fresh noise: each median of 100 calls at 1.5% CV moves ~0.2%, so 1% is the repeat
    assert bad["device_us"]["median"] / good["device_us"]["median"] == pytest.approx(
        device["bad"]["median"] / device["good"]["median"], rel=0.01)
    assert good["correctness"]["pass"] and bad["correctness"]["pass"]
    assert good["dropped"] == [] and bad["config"] == "bad"
    fixed = run_reproducer(folder, "--config", "bad", "--set", "fusion=true",
                           "--iterations", "20")
    assert fixed["device_us"]["median"] == pytest.approx(good["device_us"]["median"], rel=0.02)


def test_numerics_bundle_and_reproducer(numerics_bundle):
    found, folder = numerics_bundle
    md, html, summary = check_common_parts(found, folder)
    good, bad = summary["correctness"]
    assert good["passed"] and not bad["passed"]
    assert bad["errors"]["rmse_ratio"] > 2.0 and any("RMSE ratio" in r for r in bad["reasons"])
    assert summary["first_divergent_stage"] == "kernel"
    assert summary["numerics_first_divergent_stage"] in ("kernel", "runtime")
    assert (folder / "numerics.png").is_file() and (folder / "numerics_stages.csv").is_file()
    assert "| stage output | RMSE ratio good (× eager DLFloat16) |" in md
    assert "Error after each executable stage" in html
    assert "Config(reduction_accumulation='fp32')" in summary["workaround_statement"]
    assert "bad FAIL" in summary["causal_statement"]
    reproduced = run_reproducer(folder, "--config", "bad", "--iterations", "3")
    assert not reproduced["correctness"]["pass"]
    assert reproduced["correctness"]["rmse_ratio"] == pytest.approx(bad["errors"]["rmse_ratio"],
                                                                    rel=1e-9)
    assert run_reproducer(folder, "--config", "good", "--iterations", "3")["correctness"]["pass"]


def test_compile_time_bundle(compile_bundle):
    found, folder = compile_bundle
    md, html, summary = check_common_parts(found, folder)
    assert summary["first_divergent_stage"] == "decompose"
    assert summary["basis"] == "compile_clock"
    assert not list(folder.glob("*.diff"))  # no artifact differs, so there is no diff to ship
    assert "The decompose stage produces the same artifact, only more slowly" in \
        summary["causal_statement"]
    assert "No single Config knob restores the metric" in summary["workaround_statement"]
    assert (folder / "compile_stages.png").is_file()
    with (folder / "compile_stages.csv").open() as table:
        decompose = next(row for row in csv.DictReader(table) if row["stage"] == "decompose")
    assert float(decompose["compile_ratio"]) >= 1.5
    assert "compile time of bench_compile.CompileStage.time_stage" in html


def test_the_reproducer_counts_compile_instructions_or_says_how(compile_bundle, tmp_path):
    _, folder = compile_bundle
    quick = ("--config", "good", "--iterations", "3", "--compile-repeats", "1", "--instructions")
    without = run_reproducer(folder, *quick, path=str(tmp_path))  # no valgrind on this PATH
    assert without["compile_instructions"] is None
    assert "apt-get install valgrind" in without["compile_instructions_note"]
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind is not installed (scripts/install-valgrind.sh)")
    counted = run_reproducer(folder, *quick)["compile_instructions"]
    assert list(counted) == list(spyre_sim.STAGES)
    assert all(count > 0 for count in counted.values())


def test_report_html_renders_in_headless_chromium(device_bundle, tmp_path):
    _, folder = device_bundle
    png = tmp_path / "report.png"
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "screenshot_report.py"),
                           str(folder / "report.html"), "--out", str(png)],
                          capture_output=True, text=True, timeout=300)
    if done.returncode == 2 and "no chromium" in done.stderr:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    assert done.returncode == 0, done.stderr
    from PIL import Image

    image = Image.open(png).convert("L")
    assert image.size == (1280, 2400)
    histogram = image.histogram()  # pixels per grey level, 0 = black
    inked = sum(histogram[:200]) / sum(histogram)
    assert inked > 0.03  # text, tables and the timing plot, not a blank or error page
    assert sum(image.crop((0, 0, 1280, 160)).histogram()[:128]) > 500  # the title is drawn
