"""Bundles from real spyre_sim measurements: a device-time, a numerical and a compile-time alert.

Each investigation is emulated in-process (reports.example): two builds that differ in one
Config knob stand in for a commit that changed a default, and a slowed-down decompose stage for
a compile-time regression no knob expresses. The reproducers then run in fresh subprocesses
and must repeat the report's numbers. Slow: about a minute and a half on two cores.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import spyre_sim
from reports import example, write_bundle
from reports.markdown import inline

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _mlp(x, w1, b1, w2, b2):
    return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def _layernorm(x, weight, bias):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, 1e-5)


def _attention(x, w_qkv, b_qkv, w_out, b_out):
    q, k, v = F.linear(x, w_qkv, b_qkv).split(x.shape[-1], dim=-1)
    heads = [t.view(1, x.shape[1], 8, -1).transpose(1, 2) for t in (q, k, v)]
    attended = F.scaled_dot_product_attention(*heads, is_causal=True)
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


@pytest.fixture(scope="module")
def device_bundle(tmp_path_factory):
    work = tmp_path_factory.mktemp("device")
    inputs = (_randn(127, 512), _randn(512, 512, scale=0.04, seed=1), torch.zeros(512),
              _randn(512, 512, scale=0.04, seed=2), torch.zeros(512))
    probe = example.ProbeProgram(
        "mlp", 127, 512, example.captured_source(_mlp, inputs, "MLP block, [127, 512]."),
        "bench_execute.DeviceTime.time_device", "('mlp', 127)")
    investigation = example.emulate_investigation(
        "device_time", probe, example.EmulatedBuild("lower: fuse pointwise epilogues"),
        example.EmulatedBuild("config: turn pointwise fusion off by default",
                              spyre_sim.Config(fusion=False)),
        work / "probe", compile_repeats=3,
        extra_members=[{"benchmark": "bench_execute.DeviceTime.time_device",
                        "params": "('mlp', 128)", "ratio": 1.58, "ci": [1.57, 1.59],
                        "p": 1e-30, "q": 1e-29, "machine": "emulated", "env": "in-process"}])
    return investigation, write_bundle(investigation, work / "out")


@pytest.fixture(scope="module")
def numerics_bundle(tmp_path_factory):
    work = tmp_path_factory.mktemp("numerics")
    # activations with a DC offset: fp16 partial sums of the mean and variance lose digits
    inputs = (_randn(128, 4096, shift=4.0), torch.ones(4096), torch.zeros(4096))
    probe = example.ProbeProgram(
        "layernorm", 128, 4096,
        example.captured_source(_layernorm, inputs, "LayerNorm over 4096 offset activations."),
        "bench_numerics.StageError.track_rmse_ratio", "('layernorm', 128, 'runtime')")
    investigation = example.emulate_investigation(
        "numerics", probe, example.EmulatedBuild("kernel: accumulate reductions in fp32"),
        example.EmulatedBuild("config: accumulate reductions in fp16 (faster norms)",
                              spyre_sim.Config(reduction_accumulation="fp16")),
        work / "probe", iterations=20, compile_repeats=2)
    return investigation, write_bundle(investigation, work / "out")


@pytest.fixture(scope="module")
def compile_bundle(tmp_path_factory):
    work = tmp_path_factory.mktemp("compile")
    inputs = (_randn(1, 128, 256), _randn(768, 256, scale=0.05, seed=1), torch.zeros(768),
              _randn(256, 256, scale=0.05, seed=2), torch.zeros(256))
    probe = example.ProbeProgram(
        "attention", 128, 256,
        example.captured_source(_attention, inputs, "Causal attention, [1, 128, 256]."),
        "bench_compile.CompileStages.time_stage", "('attention', 128, 'decompose')")
    investigation = example.emulate_investigation(
        "compile_time", probe, example.EmulatedBuild("decompose: hash CSE keys"),
        example.EmulatedBuild("decompose: re-verify the decomposition", patch=slow_decompose),
        work / "probe", iterations=20, compile_repeats=5)
    return investigation, write_bundle(investigation, work / "out")


def run_reproducer(folder: Path, *args: str) -> dict:
    """reproducer.py in a fresh interpreter that sees only torch and this tree's spyre_sim."""
    environment = {key: value for key, value in os.environ.items()
                   if key in ("PATH", "HOME", "LANG", "TMPDIR")}
    environment["PYTHONPATH"] = str(ROOT)
    completed = subprocess.run([sys.executable, "reproducer.py", "--json", *args], cwd=folder,
                               env=environment, capture_output=True, text=True, timeout=300,
                               check=True)
    return json.loads(completed.stdout)


def check_common_parts(investigation: dict, folder: Path) -> tuple[str, str, dict]:
    md, html = (folder / "report.md").read_text(), (folder / "report.html").read_text()
    summary = json.loads((folder / "summary.json").read_text())
    environment = json.loads((folder / "environment.json").read_text())
    culprit = investigation["commits"]["culprit"]
    statement = summary["causal_statement"]
    assert culprit["sha"][:12] in statement and culprit["subject"] in statement
    assert f"On the {investigation['probe']['workload']} workload at shape" in statement
    for member in investigation["alert"]["members"]:
        assert member["params"] in md and member["params"].replace("'", "&#39;") in html
    assert environment["version"] == 1 and environment["torch"] == torch.__version__
    assert environment["config"] == json.loads(json.dumps(investigation["probe"]["config"]))
    assert environment["commits"]["culprit"]["sha"] == culprit["sha"]
    for side in ("good", "bad"):
        trace = json.loads((folder / f"trace_{side}.json").read_text())
        names = {event["name"] for event in trace["traceEvents"] if event.get("cat") == "kernel"}
        assert names, side
    assert (folder / "timing.png").read_bytes()[:4] == b"\x89PNG"
    assert len(md) < 65_000
    return md, html, summary


