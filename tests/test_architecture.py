"""The shape of the code: imports point down the layers, roles keep to their rooms, the metric
table decides, and modules stay small.

Layers, bottom to top: spyre_sim <- backends <- benchmarks <- regressions <- reports <-
spyre_regress. The compilers under test sit at the bottom (`backends`, the other compilers,
may use spyre_sim's stage-capture writer). A module may import its own package and the
packages below it; `reports` renders and takes from `regressions` only the types it renders
(and the errors); only `spyre_regress`, the orchestration, calls both. Inside `regressions`,
the ground truth (synthetic data, planted scenarios, scratch histories, the month simulation)
is imported by tests, scripts and the demo only; the night imports no command; nothing below
the orchestration imports the executor or Dask; and its rooms (sub-packages and top-level
modules) import one another in one direction only, with the probe protocol, stdlib-only, on
the floor of `probing`. Each rule is checked on the real tree and shown to catch a violation
written for the purpose.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from regressions import metrics

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("spyre_sim", "backends", "benchmarks", "regressions", "reports", "spyre_regress")
# What `reports` may take from `regressions`: the investigation's types and their codec.
REPORTS_MAY_IMPORT = {"regressions.investigation.model", "regressions.metrics",
                      "regressions.errors", "regressions.codec", "regressions.bisection.stages"}
GROUND_TRUTH = "regressions.groundtruth"
# The demo runs the nightly on a history with planted regressions: ground truth by design.
MAY_IMPORT_GROUND_TRUTH = {"spyre_regress.demo", "spyre_regress.cli.demo"}
EXECUTOR = ("spyre_regress.executor", "dask", "distributed")
# Modules above spyre_sim that may import it by name. For good: its implementation of the
# backend interface, Inductor's capture (it writes the protocol with spyre_sim's writer),
# spyre_sim's own asv suite, the ground truth, which plants regressions in spyre_sim, and the
# emulated builds (example investigations without git), which patch spyre_sim in-process.
# (the other backends name it for the stage-capture protocol's writer, spyre_sim.debug_capture;
# torch-spyre's timing, for spyre_sim's timing model, the one cost model there is)
NAMES_SPYRE_SIM = {"backends/spyre.py", "backends/inductor.py", "backends/torch_spyre_texts.py",
                   "backends/torch_spyre_timing.py",
                   "benchmarks/compile_work_child.py", "benchmarks/prepare.py",
                   "regressions/groundtruth/month.py", "spyre_regress/emulated.py",
                   "spyre_regress/example.py"}
# Still naming it until they go through the backend interface: none is left (the reproducer's
# harness was the last). A module that starts naming spyre_sim fails the test.
NAMES_SPYRE_SIM_FOR_NOW: set[str] = set()
# Where a metric's kind may be compared as a string: the table and the codec that reads it.
KIND_STRINGS_ALLOWED = {"regressions/metrics.py", "regressions/codec.py"}


def imported_modules(source: str) -> list[str]:
    """Every name an import statement brings in, absolute (`from a.b import c` -> a.b.c)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def violations(package: str, source: str, module: str = "") -> list[str]:
    """The imports of one module (`module`, dotted) of `package` that break a rule."""
    allowed = set(LAYERS[:LAYERS.index(package) + 1])
    problems = []
    for name in imported_modules(source):
        top = name.split(".")[0]
        if top in LAYERS and top not in allowed:
            problems.append(f"imports {name} (a layer above {package})")
        elif package == "reports" and top == "regressions" and not any(
                _within(name, m) for m in REPORTS_MAY_IMPORT):
            problems.append(f"imports {name} (reports takes only regressions' types)")
        if _within(name, GROUND_TRUTH) and not _within(module, GROUND_TRUTH) \
                and module not in MAY_IMPORT_GROUND_TRUTH:
            problems.append(f"imports {name} (ground truth is for tests, scripts, the demo)")
        if _within(module, "regressions.night") and _within(name, "spyre_regress.cli"):
            problems.append(f"imports {name} (the night knows no command)")
        if package != "spyre_regress" and any(_within(name, e) for e in EXECUTOR):
            problems.append(f"imports {name} (only the orchestration uses the executor)")
    return problems


