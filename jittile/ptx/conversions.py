"""The PTX of float element loads and stores: the conversions between a float32 register and
the bits of a ``float16`` / ``bfloat16`` / ``float8_e4m3fn`` / ``float8_e5m2`` element.

Memory holds these elements as unsigned integers of their width (numba-cuda has no arithmetic for
most of them); every load and store of one goes through a conversion here, so that no integer
conversion of the bits can happen. Forms and their rounding are the PTX ISA's ``cvt``:

- stores round to nearest even: ``cvt.rn.f16.f32``, ``cvt.rn.bf16.f32`` (out of range: infinity),
  ``cvt.rn.satfinite.e4m3x2.f32`` / ``e5m2x2`` (sm_89+, PTX 7.8; ``.satfinite``: an input whose
  magnitude exceeds the format's MAX_NORM, infinity included, becomes the sign-preserved MAX_NORM,
  448 for e4m3 and 57344 for e5m2; NaN stays NaN). The x2 form converts two values into one
  16-bit register; the element is its low byte.
- loads are exact: a bfloat16's bits shifted into the high half of a float32; ``cvt.f32.f16``;
  for fp8, ``cvt.rn.f16x2.e4m3x2`` / ``e5m2x2`` (the element in the low byte, zero above it)
  and ``cvt.f32.f16`` of the low half.
"""

from __future__ import annotations

from .asm import AsmCall, scoped

_FP8 = {"float8_e4m3fn": "e4m3x2", "float8_e5m2": "e5m2x2"}


def _fp8_load(pair: str) -> str:
    return scoped(f"""
.reg .b32 jt_h2;
.reg .b16 jt_lo, jt_hi;
cvt.rn.f16x2.{pair} jt_h2, $1;
mov.b32 {{jt_lo, jt_hi}}, jt_h2;
cvt.f32.f16 $0, jt_lo;
""")


def _fp8_store(pair: str) -> str:
    return f"cvt.rn.satfinite.{pair}.f32 $0, $1, $1;"


LOADS = {
    "bfloat16": AsmCall(
        scoped("""
.reg .b16 jt_zero;
mov.b16 jt_zero, 0;
mov.b32 $0, {jt_zero, $1};
"""),
        ("f",),
        ("h",),
        memory=False,
        comment="bfloat16 element load",
    ),
    "float16": AsmCall(
        "cvt.f32.f16 $0, $1;", ("f",), ("h",), memory=False, comment="float16 element load"
    ),
    **{
        name: AsmCall(_fp8_load(pair), ("f",), ("h",), memory=False, comment=f"{name} element load")
        for name, pair in _FP8.items()
    },
}

STORES = {
    "bfloat16": AsmCall(
        "cvt.rn.bf16.f32 $0, $1;", ("h",), ("f",), memory=False, comment="bfloat16 element store"
    ),
    "float16": AsmCall(
        "cvt.rn.f16.f32 $0, $1;", ("h",), ("f",), memory=False, comment="float16 element store"
    ),
    **{
        name: AsmCall(
            _fp8_store(pair), ("h",), ("f",), memory=False, comment=f"{name} element store"
        )
        for name, pair in _FP8.items()
    },
}


def conversion(direction: str, dtype_name: str) -> AsmCall:
    """The asm of a ``"load"`` (bits -> float32) or ``"store"`` (float32 -> bits) of one element
    of ``dtype_name``."""
    return (LOADS if direction == "load" else STORES)[dtype_name]
