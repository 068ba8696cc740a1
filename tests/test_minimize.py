"""Minimization as a pure function, on a hand-made program and an injected predicate."""

from pathlib import Path
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx

from regressions.bisection import minimize


def test_minimize_keeps_only_the_op_that_carries_the_regression():
    def program(x, w, v):
        hidden = torch.relu(x @ w)
        return torch.exp(hidden) @ v

    inputs = (torch.randn(8, 16), torch.randn(16, 16), torch.randn(16, 4))
    graph = make_fx(program)(*inputs)  # ATen ops with shapes, as AOTAutograd hands them over
    candidate = minimize.from_graph(graph, inputs)

    def ratio(source):  # "the regression" lives in exp: present iff exp is computed
        return 2.0 if "exp" in source.split("def make_inputs")[0] else 1.0

    result = minimize.minimize(candidate, ratio, 1.5)
    assert result.ops_after == 1 and "exp" in result.source
    namespace: dict[str, Any] = {}
    exec(result.source, namespace)
    assert namespace["program"](*namespace["make_inputs"]())[0].shape == (8, 16)


def test_the_catalogues_own_program_is_a_standalone_module():
    """For a compiler whose programs are not ATen graphs (torch-spyre), the report's program
    is the benchmark's own, pasted from the catalogue (which imports only torch)."""
    from benchmarks import workloads

    text = minimize.catalogue_source(Path(workloads.__file__).read_text(), "mlp", 8, 64)
    namespace: dict[str, Any] = {}
    exec(compile(text, "<program>", "exec"), namespace)  # noqa: S102 (this test's own text)
    expected, inputs = workloads.build("mlp", 8, 64)
    assert type(namespace["program"]).__name__ == type(expected).__name__
    assert [x.shape for x in namespace["make_inputs"]()] == [x.shape for x in inputs]
    assert text.startswith("# The benchmark's own program: mlp at seq 8")


def test_a_catalogue_program_with_dataclasses_runs_embedded_in_a_reproducer():
    """torch-spyre's catalogue defines a dataclass under `from __future__ import annotations`:
    executed from a string, it needs a module of its own that `sys.modules` knows."""
    from reports.reproducer import program_section

    catalogue = Path(__file__).resolve().parents[1] / "suites" / "torch_spyre" / "benchmarks"
    text = minimize.catalogue_source((catalogue / "workloads.py").read_text(), "mlp", 128,
                                     None)
    section = program_section(text)
    assert "PROGRAM_SOURCE" in section  # executed from a string, not pasted
    namespace: dict[str, Any] = {}
    exec(compile(section, "<section>", "exec"), namespace)  # noqa: S102 (the section under test)
    assert [x.shape for x in namespace["make_inputs"]()][0][-1] > 0
