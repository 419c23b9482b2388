"""Float element loads and stores as the GPU carries them out, bit for bit.

The counterpart of :mod:`jittile.ptx.conversions`: memory holds a ``float16`` / ``bfloat16`` /
``float8_e4m3fn`` / ``float8_e5m2`` element as its bits; a load yields its float32 value and a
store rounds a value to the format. Exact integer arithmetic, no float library:

- a stored value first becomes a float32 as the GPU's operand conversion makes it (integers and
  float64 round to nearest even), then rounds to nearest even into the format. Out of range:
  infinity for float16/bfloat16 (``cvt.rn``); for fp8 ``.satfinite`` makes any input whose
  magnitude exceeds MAX_NORM (infinity included) the sign-preserved MAX_NORM. Subnormals are
  kept (no ``.ftz``), zeros keep their sign, a NaN becomes the canonical NaN (0x7FFF, 0x7F).
- a load is exact: bfloat16 moves its bits into the high half of a float32 (NaN payloads
  included); float16 and fp8 convert arithmetically (``cvt.f32.f16``), whose NaN result is the
  canonical float32 NaN 0x7FFFFFFF.

The PTX ISA says only that a NaN stays NaN; the encodings are those CUDA's headers emulate these
``cvt`` forms with on the host (cuda_fp16.hpp, cuda_bf16.hpp, cuda_fp8.hpp: a NaN input becomes
the canonical 0x7FFFFFFF first, its sign is dropped), and tests/test_gpu_floats.py checks the
GPU against them.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """A binary float format: field widths, whether the all-ones exponent means infinity/NaN
    (IEEE style) or, as in e4m3fn, only S.1111.111 is NaN, and how a store treats overflow."""

    exponent_bits: int
    mantissa_bits: int
    ieee: bool
    saturates: bool  # the store's cvt has .satfinite
    nan: int  # the canonical NaN a store writes

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def max_field(self) -> int:
        """The largest exponent field of a finite number."""
        top = (1 << self.exponent_bits) - 1
        return top - 1 if self.ieee else top

    @property
    def max_finite(self) -> int:
        """The magnitude bits of MAX_NORM (e4m3fn's all-ones mantissa at the top is NaN)."""
        mantissa = (1 << self.mantissa_bits) - (1 if self.ieee else 2)
        return (self.max_field << self.mantissa_bits) | mantissa

    def is_nan(self, bits: int) -> bool:
        magnitude = bits & ((1 << (self.bits - 1)) - 1)
        if self.ieee:
            return magnitude > (self.max_field + 1) << self.mantissa_bits
        return magnitude == (1 << (self.bits - 1)) - 1

    def is_infinity(self, bits: int) -> bool:
        magnitude = bits & ((1 << (self.bits - 1)) - 1)
        return self.ieee and magnitude == (self.max_field + 1) << self.mantissa_bits


FLOAT32 = FloatFormat(8, 23, True, False, 0x7FFFFFFF)
FORMATS = {
    "float16": FloatFormat(5, 10, True, False, 0x7FFF),
    "bfloat16": FloatFormat(8, 7, True, False, 0x7FFF),
    "float8_e4m3fn": FloatFormat(4, 3, False, True, 0x7F),
    "float8_e5m2": FloatFormat(5, 2, True, True, 0x7F),
}


def _exact(bits: int, fmt: FloatFormat) -> tuple[int, int]:
    """The finite number ``bits`` encodes, as ``(integer, exponent)`` with value integer *
    2**exponent; the sign is left out."""
    field = (bits >> fmt.mantissa_bits) & ((1 << fmt.exponent_bits) - 1)
    mantissa = bits & ((1 << fmt.mantissa_bits) - 1)
    if field == 0:
        return mantissa, 1 - fmt.bias - fmt.mantissa_bits
    return mantissa | (1 << fmt.mantissa_bits), field - fmt.bias - fmt.mantissa_bits


def _round(negative: bool, integer: int, exponent: int, fmt: FloatFormat) -> int:
    """The bits of the value (-1)**negative * integer * 2**exponent rounded to nearest even
    into ``fmt`` (finite input; overflow as the format's store conversion treats it)."""
    sign = (1 << (fmt.bits - 1)) if negative else 0
    if integer == 0:
        return sign
    if fmt.saturates and _exceeds(integer, exponent, fmt.max_finite, fmt):
        return sign | fmt.max_finite
    lead = integer.bit_length() - 1 + exponent  # the value is in [2**lead, 2**(lead + 1))
    quantum = max(lead, 1 - fmt.bias) - fmt.mantissa_bits
    shift = exponent - quantum
    if shift >= 0:
        scaled = integer << shift
    else:
        scaled, rest = divmod(integer, 1 << -shift)
        half = 1 << (-shift - 1)
        if rest > half or (rest == half and scaled & 1):
            scaled += 1
    # scaled * 2**quantum; at most 2**(mantissa_bits + 1): a carry into the next binade
    field = quantum + fmt.mantissa_bits + fmt.bias
    if scaled >> fmt.mantissa_bits == 0:  # subnormal (field 1 less)
        return sign | scaled
    if scaled >> (fmt.mantissa_bits + 1):
        scaled >>= 1
        field += 1
    if field > fmt.max_field:  # only without .satfinite, which clamped above
        return sign | ((fmt.max_field + 1) << fmt.mantissa_bits)
    return sign | (field << fmt.mantissa_bits) | (scaled - (1 << fmt.mantissa_bits))


def _exceeds(integer: int, exponent: int, magnitude_bits: int, fmt: FloatFormat) -> bool:
    """Whether integer * 2**exponent is larger than the magnitude ``magnitude_bits`` encodes."""
    other, other_exponent = _exact(magnitude_bits, fmt)
    low = min(exponent, other_exponent)
    return integer << (exponent - low) > other << (other_exponent - low)


def to_float32_bits(value) -> int:
    """The float32 a kernel value becomes as an operand of a float32 conversion: integers
    (``cvt.rn.f32.s64``/``u64``) and float64 (``cvt.rn.f32.f64``) round to nearest even."""
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, (int, np.integer)):
        value = int(value)
        return _round(value < 0, abs(value), 0, FLOAT32)
    if isinstance(value, np.float32):
        return int(np.array(value).view(np.uint32))
    value = float(value)
    if math.isnan(value):
        return FLOAT32.nan
    negative = math.copysign(1.0, value) < 0
    if math.isinf(value):
        return (0x80000000 if negative else 0) | 0x7F800000
    numerator, denominator = abs(value).as_integer_ratio()
    return _round(negative, numerator, 1 - denominator.bit_length(), FLOAT32)


