"""Size limits on jittile's code: no class longer than 400 lines, no function (methods and nested
functions included) longer than 80, decorators counted. Long units mix concerns; split them."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "jittile"
MAX_CLASS_LINES = 400
MAX_FUNCTION_LINES = 80


def _span(node: ast.AST) -> int:
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return node.end_lineno - first + 1


def oversized(tree: ast.AST) -> list[str]:
    """``"kind name: N lines"`` for each class or function of ``tree`` over its limit."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            kind, limit = "class", MAX_CLASS_LINES
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind, limit = "function", MAX_FUNCTION_LINES
        else:
            continue
        if _span(node) > limit:
            found.append(
                f"{kind} {node.name} at line {node.lineno}: {_span(node)} lines (limit {limit})"
            )
    return found


def test_no_oversized_classes_or_functions():
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        problems += [f"{relative}: {p}" for p in oversized(ast.parse(path.read_text(), relative))]
    assert not problems, "\n".join(problems)


def test_limits_are_measured_from_the_first_decorator_to_the_last_line():
    body = "\n".join(["    x = 1"] * (MAX_FUNCTION_LINES - 2))
    fits = f"@decorator\ndef f():\n{body}\n"
    assert oversized(ast.parse(fits)) == []
    too_long = f"@decorator\n@another\ndef f():\n{body}\n"
    assert oversized(ast.parse(too_long)) == [
        f"function f at line 3: {MAX_FUNCTION_LINES + 1} lines (limit {MAX_FUNCTION_LINES})"
    ]
    nested = (
        "class C:\n    def m(self):\n        def inner():\n"
        + "\n".join(["            y = 2"] * MAX_FUNCTION_LINES)
        + "\n"
    )
    assert [p.split(" at ")[0] for p in oversized(ast.parse(nested))] == [
        "function m",
        "function inner",
    ]
