"""Every device op against float64, at sizes 1, 127, 128 and 4096.

Inputs are DLFloat16-representable, so the only error left is the device's DLFloat16 storage:
one rounding of each result (half a DLFloat16 ulp, 2^-10 relative), plus fp32 compute error.
"""

import pytest
import torch

import spyre_sim
from spyre_sim.dlfloat import round_dlfloat16

SIZES = (1, 127, 128, 4096)
RTOL = 2.0 ** -9  # one DLFloat16 ulp (relative): results are rounded once to DLFloat16


def dl16_values(*shape, positive=False, seed=0):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape, generator=generator)
    x = x.abs() + 0.5 if positive else x
    return round_dlfloat16(x)


UNARY = {
    "abs": torch.abs, "neg": torch.neg, "exp": torch.exp, "relu": torch.relu,
    "gelu": torch.nn.functional.gelu, "silu": torch.nn.functional.silu,
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "floor": torch.floor,
    "clamp": lambda x: torch.clamp(x, -0.5, 0.5), "pow": lambda x: x ** 3,
    "square": lambda x: x * x, "scalar_ops": lambda x: (x + 1.5) * 0.25 - 2.0,
}
POSITIVE = {"log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt,
            "reciprocal": torch.reciprocal}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "maximum": torch.maximum,
    "minimum": torch.minimum, "where": lambda x, y: torch.where(x > y, x, y),
}
DIVIDE = {"div": torch.div}
COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
           "ge": torch.ge}
REDUCE = {"sum": lambda x: x.sum(-1), "mean": lambda x: x.mean(-1), "amax": lambda x: x.amax(-1),
          "amin": lambda x: x.amin(-1), "softmax": lambda x: torch.softmax(x, -1),
          "sum_keepdim": lambda x: x.sum(-1, keepdim=True), "max_all": lambda x: x.max()}


def program_of(table):
    def run(*args):
        return tuple(fn(*args) for fn in table.values())
    return run


def check(table, outputs, references, scale_by_max=False):
    failures = []
    for name, out, ref in zip(table, outputs, references, strict=True):
        ref = ref.double()
        tolerance = RTOL * (ref.abs().max() if scale_by_max else ref.abs()) + 1e-4
        if out.shape != ref.shape or not torch.all((out.double() - ref).abs() <= tolerance):
            failures.append((name, float((out.double() - ref).abs().max())))
    assert not failures, failures


@pytest.mark.parametrize("size", SIZES)
def test_pointwise_ops(size):
    x = dl16_values(2, size)
    y = dl16_values(2, size, seed=1)
    positive = dl16_values(2, size, positive=True)
    unary = spyre_sim.compile(program_of(UNARY), (x,)).run(x).outputs
    check(UNARY, unary, program_of(UNARY)(x.double()))
    for out in unary:  # stored on the device as DLFloat16
        assert torch.equal(out, round_dlfloat16(out))
    pos = spyre_sim.compile(program_of(POSITIVE), (positive,)).run(positive).outputs
    check(POSITIVE, pos, program_of(POSITIVE)(positive.double()))
    binary = spyre_sim.compile(program_of(BINARY), (x, y)).run(x, y).outputs
    check(BINARY, binary, program_of(BINARY)(x.double(), y.double()))
    div = spyre_sim.compile(program_of(DIVIDE), (x, positive)).run(x, positive).outputs
    check(DIVIDE, div, program_of(DIVIDE)(x.double(), positive.double()))


@pytest.mark.parametrize("size", SIZES)
def test_comparisons_are_exact(size):
    x = dl16_values(2, size)
    y = torch.where(torch.arange(size) % 3 == 0, x, dl16_values(2, size, seed=1))
    outputs = spyre_sim.compile(program_of(COMPARE), (x, y)).run(x, y).outputs
    for name, out in zip(COMPARE, outputs, strict=True):
        assert out.dtype == torch.bool and torch.equal(out, COMPARE[name](x, y)), name


@pytest.mark.parametrize("size", SIZES)
def test_reductions(size):
    x = dl16_values(3, size)
    outputs = spyre_sim.compile(program_of(REDUCE), (x,)).run(x).outputs
    check(REDUCE, outputs, program_of(REDUCE)(x.double()), scale_by_max=True)


@pytest.mark.parametrize("size", SIZES)
def test_matmuls(size):
    a, b = dl16_values(size, 64), dl16_values(64, 128, seed=1)  # M = size
    c, d = dl16_values(8, size, seed=2), dl16_values(size, 128, seed=3)  # K = size
    e, f = dl16_values(2, 5, size, seed=4), dl16_values(2, size, 7, seed=5)  # batched
    bias = dl16_values(128, seed=6)

    def run(a, b, c, d, e, f, bias):
        return a @ b, c @ d, torch.bmm(e, f), torch.addmm(bias, c, d), torch.cat([a, a], 0)

    inputs = (a, b, c, d, e, f, bias)
    outputs = spyre_sim.compile(run, inputs).run(*inputs).outputs
    references = run(*(t.double() for t in inputs))
    check(["mm_m", "mm_k", "bmm", "addmm", "cat"], outputs, references, scale_by_max=True)


def test_every_executable_stage_matches_the_runtime():
    x = dl16_values(16, 128)
    program = spyre_sim.compile(program_of({**UNARY, **REDUCE}), (x,))
    runtime = program.run(x).outputs
    for stage in spyre_sim.EXECUTABLE_STAGES:
        for expected, got in zip(runtime, program.run_stage(stage, x), strict=True):
            assert torch.equal(expected, got), stage


def test_16_bit_accumulation_is_emulated_and_worse():
    x = dl16_values(4, 4096, positive=True)
    exact = x.double().sum(-1)
    fp32 = spyre_sim.compile(lambda t: t.sum(-1), (x,)).run(x).outputs[0]
    fp16 = spyre_sim.compile(lambda t: t.sum(-1), (x,),
                             spyre_sim.Config(reduction_accumulation="fp16")).run(x).outputs[0]
    error32 = (fp32.double() - exact).abs().max()
    error16 = (fp16.double() - exact).abs().max()
    assert error32 <= RTOL * exact.abs().max()
    assert error16 > 2 * error32
