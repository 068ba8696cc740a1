"""`report.md`: a GitHub issue body, with every piece of foreign text escaped explicitly.

Markdown has no autoescape, so text from the investigation goes through exactly one of three
functions: `text` (prose: markdown punctuation backslash-escaped, `<`, `>` and `&` as entities,
so neither emphasis nor HTML can be injected), `cell` (`text` on one line, for table cells,
where GitHub splits on `|` even inside code spans) or `fenced` (code blocks whose fence is
longer than any backtick run inside, so no content can close the block). GitHub rejects issue
bodies over 65,536 characters; `render` shrinks the long parts (diff, log, source) until the
body fits under `MAX_CHARS`, pointing at the bundle's files for the rest.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from regressions.investigation.model import Program
from reports import tables
from reports.narrative import Report, short
from reports.tables import Table

MAX_CHARS = 65_000
NO_DRIFT = ("No executable stage's output is further from float64 at the bad commit than at "
            "the good one (numerics_stages.csv has the numbers).")
# Inline constructs: escapes, code spans, emphasis, links/images, table pipes, strikethrough,
# math. `<`, `>` and `&` become entities instead (no HTML, no autolinks in angle brackets).
_INLINE = re.compile(r"([\\`*_\[\]|~$])")
# Block constructs only start a line: headings, list items, setext underlines, ordered lists.
_LINE_START = re.compile(r"^([#+\-=]|\d+(?=[.)]))")


def one_line(value: object) -> str:
    """`value` as one line: control and line/paragraph separator characters become spaces."""
    return "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
                   for c in str(value))


def inline(value: object) -> str:
    """One line of text that renders as itself inside a line: no emphasis, links or HTML."""
    # stripped: four leading spaces would start an indented code block
    escaped = one_line(value).strip()
    escaped = escaped.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _INLINE.sub(r"\\\1", escaped)


def text(value: object) -> str:
    """`inline`, safe to start a line too: no heading, list item or setext underline."""
    # "1." stays a number: escape the punctuation after the digits, not the digits
    return _LINE_START.sub(lambda m: m.group(1) + "\\" if m.group(1)[0].isdigit()
                           else "\\" + m.group(1), inline(value))


def cell(value: object) -> str:
    """A table cell: block syntax means nothing inside a GFM cell, so `inline` suffices."""
    return inline(value) or " "


def fenced(body: str, language: str = "") -> str:
    runs = [len(m) for m in re.findall(r"`+", body)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return f"{fence}{one_line(language)}\n{body.rstrip(chr(10))}\n{fence}"


def table(source: Table) -> str:
    """A GFM table; every cell escaped, the highlighted rows in bold."""
    def row(values: Sequence[str], bold: bool = False) -> str:
        escaped = [cell(v) for v in values]
        if bold:
            escaped = [f"**{v}**" if v.strip() else v for v in escaped]
        return "| " + " | ".join(escaped) + " |"

    marks = source.highlight or (False,) * len(source.rows)
    lines = [row(source.header), "|" + "|".join("---" for _ in source.header) + "|"]
    lines += [row(values, bold) for values, bold in zip(source.rows, marks, strict=True)]
    return "\n".join(lines)


def truncate_lines(body: str, max_chars: int, pointer: str) -> str:
    """The first lines of `body` that fit in `max_chars`, and a note naming the full file."""
    if len(body) <= max_chars:
        return body
    kept, used = [], 0
    lines = body.splitlines()
    for line in lines:
        if used + len(line) + 1 > max_chars:
            break
        kept.append(line)
        used += len(line) + 1
    return "\n".join(kept) + (f"\n... [truncated: {len(lines) - len(kept)} more lines; the "
                              f"full text is in {pointer}]")


def _section(title: str, *parts: str) -> str:
    return "\n\n".join([f"## {text(title)}", *[p for p in parts if p]])


def render(report: Report, files: Sequence[str], usage: str, diff_file: str | None,
           environment: dict) -> str:
    """The issue body, under `MAX_CHARS`: long blocks shrink until it fits."""
    budget = 24_000
    while True:
        body = _render(report, files, usage, diff_file, environment=environment, budget=budget)
        if len(body) <= MAX_CHARS or budget < 500:
            break
        budget //= 2
    if len(body) > MAX_CHARS:  # only a huge member list gets here
        body = body[:MAX_CHARS - 200].rsplit("\n", 1)[0] + (
            "\n\n... [truncated to fit an issue body; report.html and summary.json have all "
            "of it]\n")
    return body


def _render(report: Report, files: Sequence[str], usage: str, diff_file: str | None,
            environment: dict, budget: int) -> str:
    t = tables.all_tables(report)
    out = [f"# {text(report.title)}",
           f"**Causal statement.** {text(report.causal_statement)}",
           f"**Workaround, separate from the root cause.** {text(report.workaround_statement)}",
           _section("Figures", text(report.notes["figures"]), table(t["figures"])),
           _section("Affected benchmarks", table(t["members"])),
           _section("Reproduce",
                    text(f"reproducer.py needs only torch and {report.repo_name}; run it with "
                         "each build and compare what it prints:"),
                    fenced(usage, "sh"))]
    sections = {
        "timing": _section("Timing", text(report.notes["timing"]), table(t["timing"])),
        "correctness": _section(
            "Correctness vs float64",
            text(report.notes["correctness"]),
            table(t["correctness"]),
            text(report.notes["numerics"]) if report.show_stage_errors else "",
            table(t["numerics"]) if report.show_stage_errors else
            text(NO_DRIFT) if report.numerics_rows else ""),
        "evidence": _section("Compiler evidence", *_evidence(report, t, diff_file, budget)),
    }
    out += [sections[name] for name in report.section_order]
    out.append(_section("Commit bisection", *_bisect_parts(report, t["bisect"])))
    minimized = report.investigation.minimized
    if minimized:
        out.append(_section(
            "Minimized program",
            text(minimized_text(report)),
            fenced(truncate_lines(minimized.source, budget // 2, "reproducer.py"), "python")))
    out.append(_section("Environment", table(tables.environment_rows(environment)),
                        text(f"Everything else, including the full {report.wording.config}, "
                             "is in environment.json.")))
    out.append(_section("Files", "\n".join(f"- {text(name)}" for name in files)))
    return "\n\n".join(out) + "\n"


def minimized_text(report: Report) -> str:
    found = report.investigation
    minimized = found.minimized
    assert minimized is not None, "the text of a minimized program"
    captured = Program(found.target.workload, found.target.seq, found.timing.program.width,
                       "full", ops=minimized.ops_before)
    return (f"{minimized.ops_before} → {minimized.ops_after} ops in {minimized.queries} "
            f"queries, keeping the regression: the bad/good ratio of the noise-free "
            f"{report.metric.label} was {minimized.ratio_before:.3f} on "
            f"{captured.describe()} and is {minimized.ratio_after:.3f} on this one. "
            "The captured program is not the benchmark program: it takes the weights as "
            "inputs where the benchmark keeps them as parameters, so the compiler builds "
            "another program from it and its ratio is its own. reproducer.py embeds the "
            "minimized program.")


def _evidence(report: Report, t: dict[str, Table], diff_file: str | None,
              budget: int) -> list[str]:
    first = report.first_stage
    stages = report.investigation.stages
    evidence = [text(f"First divergent stage: {first or 'none'} (basis: {stages.basis or 'n/a'})"
                     + (f"; first stage whose executed output drifts: {report.numerics_stage}"
                        if report.numerics_stage else "") + ". " + report.notes["stages"]),
                table(t["stages"])]
    if stages.kernels:
        evidence += [text(report.notes["kernels"]), table(t["kernels"])]
    if stages.diff and diff_file:
        evidence += [f"### {text(f'{first} artifact diff, good → bad ({diff_file})')}",
                     fenced(truncate_lines(stages.diff, budget, diff_file), "diff")]
    if stages.log_excerpt:
        evidence += [f"### {text('Compile log excerpt, bad build (compile_log.txt)')}",
                     fenced(truncate_lines(stages.log_excerpt, budget // 4, "compile_log.txt"),
                            "text")]
    return evidence


def _bisect_parts(report: Report, steps: Table) -> list[str]:
    good, bad = report.investigation.commits.good, report.investigation.commits.bad
    parts = [text(f"good {short(good.sha)} \"{good.subject}\"; bad {short(bad.sha)} "
                  f"\"{bad.subject}\"")]
    bisect = report.investigation.bisect
    if not bisect:
        return parts + [text("No commit bisection was run.")]
    parts.append(text(bisection_text(report)))
    if steps.rows:
        parts.append(table(steps))
    return parts


def bisection_text(report: Report) -> str:
    bisect = report.investigation.bisect
    assert bisect is not None, "the text of a bisection"
    culprit = short(bisect.culprit) if bisect.culprit else "none"
    return (f"{bisect.commits_in_range} commit(s) in range; {bisect.commits_measured} measured, "
            f"the two ends included, with {report.investigation.target.label}; culprit "
            f"{culprit}.")
