"""What a report says, as plain (unescaped) text and numbers: the model both renderers share.

`build_report` turns a validated, scrubbed investigation into a `Report`. The causal statement
follows the compiler-debugging guide: name the first divergent stage and the commit, say what
changed there, and give the measured cost with its interval on the named workload and shape.
The workaround is a separate statement, because a knob that avoids a decision does not repair
the decision (the guide's "separate a local workaround from the compiler defect").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reports import analysis
from reports.analysis import Comparison, Correctness, KernelChanges, Tolerance

METRIC_LABELS = {"device_time": "simulated device time", "compile_time": "compile time",
                 "numerics": "numerical error"}
MAX_NAMES = 6  # kernel names listed inline before "and N more"
MAX_INLINE_MEMBERS = 8
# The evidence sections, symptom first (the debugging guide: "start at the symptom").
SECTION_ORDER = {"device_time": ("timing", "correctness", "evidence"),
                 "numerics": ("correctness", "evidence", "timing"),
                 "compile_time": ("evidence", "timing", "correctness")}


@dataclass(frozen=True)
class Report:
    title: str
    repo_name: str
    metric: str
    kind: str
    commits: Mapping[str, Any]
    culprit: Mapping[str, Any] | None
    probe: Mapping[str, Any]
    probe_label: str
    shape: str
    members: tuple[Mapping[str, Any], ...]
    device: Comparison
    host: Comparison
    correctness: tuple[Correctness, Correctness]
    tolerance: Tolerance
    stage_rows: tuple[Mapping[str, Any], ...]
    first_stage: str | None
    basis: str | None
    numerics_stage: str | None
    numerics_rows: tuple[Mapping[str, Any], ...]
    kernels: KernelChanges
    kernel_rows: tuple[Mapping[str, Any], ...]
    config_changes: Mapping[str, list]
    cost: str
    headline: tuple[str, str, str]  # (label, value, detail): the alert's metric in one figure
    causal_statement: str
    workaround_statement: str
    workaround: Mapping[str, Any] | None
    bisect: Mapping[str, Any] | None
    minimized: Mapping[str, Any] | None
    diff: str
    log_excerpt: str

    @property
    def section_order(self) -> tuple[str, ...]:
        return SECTION_ORDER[self.metric]

    @property
    def show_stage_errors(self) -> bool:
        """The per-stage error table is evidence for numerics alerts or when an output drifts;
        otherwise one sentence says that nothing drifts."""
        return bool(self.numerics_rows) and (self.metric == "numerics"
                                             or self.numerics_stage is not None)


def short(sha: str | None) -> str:
    return (sha or "?")[:12]


def listing(names: Sequence[str], limit: int = MAX_NAMES) -> str:
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def format_metric(metric: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if metric == "device_time":
        return f"{value:.1f} us"
    if metric == "compile_time":
        return f"{value * 1e3:.1f} ms" if value < 10 else f"{value:.2f} s"
    return f"{value:.4g}"


def _interval(ci: Sequence[float] | None, digits: int = 3) -> str:
    if not ci or any(x is None for x in ci):
        return "no interval"
    return f"{ci[0]:.{digits}f}-{ci[1]:.{digits}f}"


def _pvalue(p: float | None) -> str:
    return "n/a" if p is None else f"{p:.2g}"


def cost_sentence(metric: str, device: Comparison, first_row: Mapping[str, Any] | None,
                  correctness: Sequence[Correctness], probe_member: Mapping[str, Any] | None,
                  total_compile: Sequence[float | None]) -> str:
    """The measured cost with its interval, in the alert's metric."""
    if metric == "device_time":
        if device.ratio is None:
            return "the device time could not be compared (a build did not run)"
        good, bad = device.good, device.bad
        return (f"simulated device time per call rose from {good.median:.1f} us to "
                f"{bad.median:.1f} us (medians of {good.n} and {bad.n} synchronized "
                f"iterations): ×{device.ratio:.3f}, {device.confidence:.0%} CI "
                f"{_interval(device.ci)}, Mann-Whitney p = {_pvalue(device.pvalue)}")
    if metric == "compile_time":
        parts = []
        if first_row is not None:
            parts.append(f"the {first_row['stage']} stage's cold compile time went from "
                         f"{format_metric(metric, first_row['compile_s_good'])} to "
                         f"{format_metric(metric, first_row['compile_s_bad'])} (×"
                         f"{first_row.get('compile_ratio') or 0:.2f}, Mann-Whitney p = "
                         f"{_pvalue(first_row.get('compile_p'))}, median of repeated compiles)")
        if probe_member is not None and probe_member.get("ratio") is not None:
            parts.append(f"the probe benchmark regressed ×{probe_member['ratio']:.3f} (99% CI "
                         f"{_interval(probe_member.get('ci'))} from detection)")
        good_total, bad_total = total_compile
        if good_total is not None and bad_total is not None:
            parts.append(f"one cold compile took {format_metric(metric, good_total)} at the "
                         f"good and {format_metric(metric, bad_total)} at the bad commit")
        return "; ".join(parts) or "the compile time could not be compared"
    good, bad = correctness
    if good.rmse_ratio is None or bad.rmse_ratio is None:
        return "the error could not be compared (a build did not run)"
    return (f"the RMSE against float64 went from {good.rmse_ratio:.3g}× to "
            f"{bad.rmse_ratio:.3g}× eager fp16's (max abs error {good.max_abs:.3g} → "
            f"{bad.max_abs:.3g}); fixed seeds make this deterministic, so the numbers repeat "
            "exactly and need no interval")


