"""What a raw PTX operand is (its register class and width): shared by the raw instruction table
and the families that declare companion instructions."""

from __future__ import annotations

from enum import Enum

from .asm import CONSTRAINT_BITS


class OperandKind(Enum):
    """What a raw PTX operand is, which fixes its register class."""

    SHARED_ADDR = "32-bit shared-window address"
    GENERIC_PTR = "64-bit generic address"
    U16 = "u16"
    U32 = "u32"
    B32 = "b32"
    S32 = "s32"
    U64 = "u64"
    B64 = "b64"
    F32 = "f32"
    IMM = "compile-time integer"

    @property
    def constraint(self) -> str:
        """The LLVM inline-asm constraint letter."""
        return _CONSTRAINTS[self]

    @property
    def bits(self) -> int:
        return CONSTRAINT_BITS[self.constraint]


_CONSTRAINTS = {
    OperandKind.SHARED_ADDR: "r",
    OperandKind.GENERIC_PTR: "l",
    OperandKind.U16: "h",
    OperandKind.U32: "r",
    OperandKind.B32: "r",
    OperandKind.S32: "r",
    OperandKind.U64: "l",
    OperandKind.B64: "l",
    OperandKind.F32: "f",
    OperandKind.IMM: "n",
}
