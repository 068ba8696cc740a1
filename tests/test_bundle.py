"""Fast tests of the report bundle: reading, escaping, secrets, limits, files and formats.

The investigations here are built from the typed model with seeded lognormal timings and a
hand-written trace, so every test runs in well under a second of its own;
tests/e2e/test_bundles.py runs the real investigation on emulated builds and runs the
reproducers.
"""

from __future__ import annotations

import ast
import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest
import torch

import spyre_sim
from regressions.bisection.commits import BisectResult, Step
from regressions.bisection.minimize import MinimizeResult
from regressions.bisection.stages import KernelDelta, StageDelta, StageReport
from regressions.detection.alerts import Alert
from regressions.detection.detect import Regression
from regressions.errors import SpyreRegressError
from regressions.investigation import model
from regressions.investigation.model import Investigation
from regressions.probing import harness
from reports import bundle, markdown, reproducer, secrets, write_bundle
from reports.narrative import build_report

PROGRAM = '''"""A minimized program."""

import torch

aten = torch.ops.aten


def program(x, w):
    mm = aten.mm.default(x, w)
    gelu = aten.gelu.default(mm)
    return (gelu,)


def make_inputs():
    generator = torch.Generator().manual_seed(0)
    return (
        torch.randn([127, 256], generator=generator) * 1.0 + 0.0,
        torch.randn([256, 256], generator=generator) * 0.05 + 0.0,
    )
'''
DIFF = """--- good/lower
+++ bad/lower
@@ -1,3 +1,4 @@
   matmul %mm = mm(%x, %w)
-  group g0 matmul: %mm %gelu
+  group g0 matmul: %mm
+  group g1 pointwise: %gelu
"""
GOOD, BAD = "a" * 40, "b" * 40


def _run(rng, device_median: float, config: dict) -> model.BuildRun:
    return model.BuildRun(
        status="ok", detail="", host_s=tuple(rng.lognormal(np.log(0.02), 0.1, 100).tolist()),
        device_us=tuple(rng.lognormal(np.log(device_median), 0.015, 100).tolist()),
        errors=model.Errors(7e-4, 4.2, 1.2e-4, 1.17),
        kernels=(model.KernelTime("k0_mm_gelu", 10.0, "memory", 8),),
        compile_s={stage: 0.001 for stage in spyre_sim.STAGES},
        environment={"torch": "2.13.0+cpu", "spyre_sim": "0.1.0", "python": "3.11.7", "cores": 32},
        config=config)


