"""Element types by name: sizes, NumPy equivalents, PTX spellings, the spellings the kernel language
accepts, and the reduction facts every family and the interpreter share (:data:`REDUCTIONS`)."""

from __future__ import annotations

from dataclasses import dataclass

from .errors import JittileError


@dataclass(frozen=True)
class DType:
    """A scalar element type of kernel tensors and shared buffers."""

    name: str
    bits: int
    kind: str  # "int", "uint", "float"
    numpy: str | None  # NumPy dtype name, None where NumPy has none (tf32, fp4)
    ptx: str | None = None  # the PTX ISA's ``.type`` spelling (``u32``, ``bf16``, ``e4m3``...)

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8)

    def __str__(self) -> str:
        return self.name

    @property
    def converted(self) -> bool:
        """Whether element loads and stores convert: memory holds the format's bits, a load
        yields their float32 value and a store rounds to nearest even (docs/language.md,
        "Element types")."""
        return self.name in CONVERTED

    @property
    def bit_type(self) -> str:
        """The PTX untyped-bits spelling of the type's width (``b32``): what bitwise
        reductions name."""
        return f"b{self.bits}"

    def reduction_type(self, redop: str) -> str | None:
        """The PTX ``.type`` a reduction ``redop`` over elements of this type names: the bits
        type for the bitwise operators, else the type's own spelling."""
        return self.bit_type if redop in BITWISE_REDUCTIONS and self.kind != "float" else self.ptx

    @property
    def storage(self) -> DType:
        """The type memory holds the elements in: for floats narrower than float32 (and tf32),
        the unsigned integer of their width, whose bits are the format's; else the type itself."""
        if self.kind != "float" or self.name in ("float32", "float64"):
            return self
        return DTYPES[f"uint{max(8, self.bits)}"]


_ALL = [
    DType("int8", 8, "int", "int8", "s8"),
    DType("uint8", 8, "uint", "uint8", "u8"),
    DType("int16", 16, "int", "int16", "s16"),
    DType("uint16", 16, "uint", "uint16", "u16"),
    DType("int32", 32, "int", "int32", "s32"),
    DType("uint32", 32, "uint", "uint32", "u32"),
    DType("int64", 64, "int", "int64", "s64"),
    DType("uint64", 64, "uint", "uint64", "u64"),
    DType("float16", 16, "float", "float16", "f16"),
    DType("bfloat16", 16, "float", None, "bf16"),
    DType("float32", 32, "float", "float32", "f32"),
    DType("float64", 64, "float", "float64", "f64"),
    DType("tf32", 32, "float", None, "tf32"),
    DType("float8_e4m3fn", 8, "float", None, "e4m3"),
    DType("float8_e5m2", 8, "float", None, "e5m2"),
    DType("float4_e2m1fn", 4, "float", None, "e2m1"),
    DType("bool", 8, "uint", "bool", "pred"),
]
DTYPES = {d.name: d for d in _ALL}
# Element types whose loads and stores convert as floats (the rest of the narrow floats are
# reachable only as raw bits: ``buf.bits[i]``).
CONVERTED = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})
BY_PTX = {d.ptx: d for d in _ALL}

# Reduction operator -> the PTX ``.type`` s it is defined for, in the PTX ISA's redOp / type
# tables of cp.reduce.async.bulk{.tensor} and as the H200 computes them (each operator x type
# pair probed: bench/probe_reduce_types.py, bench/results/probe_reduce_types.json; add.f64 is in
# the non-tensor table only, but computes either way). A family's contract may accept fewer.
REDUCTIONS = {
    "add": frozenset({"u32", "s32", "u64", "f16", "bf16", "f32", "f64"}),
    "min": frozenset({"u32", "s32", "u64", "s64", "f16", "bf16"}),
    "max": frozenset({"u32", "s32", "u64", "s64", "f16", "bf16"}),
    "inc": frozenset({"u32"}),
    "dec": frozenset({"u32"}),
    "and": frozenset({"b32", "b64"}),
    "or": frozenset({"b32", "b64"}),
    "xor": frozenset({"b32", "b64"}),
}
BITWISE_REDUCTIONS = frozenset({"and", "or", "xor"})


def reduced_dtypes(ptx_type: str) -> tuple[DType, ...]:
    """The element types a reduction over PTX ``.type`` ``ptx_type`` reads: the type itself, or
    for ``.bN`` every integer type of N bits (unsigned first)."""
    if ptx_type.startswith("b") and ptx_type[1:].isdigit():
        bits = int(ptx_type[1:])
        return tuple(
            sorted(
                (
                    d
                    for d in _ALL
                    if d.kind in ("uint", "int") and d.bits == bits and d.name != "bool"
                ),
                key=lambda d: d.kind != "uint",
            )
        )
    return (BY_PTX[ptx_type],)


_ALIASES = {
    "float": "float32",
    "int": "int32",
    "half": "float16",
    "bf16": "bfloat16",
    "fp16": "float16",
    "fp32": "float32",
    "fp64": "float64",
    "double": "float64",
}


def dtype(name: str | DType | object) -> DType:
    """Look up a dtype by name, NumPy dtype, torch dtype or ``T`` scalar type."""
    if isinstance(name, DType):
        return name
    text = getattr(name, "dtype_name", None) or str(name)
    text = text.replace("torch.", "").replace("numpy.", "")
    text = _ALIASES.get(text, text)
    if text not in DTYPES:
        raise JittileError(f"unknown dtype {name!r}; known: {', '.join(sorted(DTYPES))}")
    return DTYPES[text]


def from_numpy(np_dtype) -> DType:
    """The jittile dtype of a NumPy dtype (``bfloat16`` from ml_dtypes-style names too)."""
    return dtype(str(getattr(np_dtype, "name", np_dtype)))


def convert(value, numpy_type):
    """``value`` as a scalar of NumPy type ``numpy_type`` the way a conversion on the GPU does it:
    integers wrap to the type's width (``uint32(-1)`` is 4294967295), anything else converts."""
    import numpy as np

    numpy_type = np.dtype(numpy_type)
    if numpy_type.kind in "ui" and isinstance(value, (int, np.integer, np.bool_)):
        bits = 8 * numpy_type.itemsize
        unsigned = np.array(int(value) & ((1 << bits) - 1), dtype=f"uint{bits}")
        return unsigned.view(numpy_type)[()]
    return numpy_type.type(value)
