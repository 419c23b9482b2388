"""The PTX behind ``T.exp2``... and ``T.cuda.shfl_*``: one inline-asm statement per function
and form, named (``comment``) by the instruction the interpreter models."""

from __future__ import annotations

from .asm import AsmCall, scoped

_LOG2_E = "0f3FB8AA3B"  # float32(log2(e)), the factor of CUDA's __expf
_LN_2 = "0f3F317218"  # float32(ln(2)), the factor of CUDA's __logf


def _unary(opcode: str) -> AsmCall:
    return AsmCall(f"{opcode} $0, $1;", ("f",), ("f",), memory=False, comment=opcode)


def _scaled(body: str, name: str) -> AsmCall:
    return AsmCall(scoped(".reg .f32 jt_t;\n" + body), ("f",), ("f",), memory=False, comment=name)


# T.exp2_fma: 2**x on the FMA and integer pipes, no MUFU (FlashAttention-4's way of relieving
# the SM's 16 ex2 a clock): x clamped to [-127, 128] (a NaN kept); floor(x) from the low mantissa bits of
# x + 1.5 * 2**23 rounded down; 2**f of the fraction f = x - floor(x) in [0, 1) by a degree-3
# polynomial with p(0) = 1 (a minimax fit of the relative error, 8.6e-5 = 2**-13.5 at most:
# tests/test_math.py); 2**floor(x) as its float32 bits, (floor(x) + 127) << 23, which is 0 at
# -127 and +inf at 128; their product. Every step is an IEEE-defined operation, so the
# interpreter's model (jittile/interpreter/math.py) is the GPU's result bit for bit.
EXP2_FMA_CLAMP = ("0fC2FE0000", "0f43000000")  # -127.0, 128.0
EXP2_FMA_ROUNDER = "0f4B400000"  # 1.5 * 2**23: adding it leaves floor(x) in the low bits
EXP2_FMA_POLY = ("0f3D9DD565", "0f3E691BBB", "0f3F31F32D")  # c3, c2, c1 (0.0771, 0.2276, 0.6951)
_EXP2_FMA = f"""
.reg .f32 jt_x, jt_j, jt_f, jt_p;
.reg .b32 jt_e;
max.NaN.f32 jt_x, $1, {EXP2_FMA_CLAMP[0]};
min.NaN.f32 jt_x, jt_x, {EXP2_FMA_CLAMP[1]};
add.rm.f32 jt_j, jt_x, {EXP2_FMA_ROUNDER};
sub.f32 jt_f, jt_j, {EXP2_FMA_ROUNDER};
sub.f32 jt_f, jt_x, jt_f;
fma.rn.f32 jt_p, jt_f, {EXP2_FMA_POLY[0]}, {EXP2_FMA_POLY[1]};
fma.rn.f32 jt_p, jt_p, jt_f, {EXP2_FMA_POLY[2]};
fma.rn.f32 jt_p, jt_p, jt_f, 0f3F800000;
mov.b32 jt_e, jt_j;
shl.b32 jt_e, jt_e, 23;
add.s32 jt_e, jt_e, 0x3F800000;
mov.b32 jt_j, jt_e;
mul.rn.f32 $0, jt_p, jt_j;
"""

# (function name, approx=) -> its statement; the keys with approx=True and an exact twin are
# the functions' approx= forms, the others their only form.
MATH = {
    ("exp2", False): _unary("ex2.approx.ftz.f32"),
    ("exp", False): _scaled(
        f"mul.rn.ftz.f32 jt_t, $1, {_LOG2_E};\nex2.approx.ftz.f32 $0, jt_t;", "T.exp"
    ),
    ("log2", False): _unary("lg2.approx.ftz.f32"),
    ("log", False): _scaled(
        f"lg2.approx.ftz.f32 jt_t, $1;\nmul.rn.ftz.f32 $0, jt_t, {_LN_2};", "T.log"
    ),
    ("sqrt", False): _unary("sqrt.rn.f32"),
    ("sqrt", True): _unary("sqrt.approx.ftz.f32"),
    ("rsqrt", False): _unary("rsqrt.approx.ftz.f32"),
    ("rcp", False): _unary("rcp.rn.f32"),
    ("rcp", True): _unary("rcp.approx.ftz.f32"),
    ("fma", False): AsmCall(
        "fma.rn.f32 $0, $1, $2, $3;", ("f",), ("f", "f", "f"), memory=False, comment="fma.rn.f32"
    ),
    ("fmax", False): AsmCall(
        "max.f32 $0, $1, $2;", ("f",), ("f", "f"), memory=False, comment="max.f32"
    ),
    ("fmin", False): AsmCall(
        "min.f32 $0, $1, $2;", ("f",), ("f", "f"), memory=False, comment="min.f32"
    ),
    ("tanh", False): _unary("tanh.approx.f32"),
    ("exp2_fma", False): AsmCall(
        scoped(_EXP2_FMA), ("f",), ("f",), memory=False, comment="T.exp2_fma"
    ),
}

SHUFFLE_PREFIX = "shfl.sync."


def shuffle(mode: str) -> AsmCall:
    """``shfl.sync.<mode>.b32 d, value, b, c, membermask`` on 32-bit registers; a float value
    travels in the same register class as its bits (backend/intrinsics.py)."""
    opcode = f"{SHUFFLE_PREFIX}{mode}.b32"
    return AsmCall(f"{opcode} $0, $1, $2, $3, $4;", ("r",), ("r", "r", "r", "r"), comment=opcode)


def clamp_operand(mode: str, width: int) -> int:
    """shfl's ``c`` operand for segments of ``width`` lanes: the segment mask (bits 8-12) and
    the clamp lane, 0 for ``up`` and 31 for the others, as CUDA's ``__shfl_*_sync(..., width)``."""
    return (32 - width) << 8 | (0 if mode == "up" else 0x1F)
