"""The type checker in the test command (scripts/test.sh runs `mypy` with pyproject.toml's
[tool.mypy]): the tree is clean, and the settings catch what they are there to catch - a
wrong field on a dataclass, a dict where a dataclass is expected, a probe request built
with a field the protocol does not have - each written for the purpose."""

from __future__ import annotations

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
