"""OpInfo conformance: torch's own sample inputs for every op spyre_sim claims, against float64.

Every claimed op (`spyre_sim.ops.CLAIMED_OPS`: the device ops of torch-spyre's eager list and
the CPU fallbacks) is matched to its entries in torch's `op_db`; `SAMPLES_PER_OP` of their
fp32 sample inputs (int64 for the integer-only bitwise ops; short lists are repeated with
fresh random values) are compiled with `spyre_sim.compile` and run. Each must end in one of:

- pass: the outputs match float64 within the tolerance below (on the device, or on the CPU
  after a `FallbackWarning`);
- refused: a `SpyreCompileError` or `SpyreRuntimeError` naming the op and the problem;
- flagged: the outputs differ, but the run reported where inf/NaN first appeared
  (`RunResult.nonfinite`, a `NonFiniteWarning`);

and never in a silent mismatch or a crash (any other exception from inside the compiler).

Tolerance (per output element j), derived from DLFloat16's precision and the op's
conditioning. Let u = 2^-10, DLFloat16's unit roundoff (round to nearest on 9 fraction bits),
x the fp32 inputs, x̂ = DLFloat16(x) what the device reads, f the op in float64, ref = f(x),
ref_q = f(x̂). The device's error splits into

    out - ref = [f(x̂) - f(x)] + (error of the rounding steps inside the device program)

The first term is the op's conditioning acting on the unavoidable input rounding; it is
computed exactly as |ref_q - ref|, with no condition number to estimate (this is where pow
with a large exponent, or sub with cancellation, get their slack). Each of the program's k
rounding steps (k = the number of device ops in the decomposed graph; each stores its result
in DLFloat16) adds at most u times the magnitude of its result as seen at the output. For the
claimed ops that magnitude is bounded by the output's componentwise condition scale
|ref_q| + (|J(x̂)| |x̂|) (Skeel's: J the Jacobian of f; the second term covers intermediates
larger than the output, as in cancellation or a layer norm's centring). Flush to zero below
2^-31 adds an absolute 2^-30 per step. So

    |out - ref| <= |ref_q - ref| + k * (u * (|ref_q| + |J(x̂)| |x̂|) + 2^-30)

Non-finite reference values must be non-finite on the device too (DLFloat16 has one NaN/inf
code, which reads back as NaN); integer and bool outputs must equal f(x) or f(x̂) exactly.

Run as a script for the summary table: `python tests/e2e/test_opinfo.py`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from unittest import mock

import pytest
import torch
from torch.utils import _pytree

import spyre_sim
from spyre_sim.dlfloat import UNIT_ROUNDOFF, round_dlfloat16
from spyre_sim.ops import CLAIMED_OPS, OPS

pytest.importorskip("expecttest")  # op_db imports it (and hypothesis): the test extra
from torch.testing._internal import common_utils  # noqa: E402
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.opinfo import core as opinfo_core  # noqa: E402
from torch.testing._internal.opinfo.core import (  # noqa: E402
    BinaryUfuncInfo,
    OpInfo,
    SampleInput,
    UnaryUfuncInfo,
)

ELEMENTWISE = (UnaryUfuncInfo, BinaryUfuncInfo)

SAMPLES_PER_OP = 6
FLUSH_FLOOR = 2.0 ** -30
# OpInfo variants outside what the claim covers: integer rounding modes of div have no Spyre
# kernel (refused, but not a claim), and complex-only variants have no fp32 samples.
SKIPPED_VARIANTS = {("div", "trunc_rounding"), ("div", "floor_rounding")}


def _claimed_name(op) -> str | None:
    """The claimed ATen op an op_db entry tests (None for masked./sparse./_refs variants)."""
    name = op.name.removeprefix("nn.functional.")
    return name if name in CLAIMED_OPS else None


def sample_dtype(op) -> torch.dtype | None:
    """fp32, or int64 for the integer-only claims (bitwise_or, bitwise_xor)."""
    supported = op.supported_dtypes("cpu")
    return next((d for d in (torch.float32, torch.int64) if d in supported), None)


def claimed_opinfos() -> list:
    """The op_db entries for the claimed ops (fp32 samples, or int64 for integer-only ops)."""
    return [op for op in op_db
            if _claimed_name(op) and (op.name, op.variant_test_name) not in SKIPPED_VARIANTS
            and sample_dtype(op) is not None]


def samples_of(op) -> list:
    """The first SAMPLES_PER_OP samples; short lists repeat with fresh random values."""
    samples: list = []
    with _no_test_lookup():
        for seed in range(SAMPLES_PER_OP):
            torch.manual_seed(seed)
            batch = list(op.sample_inputs("cpu", sample_dtype(op)))
            samples += batch[:SAMPLES_PER_OP - len(samples)]
            if len(samples) >= SAMPLES_PER_OP or not batch:
                return samples
    return samples


@contextlib.contextmanager
def _no_test_lookup():
    """torch's sample iterators look for the running unittest test by walking the whole stack
    (`extract_test_fn`: `inspect.stack()`, which reads the source of every frame). Here they
    run while pytest collects, where no unittest test is running and the walk finds none: its
    answer is always None, so it is given directly. Same samples, same seeds; the walk was
    two thirds of collecting the whole suite (8 s of 13)."""
    with mock.patch.object(opinfo_core, "extract_test_fn", lambda: None), \
            mock.patch.object(common_utils, "extract_test_fn", lambda: None):
        yield


def sample_id(op, index: int) -> str:
    variant = f".{op.variant_test_name}" if op.variant_test_name else ""
    return f"{op.name}{variant}[{index}]"


@dataclass
class Outcome:
    kind: str  # pass | fallback | refused | flagged | silent | crash | graph_break
    detail: str = ""


def _split(sample) -> tuple[list[torch.Tensor], Callable[..., Any]]:
    """The sample's tensors (graph inputs) and a function rebuilding (input, args, kwargs)."""
    leaves, spec = _pytree.tree_flatten((sample.input, sample.args, sample.kwargs))
    positions = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def rebuild(tensors):
        filled = list(leaves)
        for position, tensor in zip(positions, tensors, strict=True):
            filled[position] = tensor
        return _pytree.tree_unflatten(filled, spec)

    return [leaves[i] for i in positions], rebuild


