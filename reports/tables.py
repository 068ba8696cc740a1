"""The report's tables as plain strings: one definition shared by report.md and report.html.

Each function returns `Table(header, rows)` with already formatted, unescaped cells; the
markdown renderer escapes them explicitly and the HTML template autoescapes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from reports.analysis import Comparison, SampleSummary, member_label
from reports.narrative import Report, format_metric, short


class Table(NamedTuple):
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    highlight: tuple[bool, ...] = ()  # per row: the row the text is about


def number(value: float | None, digits: str = ".3g") -> str:
    return "n/a" if value is None else format(value, digits)


def _params(value: object) -> str:
    if value in (None, "", [], {}):
        return ""
    return value if isinstance(value, str) else str(value)


def members(report: Report) -> Table:
    probe = report.probe_label
    rows, marks = [], []
    for m in report.members:
        ci = m.get("ci")
        rows.append((str(m["benchmark"]), _params(m.get("params")), number(m.get("ratio"), ".3f"),
                     "n/a" if not ci or None in ci else f"{ci[0]:.3f}-{ci[1]:.3f}",
                     number(m.get("p"), ".2g"), number(m.get("q"), ".2g"),
                     str(m.get("machine", "")), str(m.get("env", ""))))
        marks.append(member_label(m) == probe)
    return Table(("benchmark", "params", "ratio", "99% CI", "p", "q", "machine", "env"),
                 tuple(rows), tuple(marks))


def _summary(summary: SampleSummary | None, unit: str) -> str:
    if summary is None:
        return "not measured"
    scale, unit = (1e3, "ms") if unit == "s" else (1.0, unit)
    return (f"{summary.median * scale:.2f} {unit} (IQR {summary.q1 * scale:.2f}-"
            f"{summary.q3 * scale:.2f}, n={summary.n})")


def timing(report: Report) -> Table:
    rows = []
    for c in (report.device, report.host):
        rows.append((c.name, _summary(c.good, c.unit), _summary(c.bad, c.unit), ratio(c),
                     number(c.pvalue, ".2g")))
    return Table(("series", "good: median (IQR, n)", "bad: median (IQR, n)", "bad / good",
                  "p"), tuple(rows), (report.metric == "device_time", False))


def ratio(c: Comparison) -> str:
    if c.ratio is None:
        return "n/a"
    return f"×{c.ratio:.3f} ({c.confidence:.0%} CI {c.ci[0]:.3f}-{c.ci[1]:.3f})"


def correctness(report: Report) -> Table:
    rows = tuple((c.build, number(c.max_abs), number(c.max_rel), number(c.rmse),
                  number(c.rmse_ratio),
                  "PASS" if c.passed else "FAIL: " + "; ".join(c.reasons))
                 for c in report.correctness)
    return Table(("build", "max abs", "max rel", "RMSE", "RMSE ratio vs eager fp16",
                  "verdict"), rows, tuple(not c.passed for c in report.correctness))


def numerics(report: Report) -> Table:
    rows = tuple((r["stage"], number(r["good"]), number(r["bad"]), number(r["good_max_abs"]),
                  number(r["bad_max_abs"])) for r in report.numerics_rows)
    return Table(("stage output", "RMSE ratio good", "RMSE ratio bad", "max abs good",
                  "max abs bad"), rows,
                 tuple(r["stage"] == report.numerics_stage for r in report.numerics_rows))


def stages(report: Report) -> Table:
    rows = tuple((r["stage"], "yes" if r["changed"] else "no", str(r.get("diff_lines", "")),
                  format_metric("compile_time", r["compile_s_good"]),
                  format_metric("compile_time", r["compile_s_bad"]),
                  number(r.get("compile_ratio"), ".2f"), number(r.get("compile_p"), ".2g"))
                 for r in report.stage_rows)
    return Table(("stage", "artifact changed", "diff lines", "compile good", "compile bad",
                  "ratio", "p"), rows,
                 tuple(r["stage"] == report.first_stage for r in report.stage_rows))


def kernels(report: Report) -> Table:
    rows, marks = [], []
    changed = {name for name, _, _ in report.kernels.changed}
    for k in report.kernel_rows:
        good, bad = k["good_us"], k["bad_us"]
        change = ("removed" if bad is None else "added" if good is None
                  else f"{bad - good:+.2f} us")
        rows.append((str(k["name"]), format_metric("device_time", good),
                     format_metric("device_time", bad), change))
        marks.append(good is None or bad is None or k["name"] in changed)
    return Table(("kernel", "good", "bad", "change"), tuple(rows), tuple(marks))


def bisect_steps(report: Report) -> Table:
    steps = (report.bisect or {}).get("steps") or []
    rows = tuple((short(s["commit"]), str(s.get("n", "")), number(s.get("median"), ".4g"),
                  str(s.get("reference", "")), number(s.get("pvalue"), ".2g"), s["verdict"],
                  str(s.get("note", ""))) for s in steps)
    culprit = (report.culprit or {}).get("sha")
    return Table(("commit", "n", "median", "compared with", "p", "verdict", "note"), rows,
                 tuple(bool(culprit) and s["commit"] == culprit for s in steps))


def environment_rows(environment: dict) -> Table:
    measured = environment.get("measured") or {}
    rows = [("python", str(environment.get("python", ""))),
            ("torch", str(environment.get("torch", ""))),
            ("spyre_sim (good / bad)", " / ".join(str((measured.get(s) or {}).get("spyre_sim", "?"))
                                                  for s in ("good", "bad"))),
            ("os", str(environment.get("os", ""))),
            ("cpu", str((environment.get("cpu") or {}).get("model", ""))),
            ("cores (logical / usable)", f"{(environment.get('cpu') or {}).get('logical')} / "
                                         f"{(environment.get('cpu') or {}).get('usable')}"),
            ("SENCORES / Config.cores", f"{environment.get('sencores')} / "
                                        f"{environment.get('config', {}).get('cores')}")]
    rows += [(f"${name}", value) for name, value in
             (environment.get("environment_variables") or {}).items()]
    return Table(("what", "value"), tuple(rows))


def all_tables(report: Report) -> dict[str, Table]:
    return {"members": members(report), "timing": timing(report),
            "correctness": correctness(report), "numerics": numerics(report),
            "stages": stages(report), "kernels": kernels(report),
            "bisect": bisect_steps(report)}


def cells(table: Table) -> Sequence[Sequence[str]]:
    return [table.header, *table.rows]
