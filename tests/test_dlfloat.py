"""DLFloat16 (SEN169_FP16): the format bit for bit, and where the device stores in it.

The table below is worked out by hand from the format's definition (value = (-1)^s *
2^(e-31) * (1 + m/512); e = 0, m = 0 is zero; e = 63, m = 511 is the single NaN/inf code;
round to nearest, ties to even); `reference_code` is a second, independent implementation in
exact rational arithmetic that random values are checked against.
"""

import math
import warnings
from fractions import Fraction

import pytest
import torch

import spyre_sim
from spyre_sim import dlfloat
from spyre_sim.dlfloat import decode, encode, round_dlfloat16

NAN = float("nan")
TWO_32 = 2.0 ** 32
FP32_ULP_AT_2_32 = 2.0 ** 9  # fp32 has 23 fraction bits: spacing 2^(32-23) at 2^32
TIE_AT_MAX = TWO_32 * (1 + 510.5 / 512)  # halfway between the largest finite and NINF

# (fp32 input, DLFloat16 code, value read back)
TABLE = [
    (1.0, 0x3E00, 1.0),                                     # e = 31, m = 0
    (-2.0, 0xC000, -2.0),                                   # s = 1, e = 32
    (3.0, 0x4100, 3.0),                                     # e = 32, m = 256
    (dlfloat.MAX, 0x7FFE, 8573157376.0),                    # largest finite: e = 63, m = 510
    (TIE_AT_MAX - FP32_ULP_AT_2_32, 0x7FFE, dlfloat.MAX),   # just below overflow
    (TIE_AT_MAX, 0x7FFE, dlfloat.MAX),                      # the tie goes to even m = 510
    (TIE_AT_MAX + FP32_ULP_AT_2_32, 0x7FFF, NAN),           # just above: NINF
    (-(TIE_AT_MAX + FP32_ULP_AT_2_32), 0xFFFF, NAN),        # negative overflow: NINF too
    (2.0 ** 33, 0x7FFF, NAN),                               # e would be 64
    (float("inf"), 0x7FFF, NAN),                            # infinity has no code of its own
    (float("-inf"), 0xFFFF, NAN),
    (NAN, 0x7FFF, NAN),
    (2.0 ** -31 * (1 + 2.0 ** -9), 0x0001, 2.0 ** -31 * (1 + 2.0 ** -9)),  # smallest positive
    (2.0 ** -31 * (1 + 3 * 2.0 ** -11), 0x0001, 2.0 ** -31 * (1 + 2.0 ** -9)),  # rounds up
    (2.0 ** -31 * (1 + 2.0 ** -10), 0x0000, 0.0),           # tie between zero's code and 0x0001
    (2.0 ** -31, 0x0000, 0.0),                              # e = 0, m = 0 is zero: flushed
    (2.0 ** -40, 0x0000, 0.0),                              # below the range: flushed
    (-(2.0 ** -40), 0x8000, -0.0),                          # flushed, keeping the sign
    (-0.0, 0x8000, -0.0),
    (0.0, 0x0000, 0.0),
    (1 + 2.0 ** -10, 0x3E00, 1.0),                          # tie: down to the even m = 0
    (1 + 3 * 2.0 ** -10, 0x3E02, 1 + 2 * 2.0 ** -9),        # tie: up to the even m = 2
    (1 + 2.0 ** -10 + 2.0 ** -20, 0x3E01, 1 + 2.0 ** -9),   # above the tie: up
    (-2.001953125, 0xC000, -2.0),                           # torch-spyre PR #1771's fp16 tie
    (65504.0, 0x5E00, 65536.0),                             # fp16's max: a tie, carries to 2^16
    (1e5, 0x5F0D, 99968.0),                                 # m = round(0.52587890625 * 512)
]


def _same(a: float, b: float) -> bool:
    if math.isnan(b):
        return math.isnan(a)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@pytest.mark.parametrize("value, code, read_back", TABLE)
def test_encoding_and_rounding_match_the_hand_checked_table(value, code, read_back):
    x = torch.tensor([value], dtype=torch.float32)
    assert int(encode(x)[0]) == code
    assert _same(float(decode(torch.tensor([code]))[0]), read_back)
    assert _same(float(round_dlfloat16(x)[0]), read_back)


