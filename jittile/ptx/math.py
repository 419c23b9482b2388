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
