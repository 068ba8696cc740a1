"""The shape of the code: imports point down the layers, and modules stay small.

Layers, bottom to top: spyre_sim <- benchmarks <- regressions <- reports <- spyre_regress. A
module may import its own package and the packages below it; `reports` renders and takes
from `regressions` only the types it renders (and the errors); only `spyre_regress`, the
orchestration, calls both. Each rule is checked on the real tree and shown to catch a
violation written for the purpose.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import size_budget  # noqa: E402

LAYERS = ("spyre_sim", "benchmarks", "regressions", "reports", "spyre_regress")
# What `reports` may take from `regressions`: the investigation's types and their codec.
REPORTS_MAY_IMPORT = {"regressions.investigation.model", "regressions.metrics",
                      "regressions.errors", "regressions.codec", "regressions.bisection.stages"}


def imported_modules(source: str) -> list[str]:
    """Every name an import statement brings in, absolute (`from a.b import c` -> a.b.c)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def violations(package: str, source: str) -> list[str]:
    """The imports of one module of `package` that point up or sideways."""
    allowed = set(LAYERS[:LAYERS.index(package) + 1])
    problems = []
    for name in imported_modules(source):
        top = name.split(".")[0]
        if top not in LAYERS:
            continue
        if top not in allowed:
            problems.append(f"imports {name} (a layer above {package})")
        elif package == "reports" and top == "regressions" and not any(
                name == m or name.startswith(m + ".") for m in REPORTS_MAY_IMPORT):
            problems.append(f"imports {name} (reports takes only regressions' types)")
    return problems


def project_modules():
    for package in LAYERS:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield package, path


def test_imports_point_down_the_layers():
    problems = [f"{path.relative_to(ROOT)}: {problem}" for package, path in project_modules()
                for problem in violations(package, path.read_text())]
    assert problems == []


@pytest.mark.parametrize(("package", "source"), [
    ("regressions", "from reports import write_bundle\n"),
    ("spyre_sim", "import regressions.stats\n"),
    ("benchmarks", "from regressions import detect\n"),
    ("reports", "from regressions.probing import prober\n"),
    ("reports", "from regressions.investigation.investigator import Investigator\n"),
    ("regressions", "def f():\n    from spyre_regress import nightly\n"),
])
def test_the_layer_check_catches_an_upward_import(package, source):
    assert violations(package, source)


def test_the_layer_check_lets_types_through():
    assert violations("reports",
                      "from regressions.investigation.model import Investigation\n") == []
    assert violations("spyre_regress", "from reports import write_bundle\n") == []


def test_no_module_or_function_is_over_the_size_budget():
    assert size_budget.over_budget(size_budget.sizes()) == []


def test_the_size_check_catches_a_long_function_and_a_long_module(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(size_budget.FUNCTION_BUDGET + 1))
    long_function = tmp_path / "spyre_sim" / "long.py"
    long_function.parent.mkdir()
    long_function.write_text(f'def f():\n    """Docstrings do not count."""\n{body}\n')
    long_module = tmp_path / "spyre_sim" / "big.py"
    long_module.write_text("# comments do not count\n" * 500 + "\n".join(
        f"y{i} = {i}" for i in range(size_budget.MODULE_BUDGET + 1)) + "\n")
    sizes = {s.path: s for s in size_budget.sizes(tmp_path)}
    assert sizes[str(Path("spyre_sim/long.py"))].long_functions == (
        ("f", size_budget.FUNCTION_BUDGET + 2),)
    assert sizes[str(Path("spyre_sim/big.py"))].code_lines == size_budget.MODULE_BUDGET + 1
    assert len(size_budget.over_budget(list(sizes.values()))) == 2
