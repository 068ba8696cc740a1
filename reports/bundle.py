"""Writing a bundle: the one module in `reports` with side effects (files, the archive).

`write_bundle` scrubs the investigation (its JSON form, read back through the typed model),
builds every file's bytes in memory (pure functions elsewhere in the package), checks the
bytes for secret values, and only then writes the folder (via a temporary sibling, so a failed
run leaves no half bundle) and its `.tar.gz`. The trace files the investigation names are read
from their paths as written, never scrubbed into other paths. docs/reports.md describes the
contents; docs/formats.md the file formats.
"""

from __future__ import annotations

import csv
import importlib.metadata
import io
import json
import os
import platform
import re
import shutil
import tarfile
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from regressions.codec import to_json
from regressions.errors import SpyreRegressError
from regressions.investigation import model
from regressions.investigation.model import Investigation
from reports import html, markdown, plots, reproducer, secrets
from reports.analysis import config_differences
from reports.narrative import (
    Report,
    build_report,
    compiler_name,
    stages_plot_title,
    timing_plot_title,
)

BUNDLE_VERSION = 2
ENVIRONMENT_VERSION = 1
SUMMARY_VERSION = 3  # 3: `basis` names the evidence (instructions, compile_clock)
MARKER = "summary.json"  # a folder holding this is a bundle we may replace
NAME_LIMIT = 100


def bundle_name(found: Investigation) -> str:
    """`<metric>-<commit>-<probe>`: stable for one alert, safe as a file name, cut at a word
    boundary (a `-`) when long."""
    commit = (found.commits.culprit or found.commits.bad).sha
    probe = re.sub(r"[^A-Za-z0-9._]+", "-", found.alert.probe.name).strip("-.")
    slug = f"{found.target.metric}-{re.sub(r'[^0-9A-Za-z]', '', commit)[:12]}-{probe}"
    if len(slug) > NAME_LIMIT:
        slug = slug[:NAME_LIMIT].rsplit("-", 1)[0]
    return slug.rstrip("-.") or "bundle"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment_manifest(found: Investigation) -> dict:
    """Versions, commits, machine, Config and allow-listed variables (never anything else).

    The probe measured each build in its own process; its `environment` is the record of what
    ran. OS and CPU are read here, on the machine that ran the probe and writes the report.
    """
    timing = found.timing
    measured = {"good": dict(timing.good.environment), "bad": dict(timing.bad.environment)}
    ran = measured["bad"] or measured["good"]
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    good_config, bad_config = dict(timing.good.config), dict(timing.bad.config)
    return {
        "version": ENVIRONMENT_VERSION,
        "python": ran.get("python") or platform.python_version(),
        "torch": ran.get("torch") or _installed("torch"),
        "spyre_sim": {side: measured[side].get("spyre_sim") for side in measured},
        "measured": measured,
        "commits": to_json(found.commits),
        "os": platform.platform(),
        "cpu": {"model": _cpu_model(), "machine": platform.machine(),
                "logical": os.cpu_count(), "usable": usable},
        "sencores": os.environ.get("SENCORES"),
        "config": bad_config,
        "config_good": good_config,
        "config_differences": config_differences(good_config, bad_config),
        "environment_variables": secrets.allowed_environment(),
        "alert_machines": sorted({f"{m.machine}/{m.env}" for m in found.alert.members}),
        "report_tool": {"name": "spyre-regress", "version": _installed("spyre-regress"),
                        "bundle_version": BUNDLE_VERSION},
    }


def _csv(header: list[str], rows: list[list[Any]]) -> bytes:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue().encode()


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=1, sort_keys=False, allow_nan=False,
                       default=str) + "\n").encode()


def _trace(path: str | None, field: str, secret_values: tuple[str, ...]) -> bytes | None:
    if path is None:
        return None
    try:
        trace = json.loads(Path(path).read_text())
    except OSError as exc:
        raise SpyreRegressError(f"investigation field `{field}` names {path}, which cannot be "
                                f"read ({exc.strerror}); keep the probe's trace files until "
                                "the report is written") from None
    except json.JSONDecodeError:
        raise SpyreRegressError(f"investigation field `{field}`: {path} is not a Chrome trace "
                                "(JSON)") from None
    trace = secrets.scrub(trace, secret_values)
    if isinstance(trace, dict):
        trace.setdefault("otherData", {}).setdefault("version", 1)
    return (json.dumps(trace) + "\n").encode()