def test_device_time_bundle(device_bundle):
    investigation, folder = device_bundle
    md, html, summary = check_common_parts(investigation, folder)
    assert summary["first_divergent_stage"] == "lower" and summary["basis"] == "artifact"
    device = summary["device_time"]
    assert 1.4 < device["ratio"] < 1.8 and device["ci"][0] < device["ratio"] < device["ci"][1]
    assert "lower (first divergent)" not in md  # the table highlights, it does not rename
    diff = (folder / "lower.diff").read_text()
    assert diff.startswith("--- good/lower") and "group g1 pointwise" in diff
    # the changed kernels named in the report are the ones in the bad trace
    bad_trace = (folder / "trace_bad.json").read_text()
    for kernel in investigation["stages"]["kernels"]:
        if kernel["good_us"] is None:
            assert inline(kernel["name"]) in md and f'"{kernel["name"]}"' in bad_trace
    # the workaround is stated apart from the cause
    assert "Config(fusion=True)" in summary["workaround_statement"]
    assert "Workaround" not in summary["causal_statement"]
    assert "--set fusion=true" in (folder / "reproducer.py").read_text()
    assert "No executable stage's output is further from float64" in md  # nothing drifts


def test_device_time_reproducer_repeats_the_ratio(device_bundle):
    _, folder = device_bundle
    summary = json.loads((folder / "summary.json").read_text())
    low, high = summary["device_time"]["ci"]
    good = run_reproducer(folder, "--config", "good")
    bad = run_reproducer(folder, "--config", "bad")
    ratio = bad["device_us"]["median"] / good["device_us"]["median"]
    assert low <= ratio <= high, (ratio, low, high)
    assert good["correctness"]["pass"] and bad["correctness"]["pass"]
    assert good["dropped"] == [] and bad["config"] == "bad"
    fixed = run_reproducer(folder, "--config", "bad", "--set", "fusion=true",
                           "--iterations", "20")
    assert fixed["device_us"]["median"] == pytest.approx(good["device_us"]["median"], rel=0.02)


def test_numerics_bundle_and_reproducer(numerics_bundle):
    investigation, folder = numerics_bundle
    md, html, summary = check_common_parts(investigation, folder)
    good, bad = summary["correctness"]
    assert good["passed"] and not bad["passed"]
    assert bad["rmse_ratio"] > 2.0 and any("RMSE ratio" in r for r in bad["reasons"])
    assert summary["first_divergent_stage"] == "kernel"
    assert summary["numerics_first_divergent_stage"] in ("kernel", "runtime")
    assert (folder / "numerics.png").is_file() and (folder / "numerics_stages.csv").is_file()
    assert "| stage output | RMSE ratio good |" in md
    assert "Error after each executable stage" in html
    assert "Config(reduction_accumulation='fp32')" in summary["workaround_statement"]
    assert "bad FAIL" in summary["causal_statement"]
    reproduced = run_reproducer(folder, "--config", "bad", "--iterations", "3")
    assert not reproduced["correctness"]["pass"]
    assert reproduced["correctness"]["rmse_ratio"] == pytest.approx(bad["rmse_ratio"], rel=1e-9)
    assert run_reproducer(folder, "--config", "good", "--iterations", "3")["correctness"]["pass"]


def test_compile_time_bundle(compile_bundle):
    investigation, folder = compile_bundle
    md, html, summary = check_common_parts(investigation, folder)
    assert summary["first_divergent_stage"] == "decompose"
    assert summary["basis"] == "compile_time"
    assert not list(folder.glob("*.diff"))  # no artifact differs, so there is no diff to ship
    assert "the decompose stage's cold compile time went from" in summary["causal_statement"]
    assert "No single Config knob restores the metric" in summary["workaround_statement"]
    assert (folder / "compile_stages.png").is_file()
    stages = (folder / "compile_stages.csv").read_text().splitlines()
    decompose = next(line for line in stages if line.startswith("decompose,"))
    assert float(decompose.split(",")[5]) >= 1.5  # the ratio column
    assert "decompose compile time, bad / good" in html


def test_report_html_renders_in_headless_chromium(device_bundle, tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import screenshot_report
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    if screenshot_report.find_browser() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    from PIL import Image

    _, folder = device_bundle
    png = screenshot_report.screenshot(folder / "report.html", tmp_path / "report.png")
    image = Image.open(png).convert("L")
    assert image.size == (1280, 2400)
    histogram = image.histogram()  # pixels per grey level, 0 = black
    inked = sum(histogram[:200]) / sum(histogram)
    assert inked > 0.03  # text, tables and the timing plot, not a blank or error page
    assert sum(image.crop((0, 0, 1280, 160)).histogram()[:128]) > 500  # the title is drawn
