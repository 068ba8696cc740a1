"""DLFloat16 (SEN169_FP16): Spyre's 16-bit floating-point format, emulated on fp32 tensors.

The format (Agrawal et al., "DLFloat: A 16-b Floating Point Format Designed for Deep Learning
Training and Inference", ARITH 2019; the same 1/6/9 "NNP-data-type-1" that IBM's zDNN and
onnx-mlir's NNPA support convert to):

    value = (-1)^s * 2^(e - 31) * (1 + m / 512),   s: 1 bit, e: 6 bits (bias 31), m: 9 bits

Edge cases, decided from public reference implementations:

- Zero is e = 0, m = 0 (either sign); e = 0 with m != 0 is an ordinary normal number
  (onnx/onnx-mlir src/Accelerators/NNPA/Support/Stickify/DLF16Conversion.hpp, NNP1::is_zero
  and NNP1::convert, which encodes every biased exponent >= 0). So the smallest positive value
  is 2^-31 * (1 + 2^-9); there are no subnormals, and anything that rounds to 2^-31 or below
  is flushed to a zero of the same sign (NNP1::convert keeps the sign bit and nothing else).
- e = 63, m = 511 (0x7FFF / 0xFFFF) is the single "NINF" code for both NaN and infinity; it
  reads back as NaN (NNP1::convert returns NAN for it). Largest finite: e = 63, m = 510
  (0x7FFE) = (1 + 510/512) * 2^32 = 8573157376 (zDNN zdnn/zdnn_private.h DLFLOAT16_MAX).
- Overflow gives NINF, not saturation: NNP1::convert encodes NINF above its NNP1_NMAX bound
  and reports VIC_OVERFLOW. zDNN's saturating transform is an opt-in software pre-pass
  (zdnn/convert.h saturate_fp32_to_dlf16 vs skip_saturate_fp32_to_dlf16), not the format.
  Infinite and NaN inputs also become NINF. torch-spyre hit the same rule when its constant
  encoder turned -inf masks into NaN (torch-spyre/torch-spyre PR #4234).
- Rounding is to nearest, ties to even, on the 9 fraction bits. onnx-mlir's software
  converter adds half an ulp and truncates (ties away from zero) and the ARITH paper's FMA is
  described as round-nearest-up; the two differ only on exact ties. On the card, an fp16
  tie went down (torch-spyre/torch-spyre PR #1771: -2.002 = -2 * (1 + 2^-10) read back as
  -2.0, not -2.0039), which ties-away would not give; ties to even does.

Values stay fp32 tensors holding DLFloat16-representable numbers (1 + 9 significant bits fit
fp32's 24 exactly), so the emulation is a rounding, done with integer ops on the fp32 bits.
"""

from __future__ import annotations

import numpy as np
import torch

EXPONENT_BIAS = 31
FRACTION_BITS = 9
UNIT_ROUNDOFF = 2.0 ** -(FRACTION_BITS + 1)  # half an ulp, relative: the rounding error bound
MAX = (1 + 510 / 512) * 2.0 ** 32  # 8573157376.0, zDNN DLFLOAT16_MAX
MIN_POSITIVE = 2.0 ** -31 * (1 + 2.0 ** -9)  # code 0x0001: e = 0 is normal, m = 0 is zero
NINF_CODE = 0x7FFF  # e = 63, m = 511: NaN and infinity share it

_FP32_FRACTION_BITS = 23
_DROPPED = _FP32_FRACTION_BITS - FRACTION_BITS  # 14 fp32 fraction bits rounded away
_HALF_ULP_MINUS_ONE = (1 << (_DROPPED - 1)) - 1
_KEEP_MASK = -(1 << _DROPPED)  # clears the dropped bits (two's complement int32)
_SIGN_BIT = -(1 << 31)
_MAGNITUDE = 0x7FFFFFFF
# fp32 bit patterns: 2^-31 (exponent 0, fraction 0 = zero) and the midpoint between the largest
# finite value (0x4FFF8000) and the NINF code's value; a tie there rounds to the even fraction
# 510, so only magnitudes strictly above it overflow.
_FLUSH_BITS = (127 - EXPONENT_BIAS) << _FP32_FRACTION_BITS  # 0x30000000
_OVERFLOW_BITS = 0x4FFFA000
_NAN_BITS = 0x7FC00000
_FLUSH_TIE = np.float32(2.0 ** -31 * (1 + 2.0 ** -10))  # rounds to even: 2^-31, i.e. zero
_OVERFLOW_VALUE = np.float32((1 + 510.5 / 512) * 2.0 ** 32)  # the midpoint above, exact