def _data_files(report: Report) -> dict[str, bytes]:
    found = report.investigation
    timing, stages = found.timing, found.stages
    rows = []
    for side, run in (("good", timing.good), ("bad", timing.bad)):
        if run.ok:
            rows += [[side, i, h, d] for i, (h, d) in
                     enumerate(zip(run.host_s, run.device_us, strict=False))]
    files = {"timing_samples.csv": _csv(["build", "iteration", "host_s", "device_us"], rows),
             "compile_stages.csv": _csv(
                 ["stage", "changed", "diff_lines", "instructions_good", "instructions_bad",
                  "compile_s_good", "compile_s_bad", "compile_ratio", "compile_p"],
                 [[d.stage, d.changed, d.diff_lines, d.instructions_good, d.instructions_bad,
                   d.compile_s_good, d.compile_s_bad, d.compile_ratio, d.compile_p]
                  for d in stages.stages]),
             "kernels.csv": _csv(["name", "good_us", "bad_us"],
                                 [[k.name, k.good_us, k.bad_us] for k in stages.kernels])}
    if report.numerics_rows:
        files["numerics_stages.csv"] = _csv(
            ["stage", "rmse_ratio_good", "rmse_ratio_bad", "max_abs_good", "max_abs_bad"],
            [[r["stage"], r["good"], r["bad"], r["good_max_abs"], r["bad_max_abs"]]
             for r in report.numerics_rows])
    if stages.diff and report.first_stage:
        files[f"{re.sub(r'[^A-Za-z0-9_-]', '_', report.first_stage)}.diff"] = \
            stages.diff.encode()
    if stages.log_excerpt:
        files["compile_log.txt"] = (stages.log_excerpt.rstrip("\n") + "\n").encode()
    return files


def _figures(report: Report) -> dict[str, bytes]:
    timing = report.investigation.timing
    found = report.investigation
    figures = {"timing.png": plots.timing_figure(timing.good if timing.good.ok else None,
                                                 timing.bad if timing.bad.ok else None,
                                                 timing_plot_title(found))}
    if found.stages.stages:
        figures["compile_stages.png"] = plots.compile_figure(
            found.stages.stages, report.first_stage, stages_plot_title(found))
    # the per-stage error plot only where it tells something: numerics alerts, or a drift
    if report.numerics_rows and (report.metric.errors or report.numerics_stage):
        figures["numerics.png"] = plots.numerics_figure(
            report.numerics_rows, timing.tolerance.rmse_ratio, report.numerics_stage,
            report.wording.eager)
    return figures


def _summary(report: Report, name: str, files: list[str]) -> dict:
    found = report.investigation
    return {"version": SUMMARY_VERSION, "bundle": name, "title": report.title,
            "metric": report.metric.name, "kind": found.alert.kind,
            "benchmark": found.target.label,
            "commits": {"good": found.commits.good.sha, "bad": found.commits.bad.sha,
                        "culprit": found.commits.culprit.sha if found.commits.culprit else None},
            "first_divergent_stage": report.first_stage, "basis": found.stages.basis,
            "numerics_first_divergent_stage": report.numerics_stage,
            "causal_statement": report.causal_statement,
            "workaround_statement": report.workaround_statement,
            "confirmation": to_json(found.confirmation), "workaround": to_json(found.workaround),
            "timing_program": found.timing.program.describe(),
            "device_time": to_json(found.timing.device), "host_time": to_json(found.timing.host),
            "correctness": to_json(found.timing.correctness),
            "tolerance": to_json(found.timing.tolerance),
            "members": to_json(found.alert.members), "files": files}


def scrubbed(found: Investigation, secret_values: tuple[str, ...]) -> Investigation:
    """The investigation with every secret value and credential shape redacted; the trace
    paths are the tool's own files and stay as they are."""
    document = model.dump(found)
    traces = document.pop("traces")
    clean = secrets.scrub(document, secret_values)
    return model.load({**clean, "traces": traces}, "the scrubbed investigation")


