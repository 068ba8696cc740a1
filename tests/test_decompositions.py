"""Decompositions on the OpInfo shapes that used to crash the compiler (issue 14).

Each runs through `spyre_sim.compile` and must match eager within DLFloat16 rounding: tensor
clamp bounds, 0-dim reductions, zero-size tensors, torch.cat's skipped 1-D empties, and CPU
fallbacks with several outputs, bool masks, dtype arguments or string literals.
"""

import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import spyre_sim
from spyre_sim.dlfloat import round_dlfloat16


def _compiled(fn, *inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", spyre_sim.FallbackWarning)
        program = spyre_sim.compile(fn, inputs)
        result = program.run(*inputs)
    assert result.nonfinite is None
    return program, result.outputs


def _close(outputs, expected):
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(outputs) == len(expected)
    for out, ref in zip(outputs, expected, strict=True):
        assert out.shape == ref.shape and out.dtype == ref.dtype
        if ref.is_floating_point():
            torch.testing.assert_close(out, ref, atol=1e-6, rtol=2.0 ** -8)
        else:
            assert torch.equal(out, ref)


def values(*shape, seed=0):
    return round_dlfloat16(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)))


def test_clamp_with_tensor_bounds_is_maximum_then_minimum():
    x, low, high = values(5, 10), values(5, 10, seed=1) - 0.5, values(10, seed=2) + 0.5
    program, outputs = _compiled(torch.clamp, x, low, high)
    _close(outputs, torch.clamp(x, low, high))
    ops = [n.op for n in program.graphs[0].artifacts["decompose"].nodes]
    assert ops == ["maximum", "minimum"]
    _, outputs = _compiled(lambda t, hi: torch.clamp(t, max=hi), x, high)
    _close(outputs, torch.clamp(x, max=high))


@pytest.mark.parametrize("reduce", [
    lambda t: t.sum(0), lambda t: t.mean(-1, keepdim=True), lambda t: t.amax(0),
    lambda t: t.amin(), lambda t: t.max(), lambda t: t.max(0), lambda t: t.min(-1, True),
])
def test_reductions_of_a_0_dim_tensor(reduce):
    x = values(())
    _, outputs = _compiled(reduce, x)
    _close(outputs, tuple(o for o in (reduce(x) if isinstance(reduce(x), tuple)
                                      else (reduce(x),))))


def test_zero_size_tensors_compile_and_run():
    _, outputs = _compiled(lambda a, b: (a @ b, torch.exp(a).sum(-1)), values(0, 5),
                           values(5, 10))
    assert [tuple(o.shape) for o in outputs] == [(0, 10), (0,)]


def test_cat_skips_1d_empty_tensors_like_torch():
    empty, x = values(0), values(5, 5)
    _, outputs = _compiled(lambda a, b: torch.cat([a, b, b], 1), empty, x)
    _close(outputs, torch.cat([empty, x, x], 1))


def test_fallbacks_with_two_outputs_bool_masks_dtypes_and_string_literals():
    x, index = values(10, 5), torch.randint(0, 10, (5, 5), generator=torch.Generator())
    mask = x > 0
    cases: list[tuple[Callable[..., Any], tuple[torch.Tensor, ...]]] = [
        (lambda t: torch.topk(t, 3), (x,)),
        (lambda t, m: t.masked_fill(m, 2.0), (x, mask)),
        (lambda t: torch.cumsum(t, 0, dtype=torch.float32), (x,)),
        (lambda t, i, s: t.scatter(0, i, s, reduce="add"), (x, index, values(5, 5, seed=3))),
    ]
    for fn, inputs in cases:
        _, outputs = _compiled(fn, *inputs)
        expected = fn(*inputs)
        expected = tuple(expected) if isinstance(expected, tuple) else (expected,)
        expected = tuple(round_dlfloat16(e) if e.is_floating_point() else e for e in expected)
        _close(outputs, expected)
