"""Scalar arithmetic with the types numba-cuda gives it: the interpreter's and compile-time
folding's.

The lowered kernel is the function numba-cuda compiles, and numba types its scalar arithmetic
by its own rules, not NumPy's (``numba/core/typing/builtins.py``: integer operators are defined
on 64-bit integers only, smaller ones are widened first):

- integers and booleans: ``+ - * // % **`` and ``& | ^`` compute in 64 bits, unsigned only when
  both operands are (``int32 * int32`` is ``int64``: no overflow at 2**31; ``uint32 + int64`` is
  ``int64``); ``bool & bool`` stays ``bool``; a shift keeps its left operand's signedness at 64
  bits; ``/`` gives ``float64``;
- floats: ``float32`` with ``float32`` (or a bool, int8, int16 or uint8, which float32 holds
  exactly) stays ``float32``; with a ``float64``, a wider integer or a Python literal
  (``x * 0.1``, ``x + 1``) the operation is ``float64``; ``float32 ** integer`` stays
  ``float32``;
- unary ``-``, ``+`` and ``~`` widen integers to 64 bits of their signedness (``~bool`` is
  ``bool``, ``-bool`` ``int64``);
- a Python int literal is an ``int64`` (a ``uint64`` from 2**63), a Python float a ``float64``.

NumPy instead keeps ``int32 * int32`` in 32 bits and ``float32 * 0.1`` in float32 (NEP 50), so
the interpreter runs every arithmetic operator of the lowered function through :func:`binop` /
:func:`unop` (``jittile/interpreter/program.py`` rewrites them), which give the result
numba-cuda's code computes: the 64-bit integer operations wrap as the GPU's do. Compile-time
folding (``jittile/frontend/static.py``) applies them where an operand is a NumPy scalar (a
``T.uint32(...)`` constant, say), so a folded expression has the value the GPU would compute. Operands whose like-typed operation NumPy
already computes alike (two ``int64``, two ``float32``...) take the plain operator.
tests/test_interpreter_arithmetic.py compares these rules with numba's typing context over
every operator and operand type.
"""

from __future__ import annotations

import operator

import numpy as np

# Like-typed operands NumPy computes as numba does (Python ints: int64 short of 2**63).
_NATIVE = frozenset({int, float, np.int64, np.uint64, np.float32, np.float64})
_SIGNED = frozenset({np.int8, np.int16, np.int32, np.int64, np.bool_})
_UNSIGNED = frozenset({np.uint8, np.uint16, np.uint32, np.uint64})
_FLOATS = frozenset({np.float16, np.float32, np.float64})
# integers numba converts to float32 exactly, so float32 with one stays float32 (int32 does not)
_TO_FLOAT32 = frozenset({np.bool_, np.int8, np.int16, np.uint8})
_BITWISE = frozenset({operator.and_, operator.or_, operator.xor})
_SHIFTS = frozenset({operator.lshift, operator.rshift})
_MASK = (1 << 64) - 1


def numba_type(value) -> type:
    """The NumPy scalar type numba gives ``value`` (a Python literal or a NumPy scalar)."""
    kind = type(value)
    if kind is bool:
        return np.bool_
    if kind is int:
        return np.uint64 if value >= 1 << 63 else np.int64
    if kind is float:
        return np.float64
    return kind


def result_type(op, left: type, right: type) -> type | None:
    """The type of ``left op right`` in numba's code (None: one numba does not type, such as a
    float shift, which the compile rejects first)."""
    floats = left in _FLOATS or right in _FLOATS
    if floats:
        if op in _BITWISE or op in _SHIFTS:
            return None
        if op is operator.pow and left is np.float32 and right not in _FLOATS:
            return np.float32
        narrow = (left is np.float32 or left in _TO_FLOAT32) and (
            right is np.float32 or right in _TO_FLOAT32
        )
        return np.float32 if narrow else np.float64
    if op is operator.truediv:
        return np.float64
    if op in _BITWISE and left is np.bool_ and right is np.bool_:
        return np.bool_
    if op in _SHIFTS:
        return np.uint64 if left in _UNSIGNED else np.int64
    return np.uint64 if left in _UNSIGNED and right in _UNSIGNED else np.int64


