"""Where each piece of the lowered kernel came from, so that a later compiler's error names the
user's code.

Lowering tags the nodes it makes with their origin (:func:`tag`: the user's node and its
``Location``, which may be in a helper's file). Before the lowered function is compiled,
:func:`number_lines` gives every node its own line number and returns the table from those numbers
to origins: a backend error reported at line ``N`` of the compiled function maps back to the
user's expression, even inside one statement.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from ..errors import Location

HELPER_PREFIX = re.compile(r"__jt_h\d+_")  # how inlining renames a helper's names apart


@dataclass(frozen=True)
class Origin:
    """The user's node a piece of lowered code came from, and where it is."""

    location: Location
    node: ast.AST

    @property
    def text(self) -> str:
        """The user's code, its first line, shortened for a message."""
        if isinstance(self.node, ast.FunctionDef):
            return f"def {self.node.name}(...)"
        text = ast.unparse(self.node).splitlines()[0] if hasattr(self.node, "lineno") else ""
        text = HELPER_PREFIX.sub("", text)
        return text if len(text) <= 80 else text[:77] + "..."


def tag(lowered: ast.AST, origin: Origin) -> ast.AST:
    """Record ``origin`` on ``lowered`` unless it already has one (inner lowering is more
    precise); returns ``lowered``."""
    if getattr(lowered, "_jt_origin", None) is None:
        lowered._jt_origin = origin
    return lowered


def origin_of(node: ast.AST) -> Origin | None:
    return getattr(node, "_jt_origin", None)


def number_lines(function: ast.FunctionDef) -> dict[int, Origin]:
    """Number the lines of ``function``'s nodes 1, 2, 3... in walk order (each node alone on its
    line, which Python's compiler accepts) and map each number to the origin of the node, or of
    its closest tagged ancestor."""
    table: dict[int, Origin] = {}
    line = 0
    stack = [(function, origin_of(function))]
    while stack:
        node, inherited = stack.pop()
        origin = origin_of(node) or inherited
        if "lineno" in node._attributes:
            line += 1
            node.lineno = node.end_lineno = line
            node.col_offset = node.end_col_offset = 0
            if origin is not None:
                table[line] = origin
        stack.extend((child, origin) for child in reversed(list(ast.iter_child_nodes(node))))
    return table