def _rounded_bits(bits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(rounded magnitude bits, sign bits, magnitude bits) of fp32 bit patterns: ties to even."""
    magnitude = bits & _MAGNITUDE
    rounded = (magnitude >> _DROPPED) & 1  # the kept lsb decides ties
    rounded += _HALF_ULP_MINUS_ONE
    rounded += magnitude
    rounded &= _KEEP_MASK
    return rounded, bits & _SIGN_BIT, magnitude


def round_dlfloat16(x: torch.Tensor, keep_infinities: bool = False) -> torch.Tensor:
    """`x` stored as DLFloat16 and read back as fp32: NINF (overflow, inf, NaN) reads as NaN.

    `keep_infinities=True` is for eager baselines that model rounding error only: finite
    overflow becomes a signed infinity and infinities and NaNs pass through unchanged.
    """
    return round_and_check(x, keep_infinities)[0]


def round_and_check(x: torch.Tensor,
                    keep_infinities: bool = False) -> tuple[torch.Tensor, bool]:
    """`round_dlfloat16(x)` and whether the result is all finite (known for free here).

    This runs after every device op, so it is a dozen single-threaded numpy passes on the
    fp32 bits (torch would split each pass over its thread pool, and on a busy machine every
    split waits for a time slice): the raw bits are rounded, sign included (the add carries
    into the sign bit only for NaN payloads, which the range test below replaces), then
    flushes and overflows are written over them.
    """
    source = x.detach().to(torch.float32).contiguous().numpy().reshape(-1)
    bits = source.view(np.int32)
    rounded = np.right_shift(bits, _DROPPED)
    np.bitwise_and(rounded, 1, out=rounded)  # the kept lsb decides ties
    rounded += bits
    rounded += _HALF_ULP_MINUS_ONE
    np.bitwise_and(rounded, _KEEP_MASK, out=rounded)
    out = rounded.view(np.float32)
    magnitude = np.abs(source)
    mask = magnitude <= _FLUSH_TIE  # rounds to 2^-31 or below (zeros included)
    if mask.any():  # a zero of the same sign
        np.putmask(out, mask, 0.0)
        np.copysign(out, source, out=out)
    np.less_equal(magnitude, _OVERFLOW_VALUE, out=mask)
    np.logical_not(mask, out=mask)  # beyond the largest finite value, inf or NaN
    finite = not mask.any()
    if not finite:
        np.putmask(out, mask, np.where(np.isfinite(source), np.copysign(np.inf, source),
                                       source) if keep_infinities else np.nan)
    return torch.from_numpy(out).reshape(x.shape), finite


def encode(x: torch.Tensor) -> torch.Tensor:
    """DLFloat16 codes (0..0xFFFF, as int32) of the values of `x`, rounded to nearest even."""
    rounded, sign, magnitude = _rounded_bits(x.to(torch.float32).view(torch.int32))
    exponent = (rounded >> _FP32_FRACTION_BITS) - (127 - EXPONENT_BIAS)
    fraction = (rounded >> _DROPPED) & ((1 << FRACTION_BITS) - 1)
    code = (exponent << FRACTION_BITS) | fraction
    code = torch.where(rounded <= _FLUSH_BITS, 0, code)
    code = torch.where(magnitude > _OVERFLOW_BITS, NINF_CODE, code)
    return code | ((sign != 0).to(torch.int32) << 15)


def decode(codes: torch.Tensor) -> torch.Tensor:
    """fp32 values of DLFloat16 codes (0..0xFFFF): NINF reads as NaN, zero keeps its sign."""
    codes = codes.to(torch.int32)
    body = codes & 0x7FFF
    exponent = (body >> FRACTION_BITS) + (127 - EXPONENT_BIAS)
    bits = (exponent << _FP32_FRACTION_BITS) | ((body & 0x1FF) << _DROPPED)
    bits = torch.where(body == 0, 0, bits)
    bits = torch.where(body == NINF_CODE, _NAN_BITS, bits)
    bits |= torch.where((codes & 0x8000) != 0, _SIGN_BIT, 0)
    return bits.view(torch.float32)


class DLFloat16Format:
    """The sentinel `spyre_sim.dlfloat16`: pass it where a dtype names a numeric format, e.g.
    `Program.reference(*inputs, dtype=spyre_sim.dlfloat16)` for the eager DLFloat16 baseline."""

    def __repr__(self) -> str:
        return "spyre_sim.dlfloat16"

    def __reduce__(self) -> str:
        return "dlfloat16"


dlfloat16 = DLFloat16Format()
