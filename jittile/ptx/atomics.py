"""The PTX behind ``T.cuda.atomic_*`` and ``T.cuda.threadfence``: which element types each
atomic operation takes, and its one inline-asm statement.

PTX ISA 9.7.13.5 (Parallel Synchronization and Communication Instructions: ``atom``):
``atom{.sem}{.scope}{.space}.op.type d, [a], b{, c}``; ``.sem`` absent is ``.relaxed`` and
``.scope`` absent is ``.gpu``, and both need sm_70 (PTX 6.0), ``.cluster`` sm_90 (PTX 7.8). The
integer ``.add`` exists for ``.u32``, ``.s32`` and ``.u64`` (a 64-bit signed add is the same
bits as the unsigned one), ``.min`` / ``.max`` compare as ``.s32``, ``.u32``, ``.s64``,
``.u64``, the bit operations and ``.exch`` / ``.cas`` take ``.b32`` / ``.b64`` registers of
any type of that size. ``atom.global.add.f32`` rounds to nearest even and flushes subnormal
inputs and results to sign-preserving zero. PTX ISA 9.7.13.4 (``membar`` / ``fence``):
``fence{.sem}.scope`` with ``.sem`` ``.sc`` or ``.acq_rel``.
"""

from __future__ import annotations

from .asm import AsmCall

ATOMIC_PREFIX = "atom."
SEMANTICS = ("relaxed", "acquire", "release", "acq_rel")
SCOPES = ("cta", "cluster", "gpu", "sys")
FENCE_SEMANTICS = ("acq_rel", "sc")

_BITS = {"int32": "b32", "uint32": "b32", "int64": "b64", "uint64": "b64", "float32": "b32"}
_INTEGER_ORDER = {"int32": "s32", "uint32": "u32", "int64": "s64", "uint64": "u64"}
_INTEGER_BITS = {name: bits for name, bits in _BITS.items() if name != "float32"}

# operation -> {element dtype name -> the PTX instruction type}
ATOMIC_TYPES = {
    "add": {"int32": "s32", "uint32": "u32", "int64": "u64", "uint64": "u64", "float32": "f32"},
    "max": _INTEGER_ORDER,
    "min": _INTEGER_ORDER,
    "and": _INTEGER_BITS,
    "or": _INTEGER_BITS,
    "xor": _INTEGER_BITS,
    "exch": _BITS,
    "cas": _BITS,
}
# An element type's register class (asm constraint): the value's, and the result's.
CONSTRAINTS = {"int32": "r", "uint32": "r", "int64": "l", "uint64": "l", "float32": "f"}


def atomic(op: str, dtype: str, sem: str, scope: str) -> AsmCall:
    """``atom.<sem>.<scope>.global.<op>.<type> d, [address], value{, value}`` on a 64-bit
    global address; the statement's comment is its opcode (the interpreter's key)."""
    opcode = f"{ATOMIC_PREFIX}{sem}.{scope}.global.{op}.{ATOMIC_TYPES[op][dtype]}"
    register = CONSTRAINTS[dtype]
    values = (register, register) if op == "cas" else (register,)
    operands = ", ".join(f"${i}" for i in range(2, 2 + len(values)))
    return AsmCall(f"{opcode} $0, [$1], {operands};", (register,), ("l", *values), comment=opcode)


def parse_atomic(opcode: str) -> tuple[str, str]:
    """(operation, PTX type) of an opcode :func:`atomic` made."""
    words = opcode.split(".")
    return words[-2], words[-1]


def fence(sem: str, scope: str) -> AsmCall:
    """``fence.<sem>.<scope>``: orders the thread's memory operations (generic proxy)."""
    opcode = f"fence.{sem}.{scope}"
    return AsmCall(f"{opcode};", comment=opcode)
