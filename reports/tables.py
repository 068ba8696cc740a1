"""The report's tables as plain strings: one definition shared by report.md and report.html.

Each function returns `Table(header, rows)` with already formatted, unescaped cells; the
markdown renderer escapes them explicitly and the HTML template autoescapes them. Headers carry
units, so no cell has to.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from regressions.investigation.model import Comparison, SampleSummary
from reports.figures import figures as figures_of
from reports.narrative import Report, has_device_clock, interval, metric_value, quantity, short


class Table(NamedTuple):
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    highlight: tuple[bool, ...] = ()  # per row: the row the text is about


def number(value: float | None, digits: str = ".3g") -> str:
    return "n/a" if value is None else format(value, digits)


def members(report: Report) -> Table:
    """Every affected series of every alert this report answers (the culprit's symptoms)."""
    probe = report.investigation.alert.probe
    members = [(alert.kind, m) for alert in report.investigation.symptoms
               for m in alert.members]
    rows = tuple((kind, m.benchmark, m.params, number(m.ratio, ".3f"), interval(m.ci),
                  number(m.p, ".2g"), number(m.q, ".2g"), f"{m.machine}/{m.env}")
                 for kind, m in members)
    return Table(("kind", "benchmark", "params", "ratio (detection)", "99% CI",
                  "p (detection)", "q (FDR)", "machine/env"), rows,
                 tuple(m.name == probe.name for _, m in members))


def _summary(summary: SampleSummary | None, unit: str) -> str:
    """Median (IQR, n) in the row's unit: us to 0.1 us, as the causal statement quotes device
    time; seconds as ms to 0.01 ms."""
    if summary is None:
        return "not measured"
    scale, digits = (1e3, ".2f") if unit == "s" else (1.0, ".1f")
    return (f"{summary.median * scale:{digits}} (IQR {summary.q1 * scale:{digits}}-"
            f"{summary.q3 * scale:{digits}}, n={summary.n})")


def ratio(c: Comparison) -> str:
    if c.ratio is None:
        return "n/a"
    return f"×{c.ratio:.3f} ({c.confidence:.0%} CI {interval(c.ci)})"


def timing(report: Report) -> Table:
    rows = []
    timing = report.investigation.timing
    series = (("device", timing.device), ("host", timing.host)) if has_device_clock(timing) \
        else (("host", timing.host),)
    for _, c in series:
        unit = "ms" if c.unit == "s" else c.unit
        rows.append((f"{c.name} ({unit})", _summary(c.good, c.unit), _summary(c.bad, c.unit),
                     ratio(c), number(c.pvalue, ".2g")))
    symptom = report.metric.timing_row
    return Table(("series", "good: median (IQR, n)", "bad: median (IQR, n)", "bad / good",
                  "p (Welch)"), tuple(rows), tuple(clock == symptom for clock, _ in series))


def correctness(report: Report) -> Table:
    """Both builds' errors against float64; the IEEE fp16 column only where a backend has
    that baseline (spyre_sim's older reports' one)."""
    correctness = report.investigation.timing.correctness
    fields = ["max_abs", "max_rel", "rmse", "rmse_ratio"]
    columns = ["max abs", "max rel", "RMSE", f"RMSE ratio vs {report.wording.eager}"]
    if any(c.errors and c.errors.rmse_ratio_fp16 is not None for c in correctness):
        fields.append("rmse_ratio_fp16")
        columns.append("vs eager IEEE fp16")
    rows = []
    for c in correctness:
        rows.append((c.build, *(number(getattr(c.errors, f) if c.errors else None, ".4g")
                                for f in fields),
                     "FAIL: " + "; ".join(c.reasons) if c.verdict == "FAIL" else c.verdict))
    return Table(("build", *columns, "verdict"), tuple(rows),
                 tuple(c.verdict == "FAIL" for c in correctness))


def numerics(report: Report) -> Table:
    rows = tuple((r["stage"], *(number(r[k], ".4g") for k in ("good", "bad", "good_max_abs",
                                                                "bad_max_abs")))
                 for r in report.numerics_rows)
    eager = report.wording.eager
    return Table(("stage output", f"RMSE ratio good (× {eager})", f"RMSE ratio bad (× {eager})",
                  "max abs good", "max abs bad"), rows,
                 tuple(r["stage"] == report.numerics_stage for r in report.numerics_rows))


def stages(report: Report) -> Table:
    """Per stage: the artifact, the work (instructions, exact) beside the wall time."""
    deltas = report.investigation.stages.stages
    counted = any(d.instructions_good is not None for d in deltas)
    rows = []
    for d in deltas:
        work = (number(None if d.instructions_good is None else d.instructions_good / 1e6,
                       ".3f"),
                number(None if d.instructions_bad is None else d.instructions_bad / 1e6, ".3f"),
                "n/a" if d.work_growth is None else f"{d.work_growth:+.2%}") if counted else ()
        rows.append((d.stage, "yes" if d.changed else "no", str(d.diff_lines), *work,
                     quantity(d.compile_s_good, "s"), quantity(d.compile_s_bad, "s"),
                     number(d.compile_ratio, ".2f"), number(d.compile_p, ".2g")))
    work_header = ("M instructions good", "M instructions bad", "change") if counted else ()
    figure = report.investigation.target.measures.stage_figure
    return Table(("stage", "artifact changed", "diff lines", *work_header,
                  f"{figure} per cold compile, good", f"{figure} per cold compile, bad",
                  "ratio", "p (Mann-Whitney)"), tuple(rows),
                 tuple(d.stage == report.first_stage for d in deltas))


def kernels(report: Report) -> Table:
    rows, marks = [], []
    changed = {name for name, _, _ in report.kernels.changed}
    for k in report.investigation.stages.kernels:
        change = ("not timed (unmodelled)" if k.unmodelled else "removed" if k.bad_us is None
                  else "added" if k.good_us is None else f"{k.bad_us - k.good_us:+.2f}")
        rows.append((k.name, number(k.good_us, ".1f"), number(k.bad_us, ".1f"), change))
        marks.append(k.good_us is None or k.bad_us is None or k.name in changed)
    return Table(("kernel", "execution time good (us)", "execution time bad (us)",
                  "change (us)"), tuple(rows), tuple(marks))


def bisect_steps(report: Report) -> Table:
    found = report.investigation
    steps = found.bisect.steps if found.bisect else []
    metric = found.target.measures
    unit = metric.unit
    rows = tuple((short(s.commit), str(s.n),
                  metric_value(s.median, unit, metric, found.target.error, words=report.wording),
                  s.reference, number(s.pvalue, ".2g"), s.verdict, s.note) for s in steps)
    culprit = found.commits.culprit.sha if found.commits.culprit else None
    return Table(("commit", "samples", "median", "compared with", "p (Mann-Whitney)",
                  "verdict", "note"), rows,
                 tuple(bool(culprit) and s.commit == culprit for s in steps))


def environment_rows(environment: dict) -> Table:
    measured = environment.get("measured") or {}
    cpu = environment.get("cpu") or {}
    rows = [("python", str(environment.get("python", ""))),
            ("torch", str(environment.get("torch", ""))),
            *((f"{name} (good / bad)", " / ".join(str((measured.get(s) or {}).get(name, "?"))
                                                   for s in ("good", "bad")))
              # the compiler's version as each build's backend recorded it
              for name in ("spyre_sim", "compiler")
              if any(name in (measured.get(s) or {}) for s in ("good", "bad"))),
            ("os", str(environment.get("os", ""))),
            ("cpu", str(cpu.get("model", ""))),
            ("cores (logical / usable)", f"{cpu.get('logical')} / {cpu.get('usable')}")]
    cores = (environment.get("config") or {}).get("cores")
    if cores is not None or environment.get("sencores"):  # a Spyre build's core count
        rows.append(("SENCORES / Config.cores", f"{environment.get('sencores')} / {cores}"))
    rows += [(f"${name}", value) for name, value in
             (environment.get("environment_variables") or {}).items()]
    return Table(("what", "value"), tuple(rows))


def figures(report: Report) -> Table:
    """Every figure the report quotes, once, with what it is (`reports.figures`)."""
    rows = tuple((f.quantity, f.program, f.measured_by, f.statistic, f.good or "-",
                  f.bad or "-", f.change or "-", f.p or "-")
                 for f in figures_of(report.investigation, report.kernels))
    return Table(("quantity", "program", "measured by", "statistic", "good", "bad",
                  "bad / good", "p (test)"), rows)


def all_tables(report: Report) -> dict[str, Table]:
    return {"figures": figures(report), "members": members(report), "timing": timing(report),
            "correctness": correctness(report), "numerics": numerics(report),
            "stages": stages(report), "kernels": kernels(report),
            "bisect": bisect_steps(report)}


def cells(table: Table) -> Sequence[Sequence[str]]:
    return [table.header, *table.rows]
