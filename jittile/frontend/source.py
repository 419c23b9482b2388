"""Kernel source: the function's AST with positions that point into the real file."""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import CompileError, Location


@dataclass
class KernelSource:
    """A kernel function's parsed definition and the scopes its names resolve in."""

    pyfunc: object
    name: str
    qualname: str
    filename: str
    firstlineno: int
    text: str
    tree: ast.FunctionDef
    globals: dict
    closure: dict

    def location(self, node: ast.AST) -> Location:
        return Location(self.filename, getattr(node, "lineno", self.firstlineno),
                        getattr(node, "col_offset", 0))


def load_source(pyfunc) -> KernelSource:
    """Parse ``pyfunc``'s source; line and column numbers of every node match the file."""
    try:
        lines, firstlineno = inspect.getsourcelines(pyfunc)
        filename = inspect.getsourcefile(pyfunc) or inspect.getfile(pyfunc)
    except (OSError, TypeError) as exc:
        raise CompileError(f"cannot read the source of {pyfunc!r}: {exc}") from exc
    raw = "".join(lines)
    text = textwrap.dedent(raw)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    module = ast.parse(text)
    funcs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not funcs:
        raise CompileError(f"{pyfunc.__qualname__} is not a function definition",
                           Location(filename, firstlineno, 0))
    tree = funcs[0]
    ast.increment_lineno(tree, firstlineno - 1)
    if indent:
        for node in ast.walk(tree):
            if hasattr(node, "col_offset"):
                node.col_offset += indent
                if getattr(node, "end_col_offset", None) is not None:
                    node.end_col_offset += indent
    tree.decorator_list = []
    closure = {}
    if pyfunc.__closure__:
        for name, cell in zip(pyfunc.__code__.co_freevars, pyfunc.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                continue
    return KernelSource(pyfunc, pyfunc.__name__, pyfunc.__qualname__, filename, firstlineno, text,
                        tree, pyfunc.__globals__, closure)
