"""Inline-assembly calls: the one form in which every PTX instruction reaches the backend.

An :class:`AsmCall` is a PTX template with ``$N`` operand placeholders (outputs first, then inputs, as
LLVM numbers them) plus one constraint letter per operand. The backend turns it into an llvmlite
``InlineAsm`` with side effects; nothing here depends on numba.
"""

from __future__ import annotations

from ..ir import Asm

# Register class per operand kind: 'h' 16-bit, 'r' 32-bit, 'l' 64-bit, 'n' immediate, 'f' 32-bit
# float. An input constraint that is a number ties the input to that output (read-modify-write
# registers such as an MMA accumulator).
CONSTRAINT_BITS = {"h": 16, "r": 32, "l": 64, "n": 32, "f": 32}

# The inline-asm statement is plan data (it travels in plan records and cache entries).
AsmCall = Asm


def operand_list(first: int, count: int) -> str:
    """``$first, $first+1, ...`` for ``count`` consecutive operands."""
    return ", ".join(f"${i}" for i in range(first, first + count))


def scoped(body: str) -> str:
    """Wrap a multi-statement template in braces so its labels and registers stay local when the
    same asm is inlined more than once."""
    return "{\n" + body.strip() + "\n}"