def kind_comparisons(source: str) -> list[str]:
    """Comparisons of a value with a metric's kind or probe name written as a string: a
    per-metric decision taken outside the metric table."""
    names = set(metrics.KINDS) | set(metrics.PROBE_METRICS)
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        for operand in (node.left, *node.comparators):
            values = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) \
                else [operand]
            found += [f"line {node.lineno}: {v.value!r}" for v in values
                      if isinstance(v, ast.Constant) and v.value in names]
    return found


def project_modules():
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield package, ".".join(p for p in parts if p != "__init__"), path


def test_imports_point_down_the_layers_and_roles_keep_to_their_rooms():
    problems = [f"{path.relative_to(ROOT)}: {problem}" for package, module, path in
                project_modules() for problem in violations(package, path.read_text(), module)]
    assert problems == []


@pytest.mark.parametrize(("package", "module", "source"), [
    ("regressions", "regressions.detection.detect", "from reports import write_bundle\n"),
    ("spyre_sim", "spyre_sim.ir", "import regressions.stats\n"),
    ("spyre_sim", "spyre_sim.pipeline", "from backends import inductor\n"),
    ("backends", "backends.inductor", "from regressions.bisection import stages\n"),
    ("benchmarks", "benchmarks.workloads", "from regressions.detection import detect\n"),
    ("reports", "reports.bundle", "from spyre_regress import prober\n"),
    ("reports", "reports.bundle",
     "from regressions.investigation.investigator import Investigator\n"),
    ("regressions", "regressions.git", "def f():\n    from spyre_regress import nightly\n"),
    ("regressions", "regressions.night", "from regressions.groundtruth import month\n"),
    ("spyre_regress", "spyre_regress.nightly", "from regressions.groundtruth import planted\n"),
    ("regressions", "regressions.night", "from spyre_regress.cli import common\n"),
    ("regressions", "regressions.detection.remeasure", "import distributed\n"),
    ("reports", "reports.bundle", "from dask import delayed\n"),
])
def test_the_layer_check_catches_a_violation(package, module, source):
    assert violations(package, source, module)


def test_the_layer_check_lets_allowed_imports_through():
    assert violations("reports", "from regressions.investigation.model import Investigation\n",
                      "reports.bundle") == []
    assert violations("spyre_regress", "from reports import write_bundle\n",
                      "spyre_regress.reporting") == []
    assert violations("spyre_regress", "from regressions.groundtruth import scratch\n",
                      "spyre_regress.demo") == []
    assert violations("regressions", "from regressions.groundtruth import month\n",
                      "regressions.groundtruth.planted") == []
    assert violations("spyre_regress", "import distributed\n", "spyre_regress.executor") == []


def room_of(module: str) -> str | None:
    """The room of `regressions` a module stands in: its sub-package, or itself when it is a
    module of the package's top (regressions.detection.detect -> detection, regressions.stats
    -> stats); None outside `regressions` and for the package itself."""
    parts = module.split(".")
    return parts[1] if parts[0] == "regressions" and len(parts) > 1 else None


def rooms_arrows(modules: dict[str, str]) -> dict[str, set[str]]:
    """Which rooms of `regressions` import which, from each module's source (`modules`:
    dotted name -> source); an import inside a room is no arrow."""
    arrows: dict[str, set[str]] = {}
    for module, source in modules.items():
        room = room_of(module)
        if room is None:
            continue
        for name in imported_modules(source):
            target = room_of(name)
            if target is not None and target != room:
                arrows.setdefault(room, set()).add(target)
    return arrows