def headline_figure(metric: str, device: Comparison, first_row: Mapping[str, Any] | None,
                    probe_member: Mapping[str, Any] | None,
                    correctness: Sequence[Correctness]) -> tuple[str, str, str]:
    """(label, value, detail) of the alert's metric, bad against good."""
    if metric == "device_time" and device.ratio is not None:
        return ("device time, bad / good", f"×{device.ratio:.3f}",
                f"{device.confidence:.0%} CI {_interval(device.ci)}")
    if metric == "compile_time" and first_row is not None and first_row.get("compile_ratio"):
        return (f"{first_row['stage']} compile time, bad / good",
                f"×{first_row['compile_ratio']:.2f}",
                f"Mann-Whitney p = {_pvalue(first_row.get('compile_p'))}")
    if metric == "compile_time" and probe_member is not None and probe_member.get("ratio"):
        return ("compile time, bad / good", f"×{probe_member['ratio']:.3f}",
                f"99% CI {_interval(probe_member.get('ci'))} (detection)")
    good, bad = correctness
    if metric == "numerics" and good.rmse_ratio is not None and bad.rmse_ratio is not None:
        return ("RMSE vs float64 / eager fp16's", f"{good.rmse_ratio:.2f} → {bad.rmse_ratio:.2f}",
                "deterministic: fixed seeds")
    return (f"{METRIC_LABELS[metric]}, bad / good", "n/a", "not measured at both commits")


def _where(report_commits: Mapping[str, Any], culprit: Mapping[str, Any] | None,
           bisect: Mapping[str, Any] | None) -> str:
    if culprit is not None:
        return f"Commit {short(culprit['sha'])} (\"{culprit['subject']}\") is the first bad commit"
    candidates = (bisect or {}).get("candidates") or []
    text = (f"The regression lies between {short(report_commits['good']['sha'])} and "
            f"{short(report_commits['bad']['sha'])} (no single culprit was isolated")
    return text + (f"; candidates: {listing([short(c) for c in candidates])})" if candidates
                   else ")")


def _stage_clause(first: str | None, basis: str | None, diff_lines: int) -> str:
    if first and basis == "artifact":
        return (f"the first compiler stage whose canonical artifact differs between the good "
                f"and the bad build is {first} ({diff_lines} changed lines)")
    if first and basis == "compile_time":
        return (f"no stage artifact differs; the first stage whose compile time grew "
                f"significantly is {first}")
    return ("no compiler stage artifact or stage compile time differs, so the divergence lies "
            "outside the compile stages")


