"""Fast tests of the report bundle: validation, escaping, secrets, limits, files and formats.

The investigations here are synthetic (seeded lognormal timings, a hand-written trace), so
every test runs in well under a second of its own; tests/test_reports_bundles.py builds
bundles from real spyre_sim measurements and runs the reproducers.
"""

from __future__ import annotations

import ast
import copy
import io
import json
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest

import spyre_sim
from regressions.errors import SpyreRegressError
from reports import analysis, bundle, harness, markdown, reproducer, secrets, write_bundle
from reports.investigation import validate_investigation

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


def _timing(rng, device_median: float, errors: dict, config: dict) -> dict:
    return {"version": 1, "status": "ok",
            "host_s": list(rng.lognormal(np.log(0.02), 0.1, 100)),
            "device_us": list(rng.lognormal(np.log(device_median), 0.015, 100)),
            "errors": errors,
            "kernels": [{"name": "k0_mm_gelu", "time_us": 10.0, "bound": "memory", "cores": 8}],
            "compile_times": {stage: 0.001 for stage in spyre_sim.STAGES},
            "environment": {"torch": "2.13.0+cpu", "spyre_sim": "0.1.0", "python": "3.11.7",
                            "cores": 32},
            "config": config}


def synthetic_investigation(tmp_path: Path, *, benchmark: str = "bench.Device.time_device",
                            params: str = "('mlp', 127)", subject: str = "lower: fusion off",
                            log: str = "spyre_sim.lower DEBUG decision fusion#0 -> False",
                            diff: str = DIFF, source: str = PROGRAM) -> dict:
    """A version-1 investigation with seeded timings: 120 us good, 194 us bad."""
    rng = np.random.default_rng(0)
    good_config = spyre_sim.Config().to_dict()
    bad_config = {**good_config, "fusion": False}
    errors = {"max_abs": 7e-4, "max_rel": 4.2, "rmse": 1.2e-4, "rmse_ratio": 1.17}
    traces = {}
    for side, kernels in (("good", ["k0_mm_gelu"]), ("bad", ["k0_mm", "k1_gelu"])):
        events = [{"name": name, "ph": "X", "ts": 20.0 * i, "dur": 10.0, "pid": 1, "tid": 0,
                   "cat": "kernel", "args": {"note": log}} for i, name in enumerate(kernels)]
        traces[side] = tmp_path / f"trace_{side}.json"
        traces[side].write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    stage_rows = [{"stage": s, "changed": s in ("lower", "layout"), "diff_lines": 3,
                   "compile_s_good": 0.001, "compile_s_bad": 0.0011, "compile_ratio": 1.1,
                   "compile_p": 0.4} for s in spyre_sim.STAGES]
    member = {"benchmark": benchmark, "params": params, "ratio": 1.6, "ci": [1.59, 1.61],
              "p": 1e-30, "q": 1e-29, "machine": "box", "env": "venv"}
    commit = {"good": {"sha": "a" * 40, "subject": "good commit", "date": "2025-01-01"},
              "bad": {"sha": "b" * 40, "subject": subject, "date": "2025-01-02"}}
    return {
        "version": 1,
        "alert": {"good_commit": "a" * 40, "bad_commit": "b" * 40, "kind": "time",
                  "members": [member, {**member, "params": "('mlp', 128)", "ratio": 1.5}],
                  "probe": {"benchmark": benchmark, "params": params}},
        "metric": "device_time",
        "commits": {**commit, "culprit": commit["bad"]},
        "bisect": {"version": 1, "culprit": "b" * 40, "good": "a" * 40, "bad": "b" * 40,
                   "commits_in_range": 1, "commits_measured": 2, "reproduced": True,
                   "candidates": [], "kind": "performance",
                   "steps": [{"commit": "b" * 40, "n": 10, "median": 194.0, "reference": "good",
                              "pvalue": 1e-4, "verdict": "bad", "note": log}]},
        "stages": {"version": 1, "good": "a" * 40, "bad": "b" * 40, "workload": "mlp",
                   "shape": "[127, 256]", "first_divergent_stage": "lower", "basis": "artifact",
                   "stage_diff_lines": 3, "diff": diff, "stages": stage_rows,
                   "kernels": [{"name": "k0_mm_gelu", "good_us": 10.0, "bad_us": None},
                               {"name": "k0_mm", "good_us": None, "bad_us": 9.0},
                               {"name": "k1_gelu", "good_us": None, "bad_us": 4.0}],
                   "device_time_us": {"good": 120.0, "bad": 194.0},
                   "numerics_first_divergent_stage": None, "numerics": {},
                   "log_excerpt": log},
        "workaround": {"knob": "fusion", "value": True, "stage": "lower", "metric_bad": 194.0,
                       "metric_with_knob": 120.5, "metric_good": 120.0, "recovered": 0.99,
                       "decisive_application": None},
        "minimized": {"source": source, "ops_before": 5, "ops_after": 2, "queries": 12,
                      "ratio_before": 1.6, "ratio_after": 1.62},
        "probe": {"workload": "mlp", "seq": 127, "width": 256, "config": bad_config},
        "timing": {"good": _timing(rng, 120.0, errors, good_config),
                   "bad": _timing(rng, 194.0, errors, bad_config)},
        "traces": {side: str(path) for side, path in traces.items()},
    }