def encode(value, name: str) -> int:
    """The bits an element store of ``value`` into a ``name`` element writes."""
    fmt = FORMATS[name]
    bits = to_float32_bits(value)
    negative = bool(bits >> 31)
    if FLOAT32.is_nan(bits):
        return fmt.nan
    if FLOAT32.is_infinity(bits):
        sign = (1 << (fmt.bits - 1)) if negative else 0
        if fmt.saturates:
            return sign | fmt.max_finite
        return sign | ((fmt.max_field + 1) << fmt.mantissa_bits)
    integer, exponent = _exact(bits & 0x7FFFFFFF, FLOAT32)
    return _round(negative, integer, exponent, fmt)


@functools.cache
def _table(name: str) -> np.ndarray:
    """float32 value of every bit pattern of ``name`` (float16 and fp8), as a load yields it."""
    fmt = FORMATS[name]
    values = np.empty(1 << fmt.bits, dtype=np.uint32)
    for bits in range(1 << fmt.bits):
        negative = bool(bits >> (fmt.bits - 1))
        if fmt.is_nan(bits):
            values[bits] = FLOAT32.nan
            continue
        if fmt.is_infinity(bits):
            values[bits] = (0x80000000 if negative else 0) | 0x7F800000
            continue
        integer, exponent = _exact(bits, fmt)
        values[bits] = _round(negative, integer, exponent, FLOAT32)  # exact: float32 is wider
    return values.view(np.float32)


def decode(bits, name: str) -> np.float32:
    """The float32 value an element load of ``name`` bits yields."""
    if name == "bfloat16":
        return np.array(int(bits) << 16, dtype=np.uint32).view(np.float32)[()]
    return _table(name)[int(bits)]


def conversion(direction: str, name: str):
    """The function a lowered kernel calls for a ``"load"`` (bits -> float32) or a ``"store"``
    (value -> bits, as the storage's unsigned integer) of a ``name`` element."""
    if direction == "load":
        return lambda bits: decode(bits, name)
    storage = np.uint8 if FORMATS[name].bits == 8 else np.uint16
    return lambda value: storage(encode(value, name))