def synthetic_investigation(tmp_path: Path, *, benchmark: str = "bench.Device.time_device",
                            params: str = "('mlp', 127)", subject: str = "lower: fusion off",
                            log: str = "spyre_sim.lower DEBUG decision fusion#0 -> False",
                            diff: str = DIFF, source: str = PROGRAM,
                            tolerance: model.Tolerance | None = None) -> Investigation:
    """An investigation with seeded timings: 120 us good, 194 us bad."""
    rng = np.random.default_rng(0)
    good_config = json.loads(json.dumps(spyre_sim.Config().to_dict()))  # as a probe answers
    bad_config = {**good_config, "fusion": False}
    traces = {}
    for side, kernels in (("good", ["k0_mm_gelu"]), ("bad", ["k0_mm", "k1_gelu"])):
        events = [{"name": name, "ph": "X", "ts": 20.0 * i, "dur": 10.0, "pid": 1, "tid": 0,
                   "cat": "kernel", "args": {"note": log}} for i, name in enumerate(kernels)]
        traces[side] = tmp_path / f"trace_{side}.json"
        traces[side].write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    member = Regression(machine="box", env="venv", benchmark=benchmark, params=params,
                        kind="device_time", good_commit=GOOD, bad_commit=BAD, good_position=0,
                        bad_position=1, ratio=1.6,
                        ci=(1.59, 1.61), p=1e-30, q=1e-29, baseline=120e-6)
    other = dataclasses.replace(member, params="('mlp', 128)", ratio=1.5)
    target = model.Target(benchmark=benchmark, params=("'mlp'", "127"), workload="mlp", seq=127,
                          width=256, metric="device_time")
    commits = model.Commits(model.CommitInfo(GOOD, "good commit", "2025-01-01"),
                            model.CommitInfo(BAD, subject, "2025-01-02"),
                            model.CommitInfo(BAD, subject, "2025-01-02"))
    samples = {GOOD: tuple(rng.lognormal(np.log(120e-6), 0.015, 20).tolist()),
               BAD: tuple(rng.lognormal(np.log(194e-6), 0.015, 20).tolist())}
    bisect = BisectResult(culprit=BAD, good=GOOD, bad=BAD, commits_in_range=1,
                          commits_measured=2,
                          steps=[Step(commit=BAD, n=20, median=194e-6, reference="good",
                                      pvalue=1e-4, verdict="bad", note=log)], samples=samples)
    program = model.Program("mlp", 127, 256, "benchmark")
    confirmation = model.confirmation(program, model.metrics.by_name("device_time"),
                                      samples[GOOD], samples[BAD], floor=0.01)
    stage_rows = [StageDelta(stage=s, changed=s in ("lower", "layout"), diff_lines=3,
                             compile_s_good=0.001, compile_s_bad=0.0011, compile_ratio=1.1,
                             compile_p=0.4)
                  for s in spyre_sim.STAGES]
    stages = StageReport(good=GOOD, bad=BAD, workload="mlp", seq=127, width=256,
                         first_divergent_stage="lower", basis="artifact", stage_diff_lines=3,
                         diff=diff, stages=stage_rows,
                         kernels=[KernelDelta("k0_mm_gelu", 10.0, None), KernelDelta("k0_mm", None,
                                                                                     9.0),
                                  KernelDelta("k1_gelu", None, 4.0)],
                         device_time_us={"good": 120.0, "bad": 194.0},
                         numerics_first_divergent_stage=None, numerics={}, log_excerpt=log)
    workaround = model.Workaround(knob="fusion", value=True, stage="lower",
                                  program=model.Program("mlp", 127, 256, "full"),
                                  metric="device_time", unit="us", metric_bad=194.0,
                                  metric_with_knob=120.5, metric_good=120.0, recovered=0.99,
                                  decisive_application=None)
    minimized = MinimizeResult(source=source, ops_before=5, ops_after=2, queries=12,
                               ratio_before=1.6, ratio_after=1.62, steps=[])
    timing = model.timing(model.Program("mlp", 127, 256, "minimized", ops=2),
                          _run(rng, 120.0, good_config), _run(rng, 194.0, bad_config),
                          tolerance or model.Tolerance())
    alert = Alert("device_time", GOOD, BAD, (member, other), probe=member)
    return Investigation(version=model.INVESTIGATION_VERSION, alert=alert, target=target,
                         commits=commits, bisect=bisect,
                         confirmation=confirmation, stages=stages, workaround=workaround,
                         minimized=minimized, source=source, timing=timing,
                         traces={side: str(path) for side, path in traces.items()})