def bundle_texts(folder: Path) -> dict[str, bytes]:
    """Every file of the folder and every member of its archive, by name."""
    contents = {f"folder/{p.name}": p.read_bytes() for p in folder.iterdir()}
    with tarfile.open(folder.parent / f"{folder.name}.tar.gz") as tar:
        for member in tar.getmembers():
            if member.isfile():
                contents[f"tar/{member.name}"] = tar.extractfile(member).read()
    return contents


# --- validation -----------------------------------------------------------------------------

def test_validation_accepts_the_synthetic_document(tmp_path):
    document = synthetic_investigation(tmp_path)
    assert validate_investigation(document)["metric"] == "device_time"


@pytest.mark.parametrize(("path", "value", "message"), [
    ("version", 2, "`version` is 2, newer"),
    ("version", "1", "`version` must be an integer"),
    ("metric", "latency", "`metric` is 'latency'"),
    ("stages.version", 7, "`stages.version` is 7, newer"),
    ("bisect.version", 0, "`bisect.version` is 0"),
    ("alert.members.0.benchmark", 3, "`alert.members[0].benchmark` must be string"),
    ("timing.bad.device_us", [], "`timing.bad.device_us` is empty"),
    ("timing.good.device_us.3", "fast", "`timing.good.device_us[3]` must be number"),
    ("probe.seq", True, "`probe.seq` must be integer"),
])
def test_validation_names_the_bad_field(tmp_path, path, value, message):
    document = synthetic_investigation(tmp_path)
    *parents, last = path.split(".")
    target = document
    for part in parents:
        target = target[int(part)] if part.isdigit() else target[part]
    target[int(last) if last.isdigit() else last] = value
    with pytest.raises(SpyreRegressError, match=re.escape(message)):
        validate_investigation(document)


@pytest.mark.parametrize("path", ["alert", "commits.bad.sha", "stages.diff", "probe.config",
                                  "timing.good.errors", "traces", "minimized.source"])
def test_validation_names_a_missing_field(tmp_path, path):
    document = synthetic_investigation(tmp_path)
    *parents, last = path.split(".")
    target = document
    for part in parents:
        target = target[part]
    del target[last]
    with pytest.raises(SpyreRegressError, match=re.escape(f"`{path}` is missing")):
        validate_investigation(document)


def test_optional_parts_may_be_null(tmp_path):
    document = synthetic_investigation(tmp_path)
    document.update(workaround=None, bisect=None)
    document["commits"]["culprit"] = None
    folder = write_bundle(document, tmp_path / "out")
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


def test_environment_values_are_scrubbed_and_only_allow_listed_names_kept():
    environ = {"MY_PASSWORD": "hunter2", "SOME_ID": "abcd1234efgh", "SENCORES": "16",
               "HOME": "/root", "SHORT": "abc"}
    values = secrets.secret_values(environ)
    assert set(values) == {"hunter2", "abcd1234efgh"}  # HOME is harmless; SHORT too short
    assert secrets.allowed_environment(environ) == {"SENCORES": "16"}
    assert secrets.scrub_text("x hunter2 y abcd1234efgh", values) == "x [redacted] y [redacted]"


def test_ordinary_compiler_text_survives_scrubbing():
    text = "spyre_sim.lower DEBUG decision fusion#0 %addmm -> False; max_tokens: 5; author: a"
    assert secrets.scrub_text(text, ()) == text


# --- numbers --------------------------------------------------------------------------------