def unary_type(op, operand: type) -> type:
    """The type of ``op operand`` (``-``, ``+``, ``~``) in numba's code."""
    if operand in _FLOATS:
        return operand
    if operand is np.bool_ and op is operator.invert:
        return np.bool_
    return np.uint64 if operand in _UNSIGNED else np.int64


_RESULTS: dict = {}  # (op, left type, right type) -> result type


def binop(op, a, b):
    """``op(a, b)`` with numba's result type and, for integers, its 64-bit wraparound."""
    kind = type(a)
    if kind is type(b) and kind in _NATIVE:
        return op(a, b)
    key = (op, numba_type(a), numba_type(b))
    result = _RESULTS.get(key)
    if result is None:
        result = _RESULTS[key] = result_type(*key)
    if result is None or result is np.bool_:
        return op(a, b)
    if result in _FLOATS:
        if op is operator.pow and result is np.float32:
            return np.float32(np.float32(a) ** np.float32(b))
        return op(result(a), result(b))
    return _integer(op, int(a), int(b), result)


def unop(op, a):
    """``op(a)`` for unary ``-``, ``+`` and ``~``, with numba's result type."""
    kind = type(a)
    if kind in _NATIVE:
        return op(a)
    result = unary_type(op, numba_type(a))
    if result in _FLOATS or result is np.bool_:
        return op(a)
    return _wrap(op(int(a)), result)


def _integer(op, a: int, b: int, result: type):
    """An integer operation as 64-bit code computes it (division by zero gives 0, as NumPy)."""
    if op in (operator.floordiv, operator.mod) and b == 0:
        return result(0)
    if op in _SHIFTS:
        if not 0 <= b < 64:  # beyond the width: what LLVM leaves undefined, as 0
            return result(0)
        a = _wrap(a, result) if op is operator.rshift else a
        return _wrap(op(int(a), b), result)
    if op is operator.pow:  # modular: the low 64 bits without the whole power
        return result(0) if b < 0 else _wrap(pow(a, b, 1 << 64), result)
    if op in (operator.floordiv, operator.mod):  # on the operands as that type holds them
        return _wrap(op(int(_wrap(a, result)), int(_wrap(b, result))), result)
    return _wrap(op(a, b), result)


def _wrap(value: int, result: type):
    """``value`` modulo 2**64, as ``result`` (int64 or uint64) holds it."""
    value &= _MASK
    if result is np.int64 and value >> 63:
        value -= 1 << 64
    return result(value)


# The operators of the lowered function's ``ast.BinOp`` / ``ast.AugAssign`` and ``ast.UnaryOp``
# nodes, by the global name the interpreter's rewritten code calls them through.
BINARY = {
    "Add": operator.add,
    "Sub": operator.sub,
    "Mult": operator.mul,
    "Div": operator.truediv,
    "FloorDiv": operator.floordiv,
    "Mod": operator.mod,
    "Pow": operator.pow,
    "LShift": operator.lshift,
    "RShift": operator.rshift,
    "BitOr": operator.or_,
    "BitXor": operator.xor,
    "BitAnd": operator.and_,
}
UNARY = {"USub": operator.neg, "UAdd": operator.pos, "Invert": operator.invert}
BINOP, UNOP = "__jt_binop", "__jt_unop"


def operator_global(name: str) -> str:
    """The global through which the rewritten code names operator ``name`` (``"Add"``)."""
    return f"__jt_op_{name}"


GLOBALS = {
    BINOP: binop,
    UNOP: unop,
    **{operator_global(name): fn for name, fn in {**BINARY, **UNARY}.items()},
}