def bundle_texts(folder: Path) -> dict[str, bytes]:
    """Every file of the folder and every member of its archive, by name."""
    contents = {f"folder/{p.name}": p.read_bytes() for p in folder.iterdir()}
    with tarfile.open(folder.parent / f"{folder.name}.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                extracted = tar.extractfile(member)
                assert extracted is not None  # a regular file
                contents[f"tar/{member.name}"] = extracted.read()
    return contents


# --- reading an investigation ---------------------------------------------------------------

def test_an_investigation_reads_back_as_itself(tmp_path):
    found = synthetic_investigation(tmp_path)
    document = json.loads(json.dumps(model.dump(found)))
    assert model.load(document) == found


@pytest.mark.parametrize(("path", "value", "message"), [
    ("version", 1, "investigation format version 1"),
    ("version", "2", "investigation format version '2'"),
    ("alert.members.0.benchmark", 3, "`investigation.alert.members[0].benchmark` must be a "
                                     "string"),
    ("timing.good.device_us.3", "fast", "`investigation.timing.good.device_us[3]` must be a "
                                        "number"),
    ("target.seq", True, "`investigation.target.seq` must be an integer"),
    ("stages.basis", 3, "`investigation.stages.basis` must be one of 'artifact', "
                        "'instructions', 'compile_clock', 'wait', 'compile_error' or null"),
])
def test_reading_names_the_bad_field(tmp_path, path, value, message):
    document = model.dump(synthetic_investigation(tmp_path))
    *parents, last = path.split(".")
    target = document
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    with pytest.raises(SpyreRegressError, match=re.escape(message)):
        model.load(document)


@pytest.mark.parametrize(("old", "new"), [("compile_work", "instructions"),
                                           ("compile_time", "compile_clock"),
                                           ("artifact", "artifact")])
def test_a_version_2_investigation_is_read_with_its_basis_renamed(tmp_path, old, new):
    document = model.dump(synthetic_investigation(tmp_path))
    document["version"], document["stages"]["basis"] = 2, old
    found = model.load(document)
    assert found.stages.basis == new and found.version == model.INVESTIGATION_VERSION == 3


@pytest.mark.parametrize("path", ["alert", "commits.bad.sha", "stages.diff", "timing.program",
                                  "traces", "source"])
def test_reading_names_a_missing_field(tmp_path, path):
    document = model.dump(synthetic_investigation(tmp_path))
    *parents, last = path.split(".")
    target = document
    for part in parents:
        target = target[part]
    del target[last]
    with pytest.raises(SpyreRegressError, match=re.escape(f"`investigation.{path}` is missing")):
        model.load(document)


def test_optional_parts_may_be_null(tmp_path):
    found = synthetic_investigation(tmp_path)
    found = dataclasses.replace(found, workaround=None, bisect=None, confirmation=None,
                                commits=dataclasses.replace(found.commits, culprit=None))
    found = model.load(json.loads(json.dumps(model.dump(found))))
    folder = write_bundle(found, tmp_path / "out")
    text = (folder / "report.md").read_text()
    assert "No single Config knob restores the metric" in text
    assert "No commit bisection was run" in text
    assert "lies between aaaaaaaaaaaa and bbbbbbbbbbbb" in text


# --- markdown escaping ----------------------------------------------------------------------

@pytest.mark.parametrize(("raw", "escaped"), [
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("a|b", "a\\|b"),
    ("`x`", "\\`x\\`"),
    ("**b** _i_ [l](u) $m$ ~s~", "\\*\\*b\\*\\* \\_i\\_ \\[l\\](u) \\$m\\$ \\~s\\~"),
    ("# title", "\\# title"),
    ("1. item", "1\\. item"),
    ("two\nlines", "two lines"),
    ("&lt;", "&amp;lt;"),
])
def test_markdown_text_escapes_every_construct(raw, escaped):
    assert markdown.text(raw) == escaped


def test_fence_is_longer_than_any_backtick_run_inside():
    block = markdown.fenced("a ```` b\n```\n", "diff")
    fence = block.split("\n", 1)[0].removesuffix("diff")
    assert fence == "`" * 5
    assert block.endswith("\n" + fence)


def test_long_text_is_truncated_with_a_pointer():
    body = "\n".join(f"+ line {i}" for i in range(1000))
    short = markdown.truncate_lines(body, 200, "lower.diff")
    assert len(short) < 300
    assert short.endswith("full text is in lower.diff]")


# --- secrets --------------------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789 here",
    "GITHUB_TOKEN=ghp_secretvalue",
    "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "key id AKIAIOSFODNN7EXAMPLE",
    "clone https://user:hunter2pass@example.com/repo.git",
    "Authorization: Bearer abcdef0123456789abcdef",
    '{"password": "correct horse"}',
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
])
def test_credential_shapes_are_scrubbed_without_knowing_the_value(raw):
    scrubbed = secrets.scrub_text(raw, ())
    assert secrets.REDACTED in scrubbed
    for secret in ("abcdefghijklmnop", "ghp_secretvalue", "wJalrXUtnFEMI", "AKIAIOSFODNN7",
                   "hunter2pass", "abcdef0123456789", "correct horse", "MIIEowIBAAKCAQEA"):
        assert secret not in scrubbed


def test_only_credential_variables_are_scrubbed_and_only_allow_listed_names_kept():
    environ = {"MY_PASSWORD": "hunter2", "DEPLOY_KEY": "abcd1234efgh", "SENCORES": "16",
               "HOME": "/root", "GITHUB_WORKSPACE": "/w", "PYENV_DIR": "/root/.pyenv",
               "SOME_ID": "abcd1234wxyz", "API_TOKEN": "abc", "DB_PWD": "s3cr3tpw",
               "PWD": "/tmp", "OLDPWD": "/work"}
    values = secrets.secret_values(environ)
    # credentials by name; paths (the shell's PWD too) and ids are report text; "abc" is too
    # short to matter
    assert set(values) == {"hunter2", "abcd1234efgh", "s3cr3tpw"}
    assert secrets.allowed_environment(environ) == {"SENCORES": "16"}
    assert secrets.scrub_text("x hunter2 y abcd1234efgh /w/out", values) == \
        "x [redacted] y [redacted] /w/out"


def test_ordinary_compiler_text_survives_scrubbing():
    text = "spyre_sim.lower DEBUG decision fusion#0 %addmm -> False; max_tokens: 5; author: a"
    assert secrets.scrub_text(text, ()) == text


# --- numbers --------------------------------------------------------------------------------

def test_summary_quartiles_match_numpy_and_the_reproducer_harness():
    samples = list(np.random.default_rng(3).lognormal(0, 0.2, 37))
    ours, theirs = model.summarize(samples), harness.summarize(samples)
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    assert (ours.q1, ours.median, ours.q3) == pytest.approx((q1, median, q3), rel=1e-12)
    assert (theirs.q1, theirs.median, theirs.q3) == pytest.approx((q1, median, q3))
    assert theirs.geomean == pytest.approx(ours.geomean)


