"""Kernel loops (a part of :class:`~.lower.KernelLowering`): ``while``, ``for`` over
``range(...)``, ``T.grid(...)`` (nested run-time loops) and ``T.unroll(...)`` (one copy of the
body per value), and the statement budget that keeps numba-cuda's compile time bounded."""

from __future__ import annotations

import ast
import copy

from .. import language as L
from ..errors import CompileError
from .static import sequence_length
from .syntax import name as _name
from .syntax import src
from .unsupported import LOOP_HINT

# Limits that keep compile times bounded. The repository's kernels (examples/, tests/, bench/)
# unroll at most 4 iterations and lower to at most 128 statements; numba-cuda's typing time grows
# about quadratically with the function: 1024 one-line statements take it about a minute.
MAX_UNROLL = 256  # iterations of one T.unroll loop
MAX_STATEMENTS = 1024  # statements of the lowered kernel


class LoopLowering:
    """Loop statements (a part of :class:`~.lower.KernelLowering`)."""

    def stmt_While(self, node: ast.While):
        if node.orelse:
            raise self.error(node, "while/else is not supported in kernels")
        return [ast.While(test=self.expr(node.test), body=self.block(node.body), orelse=[])]

    def stmt_For(self, node: ast.For):
        if node.orelse:
            raise self.error(node, "for/else is not supported in kernels")
        it = node.iter
        if isinstance(it, ast.Call) and self.resolve(it.func) is L.grid:
            names = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
            if len(names) != len(it.args) or not all(isinstance(n, ast.Name) for n in names):
                raise self.error(
                    node, f"T.grid with {len(it.args)} extents needs as many loop names"
                )
            body = self.block(node.body)
            for name, extent in reversed(list(zip(names, it.args))):
                self.locals.add(name.id)
                rng = ast.Call(func=_name("range"), args=[self.expr(extent)], keywords=[])
                body = [
                    ast.copy_location(
                        ast.For(target=_name(name.id, ast.Store()), iter=rng, body=body, orelse=[]),
                        node,
                    )
                ]
            return body
        if isinstance(it, ast.Call) and self.resolve(it.func) is L.unroll:
            return self.unrolled_for(node)
        if isinstance(it, ast.Call) and self.resolve(it.func) is range:
            return [
                ast.For(
                    target=self.store_target(node.target),
                    iter=ast.Call(
                        func=_name("range"), args=[self.expr(a) for a in it.args], keywords=[]
                    ),
                    body=self.block(node.body),
                    orelse=[],
                )
            ]
        raise CompileError(
            f"kernel loops iterate over range(...), T.grid(...) or T.unroll(...), not {src(it)}",
            self.loc(node.iter),
            hint=LOOP_HINT,
        )

    def unrolled_for(self, node: ast.For) -> list[ast.stmt]:
        """``for s in T.unroll(...)``: one copy of the body per value, ``s`` static in each."""
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "T.unroll binds a single loop name")
        bounds = [self.static(a) for a in node.iter.args]
        if (
            not bounds
            or len(bounds) > 3
            or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds)
        ):
            raise self.error(
                node.iter, "T.unroll(...) takes one to three compile-time integers, like range()"
            )
        if 0 in bounds[2:]:
            raise self.error(node.iter, "T.unroll(...) step must not be zero")
        values = range(*bounds)
        count = sequence_length(values)
        if count > MAX_UNROLL:
            raise self.error(
                node.iter,
                f"T.unroll over {count} iterations is more than the "
                f"{MAX_UNROLL} jittile unrolls: each copy of the body is "
                f"compiled separately; use range(...) for a run-time loop "
                f"and keep T.unroll for the few stages that tile calls "
                f"must name statically",
            )
        name = node.target.id
        out: list[ast.stmt] = []
        self._unrolled.add(name)
        emitted = 0
        for value in values:
            self.scope.statics[name] = value
            copies = self.block(copy.deepcopy(node.body))
            emitted += statement_count(copies)
            self.check_statement_budget(node.iter, emitted)
            out.extend(copies)
        self.scope.statics.pop(name, None)
        self._unrolled.discard(name)
        return out

    def check_statement_budget(self, node: ast.AST, count: int) -> None:
        """Refuse a kernel that lowers to more statements than numba-cuda compiles in reasonable
        time (its typing time grows faster than linearly with the function's size)."""
        if count > MAX_STATEMENTS:
            raise self.error(
                node,
                f"the kernel expands to more than {MAX_STATEMENTS} statements "
                f"(T.unroll copies, inlined helpers and tile-call instructions "
                f"count), which would take numba-cuda minutes to compile; use "
                f"range(...) loops for repeated work",
            )


def statement_count(statements: list[ast.stmt]) -> int:
    """Statements in ``statements``, nested ones included."""
    return sum(isinstance(n, ast.stmt) for s in statements for n in ast.walk(s))