def test_summary_quartiles_match_numpy_and_the_reproducer_harness():
    samples = list(np.random.default_rng(3).lognormal(0, 0.2, 37))
    ours, theirs = analysis.summarize(samples), harness.summarize(samples)
    q1, median, q3 = np.percentile(samples, [25, 50, 75])
    assert (ours.q1, ours.median, ours.q3) == pytest.approx((q1, median, q3), rel=1e-12)
    assert (theirs["q1"], theirs["median"], theirs["q3"]) == pytest.approx((q1, median, q3))
    assert theirs["geomean"] == pytest.approx(ours.geomean)


@pytest.mark.parametrize(("rmse_ratio", "max_abs", "passed"), [
    (2.0, 0.05, True), (2.01, 0.001, False), (1.0, 0.0501, False),
    (float("nan"), 0.001, False), (float("inf"), 0.001, False)])
def test_correctness_verdict_at_the_tolerance(rmse_ratio, max_abs, passed):
    timing = {"status": "ok", "errors": {"max_abs": max_abs, "max_rel": 0.1, "rmse": 1e-4,
                                         "rmse_ratio": rmse_ratio}}
    verdict = analysis.judge("bad", timing, analysis.Tolerance())
    assert verdict.passed is passed
    errors = timing["errors"]
    assert (not harness.failures(errors, {"rmse_ratio": 2.0, "max_abs": 0.05})) is passed


def test_device_ratio_interval_brackets_the_true_shift(tmp_path):
    document = synthetic_investigation(tmp_path)
    summary = json.loads(write_bundle(document, tmp_path / "o").joinpath("summary.json")
                         .read_text())
    device = summary["device_time"]
    assert device["ci"][0] < 194.0 / 120.0 < device["ci"][1]
    assert device["pvalue"] < 1e-20 and device["confidence"] == 0.95


# --- the bundle -----------------------------------------------------------------------------

HOSTILE = "<script>alert('x')</script> `tick` ``` | pipe |"


def test_hostile_strings_are_escaped_and_secrets_never_written(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secretvalue")
    monkeypatch.setenv("MY_PASSWORD", "hunter2hunter2")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMIK7MDENGbPxRfiCY")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    leak = "ghp_secretvalue hunter2hunter2 wJalrXUtnFEMIK7MDENGbPxRfiCY"
    document = synthetic_investigation(
        tmp_path, benchmark=f"bench.{HOSTILE}", params=f"('{HOSTILE}', 127)",
        subject=f"lower: {HOSTILE} {leak}", log=f"spyre_sim.lower {HOSTILE} {leak}",
        diff=DIFF + f"+ {HOSTILE}\n+ ```` four\n")
    folder = write_bundle(document, tmp_path / "out")
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
    fence = re.search(r"^(`{3,})diff$", md, re.MULTILINE).group(1)
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
    document = synthetic_investigation(tmp_path, diff=huge_diff, log="log line\n" * 20000)
    folder = write_bundle(document, tmp_path / "out")
    md = (folder / "report.md").read_text()
    assert len(md) <= markdown.MAX_CHARS
    assert "the full text is in lower.diff]" in md
    assert (folder / "lower.diff").read_text() == huge_diff


def test_every_json_file_is_versioned_and_the_archive_matches(tmp_path):
    folder = write_bundle(synthetic_investigation(tmp_path), tmp_path / "out")
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())
        version = data.get("version", (data.get("otherData") or {}).get("version"))
        assert version == 1, path.name
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
    document = synthetic_investigation(tmp_path)
    folder = write_bundle(document, tmp_path / "out")
    (folder / "stale.txt").write_text("old")
    assert write_bundle(document, tmp_path / "out") == folder
    assert not (folder / "stale.txt").exists()
    (folder / "summary.json").unlink()
    with pytest.raises(SpyreRegressError, match="is not a report bundle"):
        write_bundle(document, tmp_path / "out")


def test_an_unreadable_trace_names_the_field(tmp_path):
    document = synthetic_investigation(tmp_path)
    document["traces"]["bad"] = str(tmp_path / "missing.json")
    with pytest.raises(SpyreRegressError, match=r"`traces.bad` names .*missing.json"):
        bundle.bundle_files(document, "spyre_sim")


def test_a_failed_build_is_reported_not_crashed(tmp_path):
    document = synthetic_investigation(tmp_path)
    document["timing"]["bad"] = {"version": 1, "status": "failed",
                                 "detail": "SpyreRuntimeError: layout mismatch"}
    document["traces"]["bad"] = None
    _, files = bundle.bundle_files(document, "spyre_sim")
    md = files["report.md"].decode()
    assert "FAIL: the build did not run: SpyreRuntimeError: layout mismatch" in md
    assert "trace_bad.json" not in files