def reference_code(value: float) -> int:
    """DLFloat16 code of an fp32 value, in exact arithmetic (independent of spyre_sim)."""
    sign = 0x8000 if math.copysign(1.0, value) < 0 else 0
    if math.isnan(value) or math.isinf(value):
        return sign | 0x7FFF
    magnitude = Fraction(abs(value))
    if magnitude == 0:
        return sign
    exponent = math.frexp(abs(value))[1] - 1  # magnitude in [2^exponent, 2^(exponent+1))
    significand = round(magnitude / Fraction(2) ** exponent * 512)  # round half to even
    if significand == 1024:
        significand, exponent = 512, exponent + 1
    biased = exponent + 31
    if biased < 0 or (biased == 0 and significand == 512):
        return sign  # flushed to zero
    if biased > 63 or (biased == 63 and significand == 1023):
        return sign | 0x7FFF
    return sign | biased << 9 | (significand - 512)


def test_random_values_in_every_binade_match_exact_arithmetic():
    generator = torch.Generator().manual_seed(0)
    exponents = torch.randint(-45, 36, (20000,), generator=generator).float()
    values = torch.randn(20000, generator=generator).sign() * \
        (1 + torch.rand(20000, generator=generator)) * 2.0 ** exponents
    codes = encode(values)
    for value, code in zip(values.tolist(), codes.tolist(), strict=True):
        assert code == reference_code(value), (value, hex(code))
    assert torch.equal(round_dlfloat16(values).isnan(), decode(codes).isnan())
    finite = ~decode(codes).isnan()
    assert torch.equal(round_dlfloat16(values)[finite], decode(codes)[finite])


def test_the_eager_baseline_rounding_keeps_infinities():
    x = torch.tensor([float("-inf"), 1e10, -1e10, float("nan"), 1 + 2.0 ** -10])
    out = round_dlfloat16(x, keep_infinities=True)
    assert out[:3].tolist() == [float("-inf"), float("inf"), float("-inf")]
    assert out[3].isnan() and out[4] == 1.0


# --- the device stores in DLFloat16 -----------------------------------------------------------

def test_rms_norm_of_activations_near_1e3_matches_float64():
    """x^2 ~ 1e6 overflows IEEE fp16 (all-zero output) but not DLFloat16."""
    x = torch.randn(8, 1024, generator=torch.Generator().manual_seed(0)) * 1e3
    weight = torch.ones(1024)

    def rms_norm(t, w):
        return torch.nn.functional.rms_norm(t, (1024,), w, 1e-6)

    program = spyre_sim.compile(rms_norm, (x, weight))
    with warnings.catch_warnings():
        warnings.simplefilter("error", spyre_sim.NonFiniteWarning)
        result = program.run(x, weight)
    reference = program.reference(x, weight)[0].double()
    assert result.nonfinite is None
    # a handful of DLFloat16 roundings (x, x^2, the mean, rsqrt, the products): 8u relative
    error = (result.outputs[0].double() - reference).abs()
    assert bool((error <= 8 * dlfloat.UNIT_ROUNDOFF * reference.abs() + 1e-6).all())
    assert not program.reference(x, weight, dtype=torch.float16)[0].any()  # fp16: all zeros


def test_results_and_inputs_are_stored_in_dlfloat16():
    x = torch.randn(4, 200, generator=torch.Generator().manual_seed(1))
    program = spyre_sim.compile(lambda t: (t * 3.0).exp(), (x,))
    out = program.run(x).outputs[0]
    expected = round_dlfloat16(torch.exp(round_dlfloat16(round_dlfloat16(x) * 3.0)))
    assert torch.equal(out, expected)


def test_the_eager_dlfloat16_baseline_rounds_every_op():
    x = torch.randn(64, generator=torch.Generator().manual_seed(2))
    program = spyre_sim.compile(lambda t: t * 3.0 + 1.0, (x,))
    (baseline,) = program.reference(x, dtype=spyre_sim.dlfloat16)
    expected = round_dlfloat16(round_dlfloat16(round_dlfloat16(x) * 3.0) + 1.0)
    assert torch.equal(baseline, expected)
    (fp16,) = program.reference(x, dtype=torch.float16)
    assert not torch.equal(fp16, baseline)  # IEEE fp16 keeps one more fraction bit


def test_causal_attention_masks_with_a_finite_value():
    """-inf has no DLFloat16 code (it reads back as NaN): the mask must be finite."""
    q = torch.randn(1, 2, 8, 16, generator=torch.Generator().manual_seed(3))

    def attend(t):
        return torch.nn.functional.scaled_dot_product_attention(t, t, t, is_causal=True)

    program = spyre_sim.compile(attend, (q,))
    result = program.run(q)
    assert result.nonfinite is None and bool(torch.isfinite(result.outputs[0]).all())
    torch.testing.assert_close(result.outputs[0], attend(q), atol=1e-2, rtol=1e-2)


