"""reproducer.py: one standalone file a maintainer runs with the good and with the bad build.

Assembled from four parts: a usage docstring (commands, what to expect), the compiler's
backend module (`backends/spyre.py` or `backends/inductor.py`, the one the investigation
measured through, embedded as text and loaded as a module: it needs only torch and the
compiler), the program under test (the investigation's `source`, the minimized program when
there is one, pasted verbatim so it can be read), and the harness
(`regressions/probing/harness.py`, read through the installed package and copied between its
markers). Text from the investigation enters the file
only through `docstring_text` (inside the docstring) or `python_literal` (as data), and the
assembled source is compiled before it is written, so no name or subject can break out into
code. When the program's top-level names collide with the harness's, or it needs a
`__future__` import, it is embedded as a string and executed in a namespace of its own.
"""

from __future__ import annotations

import ast
import importlib.resources
import json
import math
import pprint
import shlex
import textwrap
from typing import Any

from regressions.errors import SpyreRegressError
from reports.narrative import Report, confirmation_figure, short

BEGIN, END = "# --- reproducer harness begins ---", "# --- reproducer harness ends ---"
SEED = 0


def harness_source() -> str:
    source = importlib.resources.files("regressions.probing").joinpath("harness.py").read_text()
    return source[source.index(BEGIN) + len(BEGIN):source.index(END)].strip("\n") + "\n"


def _harness_parts() -> tuple[str, str]:
    """(import lines, everything else) of the harness."""
    lines = harness_source().splitlines()
    imports = [line for line in lines if line.startswith(("import ", "from "))]
    body = "\n".join(line for line in lines if line not in imports).strip("\n")
    # isort's groups: the standard library (with the backend's loader), then torch
    standard = sorted(set(imports) - {"import torch"} | {"import importlib.util"})
    return "\n".join(standard) + "\n\nimport torch\n", body + "\n"


def _source_literal(source: str) -> str:
    """A raw triple-quoted string keeps a module readable; `repr` where its text could end
    one."""
    quotes = "'" * 3
    return (f"r{quotes}{source}{quotes}"
            if quotes not in source and not source.endswith(("\\", "'")) else repr(source))


def backend_section(name: str) -> str:
    """The backend module `name` as text (and the modules it loads beside it, its
    companions), and the function that loads it as a module: the reproducer reaches the
    compiler only through it, as the probes did."""
    from backends import interface

    source = interface.module_path(name).read_text()
    companions = {module: path.read_text()
                  for module, path in interface.companion_paths(name).items()}
    lines = [f"# The compiler under test, {name}, as the investigation measured it: "
             "spyre-regress's backend module for it.",
             f"BACKEND_SOURCE = {_source_literal(source)}"]
    if companions:
        lines.append("# The modules it loads beside it, by name.")
        lines.append("COMPANION_SOURCES = {" + ", ".join(
            f"{module!r}: {_source_literal(text)}" for module, text in companions.items())
            + "}")
    loader = ["", "", "def load_backend():"]
    if companions:
        loader += ["    for name, text in COMPANION_SOURCES.items():",
                   "        companion = importlib.util.module_from_spec(",
                   "            importlib.util.spec_from_loader(name, loader=None))",
                   "        sys.modules[name] = companion",
                   "        exec(compile(text, f'<{name}>', 'exec'), companion.__dict__)"]
    loader += ["    spec = importlib.util.spec_from_loader('reproducer_backend', loader=None)",
               "    module = importlib.util.module_from_spec(spec)",
               "    sys.modules[spec.name] = module  # dataclasses look their module up",
               f"    exec(compile(BACKEND_SOURCE, '<backend {name}>', 'exec'), module.__dict__)",
               "    if SETTINGS.get('compiler'):  # the project's module in the compiler's place",
               "        module.COMPILER = SETTINGS['compiler']",
               "    return module"]
    return "\n".join([*lines, *loader]) + "\n"


def docstring_text(value: str) -> str:
    """Text safe inside a triple-quoted docstring: nothing in it can end the string."""
    value = value.replace("\\", "\\\\")
    while '""' in value:  # no two quotes in a row, so no run of three anywhere
        value = value.replace('""', '"\\"')
    return value + (" " if value.endswith('"') else "")


def python_literal(value: Any) -> str:
    """A readable Python expression for JSON-like data (non-finite floats included)."""
    pretty = pprint.pformat(value, width=96, sort_dicts=False)
    try:
        if ast.literal_eval(pretty) == value:
            return pretty
    except (ValueError, SyntaxError):
        pass  # inf or nan: pprint writes them as bare names
    return _flat_literal(value)


