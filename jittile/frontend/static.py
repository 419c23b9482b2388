"""Compile-time evaluation: which expressions of a kernel are static, and their values.

Literals, ``T.constexpr`` parameters, module globals, names assigned once from static values, and
arithmetic, tuples, subscripts and attribute reads on them are folded. Calls fold only for pure
constructors of the kernel language (layouts, ``T.Tensor``, ``LaunchConfig``) and a few builtins.
Everything else is a runtime value.
"""
from __future__ import annotations

import ast
import builtins
import operator
import types as pytypes


class _Runtime:
    def __repr__(self) -> str:
        return "RUNTIME"


RUNTIME = _Runtime()

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.LShift: operator.lshift, ast.RShift: operator.rshift, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.Div: operator.truediv,
           ast.MatMult: operator.matmul}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert,
          ast.Not: operator.not_}
_COMPARE = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
            ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Is: operator.is_,
            ast.IsNot: operator.is_not, ast.In: lambda a, b: a in b,
            ast.NotIn: lambda a, b: a not in b}
_PURE_BUILTINS = {len, min, max, abs, int, tuple, sum, range, bool, float, list}
_PURE_MODULES = ("jittile.layout", "jittile.axis", "jittile.language.types", "jittile.ir",
                 "jittile.language.cuda", "jittile.dtypes")


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
    """The static value of ``node``, or ``RUNTIME``. Unknown names raise ``NameError``."""
    if isinstance(node, ast.Constant):
        return node.value
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
    if isinstance(node, (ast.Tuple, ast.List)):
        values = [evaluate(e, scope) for e in node.elts]
        if any(v is RUNTIME for v in values):
            return RUNTIME
        return tuple(values)
    if isinstance(node, ast.Slice):
        parts = [evaluate(p, scope) if p is not None else None
                 for p in (node.lower, node.upper, node.step)]
        if any(p is RUNTIME for p in parts):
            return RUNTIME
        return slice(*parts)
    if isinstance(node, ast.Subscript):
        base = evaluate(node.value, scope)
        index = evaluate(node.slice, scope)
        if base is RUNTIME or index is RUNTIME:
            return RUNTIME
        try:
            return base[index]
        except Exception:
            return RUNTIME
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = evaluate(node.left, scope), evaluate(node.right, scope)
        if left is RUNTIME or right is RUNTIME:
            return RUNTIME
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        operand = evaluate(node.operand, scope)
        return RUNTIME if operand is RUNTIME else _UNARY[type(node.op)](operand)
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, scope)
        if left is RUNTIME:
            return RUNTIME
        for op, comp in zip(node.ops, node.comparators):
            right = evaluate(comp, scope)
            if right is RUNTIME or type(op) not in _COMPARE:
                return RUNTIME
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
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
        fn = evaluate(node.func, scope)
        if fn is RUNTIME or not is_pure_callable(fn):
            return RUNTIME
        args = [evaluate(a, scope) for a in node.args]
        kwargs = {k.arg: evaluate(k.value, scope) for k in node.keywords if k.arg}
        if any(a is RUNTIME for a in args) or any(v is RUNTIME for v in kwargs.values()):
            return RUNTIME
        return fn(*args, **kwargs)
    return RUNTIME