def test_the_reproducers_outcome_prints_the_keys_of_its_json_version():
    """The outcome is a dataclass (`harness.Outcome`); its JSON stays version 2's document
    (docs/reference/formats.md), `compile_instructions` and its note only with --instructions."""
    errors = {"max_abs": 0.5, "max_rel": 0.1, "rmse": 1e-4, "rmse_ratio": 3.0}
    outcome = harness.Outcome(
        build=harness.Build("spyre_sim", {"torch": "2.13.0"}, "/b", "3.11.9"), config="bad",
        overrides={"fusion": False}, dropped=["x"], compile_s={"lower": 0.1, "total": 0.3},
        device_us=harness.summarize([2.0, 4.0]), host_s=None,
        correctness=harness.Correctness(errors, harness.failures(
            errors, {"rmse_ratio": 2.0, "max_abs": 0.05})), kernels=[])
    document = json.loads(json.dumps(outcome.to_json()))
    assert document["version"] == harness.REPRODUCER_OUTPUT_VERSION == 2
    assert list(document) == ["version", "build", "config", "overrides", "dropped",
                              "compile_s", "device_us", "host_s", "correctness", "kernels"]
    assert document["build"] == {"backend": "spyre_sim", "versions": {"torch": "2.13.0"},
                                 "path": "/b", "python": "3.11.9"}
    assert document["device_us"]["n"] == 2 and document["device_us"]["median"] == 3.0
    assert document["correctness"]["pass"] is False
    assert document["correctness"]["reasons"] == ["RMSE ratio 3 > 2", "max abs 0.5 > 0.05"]
    outcome.instructions = harness.Instructions(None, "valgrind is not installed")
    assert outcome.to_json()["compile_instructions"] is None
    assert "-> FAIL (RMSE ratio 3 > 2; max abs 0.5 > 0.05)" in harness.describe(
        outcome, {"tolerance_text": "t"})


@pytest.mark.parametrize(("rmse_ratio", "max_abs", "passed"), [
    (2.0, 0.05, True), (2.01, 0.001, False), (1.0, 0.0501, False),
    (float("nan"), 0.001, False), (float("inf"), 0.001, False)])
def test_correctness_verdict_at_the_tolerance(rmse_ratio, max_abs, passed):
    errors = {"max_abs": max_abs, "max_rel": 0.1, "rmse": 1e-4, "rmse_ratio": rmse_ratio}
    run = model.BuildRun(status="ok", errors=model.errors_from(errors))
    assert model.judge("bad", run, model.Tolerance()).passed is passed
    assert (not harness.failures(errors, {"rmse_ratio": 2.0, "max_abs": 0.05})) is passed


def test_device_ratio_interval_brackets_the_true_shift(tmp_path):
    found = synthetic_investigation(tmp_path)
    summary = json.loads(write_bundle(found, tmp_path / "o").joinpath("summary.json")
                         .read_text())
    device, confirmation = summary["device_time"], summary["confirmation"]
    assert device["ci"][0] < 194.0 / 120.0 < device["ci"][1]
    assert device["pvalue"] < 1e-20 and device["confidence"] == 0.95
    assert confirmation["ci"][0] < 194.0 / 120.0 < confirmation["ci"][1]
    assert confirmation["confirmed"] is True


def test_every_quote_of_the_regression_is_the_confirmation(tmp_path):
    found = synthetic_investigation(tmp_path)
    _, files = bundle.bundle_files(found, "spyre_sim")
    assert found.confirmation is not None
    figure = f"×{found.confirmation.ratio:.3f}"
    summary = json.loads(files["summary.json"])
    assert figure in summary["title"] and figure in summary["causal_statement"]
    assert figure in files["report.md"].decode() and figure in files["report.html"].decode()
    # the timing of the minimized program is quoted as what it is
    assert ("on the minimized program (2 ATen ops cut from the captured mlp program at seq "
            "127, width 256)") in summary["causal_statement"]


# --- the bundle -----------------------------------------------------------------------------

HOSTILE = "<script>alert('x')</script> `tick` ``` | pipe |"


