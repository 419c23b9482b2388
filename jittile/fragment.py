"""Register fragments: which elements of a warpgroup's tile each thread holds in its registers.

A ``T.alloc_local(shape, dtype, layout=wgmma_accumulator)`` is not memory: it is a set of 32-bit
registers per thread, spread over the 128 threads of a warpgroup the way the tensor cores read and
write them (PTX ISA, "Register Fragments" of ``wgmma.mma_async``). The frontend lowers every
register to its own scalar variable, indexed with compile-time integers (the backend hands them to
numba-cuda as one tuple, ``backend/reshape.py``), so the registers stay registers (no local
memory). Pure Python: the frontend, the wgmma pattern and the tests share
these mappings.

Within a warpgroup, thread ``t`` is in warp ``w = t // 32`` with lane ``l``; ``g = l // 4`` and
``q = l % 4``. Every warp owns 16 rows (``16 w + g`` and ``16 w + g + 8``):

- accumulator ``(64, N)``: per 8-column chunk ``c`` a thread holds ``(g, 2q)``, ``(g, 2q + 1)``,
  ``(g + 8, 2q)``, ``(g + 8, 2q + 1)`` of the chunk; f32 and s32 take one register each, f16 two
  per register (the pair of columns);
- A operand ``(64, K)``: per instruction of ``k`` columns (32 bytes of K), four registers
  ``(g, q)``, ``(g + 8, q)``, ``(g, q + k/2)``, ``(g + 8, q + k/2)``, each packing ``32 / bits``
  consecutive columns starting at ``q * 32 / bits``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import DType
from .dtypes import dtype as as_dtype

WARPGROUP_THREADS = 128
ROWS = 64  # a warpgroup's fragment always spans m64

# Element types of each fragment kind (the wgmma forms that read or write them).
ACCUMULATOR_TYPES = ("float32", "float16", "int32")
A_TYPES = ("float16", "bfloat16", "tf32", "float8_e4m3fn", "float8_e5m2", "int8", "uint8")


@dataclass(frozen=True)
class FragmentLayout:
    """A register-fragment layout over a warpgroup: ``accumulator`` (the MMA's D) or ``a`` (its A
    operand held in registers)."""

    kind: str

    def __post_init__(self) -> None:
        if self.kind not in ("accumulator", "a"):
            raise ValueError(f"fragment layouts are 'accumulator' or 'a', got {self.kind!r}")

    def __repr__(self) -> str:
        return f"wgmma_{self.kind}"

    def problem(self, shape: tuple, dtype: str | DType) -> str | None:
        """Why ``shape`` / ``dtype`` cannot have this layout, or None."""
        dt = as_dtype(dtype)
        allowed = ACCUMULATOR_TYPES if self.kind == "accumulator" else A_TYPES
        if dt.name not in allowed:
            return f"a {self!r} fragment holds {', '.join(allowed)} elements, not {dt.name}"
        if len(shape) != 2 or shape[0] != ROWS:
            return (
                f"a {self!r} fragment is a ({ROWS}, {'N' if self.kind == 'accumulator' else 'K'}) "
                f"tile of one warpgroup, got shape {tuple(shape)}"
            )
        step = 8 if self.kind == "accumulator" else self.k_per_instruction(dt)
        if shape[1] % step:
            return (
                f"its second extent must be a multiple of {step} "
                f"({'8-column chunks' if self.kind == 'accumulator' else 'one instruction of K'}), "
                f"got {shape[1]}"
            )
        return None

    @staticmethod
    def k_per_instruction(dtype: str | DType) -> int:
        """K of one wgmma for this A type: 32 bytes of elements (k16 for 16-bit, k8 tf32, k32 8-bit)."""
        return 256 // as_dtype(dtype).bits

    @staticmethod
    def per_register(dtype: str | DType) -> int:
        """Elements packed in one 32-bit register."""
        return 32 // as_dtype(dtype).bits

    def registers(self, shape: tuple, dtype: str | DType) -> int:
        """32-bit registers per thread."""
        return shape[0] * shape[1] // WARPGROUP_THREADS // self.per_register(dtype)

    def register_class(self, dtype: str | DType) -> str:
        """The asm constraint of one register: ``f`` for f32 accumulators, else ``r``."""
        dt = as_dtype(dtype)
        return "f" if self.kind == "accumulator" and dt.name == "float32" else "r"

    def terms(self, register: int, dtype: str | DType) -> tuple[int, int, int]:
        """``(row offset, column offset, column step)`` of ``register``'s first element: it is at
        row ``16 w + g + row offset`` and column ``column offset + q * column step``."""
        per = self.per_register(dtype)
        if self.kind == "accumulator":
            chunk, within = divmod(register * per, 4)  # among the thread's accumulator elements
            return 8 * (within // 2), 8 * chunk + within % 2, 2
        instruction, r = divmod(register, 4)
        k = self.k_per_instruction(dtype)
        return 8 * (r % 2), instruction * k + (r // 2) * (k // 2), per

    def element(self, register: int, thread: int, dtype: str | DType) -> tuple[int, int]:
        """(row, column) of the first element that ``register`` of warpgroup thread ``thread``
        holds; the register's other elements follow in the columns after it."""
        warp, lane = divmod(thread % WARPGROUP_THREADS, 32)
        g, q = divmod(lane, 4)
        row, column, step = self.terms(register, dtype)
        return 16 * warp + g + row, column + q * step


wgmma_accumulator = FragmentLayout("accumulator")
wgmma_a = FragmentLayout("a")
