"""Compile-time evaluation: which expressions of a kernel are static, and their values.

Literals, ``T.constexpr`` parameters, module globals, names assigned once from static values, and
arithmetic, tuples, subscripts and attribute reads on them are folded. Calls fold only for pure
constructors of the kernel language (layouts, ``T.Tensor``, ``LaunchConfig``) and a few builtins.
Everything else is a runtime value.

Folding is bounded: integers stay within ``MAX_INT_BITS`` bits and sequences within
``MAX_ELEMENTS`` elements (``**``, ``<<`` and ``*`` are refused before computing a result past
them), and an operation that fails (``1 // 0``, ``'a' < 1``, a constructor rejecting its
arguments) raises :class:`FoldError` at its node instead of escaping as a Python exception.
"""

from __future__ import annotations

import ast
import builtins
import math
import operator
import types as pytypes

import numpy as np

from .. import scalars
from ..errors import JittileError as _JittileError

MAX_INT_BITS = 4096  # the largest compile-time integer: 2**4096
MAX_ELEMENTS = 10**6  # the longest compile-time tuple, string or range a fold may build or scan


class FoldError(Exception):
    """A compile-time expression that cannot be evaluated; ``node`` is where, ``message`` why."""

    def __init__(self, node: ast.AST, message: str):
        super().__init__(message)
        self.node = node
        self.message = message


class _Runtime:
    def __repr__(self) -> str:
        return "RUNTIME"


RUNTIME = _Runtime()

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.Div: operator.truediv,
    ast.MatMult: operator.matmul,
}
_UNARY = {
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
    ast.Invert: operator.invert,
    ast.Not: operator.not_,
}
_COMPARE = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_PURE_BUILTINS = {len, min, max, abs, int, tuple, sum, range, bool, float, list}
_PURE_MODULES = (
    "jittile.layout",
    "jittile.axis",
    "jittile.language.types",
    "jittile.ir",
    "jittile.language.cuda",
    "jittile.dtypes",
)