# --- the reproducer's text ------------------------------------------------------------------

def test_reproducer_text_survives_hostile_names(tmp_path):
    document = synthetic_investigation(tmp_path, subject='quote """ and \\ backslash\n"',
                                       benchmark="b\nimport os; os.system('x')")
    _, files = bundle.bundle_files(document, "spyre_sim")
    source = files["reproducer.py"].decode()
    tree = ast.parse(source)
    imported = {alias.name for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    assert imported == {"argparse", "dataclasses", "json", "math", "statistics", "sys", "time",
                        "warnings", "torch", "spyre_sim"}
    assert not any(isinstance(node, ast.Name) and node.id == "os" for node in ast.walk(tree))
    assert 'quote "\\"\\" and \\\\ backslash' in source  # inside the docstring, as text
    assert "def program(x, w):" in source  # pasted verbatim: readable


def test_a_program_that_clashes_with_the_harness_is_embedded_as_text(tmp_path):
    clashing = PROGRAM.replace("def make_inputs", "def main():\n    pass\n\n\ndef make_inputs")
    document = synthetic_investigation(tmp_path, source=clashing)
    source = reproducer.reproducer_source(
        *_report_and_document(document))
    assert "PROGRAM_SOURCE = " in source
    compile(source, "reproducer.py", "exec")


def test_a_program_without_the_entry_points_is_refused(tmp_path):
    document = synthetic_investigation(tmp_path, source="x = 1\n")
    with pytest.raises(SpyreRegressError, match=r"must define \['make_inputs', 'program'\]"):
        bundle.bundle_files(document, "spyre_sim")


def test_without_a_minimized_program_the_workload_catalogue_is_embedded(tmp_path):
    document = synthetic_investigation(tmp_path)
    document["minimized"] = None
    source = reproducer.reproducer_source(*_report_and_document(document))
    assert "CATALOGUE_SOURCE = " in source and "_catalogue.build('mlp', 127, 256" in source
    compile(source, "reproducer.py", "exec")


def _report_and_document(document: dict):
    from reports.narrative import build_report
    document = copy.deepcopy(validate_investigation(document))
    return build_report(document, "spyre_sim"), document


def test_reproducer_usage_quotes_the_workaround_for_the_shell(tmp_path):
    document = synthetic_investigation(tmp_path)
    document["workaround"].update(knob="fusion; rm -rf /", value="a b")
    report, document = _report_and_document(document)
    assert "--set 'fusion; rm -rf /=a b'" in reproducer.usage_commands(report)


def test_harness_reads_configs_recorded_by_another_build():
    recorded = {**spyre_sim.Config().to_dict(), "future_knob": 3}
    recorded["device"] = {**recorded["device"], "future_param": 1.0}
    config, dropped = harness.config_for(recorded, {"fusion": False})
    assert dropped == ["future_knob", "device.future_param"]
    assert config.fusion is False
    with pytest.raises(SystemExit, match="no field 'fusoin'"):
        harness.config_for(recorded, {"fusoin": False})


def test_kernels_csv_has_one_row_per_kernel(tmp_path):
    folder = write_bundle(synthetic_investigation(tmp_path), tmp_path / "out")
    kernels = list(io.StringIO((folder / "kernels.csv").read_text()))
    assert kernels[0].strip() == "name,good_us,bad_us" and len(kernels) == 4


def test_a_stated_tolerance_overrides_the_default(tmp_path):
    document = synthetic_investigation(tmp_path)
    document["tolerance"] = {"rmse_ratio": 1.1, "max_abs": 0.01}
    _, files = bundle.bundle_files(document, "spyre_sim")
    summary = json.loads(files["summary.json"])
    assert [c["passed"] for c in summary["correctness"]] == [False, False]  # 1.17 > 1.1
    assert "RMSE ratio 1.17 > 1.1" in files["report.md"].decode().replace("&gt;", ">")
    document["tolerance"] = {"rmse_ratio": -1}
    with pytest.raises(SpyreRegressError, match="`tolerance.rmse_ratio` must be a positive"):
        validate_investigation(document)


def test_the_shipped_investigation_names_the_bundled_traces_not_local_paths(tmp_path):
    document = synthetic_investigation(tmp_path)
    _, files = bundle.bundle_files(document, "spyre_sim")
    shipped = json.loads(files["investigation.json"])
    assert shipped["traces"] == {"good": "trace_good.json", "bad": "trace_bad.json"}
    assert str(tmp_path).encode() not in b"".join(files.values())