def _call(op, rebuild, tensors):
    value, args, kwargs = rebuild(tensors)
    return op.op(value, *args, **kwargs)


def _float64(tensors, rounding=None):
    out = []
    for t in tensors:
        if t.is_floating_point():
            t = rounding(t) if rounding else t
            t = t.double()
        out.append(t)
    return out


def _leaves(value) -> list[torch.Tensor]:
    return [leaf for leaf in _pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def _condition_scale(op, rebuild, tensors) -> list[torch.Tensor | None]:
    """|J(x̂)| |x̂| per floating output (None where the output is not differentiable).

    Elementwise ops (OpInfo's ufuncs) have a diagonal Jacobian per input, so one forward-mode
    product per input gives it exactly; other ops build the Jacobian (their samples are small).
    """
    inputs = _float64(tensors, round_dlfloat16)
    floating = [i for i, t in enumerate(inputs) if t.is_floating_point() and t.numel()]
    outputs = _leaves(_call(op, rebuild, inputs))

    scales = [torch.zeros(o.shape, dtype=torch.float64) if o.is_floating_point() and o.numel()
              and floating else None for o in outputs]
    differentiable = [i for i, scale in enumerate(scales) if scale is not None]
    if not differentiable:
        return scales

    def f(*diff):
        full = list(inputs)
        for position, tensor in zip(floating, diff, strict=True):
            full[position] = tensor
        results = _leaves(_call(op, rebuild, full))
        return tuple(results[i] for i in differentiable)

    primals = tuple(inputs[i] for i in floating)
    try:
        _accumulate_scales(f, primals, [scales[i] for i in differentiable],
                           isinstance(op, ELEMENTWISE))
    except (RuntimeError, NotImplementedError):  # no derivative (scatter's reduce=, ...)
        return [None] * len(scales)
    return scales


def _accumulate_scales(f, primals: tuple, scales: list, elementwise: bool) -> None:
    """Add |J_k| |x_k| over the inputs k into `scales` (one per output of f)."""
    if elementwise:
        for k in range(len(primals)):
            tangents = tuple(p.abs() if j == k else torch.zeros_like(p)
                             for j, p in enumerate(primals))
            products = torch.func.jvp(f, primals, tangents)[1]  # (outputs, their jvp)
            for scale, product in zip(scales, products, strict=True):
                scale += product.abs()
        return
    jacobians = torch.autograd.functional.jacobian(f, primals, vectorize=True)
    for index, scale in enumerate(scales):
        flat = scale.view(-1)
        for primal, block in zip(primals, jacobians[index], strict=True):
            flat += block.reshape(scale.numel(), -1).abs() @ primal.abs().flatten()


def _device_steps(program) -> int:
    return sum(1 for graph in program.graphs for node in graph.artifacts["decompose"].nodes
               if node.op not in ("view", "permute", "expand", "slice"))


def _compare(out, ref, ref_q, scale, steps) -> str | None:
    """None when `out` matches; otherwise what differs."""
    if out.shape != ref.shape:
        return f"shape {tuple(out.shape)} != {tuple(ref.shape)}"
    if not ref.is_floating_point():
        return None if torch.equal(out, ref) or torch.equal(out, ref_q) else "values differ"
    out = out.double()
    finite = torch.isfinite(ref)
    if not torch.equal(~finite, ~torch.isfinite(out)):
        return "inf/NaN where float64 has none (or the reverse)"
    tolerance = (ref_q - ref).abs() + steps * (
        UNIT_ROUNDOFF * (ref_q.abs() + (scale if scale is not None else 0)) + FLUSH_FLOOR)
    excess = ((out - ref).abs() - tolerance)[finite & torch.isfinite(tolerance)]
    if excess.numel() and float(excess.max()) > 0:
        worst = int(excess.argmax())
        return f"error exceeds tolerance by {float(excess.max()):.3g} at element {worst}"
    return None


def run_sample(op, sample) -> Outcome:
    tensors, rebuild = _split(sample)
    try:
        program = spyre_sim.compile(lambda *ts: _call(op, rebuild, ts), tensors)
    except (spyre_sim.SpyreCompileError, spyre_sim.SpyreConfigError) as error:
        return Outcome("refused", str(error))
    except Exception as error:  # noqa: BLE001 - a crash is what this suite looks for
        return Outcome("crash", f"{type(error).__name__}: {error}")
    if program.dynamo.graph_breaks or not program.graphs:
        return Outcome("graph_break", "; ".join(program.dynamo.graph_breaks) or "no graph")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", spyre_sim.NonFiniteWarning)
            result = program.run(*tensors)
    except spyre_sim.SpyreRuntimeError as error:
        return Outcome("refused", str(error))
    except Exception as error:  # noqa: BLE001
        return Outcome("crash", f"{type(error).__name__}: {error}")
    refs = _leaves(_call(op, rebuild, _float64(tensors)))
    refs_q = _leaves(_call(op, rebuild, _float64(tensors, round_dlfloat16)))
    scales = _condition_scale(op, rebuild, tensors)
    steps = max(_device_steps(program), 1)
    outs = list(result.outputs)
    problem: str | None
    if len(outs) != len(refs):
        problem = f"{len(outs)} outputs, float64 has {len(refs)}"
    else:
        problems = [_compare(o, r, q, s, steps=steps)
                    for o, r, q, s in zip(outs, refs, refs_q, scales, strict=True)]
        problem = next((p for p in problems if p), None)
    fallback = any(n.placement == "cpu" for g in program.graphs
                   for n in g.artifacts["decompose"].nodes)
    if problem is None:
        return Outcome("fallback" if fallback else "pass")
    if result.nonfinite is not None:
        return Outcome("flagged", f"{problem}; {result.nonfinite.describe()}")
    return Outcome("silent", problem)


def all_cases() -> list[tuple[str, OpInfo, SampleInput]]:
    return [(sample_id(op, i), op, s) for op in claimed_opinfos()
            for i, s in enumerate(samples_of(op))]


CASES = all_cases()


@pytest.mark.slow
@pytest.mark.parametrize("name,op,sample", CASES, ids=[c[0] for c in CASES])
def test_opinfo_sample(name, op, sample):
    outcome = run_sample(op, sample)
    assert outcome.kind not in ("silent", "crash", "graph_break"), outcome.detail


def test_every_claimed_op_has_six_samples():
    per_entry = collections.Counter((op.name, op.variant_test_name) for _, op, _ in CASES)
    covered = {_claimed_name(op) for _, op, _ in CASES}
    assert set(CLAIMED_OPS) <= covered, sorted(set(CLAIMED_OPS) - covered)
    assert min(per_entry.values()) >= SAMPLES_PER_OP, per_entry


def _opinfo(name: str, variant: str = ""):
    return next(op for op in op_db if op.name == name and op.variant_test_name == variant)


def test_the_tolerance_rejects_wrong_answers_and_accepts_dlfloat16_rounding():
    op = _opinfo("nn.functional.rms_norm")
    sample = samples_of(op)[1]
    tensors, rebuild = _split(sample)
    ref = _leaves(_call(op, rebuild, _float64(tensors)))[0]
    ref_q = _leaves(_call(op, rebuild, _float64(tensors, round_dlfloat16)))[0]
    (scale,) = _condition_scale(op, rebuild, tensors)
    steps = 6  # rms_norm's decomposition: mul, mean, add, rsqrt, mul, mul
    assert _compare(round_dlfloat16(ref), ref, ref_q, scale, steps=steps) is None
    assert _compare(torch.zeros_like(ref), ref, ref_q, scale, steps=steps) is not None
    assert _compare(ref * 1.05, ref, ref_q, scale, steps=steps) is not None


def test_a_wrong_kernel_is_a_silent_mismatch(monkeypatch):
    op = _opinfo("rsqrt")
    monkeypatch.setitem(OPS, "rsqrt", dataclasses.replace(
        OPS["rsqrt"], compute=lambda x, **_: torch.sqrt(x)))
    assert run_sample(op, samples_of(op)[0]).kind == "silent"


def test_an_overflowing_power_is_flagged_not_silent():
    op = _opinfo("pow")
    sample = SampleInput(torch.full((4, 8), 9.0), args=(40.0,))  # 9^40 = 1.5e38
    outcome = run_sample(op, sample)
    assert outcome.kind == "flagged" and "op pow" in outcome.detail


def main() -> int:
    start = time.perf_counter()
    counts: collections.Counter = collections.Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, op, sample in CASES:
            outcome = run_sample(op, sample)
            counts[outcome.kind] += 1
            if outcome.kind not in ("pass", "fallback"):
                print(f"{outcome.kind:11} {name}: {outcome.detail[:160]}")
    total = sum(counts.values())
    print(f"{total} samples over {len({op.name for _, op, _ in CASES})} OpInfo entries in "
          f"{time.perf_counter() - start:.1f} s: " + ", ".join(
              f"{kind} {counts[kind]}" for kind in
              ("pass", "fallback", "refused", "flagged", "silent", "crash", "graph_break")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