def _flat_literal(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    if isinstance(value, dict):
        items = ", ".join(f"{_flat_literal(str(k))}: {_flat_literal(v)}"
                          for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flat_literal(v) for v in value) + "]"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    return repr(str(value))


def _top_level_names(source: str) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def program_section(source: str) -> str:
    """The program and `make_inputs`, pasted when safe, else executed from a string."""
    try:
        names = _top_level_names(source)
    except SyntaxError as exc:
        raise SpyreRegressError(f"investigation field `source` is not Python "
                                f"({exc.msg}, line {exc.lineno})") from None
    missing = {"program", "make_inputs"} - names
    if missing:
        raise SpyreRegressError(f"investigation field `source` must define "
                                f"{sorted(missing)} (regressions.bisection.minimize.to_source "
                                "does)")
    harness_names = _top_level_names(harness_source()) | {"SETTINGS", "BACKEND_SOURCE",
                                                          "load_backend", "importlib"}
    if (names & harness_names) - {"torch"} or "from __future__" in source:
        return ("# The program under test (embedded as text: its names would clash with the "
                "harness's).\n"
                f"PROGRAM_SOURCE = {source!r}\n"
                "# a module of its own, registered: a dataclass under `from __future__ import "
                "annotations` looks its module up\n"
                "import sys as _sys, types as _types\n"
                "_program_module = _types.ModuleType('reproducer_program')\n"
                "_sys.modules['reproducer_program'] = _program_module\n"
                "exec(compile(PROGRAM_SOURCE, '<program>', 'exec'), _program_module.__dict__)\n"
                "program = _program_module.program\n"
                "make_inputs = _program_module.make_inputs\n")
    return ("# " + "-" * 30 + " the program under test " + "-" * 30 + "\n"
            + source.rstrip() + "\n# " + "-" * 84 + "\n")


def _set_argument(knob: str, value: Any) -> str:
    rendered = value if isinstance(value, str) else json.dumps(value)
    if isinstance(value, str):
        try:
            json.loads(value)
            rendered = json.dumps(value)  # "true" the string, not the boolean
        except ValueError:
            pass
    return shlex.quote(f"{knob}={rendered}")


def usage_commands(report: Report) -> str:
    """The shell lines of the reproduction recipe (also shown in report.md and .html)."""
    commits = report.investigation.commits
    good, bad = short(commits.good.sha), short(commits.bad.sha)
    lines = [f"# the good build ({good})",
             f"PYTHONPATH=<checkout of {good}> python reproducer.py --config good",
             f"# the bad build ({bad})",
             f"PYTHONPATH=<checkout of {bad}> python reproducer.py --config bad"]
    workaround = report.investigation.workaround
    if workaround:
        lines += ["# the bad build with the workaround knob",
                  f"PYTHONPATH=<checkout of {bad}> python reproducer.py --config bad --set "
                  + _set_argument(workaround.knob, workaround.value)]
    if report.config_changes:
        lines += ["# one build, both recorded settings: emulates the change of defaults",
                  "python reproducer.py --config good && python reproducer.py --config bad"]
    return "\n".join(lines)


def expected_summary(report: Report) -> str:
    """What the reproducer printed for the report, on the program it embeds."""
    timing = report.investigation.timing
    device = timing.device
    good, bad = timing.correctness
    text = ""
    if device.ratio is not None and device.good and device.bad and device.ci:
        text = (f"device time median {device.good.median:.1f} us (good) vs "
                f"{device.bad.median:.1f} us (bad), x{device.ratio:.3f} "
                f"({device.confidence:.0%} CI {device.ci[0]:.3f}-{device.ci[1]:.3f}); ")
    return text + f"correctness good {good.verdict}, bad {bad.verdict}"


def settings(report: Report) -> dict:
    timing = report.investigation.timing
    recorded_bad = dict(timing.bad.config) or dict(timing.good.config)
    recorded_good = dict(timing.good.config) or recorded_bad
    return {"version": 2, "backend": report.investigation.backend,
            "compiler": report.investigation.compiler,
            "configs": {"good": recorded_good, "bad": recorded_bad},
            "default_config": "bad", "seed": SEED, "iterations": timing.iterations or 100,
            "compile_repeats": report.metric.reproducer_compiles,
            "tolerance": {"rmse_ratio": timing.tolerance.rmse_ratio,
                          "max_abs": timing.tolerance.max_abs},
            "tolerance_text": timing.tolerance.describe(report.wording.eager_run),
            "metric": report.metric.name,
            "expected": {"summary": expected_summary(report)}}


def reproducer_source(report: Report) -> str:
    """The complete reproducer.py text; compiled here so a broken file is never written."""
    usage = usage_commands(report)
    program = report.investigation.timing.program.describe()
    doc = "\n".join([
        f"Reproducer: {report.title}",
        "",
        textwrap.fill(report.causal_statement, 96),
        "",
        textwrap.fill(f"Needs only torch and the compiler under test "
                      f"({report.investigation.backend}, reached through the backend module "
                      "embedded below). One cold compile, one warm-up call, then synchronized "
                      "iterations; prints host time and, where the compiler models a device, "
                      "device time (median, IQR), and the output's error against float64 "
                      "with a PASS/FAIL verdict. Usage:", 96),
        "",
        textwrap.indent(usage, "    "),
        "",
        "--config good|bad applies the settings recorded at that commit exactly; --set",
        "NAME=VALUE overrides one; --iterations N; --json prints one JSON document.",
        "",
        textwrap.fill(f"When the report was written, on {program}: "
                      + expected_summary(report) + ".", 96),
        textwrap.fill("The regression as the benchmark measured it: " + (
            confirmation_figure(report.investigation.confirmation)
            if report.investigation.confirmation else "the bad build fails") + ".", 96),
    ])
    imports, body = _harness_parts()
    parts = [
        f'"""{docstring_text(doc)}\n"""\n',
        imports,
        f"SETTINGS = {python_literal(settings(report))}\n",
        backend_section(report.investigation.backend),
        program_section(report.investigation.source),
        body,
        'if __name__ == "__main__":',
        "    sys.exit(main(sys.argv[1:], load_backend(), program, make_inputs, SETTINGS))",
        "",
    ]
    source = "\n".join(parts)
    try:
        compile(source, "reproducer.py", "exec")
    except SyntaxError as exc:  # a bug here, not in the input: the pieces are escaped
        raise SpyreRegressError(f"the assembled reproducer does not compile ({exc.msg}, "
                                f"line {exc.lineno}); please report this") from None
    return source
