"""What ``T.exp2``... and ``T.cuda.shfl_*`` do, for the interpreter.

The exact forms (``sqrt.rn``, ``rcp.rn``, ``fma.rn``, ``max``, ``min``, shuffles) give the PTX
ISA's result bit for bit: float64 holds a float32 product exactly, and float64's quotient and
square root round correctly to float32 afterwards (53 >= 2 * 24 + 2 bits), the sum of ``fma``
is rounded to odd in float64 first so that the second rounding is the only one. The approximate
forms are modelled as the correctly rounded result (within the ISA's stated error, but not
promised bit-equal to a GPU's), with the form's flush of subnormals to zero. Every NaN result
is the canonical NaN (0x7FFFFFFF) the GPU returns.
"""

from __future__ import annotations

import math

import numpy as np

from ..ptx import math as ptx_math

_CANONICAL_NAN = np.array([0x7FFFFFFF], dtype=np.uint32).view(np.float32)[0]
_SMALLEST_NORMAL = np.float32(np.finfo(np.float32).tiny)


def _f32(value) -> np.float32:
    return value if type(value) is np.float32 else np.float32(value)


def _flush(x: np.float32) -> np.float32:
    """``.ftz``: a subnormal becomes a zero of its sign."""
    return np.float32(math.copysign(0.0, x)) if 0 < abs(x) < _SMALLEST_NORMAL else x


def _result(value: float, ftz: bool) -> np.float32:
    """float64 -> float32, rounded to nearest even, NaN canonical."""
    if value != value:
        return _CANONICAL_NAN
    with np.errstate(over="ignore"):
        out = np.float32(value)
    return _flush(out) if ftz else out


def _unary(function, ftz: bool):
    def run(machine, thread, opcode, values, name):
        x = _f32(values[0])
        if ftz:
            x = _flush(x)
        with np.errstate(all="ignore"):
            return _result(function(np.float64(x)), ftz)

    return run


def add_ftz_f32(a, b) -> np.float32:
    """``add.rn.ftz.f32`` (``atom.global.add.f32``'s arithmetic): the float64 sum of two float32s
    is exact, or so far from a float32 tie that rounding it twice rounds correctly."""
    return _result(np.float64(_flush(_f32(a))) + np.float64(_flush(_f32(b))), True)


def _mul_ftz(x, factor: np.float32) -> np.float32:
    """``mul.rn.ftz.f32``: the float64 product of two float32s is exact, then one rounding."""
    return _result(np.float64(_flush(_f32(x))) * np.float64(factor), True)


_LOG2_E = np.uint32(0x3FB8AA3B).view(np.float32)
_LN_2 = np.uint32(0x3F317218).view(np.float32)
_ex2_ftz = _unary(np.exp2, True)
_lg2_ftz = _unary(np.log2, True)


def _exp(machine, thread, opcode, values, name):
    return _ex2_ftz(machine, thread, opcode, [_mul_ftz(values[0], _LOG2_E)], name)


def _log(machine, thread, opcode, values, name):
    return _mul_ftz(_lg2_ftz(machine, thread, opcode, values, name), _LN_2)


def fma_f32(a, b, c) -> np.float32:
    """``fma.rn.f32``: ``a * b`` is exact in float64; the sum is rounded to odd there (the
    float64 sum, moved one unit toward the exact sum where it is inexact and even), so that
    rounding it to float32 is the one correct rounding."""
    a, b, c = np.float64(_f32(a)), np.float64(_f32(b)), np.float64(_f32(c))
    product = a * b
    with np.errstate(all="ignore"):
        total = product + c
    if not math.isfinite(total):
        return _result(total, False)
    virtual = total - c  # TwoSum: the exact error of product + c
    error = (product - virtual) + (c - (total - virtual))
    if error != 0 and int(total.view(np.uint64)) & 1 == 0:
        total = np.nextafter(total, np.inf if error > 0 else -np.inf)
    return _result(total, False)


_EXP2_FMA_POLY = tuple(np.uint32(int(c[2:], 16)).view(np.float32) for c in ptx_math.EXP2_FMA_POLY)