def loops(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The rooms that import each other, directly or around a circle: every strongly
    connected group of more than one room (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for target in sorted(arrows.get(room, ())):
            if target not in index:
                visit(target)
                low[room] = min(low[room], low[target])
            elif target in stack:
                low[room] = min(low[room], index[target])
        if low[room] == index[room]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == room:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for room in sorted({*arrows, *(t for ts in arrows.values() for t in ts)}):
        if room not in index:
            visit(room)
    return sorted(found)


def test_inside_regressions_no_room_imports_one_that_imports_it_back():
    """Folder by folder (detection, bisection, probing, investigation, records, ...; a
    top-level module is a room of its own), every arrow points down: no loop."""
    sources = {module: path.read_text() for package, module, path in project_modules()
               if package == "regressions"}
    arrows = rooms_arrows(sources)
    assert loops(arrows) == [], {room: sorted(targets) for room, targets in arrows.items()}
    # the probe protocol is the floor of the probing room: nothing but the standard library
    protocol = sources["regressions.probing.protocol"]
    assert {name.split(".")[0] for name in imported_modules(protocol)} <= {
        "__future__", "collections", "dataclasses", "typing"}


def test_the_loop_check_catches_rooms_that_import_each_other():
    back = rooms_arrows({
        "regressions.bisection.stages": "from regressions.probing.protocol import KernelTime\n",
        "regressions.probing.prober": "from regressions.bisection import minimize\n",
        "regressions.detection.detect": "from regressions import stats\n"})
    assert loops(back) == [["bisection", "probing"]]
    around = {"records": {"investigation"}, "investigation": {"bisection"},
              "bisection": {"records"}, "night": {"records"}}
    assert loops(around) == [["bisection", "investigation", "records"]]
    assert loops({"night": {"records"}, "records": {"codec"}}) == []


def names_spyre_sim(source: str) -> bool:
    return any(name.split(".")[0] == "spyre_sim" for name in imported_modules(source))


def test_above_the_simulator_only_its_backend_and_the_listed_modules_name_it():
    naming = {str(path.relative_to(ROOT)) for package, _, path in project_modules()
              if package != "spyre_sim" and names_spyre_sim(path.read_text())}
    assert naming - NAMES_SPYRE_SIM == NAMES_SPYRE_SIM_FOR_NOW


def test_naming_the_simulator_is_seen_in_a_function_too():
    assert names_spyre_sim("def f():\n    from spyre_sim.stages import STAGES\n")
    assert not names_spyre_sim("from backends import interface\n")


def test_no_metric_kind_is_compared_as_a_string_outside_the_table():
    problems = [f"{path.relative_to(ROOT)}: {found}" for _, _, path in project_modules()
                if str(path.relative_to(ROOT)) not in KIND_STRINGS_ALLOWED
                for found in kind_comparisons(path.read_text())]
    assert problems == []


@pytest.mark.parametrize("source", [
    "if metric == 'numerics':\n    pass\n",
    "ok = kind in ('compile_time', 'compile_work')\n",
    "ok = 'device_time' != probe\n",
])
def test_the_kind_check_catches_a_comparison(source):
    assert kind_comparisons(source)


def test_the_kind_check_lets_table_fields_through():
    assert kind_comparisons("if metric.errors and kind == metrics.FAILURE:\n    pass\n") == []


def size_budget(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "size_budget.py"), *args],
                          capture_output=True, text=True, timeout=120)


def test_no_module_or_function_is_over_the_size_budget():
    done = size_budget()
    assert done.returncode == 0, done.stderr


def test_the_size_check_catches_a_long_function_and_a_long_module(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(61))
    (tmp_path / "spyre_sim").mkdir()
    (tmp_path / "spyre_sim" / "long.py").write_text(
        f'def f():\n    """Docstrings do not count."""\n{body}\n')
    (tmp_path / "spyre_sim" / "big.py").write_text("# comments do not count\n" * 500 + "\n".join(
        f"y{i} = {i}" for i in range(401)) + "\n")
    done = size_budget("--root", str(tmp_path))
    assert done.returncode == 1
    assert "spyre_sim/long.py: f() has 62 code lines (budget 60)" in done.stderr
    assert "spyre_sim/big.py: 401 code lines (budget 400)" in done.stderr