def _what_changed(report: Mapping[str, Any]) -> str:
    sentences = []
    changes = report["config_changes"]
    if changes:
        sentences.append("The default Config changed: " + ", ".join(
            f"{name} {values[0]!r} → {values[1]!r}" for name, values in changes.items()) + ".")
    kernels: KernelChanges = report["kernels"]
    if kernels.any:
        parts = []
        if kernels.removed:
            parts.append(f"removed {listing(list(kernels.removed))}")
        if kernels.added:
            parts.append(f"added {listing(list(kernels.added))}")
        if kernels.changed:
            parts.append("retimed " + listing([f"{n} ({g:.1f} → {b:.1f} us)"
                                               for n, g, b in kernels.changed]))
        sentences.append(f"The compiled kernels changed ({'; '.join(parts)}), "
                         f"{kernels.good_total_us:.1f} → {kernels.bad_total_us:.1f} us of "
                         "kernel time in total.")
    stage = report["numerics_stage"]
    if stage:
        row = next((r for r in report["numerics_rows"] if r["stage"] == stage), None)
        detail = ""
        if row and row["good"] is not None and row["bad"] is not None:
            detail = f" (RMSE ratio {row['good']:.3g} → {row['bad']:.3g})"
        sentences.append(f"The first executed stage output that drifts further from float64 "
                         f"is {stage}'s{detail}.")
    if report["basis"] == "compile_time" and report["first_row"] is not None:
        sentences.append(f"The {report['first_stage']} stage produces the same artifact, "
                         "only more slowly.")
    return " ".join(sentences)


def causal_statement(report: Mapping[str, Any]) -> str:
    """One paragraph: stage and commit, what changed there, the cost, correctness, scope."""
    members = report["members"]
    labels = [analysis.member_label(m) for m in members]
    scope = (f"The alert covers {len(members)} benchmark(s): {', '.join(labels)}."
             if len(members) <= MAX_INLINE_MEMBERS else
             f"The alert covers {len(members)} benchmarks, all listed below.")
    good, bad = report["correctness"]
    verdict = (f"Correctness against float64 at the stated tolerance: good "
               f"{'PASS' if good.passed else 'FAIL'}, bad {'PASS' if bad.passed else 'FAIL'}.")
    parts = [
        f"{_where(report['commits'], report['culprit'], report['bisect'])}; "
        f"{_stage_clause(report['first_stage'], report['basis'], report['diff_lines'])}.",
        _what_changed(report),
        f"On the {report['probe']['workload']} workload at shape {report['shape']} "
        f"({report['probe_label']}), {report['cost']}.",
        verdict,
        scope,
    ]
    return " ".join(p for p in parts if p)


def workaround_statement(metric: str, workaround: Mapping[str, Any] | None) -> str:
    if not workaround:
        return ("No single Config knob restores the metric at the bad commit; there is no "
                "local workaround, the fix belongs in the compiler.")
    recovered = workaround.get("recovered")
    if isinstance(recovered, bool):
        recovery = "restores it" if recovered else "does not fully restore it"
    elif isinstance(recovered, (int, float)):
        recovery = f"recovers {recovered:.0%} of the regression"
    else:
        recovery = ""
    text = (f"Workaround (local, not a fix): set Config({workaround['knob']}="
            f"{workaround.get('value')!r}), a decision of the {workaround['stage']} stage. On the "
            f"probe it takes the {METRIC_LABELS[metric]} from "
            f"{format_metric(metric, workaround.get('metric_bad'))}"
            f" to {format_metric(metric, workaround.get('metric_with_knob'))} (good build: "
            f"{format_metric(metric, workaround.get('metric_good'))})"
            + (f"; it {recovery}" if recovery else "") + ".")
    if workaround.get("decisive_application"):
        text += f" The decisive application: {workaround['decisive_application']}."
    return text + (" It avoids the decision for every program it is applied to; the root "
                   "cause above still needs a compiler fix, and the end-to-end workload "
                   "needs re-testing after either.")


def _numerics_rows(stages: Mapping[str, Any]) -> tuple[dict, ...]:
    numerics = stages.get("numerics") or {}
    good, bad = numerics.get("good") or {}, numerics.get("bad") or {}
    names = [s for s in dict.fromkeys([*good, *bad])]
    return tuple({"stage": s, "good": (good.get(s) or {}).get("rmse_ratio"),
                  "bad": (bad.get(s) or {}).get("rmse_ratio"),
                  "good_max_abs": (good.get(s) or {}).get("max_abs"),
                  "bad_max_abs": (bad.get(s) or {}).get("max_abs")} for s in names)