def test_hostile_strings_are_escaped_and_secrets_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secretvalue")
    monkeypatch.setenv("MY_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENGbPxRfiCY")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    leak = "ghp_secretvalue hunter2hunter2 wJalrXUtnFEMIK7MDENGbPxRfiCY"
    found = synthetic_investigation(
        tmp_path, benchmark=f"bench.{HOSTILE}", params=f"('{HOSTILE}', 127)",
        subject=f"lower: {HOSTILE} {leak}", log=f"spyre_sim.lower {HOSTILE} {leak}",
        diff=DIFF + f"+ {HOSTILE}\n+ ```` four\n")
    folder = write_bundle(found, tmp_path / "out")
    contents = bundle_texts(folder)
    for name, data in contents.items():
        for secret in ("ghp_secretvalue", "hunter2hunter2", "wJalrXUtnFEMIK7MDENGbPxRfiCY"):
            assert secret.encode() not in data, (secret, name)
    md = (folder / "report.md").read_text()
    html = (folder / "report.html").read_text()
    assert "<script" not in html.lower() and "&lt;script&gt;" in html
    # in markdown a raw tag may only appear as text inside a fenced code block
    prose = re.sub(r"^(`{3,})[^\n]*\n.*?^\1$", "", md, flags=re.MULTILINE | re.DOTALL)
    assert "<script" not in prose and "&lt;script&gt;" in prose
    assert r"\`tick\`" in md
    # every table row keeps its column count: the pipes inside cells are escaped
    for block in re.split(r"\n\n", md):
        rows = [line for line in block.splitlines() if line.startswith("| ")]
        if rows:
            widths = {len(re.findall(r"(?<!\\)\|", row)) for row in rows}
            assert len(widths) == 1, block
    # the diff's own backtick runs cannot close its fence
    opening = re.search(r"^(`{3,})diff$", md, re.MULTILINE)
    assert opening is not None
    fence = opening.group(1)
    assert len(fence) > 4 and f"\n{fence}\n" in md
    environment = json.loads((folder / "environment.json").read_text())
    assert environment["environment_variables"] == {"OMP_NUM_THREADS": "2"}


def test_html_is_self_contained(tmp_path):
    folder = write_bundle(synthetic_investigation(tmp_path), tmp_path / "out")
    html = (folder / "report.html").read_text()
    assert "default-src 'none'" in html  # the browser refuses any request
    assert not re.search(r"<link|<script|@import|<iframe|<object|<embed", html, re.I)
    sources = re.findall(r"""\b(?:src|href|srcset|poster|action)\s*=\s*["']?([^"' >]+)""",
                         html, re.I)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//", html, re.I)


def test_markdown_stays_under_the_issue_limit(tmp_path):
    huge_diff = "--- good/lower\n+++ bad/lower\n" + "".join(
        f"+  group g{i} pointwise: %{'x' * 60}\n" for i in range(5000))
    found = synthetic_investigation(tmp_path, diff=huge_diff, log="log line\n" * 20000)
    folder = write_bundle(found, tmp_path / "out")
    md = (folder / "report.md").read_text()
    assert len(md) <= markdown.MAX_CHARS
    assert "the full text is in lower.diff]" in md
    assert (folder / "lower.diff").read_text() == huge_diff


