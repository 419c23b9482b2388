"""Small helpers for building the lowered kernel's Python AST."""

from __future__ import annotations

import ast

from ..errors import ContractError, Location


def name(id_: str, ctx=None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def src(node: ast.AST) -> str:
    return ast.unparse(node)


def parse_expr(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


def align_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


def located(exc: ContractError, location: Location) -> ContractError:
    """``exc`` at ``location`` unless it already names one."""
    return ContractError(
        exc.rule,
        exc.location or location,
        opcode=exc.opcode,
        parameter=exc.parameter,
        hint=exc.hint,
    )
