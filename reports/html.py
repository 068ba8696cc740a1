"""`report.html`: the same report as one self-contained page (jinja2, autoescape on).

Self-contained means it makes no request at all: CSS is inline, figures are PNG data URIs,
and a Content-Security-Policy meta tag (`default-src 'none'`) makes the browser refuse any
request the page might still contain, so it can be opened offline or from an attachment.
Every value reaches the page through jinja2's autoescaping; no filter marks text safe.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence

import jinja2

from reports import markdown, tables
from reports.narrative import Report

_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("reports", "templates"),
    autoescape=True,  # every template, whatever its file name
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENVIRONMENT.filters["number"] = tables.number


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """(css class, line) for a unified diff, so additions and removals are coloured."""
    kinds = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kinds.append(("file", line))
        elif line.startswith("@@"):
            kinds.append(("hunk", line))
        elif line.startswith("+"):
            kinds.append(("add", line))
        elif line.startswith("-"):
            kinds.append(("del", line))
        else:
            kinds.append(("ctx", line))
    return kinds


def render(report: Report, figures: Mapping[str, bytes], files: Sequence[str], usage: str,
           diff_file: str | None, environment: dict, max_diff_lines: int = 2000) -> str:
    """The page. `figures` maps a figure's file name to its PNG bytes."""
    lines = diff_lines(report.investigation.stages.diff)
    template = _ENVIRONMENT.get_template("report.html.j2")
    return template.render(
        report=report,
        tables=tables.all_tables(report),
        environment_table=tables.environment_rows(environment),
        figures={name: data_uri(png) for name, png in figures.items()},
        files=files,
        usage=usage,
        no_drift=markdown.NO_DRIFT,
        bisection_text=markdown.bisection_text(report) if report.investigation.bisect else "",
        minimized_text=markdown.minimized_text(report) if report.investigation.minimized else "",
        diff_file=diff_file,
        diff=lines[:max_diff_lines],
        diff_truncated=max(0, len(lines) - max_diff_lines),
    )
