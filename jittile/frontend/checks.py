"""Checks of a kernel's or helper's definition before it is lowered.

- :func:`definition_problem`: what kind of Python function it is (a plain ``def`` with named
  parameters; no ``async def``, generator, ``*args`` or ``**kwargs``), from its code object, so
  that ``@jittile.kernel`` refuses it where it is applied.
- :func:`body_problem`: nesting too deep to lower, names jittile reserves for its own temporaries
  (``__jt_...``), and names read before any assignment. The latter is the simple, conservative
  rule: a name the body assigns, read before its first assignment in program order, is refused
  (Python would raise ``UnboundLocalError`` on some path), parameters excepted.
"""

from __future__ import annotations

import ast
import inspect
import linecache

from ..errors import CompileError, Location

RESERVED_PREFIX = "__jt_"
# The deepest a kernel's syntax tree may nest (the repository's kernels: 16); the lowering and
# folding recurse over it, as does Python's own compiler over the lowered kernel.
MAX_NESTING = 100


def definition_problem(pyfunc, what: str = "kernel") -> CompileError | None:
    """A :class:`CompileError` at the definition of ``pyfunc`` when it cannot be a ``what``."""
    code = getattr(pyfunc, "__code__", None)
    if code is None:
        return CompileError(f"a {what} is a Python function (def ...), got {pyfunc!r}")
    location = definition_location(code)
    if inspect.iscoroutinefunction(pyfunc) or inspect.isasyncgenfunction(pyfunc):
        return CompileError(
            f"{pyfunc.__qualname__}: a {what} cannot be an async def; write it as a plain def",
            location,
        )
    if inspect.isgeneratorfunction(pyfunc):
        return CompileError(
            f"{pyfunc.__qualname__}: a {what} cannot yield; write it as a plain def without yield",
            location,
        )
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        return CompileError(
            f"{pyfunc.__qualname__}: a {what} takes named parameters, not *args or **kwargs",
            location,
        )
    return None


def definition_location(code) -> Location:
    """Where a function's ``def`` is (``co_firstlineno`` is its first decorator's line)."""
    lines = linecache.getlines(code.co_filename)
    for number in range(code.co_firstlineno, min(len(lines), code.co_firstlineno + 20) + 1):
        if lines[number - 1].lstrip().startswith(("def ", "async def ")):
            return Location(code.co_filename, number, 0)
    return Location(code.co_filename, code.co_firstlineno, 0)


def body_problem(tree: ast.FunctionDef) -> tuple[ast.AST, str] | None:
    """``(node, message)`` for nesting past :data:`MAX_NESTING`, the first reserved name, or the
    first read-before-assignment in ``tree``."""
    deepest, depth = _deepest(tree)
    if depth > MAX_NESTING:
        return deepest, (
            f"the code nests {depth} levels deep here, more than the {MAX_NESTING} "
            f"jittile lowers; split the expression into several assignments or the "
            f"nested blocks into helpers"
        )
    for node in ast.walk(tree):
        name = (
            node.id
            if isinstance(node, ast.Name)
            else node.arg
            if isinstance(node, ast.arg)
            else None
        )
        if name is not None and name.startswith(RESERVED_PREFIX):
            return node, (
                f"the name {name!r} is reserved: jittile names its own temporaries "
                f"{RESERVED_PREFIX}...; rename it"
            )
    order = _ProgramOrder(tree)
    order.visit_body(tree.body)
    if order.early is not None:
        node, first = order.early
        return node, (
            f"{node.id!r} is read here before it is assigned (its first assignment is "
            f"at line {first.lineno}); assign it before this use"
        )
    return None


def _deepest(tree: ast.AST) -> tuple[ast.AST, int]:
    """The deepest node of ``tree`` that has a position, and its depth (counted iteratively)."""
    deepest, best = tree, 1
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > best and hasattr(node, "lineno"):
            deepest, best = node, depth
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest, best


def assigned_names(tree: ast.FunctionDef) -> dict[str, ast.Name]:
    """Every name the body binds (assignments and loop targets) -> its first binding in the
    file."""
    found: dict[str, ast.Name] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        first = found.get(sub.id)
                        if first is None or (sub.lineno, sub.col_offset) < (
                            first.lineno,
                            first.col_offset,
                        ):
                            found[sub.id] = sub
    return found


class _ProgramOrder(ast.NodeVisitor):
    """Walks statements in the order they run (an assignment's value before its targets, a loop's
    iterable before its target and body) and records the first read of a local name that no
    earlier statement assigned."""

    def __init__(self, tree: ast.FunctionDef):
        args = tree.args
        self.locals = assigned_names(tree)
        self.assigned = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        self.early: tuple[ast.Name, ast.Name] | None = None

    def visit_body(self, statements: list) -> None:
        for statement in statements:
            if self.early is None:
                self.visit(statement)

    def visit_Name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self.assigned.add(node.id)
        elif node.id in self.locals and node.id not in self.assigned and self.early is None:
            self.early = (node, self.locals[node.id])

    def visit_Assign(self, node: ast.Assign) -> None:
        self.visit(node.value)
        for target in node.targets:
            self.visit(target)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self.visit(node.value)
            self.visit(node.target)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name):
            self.visit_Name(
                ast.copy_location(ast.Name(id=node.target.id, ctx=ast.Load()), node.target)
            )
        self.visit(node.value)
        self.visit(node.target)

    def visit_For(self, node: ast.For) -> None:
        self.visit(node.iter)
        self.visit(node.target)
        self.visit_body(node.body)
        self.visit_body(node.orelse)

    def _skip(self, node: ast.AST) -> None:
        """Nested scopes bind their own names; the lowering refuses them anyway."""

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = visit_ClassDef = _skip
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _skip