# --- fp32 where the program asks for it and Spyre allows it -----------------------------------

def _llama_rms_norm(x, weight):
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
    return weight * h.to(x.dtype)


def test_a_widened_fp16_program_runs_its_spyre_fp32_ops_in_ieee_fp32():
    x = (torch.randn(4, 256, generator=torch.Generator().manual_seed(4)) * 300).half()
    weight = torch.ones(256, dtype=torch.float16)
    config = spyre_sim.Config(reduction_accumulation="fp16")
    program = spyre_sim.compile(_llama_rms_norm, (x, weight), config)
    kernels = [line for line in program.artifacts["kernel"].splitlines()
               if line.startswith("  kernel ")]
    fp32 = [k for k in kernels if "format=IEEE_FP32" in k]
    assert fp32 and all("acc=fp32" in k for k in fp32)  # fp32 kernels keep fp32 sums
    assert any("format=SEN169_FP16" in k for k in kernels)
    result = program.run(x, weight)
    reference = program.reference(x, weight)[0].double()
    assert result.outputs[0].dtype == torch.float16 and result.nonfinite is None
    assert float((result.outputs[0].double() - reference).abs().max()) < 2e-2


def test_an_op_outside_spyre_fp32_ops_refuses_fp32_operands():
    x = torch.randn(4, 64).half()
    with pytest.raises(spyre_sim.SpyreCompileError, match=r"tanh.*SPYRE_FP32_OPS"):
        spyre_sim.compile(lambda t: torch.tanh(t.float()), (x,))


# --- non-finite values never pass silently ----------------------------------------------------

def _squares(t):
    return (t * t).sum(-1)


def test_an_overflow_warns_and_names_the_kernel_op_and_stage():
    x = torch.full((4, 64), 1e6)  # squares to 1e12 > 8.57e9
    program = spyre_sim.compile(_squares, (x,))
    with pytest.warns(spyre_sim.NonFiniteWarning, match="kernel k0_mul") as caught:
        result = program.run(x)
    assert result.nonfinite == spyre_sim.NonFinite("k0_mul", "runtime", "mul", 0)
    warned = caught[0].message
    assert isinstance(warned, spyre_sim.NonFiniteWarning) and warned.location == result.nonfinite
    with pytest.warns(spyre_sim.NonFiniteWarning) as caught:
        program.run_stage("lower", x)
    warned = caught[0].message
    assert isinstance(warned, spyre_sim.NonFiniteWarning) and warned.location.stage == "lower"


def test_a_clean_run_and_already_nonfinite_inputs_note_nothing():
    x = torch.randn(4, 64)
    program = spyre_sim.compile(_squares, (x,))
    with warnings.catch_warnings():
        warnings.simplefilter("error", spyre_sim.NonFiniteWarning)
        assert program.run(x).nonfinite is None
        x[0, 0] = float("inf")
        assert program.run(x).nonfinite is None  # the inputs held inf already


def test_conversions_at_the_host_boundary_are_noted():
    big = torch.full((2, 64), 1e10)  # beyond DLFloat16 on the way in
    program = spyre_sim.compile(lambda t: t + 1.0, (big,))
    with pytest.warns(spyre_sim.NonFiniteWarning):
        assert program.run(big).nonfinite.kernel == "h2d %arg0_1"
    half = torch.full((2, 64), 300.0, dtype=torch.float16)  # 9e4 fits DLFloat16, not fp16
    program = spyre_sim.compile(lambda t: t * t, (half,))
    with pytest.warns(spyre_sim.NonFiniteWarning):
        assert program.run(half).nonfinite.op == "to_host"


def test_torch_compile_warns_too():
    x = torch.full((4, 64), 1e6)
    compiled = torch.compile(_squares, backend="spyre")
    with pytest.warns(spyre_sim.NonFiniteWarning, match="kernel k0_mul"):
        compiled(x)
    torch._dynamo.reset()


def test_a_constant_beyond_dlfloat16_is_refused_at_compile_time():
    """Stored as the NaN/inf code, no run could tell it had been finite: refuse it."""
    x = torch.randn(4, 2)
    with pytest.raises(spyre_sim.SpyreCompileError, match="sdsc: constant .* do not fit"):
        spyre_sim.compile(lambda t: t * torch.tensor([1e10, 1.0]), (x,))