def _shape(document: Mapping[str, Any]) -> str:
    shape = document["stages"].get("shape")
    if isinstance(shape, list):
        shape = "[" + ", ".join(str(s) for s in shape) + "]"
    probe = document["probe"]
    return shape or f"seq {probe['seq']}, width {probe.get('width')}"


def build_report(document: Mapping[str, Any], repo_name: str) -> Report:
    """The report's model. `document` must be validated and scrubbed already."""
    timing, stages, metric = document["timing"], document["stages"], document["metric"]
    samples = {side: timing[side] if timing[side]["status"] == "ok" else None
               for side in ("good", "bad")}
    device = analysis.compare_series("device time", "us", *(
        s["device_us"] if s else None for s in samples.values()))
    host = analysis.compare_series("host wall time", "s", *(
        s["host_s"] if s else None for s in samples.values()))
    tolerance = analysis.tolerance_from(document)
    correctness = (analysis.judge("good", timing["good"], tolerance),
                   analysis.judge("bad", timing["bad"], tolerance))
    first = stages.get("first_divergent_stage")
    first_row = analysis.stage_row(stages, first) if first else None
    members = tuple(document["alert"]["members"])
    probe_ident = document["alert"]["probe"]
    probe_member = next((m for m in members if m["benchmark"] == probe_ident["benchmark"]
                         and m.get("params") == probe_ident.get("params")), None)
    culprit = document["commits"].get("culprit")
    config_changes = analysis.config_differences(
        (samples["good"] or {}).get("config") or {}, (samples["bad"] or {}).get("config") or {})
    config_changes = {k: v for k, v in config_changes.items() if k != "device"}
    fields: dict[str, Any] = {
        "metric": metric, "commits": document["commits"], "culprit": culprit,
        "bisect": document.get("bisect"), "probe": document["probe"],
        "probe_label": analysis.member_label(probe_ident), "shape": _shape(document),
        "members": members, "correctness": correctness, "first_stage": first,
        "first_row": first_row, "basis": stages.get("basis"),
        "diff_lines": int(stages.get("stage_diff_lines") or 0),
        "numerics_stage": stages.get("numerics_first_divergent_stage"),
        "numerics_rows": _numerics_rows(stages),
        "kernels": analysis.kernel_changes(stages["kernels"]),
        "config_changes": config_changes,
        "cost": cost_sentence(metric, device, first_row, correctness, probe_member,
                              [analysis.total_compile_s(timing[s]) for s in ("good", "bad")]),
    }
    headline = headline_figure(metric, device, first_row, probe_member, correctness)
    where = f" in {first}" if first else ""
    sha = short((culprit or document["commits"]["bad"])["sha"])
    figure = f" {headline[1]}" if headline[1] != "n/a" else ""
    title = (f"[{repo_name}] {METRIC_LABELS[metric]} regression{figure}{where}: "
             f"{document['probe']['workload']} {fields['shape']} ({sha})")
    return Report(
        title=title, repo_name=repo_name, metric=metric, kind=document["alert"]["kind"],
        commits=document["commits"], culprit=culprit, probe=document["probe"],
        probe_label=fields["probe_label"], shape=fields["shape"], members=members,
        device=device, host=host, correctness=correctness, tolerance=tolerance,
        stage_rows=tuple(stages["stages"]), first_stage=first, basis=fields["basis"],
        numerics_stage=fields["numerics_stage"], numerics_rows=fields["numerics_rows"],
        kernels=fields["kernels"], kernel_rows=tuple(stages["kernels"]),
        config_changes=config_changes, cost=fields["cost"], headline=headline,
        causal_statement=causal_statement(fields),
        workaround_statement=workaround_statement(metric, document.get("workaround")),
        workaround=document.get("workaround"), bisect=document.get("bisect"),
        minimized=document.get("minimized"), diff=stages.get("diff") or "",
        log_excerpt=stages.get("log_excerpt") or "")