def test_every_json_file_is_versioned_and_the_archive_matches(tmp_path):
    folder = write_bundle(synthetic_investigation(tmp_path), tmp_path / "out")
    versions = {"investigation.json": model.INVESTIGATION_VERSION,
                "summary.json": bundle.SUMMARY_VERSION,
                "environment.json": bundle.ENVIRONMENT_VERSION}
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())
        version = data.get("version", (data.get("otherData") or {}).get("version"))
        assert version == versions.get(path.name, 1), path.name
    with tarfile.open(folder.parent / f"{folder.name}.tar.gz") as tar:
        names = {Path(m.name).name for m in tar.getmembers() if m.isfile()}
        assert all(m.uname == "" and m.uid == 0 for m in tar.getmembers())
    assert names == {p.name for p in folder.iterdir()}
    expected = {"report.md", "report.html", "reproducer.py", "environment.json", "summary.json",
                "investigation.json", "timing_samples.csv", "timing.png", "compile_stages.csv",
                "compile_stages.png", "kernels.csv", "lower.diff", "compile_log.txt",
                "trace_good.json", "trace_bad.json"}
    assert expected <= names
    assert (folder / "timing.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = (folder / "timing_samples.csv").read_text().splitlines()
    assert rows[0] == "build,iteration,host_s,device_us" and len(rows) == 201


def test_a_bundle_replaces_its_old_self_but_never_a_foreign_folder(tmp_path):
    found = synthetic_investigation(tmp_path)
    folder = write_bundle(found, tmp_path / "out")
    (folder / "stale.txt").write_text("old")
    assert write_bundle(found, tmp_path / "out") == folder
    assert not (folder / "stale.txt").exists()
    (folder / "summary.json").unlink()
    with pytest.raises(SpyreRegressError, match="is not a report bundle"):
        write_bundle(found, tmp_path / "out")


def test_a_long_bundle_name_is_cut_at_a_word_boundary(tmp_path):
    found = synthetic_investigation(tmp_path, benchmark="bench." + "long_name-" * 20)
    name = bundle.bundle_name(found)
    assert len(name) <= bundle.NAME_LIMIT and name.endswith("long_name")


def test_an_unreadable_trace_names_the_field(tmp_path):
    found = synthetic_investigation(tmp_path)
    found = dataclasses.replace(found, traces={**found.traces,
                                               "bad": str(tmp_path / "missing.json")})
    with pytest.raises(SpyreRegressError, match=r"`traces.bad` names .*missing.json"):
        bundle.bundle_files(found, "spyre_sim")


def test_paths_the_tool_wrote_survive_variables_that_are_their_prefix(tmp_path):
    found = synthetic_investigation(tmp_path)
    environ = {"GITHUB_WORKSPACE": str(tmp_path), "HOME": str(tmp_path.parent),
               "PYENV_DIR": str(tmp_path), "CI_TOKEN": "tok-planted-1234"}
    found = dataclasses.replace(found, commits=dataclasses.replace(
        found.commits, bad=dataclasses.replace(found.commits.bad, subject="x tok-planted-1234")))
    _, files = bundle.bundle_files(found, "spyre_sim", environ)
    assert "trace_bad.json" in files and "trace_good.json" in files
    assert not any(b"tok-planted-1234" in data for data in files.values())


def test_a_failed_build_is_reported_not_crashed(tmp_path):
    found = synthetic_investigation(tmp_path)
    failed = model.BuildRun(status="failed", detail="SpyreRuntimeError: layout mismatch")
    timing = model.timing(found.timing.program, found.timing.good, failed)
    found = dataclasses.replace(found, timing=timing,
                                traces={**found.traces, "bad": None})
    _, files = bundle.bundle_files(found, "spyre_sim")
    md = files["report.md"].decode()
    assert "FAIL: the build did not run: SpyreRuntimeError: layout mismatch" in md
    assert "trace_bad.json" not in files


# --- the reproducer's text ------------------------------------------------------------------

def test_reproducer_text_survives_hostile_names(tmp_path):
    found = synthetic_investigation(tmp_path, subject='quote """ and \\ backslash\n"',
                                    benchmark="b\nimport os; os.system('x')")
    _, files = bundle.bundle_files(found, "spyre_sim")
    source = files["reproducer.py"].decode()
    tree = ast.parse(source)
    imported = {alias.name for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    # the compiler is reached through the embedded backend module (BACKEND_SOURCE), never
    # imported by the reproducer's own code
    assert imported == {"argparse", "contextlib", "ctypes", "dataclasses", "gc",
                        "importlib.util", "json",
                        "math", "mmap", "os", "platform", "shutil", "statistics", "subprocess",
                        "sys", "tempfile", "time", "warnings", "torch"}
    assert "BACKEND_SOURCE = r" + "'''" in source and "import spyre_sim" in source
    assert not any(isinstance(node, ast.Attribute) and node.attr == "system"
                   for node in ast.walk(tree))  # the hostile name stayed text
    assert 'quote "\\"\\" and \\\\ backslash' in source  # inside the docstring, as text
    assert "def program(x, w):" in source  # pasted verbatim: readable


def test_a_program_that_clashes_with_the_harness_is_embedded_as_text(tmp_path):
    clashing = PROGRAM.replace("def make_inputs", "def main():\n    pass\n\n\ndef make_inputs")
    found = synthetic_investigation(tmp_path, source=clashing)
    source = reproducer.reproducer_source(build_report(found, "spyre_sim"))
    assert "PROGRAM_SOURCE = " in source
    compile(source, "reproducer.py", "exec")


def test_a_program_without_the_entry_points_is_refused(tmp_path):
    found = synthetic_investigation(tmp_path, source="x = 1\n")
    with pytest.raises(SpyreRegressError, match=r"must define \['make_inputs', 'program'\]"):
        bundle.bundle_files(found, "spyre_sim")


def test_reproducer_usage_quotes_the_workaround_for_the_shell(tmp_path):
    found = synthetic_investigation(tmp_path)
    assert found.workaround is not None
    found = dataclasses.replace(found, workaround=dataclasses.replace(
        found.workaround, knob="fusion; rm -rf /", value="a b"))
    usage = reproducer.usage_commands(build_report(found, "spyre_sim"))
    assert "--set 'fusion; rm -rf /=a b'" in usage


def test_a_report_names_the_measuring_backends_baseline_and_settings(tmp_path):
    """An Inductor investigation's numerics are relative to eager PyTorch and its knobs are
    torch._inductor.config entries; nothing of spyre_sim's vocabulary (DLFloat16, Config,
    SENCORES) reaches its bundle, while a spyre_sim bundle keeps it."""
    found = synthetic_investigation(tmp_path)
    assert found.workaround is not None
    settings = {"cpp.simdlen": None, "max_fusion_size": 64}
    inductor = dataclasses.replace(
        found, backend="inductor",
        timing=dataclasses.replace(
            found.timing, good=dataclasses.replace(found.timing.good, config=settings),
            bad=dataclasses.replace(found.timing.bad, config={**settings, "cpp.simdlen": 1})),
        workaround=dataclasses.replace(found.workaround, knob="cpp.simdlen", value=None,
                                       stage="codegen"))
    texts = {}
    for name, investigation in (("spyre", found), ("inductor", inductor)):
        folder = write_bundle(investigation, tmp_path / name, repo_name=name)
        texts[name] = "\n".join((folder / f).read_text() for f in ("report.md", "summary.json"))
    spyre, inductor_text = texts["spyre"], texts["inductor"]
    assert "RMSE ratio vs eager DLFloat16" in spyre and "SENCORES" in spyre
    assert "Config(fusion=True)" in spyre
    assert "RMSE ratio vs eager PyTorch" in inductor_text
    assert "torch.\\_inductor.config.cpp.simdlen = None" in inductor_text  # escaped markdown
    assert "default torch.\\_inductor.config changed: cpp.simdlen None → 1" in inductor_text
    for word in ("DLFloat16", "SENCORES", "Config("):
        assert word not in inductor_text, word


def test_harness_reads_configs_recorded_by_another_build():
    from backends import spyre

    recorded = {**spyre_sim.Config().to_dict(), "future_knob": 3}
    recorded["device"] = {**recorded["device"], "future_param": 1.0}
    values, dropped = harness.settings_for(spyre, recorded, {"fusion": False})
    assert dropped == ["future_knob", "device.future_param"]
    assert spyre.config(values).fusion is False
    assert spyre.config(values).device == spyre_sim.Config().device
    with pytest.raises(SystemExit, match="spyre_sim has no setting 'fusoin'"):
        harness.settings_for(spyre, recorded, {"fusoin": False})


def _run_isolated(folder: Path, *args: str) -> subprocess.CompletedProcess:
    """reproducer.py in a fresh interpreter in which `import spyre_sim` fails, as for a
    maintainer of another compiler (the reproducer imports nothing of spyre-regress:
    `test_reproducer_text_survives_hostile_names` checks its imports)."""
    blocked = folder / "blocked" / "spyre_sim"
    blocked.mkdir(parents=True, exist_ok=True)
    (blocked / "__init__.py").write_text("raise ImportError('no spyre_sim here')\n")
    environment = {key: value for key, value in os.environ.items()
                   if key in ("PATH", "HOME", "LANG", "TMPDIR")}
    environment.update(PYTHONPATH=str(blocked.parent),
                       TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor-cache"))
    return subprocess.run([sys.executable, "reproducer.py", *args], cwd=folder,
                          env=environment, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_an_inductor_reproducer_runs_with_torch_alone(tmp_path):
    """An investigation measured through the Inductor backend embeds backends/inductor.py,
    applies the recorded Inductor settings (dropping a knob this torch lacks) and times the
    compiled CPU code on the host clock, with no simulator importable."""
    from backends import inductor

    found = synthetic_investigation(tmp_path)
    recorded = json.loads(json.dumps(inductor.settings()))
    timing = dataclasses.replace(
        found.timing, good=dataclasses.replace(found.timing.good, config=recorded),
        bad=dataclasses.replace(found.timing.bad, config={**recorded, "max_fusion_size": 1,
                                                          "future_knob": 3}))
    found = dataclasses.replace(found, timing=timing, backend="inductor")
    (tmp_path / "reproducer.py").write_text(
        reproducer.reproducer_source(build_report(found, "inductor")))

    done = _run_isolated(tmp_path, "--json", "--iterations", "5", "--compile-repeats", "1")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["build"]["backend"] == "inductor"
    assert outcome["build"]["versions"]["torch"] == torch.__version__
    assert outcome["dropped"] == ["future_knob"]
    assert outcome["device_us"] is None and outcome["host_s"]["n"] == 5
    assert outcome["kernels"] == []
    assert set(inductor.STAGES) < set(outcome["compile_s"])
    # float32 code against float64: far inside the tolerance, unlike a 16-bit format
    assert outcome["correctness"]["max_rel"] < 1e-5
    refused = _run_isolated(tmp_path, "--set", "max_fusoin_size=2", "--iterations", "1")
    assert refused.returncode != 0
    assert "inductor has no setting 'max_fusoin_size'" in refused.stderr


def test_kernels_csv_has_one_row_per_kernel(tmp_path):
    folder = write_bundle(synthetic_investigation(tmp_path), tmp_path / "out")
    kernels = list(io.StringIO((folder / "kernels.csv").read_text()))
    assert kernels[0].strip() == "name,good_us,bad_us" and len(kernels) == 4


def test_a_stated_tolerance_is_the_one_judged_and_quoted(tmp_path):
    found = synthetic_investigation(tmp_path, tolerance=model.Tolerance(1.1, 0.01))
    _, files = bundle.bundle_files(found, "spyre_sim")
    summary = json.loads(files["summary.json"])
    assert [c["passed"] for c in summary["correctness"]] == [False, False]  # 1.17 > 1.1
    assert "RMSE ratio 1.17 > 1.1" in files["report.md"].decode().replace("&gt;", ">")


def test_the_shipped_investigation_names_the_bundled_traces_not_local_paths(tmp_path):
    found = synthetic_investigation(tmp_path)
    _, files = bundle.bundle_files(found, "spyre_sim")
    shipped = json.loads(files["investigation.json"])
    assert shipped["traces"] == {"good": "trace_good.json", "bad": "trace_bad.json"}
    assert str(tmp_path).encode() not in b"".join(files.values())


def test_every_figure_the_statements_quote_is_a_named_figure_of_the_report(tmp_path):
    """One quantity, one value, one name: the causal and workaround statements quote only
    values the Figures table lists (with program, clock and statistic), and that table names
    no quantity twice; a figure that is not there is found."""
    from rendered import named_twice, quoted, unexplained

    folder = write_bundle(synthetic_investigation(tmp_path), tmp_path / "out")
    report = (folder / "report.md").read_text()
    assert len(quoted(report.split("## Figures")[0])) >= 8  # the statements do quote figures
    assert unexplained(report) == [] and named_twice(report) == []
    stray = report.replace("**Causal statement.** ", "**Causal statement.** It took 9.87 us. ")
    assert unexplained(stray) == ["9.87"]
    host = next(line for line in report.splitlines()
                if line.startswith("| host wall time per call |"))
    assert named_twice(report.replace(host, f"{host}\n{host}")) == [tuple(
        cell.strip() for cell in host.split("|")[1:5])]


def test_a_report_of_a_stage_that_now_waits_says_which_part_moved_and_by_how_much(tmp_path):
    """A blocked-time regression (a stage that sleeps): the report names the part, the stage
    and the wait per compile, on the part's own figures, not the stages' wall times."""
    found = synthetic_investigation(tmp_path, benchmark="bench_compile.CompileStage."
                                    "time_stage_blocked", params="('sdsc', 'mlp', 128)")
    metric = model.metrics.by_name("compile_blocked")
    target = model.Target(benchmark="bench_compile.CompileStage.time_stage_blocked",
                          params=("'sdsc'", "'mlp'", "128"), workload="mlp", seq=128, width=1024,
                          metric=metric.name, stage="sdsc")
    program = model.Program("mlp", 128, 1024, "benchmark")
    rng = np.random.default_rng(1)
    confirmation = model.confirmation(program, metric, (0.005,) * 20,
                                      tuple(rng.normal(0.0502, 0.0002, 20).tolist()),
                                      floor=metric.floor)
    rows = [StageDelta(stage=s, changed=False, diff_lines=0, compile_s_good=0.00001,
                       compile_s_bad=0.0501 if s == "sdsc" else 0.00001, compile_ratio=None,
                       compile_p=0.03)
            for s in spyre_sim.STAGES]
    stages = dataclasses.replace(found.stages, first_divergent_stage="sdsc", basis="wait",
                                 diff="", stage_diff_lines=0, stages=rows, wait_part="blocked")
    found = dataclasses.replace(found, target=target, confirmation=confirmation, stages=stages,
                                workaround=None, minimized=None)
    report = build_report(found, "spyre-regress")
    assert "compile blocked time regression" in report.title and "in sdsc" in report.title
    assert "the stage whose blocked time grew most is sdsc" in report.causal_statement
    assert "The sdsc stage now waits 50.09 ms more per compile, blocked (0.01 ms → 50.10 ms)" \
        in report.causal_statement  # the stage probe's own figures
    # the benchmark's samples read the floor at the parent: the growth is at least the rest
    assert "now waits at least 45." in report.causal_statement
    assert "5.00 ms or less, the floor" in report.causal_statement
    _, files = bundle.bundle_files(found, "spyre_sim")
    assert "blocked time per cold compile, good" in files["report.md"].decode()


def test_the_timing_figure_of_a_build_that_ran_nowhere_here_draws_no_empty_curve():
    """torch-spyre's programs need a card: its timing probe has device time (modelled) and no
    host time. The host panel says so instead of taking the median of nothing."""
    import warnings

    from regressions.investigation.model import BuildRun
    from reports import plots

    good = BuildRun(status="ok", device_us=(87.3,))
    bad = BuildRun(status="ok", device_us=(104.1,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        png = plots.timing_figure(good, bad, "device only")
    assert png.startswith(b"\x89PNG")