def scrub_investigation(found: Investigation,
                        environ: Mapping[str, str] | None = None) -> Investigation:
    """`found` as it may be saved beside a bundle (the reports directory is uploaded and
    shared like the bundle): secrets redacted as in the bundle, trace paths kept so
    `spyre-regress report --investigation` can render it again."""
    return scrubbed(found, secrets.secret_values(environ))


def bundle_files(found: Investigation, repo_name: str,
                 environ: Mapping[str, str] | None = None) -> tuple[str, dict[str, bytes]]:
    """(bundle name, {file name: bytes}) for an investigation; nothing is written."""
    secret_values = secrets.secret_values(environ)
    found = scrubbed(found, secret_values)
    repo_name = secrets.scrub_text(repo_name, secret_values)
    report = build_report(found, repo_name)
    name = bundle_name(found)
    files = _data_files(report)
    for side, path in found.traces.items():
        trace = _trace(path, f"traces.{side}", secret_values)
        if trace is not None:
            files[f"trace_{side}.json"] = trace
    figures = _figures(report)
    files.update(figures)
    environment = environment_manifest(found)
    files["environment.json"] = _json(environment)
    # the probe's trace paths are local; inside the bundle the traces have their own names
    shipped = {side: f"trace_{side}.json" if f"trace_{side}.json" in files else None
               for side in ("good", "bad")}
    files["investigation.json"] = _json({**model.dump(found), "traces": shipped})
    files["reproducer.py"] = reproducer.reproducer_source(report).encode()
    names = sorted([*files, "report.md", "report.html", "summary.json"])
    diff_file = next((n for n in files if n.endswith(".diff")), None)
    usage = reproducer.usage_commands(report)
    files["summary.json"] = _json(_summary(report, name, names))
    files["report.md"] = markdown.render(report, names, usage, diff_file,
                                         environment=environment).encode()
    files["report.html"] = html.render(report, figures, names, usage, diff_file=diff_file,
                                       environment=environment).encode()
    leaks = secrets.find_leaks(files, secret_values)
    if leaks:  # scrubbing happens on input; reaching this is a bug, so refuse to write
        raise SpyreRegressError(f"refusing to write the bundle: a secret value from the "
                                f"environment appears in {leaks}; please report this")
    return name, files


def _archive(folder: Path) -> Path:
    """`<folder>.tar.gz`, owner names and ids cleared (they would name the local user)."""
    archive = folder.parent / f"{folder.name}.tar.gz"

    def anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = ""
        return info

    partial = archive.with_name(archive.name + ".partial")
    try:
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(folder, arcname=folder.name, filter=anonymous, recursive=False)
            for path in sorted(folder.iterdir()):
                tar.add(path, arcname=f"{folder.name}/{path.name}", filter=anonymous)
        partial.replace(archive)
    except BaseException:  # interrupted: no half archive left beside the bundle
        partial.unlink(missing_ok=True)
        raise
    return archive


def write_bundle(investigation: Investigation, out_dir: Path,
                 repo_name: str | None = None) -> Path:
    """Write one alert's bundle: `<out_dir>/<name>/` and `<out_dir>/<name>.tar.gz`.

    Args:
        investigation: what the investigation found (regressions.investigation).
        out_dir: where the folder and the archive go; created if missing.
        repo_name: the compiler's name in titles and instructions (default: the
            investigation's, `narrative.compiler_name`).

    Returns:
        The bundle folder; the archive is the sibling `<folder>.tar.gz`. An existing bundle
        of the same name is replaced.

    Raises:
        SpyreRegressError: a trace cannot be read, or the folder exists and is not a
            bundle.
    """
    name, files = bundle_files(investigation, repo_name or compiler_name(investigation))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    folder = out_dir / name
    if folder.exists() and not (folder / MARKER).is_file():
        raise SpyreRegressError(f"{folder} exists and is not a report bundle; move it away or "
                                "choose another output directory")
    staging = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=out_dir))
    try:
        for file_name, data in files.items():
            (staging / file_name).write_bytes(data)
        if folder.exists():
            shutil.rmtree(folder)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    folder.chmod(0o755)  # mkdtemp made it private
    _archive(folder)
    return folder