def exp2_fma_f32(x) -> np.float32:
    """``T.exp2_fma``'s steps (jittile/ptx/math.py), each as the PTX ISA defines it: clamp,
    ``floor`` (what ``add.rm`` by 1.5 * 2**23 leaves in the low bits, exact for |x| <= 128),
    the fraction (``sub.f32``: the float64 difference rounds once more, correctly, to float32),
    the polynomial by ``fma.rn.f32``, and the product with 2 ** floor(x), 0 at -127."""
    x = _f32(x)
    if x != x:  # max.NaN / min.NaN keep it, and every later step
        return _CANONICAL_NAN
    clamp = min(max(x, np.float32(-127.0)), np.float32(128.0))
    whole = math.floor(clamp)
    fraction = _result(np.float64(clamp) - whole, False)
    c3, c2, c1 = _EXP2_FMA_POLY
    poly = fma_f32(fma_f32(fma_f32(fraction, c3, c2), fraction, c1), fraction, np.float32(1.0))
    power = np.uint32((whole + 127) << 23).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        return _result(np.float64(poly) * np.float64(power), False)


def _exp2_fma(machine, thread, opcode, values, name):
    return exp2_fma_f32(values[0])


def _fma(machine, thread, opcode, values, name):
    return fma_f32(*values)


def _extremum(larger: bool):
    """``max.f32`` / ``min.f32``: a NaN operand yields the other, two NaNs the canonical NaN;
    +0 is larger than -0."""

    def run(machine, thread, opcode, values, name):
        a, b = _f32(values[0]), _f32(values[1])
        if a != a:
            return _CANONICAL_NAN if b != b else b
        if b != b:
            return a
        if a == b:  # equal zeros of either sign: +0 is the larger
            pick_a = math.copysign(1.0, a) >= math.copysign(1.0, b)
            return a if pick_a == larger else b
        return a if (a > b) == larger else b

    return run


# ------------------------------------------------------------------------------- shuffles
def shuffle_source(mode: str, lane: int, b: int, c: int) -> int:
    """The lane whose value ``shfl.sync.<mode>`` gives ``lane``, per the PTX ISA's pseudocode:
    outside the segment's clamp the lane reads its own value."""
    b, clamp, segmask = b & 0x1F, c & 0x1F, c >> 8 & 0x1F
    max_lane = (lane & segmask) | (clamp & ~segmask)
    min_lane = lane & segmask
    if mode == "up":
        j = lane - b
        return j if j >= max_lane else lane
    j = {"down": lane + b, "bfly": lane ^ b, "idx": min_lane | (b & ~segmask)}[mode]
    return j if j <= max_lane else lane


def _word(value):
    """The value a shuffle moves, typed as the compiled kernel types it (backend/intrinsics.py
    ``make_word_asm``): floats as float32, integers as int32 if signed, else uint32."""
    if isinstance(value, (float, np.floating)):
        return _f32(value)
    kind = np.uint32 if isinstance(value, (bool, np.bool_, np.unsignedinteger)) else np.int32
    return np.array(int(value) & 0xFFFFFFFF, dtype=np.uint32).view(kind)[()]


def shuffle(machine, opcode, per_lane, threads):
    """``shfl.sync.<mode>.b32`` across the member lanes of a warp (a warp collective)."""
    mode = opcode.split(".")[2]
    by_lane = {t.lane: values for values, t in zip(per_lane, threads)}
    out = []
    for values, t in zip(per_lane, threads):
        _, b, c, mask = values
        source = shuffle_source(mode, t.lane, int(b), int(c))
        if not int(mask) >> source & 1 or source not in by_lane:
            raise machine.error(
                t,
                f"{opcode} in lane {t.lane} reads lane {source}, which is not in the "
                f"member mask {int(mask):#010x}: the result is undefined; include the "
                f"lane in mask= or keep the source inside it",
            )
        out.append(_word(by_lane[source][0]))
    return out


UNARY = {
    "ex2.approx.ftz.f32": _ex2_ftz,
    "lg2.approx.ftz.f32": _lg2_ftz,
    "sqrt.rn.f32": _unary(np.sqrt, False),
    "sqrt.approx.ftz.f32": _unary(np.sqrt, True),
    "rsqrt.approx.ftz.f32": _unary(lambda x: 1.0 / np.sqrt(x), True),
    "rcp.rn.f32": _unary(lambda x: 1.0 / x, False),
    "rcp.approx.ftz.f32": _unary(lambda x: 1.0 / x, True),
    "tanh.approx.f32": _unary(np.tanh, False),
}
# Opcode (the asm statement's comment) -> semantics, as instructions.RAW takes them.
MATH = {
    **UNARY,
    "T.exp2_fma": _exp2_fma,  # before its prefix "T.exp"
    "T.exp": _exp,
    "T.log": _log,
    "fma.rn.f32": _fma,
    "max.f32": _extremum(True),
    "min.f32": _extremum(False),
}
