"""Element types by name: sizes, NumPy equivalents and the spellings the kernel language accepts."""
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
    def storage(self) -> "DType":
        """The type memory holds the elements in: for floats narrower than float32 (and tf32),
        the unsigned integer of their width, whose bits are the format's; else the type itself."""
        if self.kind != "float" or self.name in ("float32", "float64"):
            return self
        return DTYPES[f"uint{max(8, self.bits)}"]


_ALL = [
    DType("int8", 8, "int", "int8"), DType("uint8", 8, "uint", "uint8"),
    DType("int16", 16, "int", "int16"), DType("uint16", 16, "uint", "uint16"),
    DType("int32", 32, "int", "int32"), DType("uint32", 32, "uint", "uint32"),
    DType("int64", 64, "int", "int64"), DType("uint64", 64, "uint", "uint64"),
    DType("float16", 16, "float", "float16"), DType("bfloat16", 16, "float", None),
    DType("float32", 32, "float", "float32"), DType("float64", 64, "float", "float64"),
    DType("tf32", 32, "float", None),
    DType("float8_e4m3fn", 8, "float", None), DType("float8_e5m2", 8, "float", None),
    DType("float4_e2m1fn", 4, "float", None),
    DType("bool", 8, "uint", "bool"),
]
DTYPES = {d.name: d for d in _ALL}
# Element types whose loads and stores convert as floats (the rest of the narrow floats are
# reachable only as raw bits: ``buf.bits[i]``).
CONVERTED = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"})
_ALIASES = {"float": "float32", "int": "int32", "half": "float16", "bf16": "bfloat16",
            "fp16": "float16", "fp32": "float32", "fp64": "float64", "double": "float64"}


def dtype(name: "str | DType | object") -> DType:
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
