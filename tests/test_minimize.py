"""Minimization as a pure function, on a hand-made program and an injected predicate."""

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
