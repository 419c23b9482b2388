"""Printing plan values into the lowered kernel: each :mod:`jittile.ir` expression becomes the
Python expression numba-cuda compiles (thread registers, shared and global addresses, arithmetic).

The lowered function refers to numba objects by these generated global names; the backend binds
each one (``jittile.backend.compiler``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from ..ir import BinOp, DescriptorWord, Expr, GlobalAddress, HostParam, SharedAddress, Special, Var
from ..ptx import builtins
from .syntax import name as _name

CUDA = "__jt_cuda"
SHARED_ADDRESS = "__jt_saddr"
GLOBAL_ADDRESS = "__jt_gaddr"
DESCRIPTOR_WORD = "__jt_mdesc"

_OPERATORS = {
    "+": ast.Add,
    "*": ast.Mult,
    "%": ast.Mod,
    ">>": ast.RShift,
    "&": ast.BitAnd,
    "|": ast.BitOr,
}


def address_buffer(lowered: ast.expr | None) -> str | None:
    """The shared buffer variable a lowered address points into (``buf.ptr_to([...])`` lowers
    to ``__jt_saddr(buf, index)``), or None where the address is any other value."""
    if (
        isinstance(lowered, ast.Call)
        and isinstance(lowered.func, ast.Name)
        and lowered.func.id == SHARED_ADDRESS
        and lowered.args
        and isinstance(lowered.args[0], ast.Name)
    ):
        return lowered.args[0].id
    return None


def cuda_attribute(*attrs: str) -> ast.expr:
    node: ast.expr = _name(CUDA)
    for attr in attrs:
        node = ast.Attribute(value=node, attr=attr, ctx=ast.Load())
    return node


def linear_index(idx: str, dim: str) -> ast.expr:
    """``idx.x + idx.y * dim.x + idx.z * dim.x * dim.y`` (threadIdx/blockDim, blockIdx/gridDim)."""
    x, y, z = (cuda_attribute(idx, a) for a in "xyz")
    dx, dy = cuda_attribute(dim, "x"), cuda_attribute(dim, "y")
    mul = lambda a, b: ast.BinOp(left=a, op=ast.Mult(), right=b)  # noqa: E731
    plus = lambda a, b: ast.BinOp(left=a, op=ast.Add(), right=b)  # noqa: E731
    return plus(plus(x, mul(y, dx)), mul(mul(z, dx), dy))


def render(expr: Expr, asm_name: Callable) -> ast.expr:
    """The lowered-kernel expression computing ``expr``; ``asm_name(AsmCall)`` names the
    intrinsic of an asm statement (a special register read)."""
    if isinstance(expr, int):
        return ast.Constant(value=expr)
    if isinstance(expr, (Var, HostParam)):
        return _name(expr.name)
    if isinstance(expr, BinOp):
        return ast.BinOp(
            left=render(expr.left, asm_name),
            op=_OPERATORS[expr.op](),
            right=render(expr.right, asm_name),
        )
    if isinstance(expr, SharedAddress):
        base = ast.Call(
            func=_name(SHARED_ADDRESS),
            args=[_name(expr.buffer), ast.Constant(value=0)],
            keywords=[],
        )
        if expr.offset == 0:
            return base
        return ast.BinOp(left=base, op=ast.Add(), right=render(expr.offset, asm_name))
    if isinstance(expr, DescriptorWord):
        return ast.Call(
            func=_name(DESCRIPTOR_WORD),
            args=[render(expr.start, asm_name), ast.Constant(value=expr.fields)],
            keywords=[],
        )
    if isinstance(expr, GlobalAddress):
        index = ast.Tuple(elts=[render(i, asm_name) for i in expr.index], ctx=ast.Load())
        return ast.Call(func=_name(GLOBAL_ADDRESS), args=[_name(expr.tensor), index], keywords=[])
    if isinstance(expr, Special):
        if expr.register == "lane":
            return cuda_attribute("laneid")
        if expr.register == "thread":
            return linear_index("threadIdx", "blockDim")
        return ast.Call(func=_name(asm_name(builtins.CLUSTER_CTARANK)), args=[], keywords=[])
    raise TypeError(f"not a plan value: {expr!r}")
