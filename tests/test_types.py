"""The type checker in the test command (scripts/test.sh runs `mypy` with pyproject.toml's
[tool.mypy]): the tree is clean, no package or test is exempt, and the settings catch what
they are there to catch - a
wrong field on a dataclass, a dict where a dataclass is expected, a probe request built
with a field the protocol does not have - each written for the purpose."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is in the test extra")

ROOT = Path(__file__).resolve().parents[1]


def check(source: str, tmp_path: Path) -> tuple[str, int]:
    """mypy's report on `source` as a module of this tree, with the project's settings."""
    module = tmp_path / "checked.py"
    module.write_text(source)
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                "--cache-dir", str(tmp_path / ".mypy_cache"), str(module)])
    return out + err, status


def exempt(config: dict) -> list[str]:
    """The modules `[tool.mypy]` excuses from errors (an override with `ignore_errors`)."""
    return [module for override in config.get("overrides", []) if override.get("ignore_errors")
            for module in ([override["module"]] if isinstance(override["module"], str)
                           else override["module"])]


def test_every_package_and_the_tests_are_checked_and_none_is_exempt():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert {"spyre_sim", "backends", "benchmarks", "regressions", "reports", "spyre_regress",
            "scripts", "tests"} <= set(config["files"])
    assert exempt(config) == []
    assert exempt(tomllib.loads('[tool.mypy]\n[[tool.mypy.overrides]]\nmodule = ["tests.*"]\n'
                                "ignore_errors = true\n")["tool"]["mypy"]) == ["tests.*"]


def test_a_wrong_dataclass_field_and_a_dict_for_a_dataclass_are_caught(tmp_path):
    report, status = check(
        "from regressions.probing.protocol import KernelTime, ProbeRequest, StageAnswer\n"
        "ProbeRequest(wrkload='mlp')\n"
        "def kernels(answer: StageAnswer) -> float:\n"
        "    return sum(k.time_ns for k in answer.kernels)\n"
        "def first() -> KernelTime:\n"
        "    return {'name': 'k0', 'time_us': 1.0}\n", tmp_path)
    assert status == 1
    assert 'Unexpected keyword argument "wrkload" for "ProbeRequest"' in report
    assert '"KernelTime" has no attribute "time_ns"' in report
    assert 'Incompatible return value type (got "dict[str, object]", expected ' \
           '"KernelTime")' in report


def test_an_unannotated_function_body_is_checked_too(tmp_path):
    report, status = check(
        "from regressions.records.results_store import ResultsStore\n"
        "def helper(path):\n"
        "    return ResultsStore(path, machine='m').samples_of('abc')\n", tmp_path)
    assert status == 1 and '"ResultsStore" has no attribute "samples_of"' in report


def test_typed_code_passes(tmp_path):
    report, status = check(
        "from regressions.probing.protocol import KernelTime\n"
        "def total(kernels: list[KernelTime]) -> float:\n"
        "    return sum(k.time_us for k in kernels if k.time_us is not None)\n", tmp_path)
    assert status == 0, report