class StaticScope:
    """Name resolution for folding: kernel statics shadow closure variables, which shadow globals."""

    def __init__(self, globals_: dict, closure: dict, statics: dict, runtime_names: set[str]):
        self.globals = globals_
        self.closure = closure
        self.statics = statics
        self.runtime_names = runtime_names

    def lookup(self, name: str):
        if name in self.statics:
            return self.statics[name]
        if name in self.runtime_names:
            return RUNTIME
        for scope in (self.closure, self.globals):
            if name in scope:
                return scope[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NameError(name)


def is_pure_callable(fn) -> bool:
    """Whether calling ``fn`` at compile time is safe: builtins we list, and the kernel language's
    own value constructors."""
    if fn in _PURE_BUILTINS:
        return True
    module = getattr(fn, "__module__", "") or ""
    return module.startswith(_PURE_MODULES) and not isinstance(fn, pytypes.ModuleType)


def evaluate(node: ast.AST, scope: StaticScope):
    """The static value of ``node``, or ``RUNTIME``. Unknown names raise ``NameError``; an
    operation that fails or would exceed the folding limits raises :class:`FoldError`."""
    if isinstance(node, ast.Constant):
        return _bounded(node, node.value)
    if isinstance(node, ast.Name):
        return scope.lookup(node.id)
    if isinstance(node, ast.Attribute):
        base = evaluate(node.value, scope)
        if base is RUNTIME:
            return RUNTIME
        try:
            return getattr(base, node.attr)
        except AttributeError:
            return RUNTIME
        except Exception as exc:  # a kernel-language object refusing the attribute
            raise _failed(node, exc) from None
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [evaluate(e, scope) for e in node.elts]
        return RUNTIME if any(v is RUNTIME for v in values) else tuple(values)
    if isinstance(node, ast.Slice):
        parts = [
            evaluate(p, scope) if p is not None else None
            for p in (node.lower, node.upper, node.step)
        ]
        return RUNTIME if any(p is RUNTIME for p in parts) else slice(*parts)
    if isinstance(node, ast.Subscript):
        base, index = evaluate(node.value, scope), evaluate(node.slice, scope)
        if base is RUNTIME or index is RUNTIME:
            return RUNTIME
        try:
            return _bounded(node, base[index])
        except FoldError:
            raise
        except _JittileError as exc:  # a kernel-language object refusing the index
            raise _failed(node, exc) from None
        except Exception:
            return RUNTIME
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = evaluate(node.left, scope), evaluate(node.right, scope)
        if left is RUNTIME or right is RUNTIME:
            return RUNTIME
        _check_binop(node, left, right)
        op = _BINOPS[type(node.op)]
        if _numpy_number(left) or _numpy_number(right):  # as numba's code computes it
            return _apply(node, scalars.binop, op, left, right)
        return _apply(node, op, left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        operand = evaluate(node.operand, scope)
        if operand is RUNTIME:
            return RUNTIME
        op = _UNARY[type(node.op)]
        if _numpy_number(operand) and op is not operator.not_:
            return _apply(node, scalars.unop, op, operand)
        return _apply(node, op, operand)
    if isinstance(node, ast.Compare):
        return _compare(node, scope)
    if isinstance(node, ast.BoolOp):
        values = [evaluate(v, scope) for v in node.values]
        if any(v is RUNTIME for v in values):
            return RUNTIME
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.IfExp):
        test = evaluate(node.test, scope)
        if test is RUNTIME:
            return RUNTIME
        return evaluate(node.body if test else node.orelse, scope)
    if isinstance(node, ast.Call):
        return _call(node, scope)
    return RUNTIME


def _numpy_number(value) -> bool:
    """A NumPy scalar (a typed ``T.uint32(...)`` constant), whose arithmetic follows numba's
    types (jittile/scalars.py); plain Python numbers fold as Python computes them."""
    return isinstance(value, (np.number, np.bool_))


def _compare(node: ast.Compare, scope: StaticScope):
    left = evaluate(node.left, scope)
    if left is RUNTIME:
        return RUNTIME
    for op, comp in zip(node.ops, node.comparators):
        right = evaluate(comp, scope)
        if right is RUNTIME or type(op) not in _COMPARE:
            return RUNTIME
        if not _apply(node, _COMPARE[type(op)], left, right):
            return False
        left = right
    return True


def _call(node: ast.Call, scope: StaticScope):
    fn = evaluate(node.func, scope)
    if fn is RUNTIME or not is_pure_callable(fn):
        return RUNTIME
    if any(k.arg is None for k in node.keywords):
        raise FoldError(
            node,
            f"{ast.unparse(node.func)}(**...) cannot be folded at compile time; "
            f"pass each keyword argument by name",
        )
    args = [evaluate(a, scope) for a in node.args]
    kwargs = {k.arg: evaluate(k.value, scope) for k in node.keywords}
    if any(a is RUNTIME for a in args) or any(v is RUNTIME for v in kwargs.values()):
        return RUNTIME
    for value in [*args, *kwargs.values()]:
        _check_length(node, value)
    return _apply(node, fn, *args, **kwargs)


def _apply(node: ast.AST, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, its failure a :class:`FoldError` at ``node``, its result
    within the folding limits."""
    try:
        value = fn(*args, **kwargs)
    except Exception as exc:
        raise _failed(node, exc) from None
    return _bounded(node, value)


def _failed(node: ast.AST, exc: Exception) -> FoldError:
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    if not isinstance(exc, _JittileError):
        message = f"{type(exc).__name__}: {message}"
    return FoldError(node, f"the compile-time expression {ast.unparse(node)!r} fails: {message}")


def sequence_length(value) -> int | None:
    """Elements of a sequence (a range's by arithmetic: ``len()`` overflows past 2**63)."""
    if isinstance(value, range):
        return max(0, -((value.start - value.stop) // value.step))
    if isinstance(value, (tuple, list, str, bytes, dict, set, frozenset)):
        return len(value)
    return None


def _check_length(node: ast.AST, value) -> None:
    length = sequence_length(value)
    if length is not None and length > MAX_ELEMENTS:
        raise FoldError(
            node,
            f"the compile-time expression {ast.unparse(node)!r} has a sequence "
            f"of {length} elements, over the folding limit of {MAX_ELEMENTS}; "
            f"compute it at run time (a range() loop) or use a smaller value",
        )


def _too_big(node: ast.AST, bits: int) -> FoldError:
    return FoldError(
        node,
        f"the compile-time expression {ast.unparse(node)!r} needs an integer of "
        f"about {bits} bits, over the folding limit of {MAX_INT_BITS} bits "
        f"(2**{MAX_INT_BITS}); kernel integers are at most 64 bits wide",
    )


def _bounded(node: ast.AST, value):
    """``value`` when it is within the folding limits; else a :class:`FoldError`."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise _too_big(node, value.bit_length())
    if isinstance(value, (tuple, list, str, bytes)):
        _check_length(node, value)
    if isinstance(value, np.ndarray):  # T.int32((1, 2)): a NumPy array, no kernel value
        raise FoldError(
            node,
            f"the compile-time expression {ast.unparse(node)!r} makes an array; "
            f"kernel values are scalars",
        )
    return value


def _is_int(value) -> bool:
    return isinstance(value, int)


def _check_binop(node: ast.BinOp, left, right) -> None:
    """Refuse, before computing it, a result past the limits: ``**``, ``<<`` and ``*`` can make
    one from small operands (``10 ** 10 ** 8`` takes minutes to compute)."""
    op = node.op
    if _is_int(left) and _is_int(right):
        if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
            bits = int(right * math.log2(abs(left))) + 1
        elif isinstance(op, ast.LShift) and right > 0 and left:
            bits = left.bit_length() + right
        elif isinstance(op, ast.Mult):
            bits = left.bit_length() + right.bit_length()
        else:
            return
        if bits > MAX_INT_BITS:
            raise _too_big(node, bits)
        return
    if isinstance(op, ast.Mult):
        for seq, count in ((left, right), (right, left)):
            length = sequence_length(seq)
            if length is not None and _is_int(count) and length * max(count, 0) > MAX_ELEMENTS:
                raise FoldError(
                    node,
                    f"the compile-time expression {ast.unparse(node)!r} builds "
                    f"a sequence of {length * count} elements, over the folding "
                    f"limit of {MAX_ELEMENTS}",
                )
