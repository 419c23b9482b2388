"""Inlining ``@jittile.func`` helpers: a call becomes the helper's body with its names renamed apart.

Pure AST work; the lowering decides how each argument binds (see ``KernelLowering.inline``):

- ``bind`` matches a call's arguments to the helper's parameters by Python's rules;
- ``names_of`` sorts the helper's names into parameters, names its body assigns, and free names
  (which resolve in the helper's own module, not the caller's);
- ``inline_body`` copies the body, renaming names and substituting argument expressions, and turns
  a final ``return value`` into an assignment to the call's targets.
"""
from __future__ import annotations

import ast
import copy
from dataclasses import dataclass


class InlineError(ValueError):
    """A helper call or body that cannot be inlined; ``node`` is where."""

    def __init__(self, node: ast.AST, message: str):
        super().__init__(message)
        self.node = node


@dataclass
class Binding:
    """Per parameter, the caller's argument expression, or (when not given) the helper's default."""

    arguments: dict[str, ast.expr]
    defaults: dict[str, ast.expr]


@dataclass
class HelperNames:
    params: list[str]
    assigned: set[str]  # names the body binds (its locals)
    free: set[str]  # read but neither a parameter nor assigned: the helper's globals and builtins


def bind(tree: ast.FunctionDef, call: ast.Call) -> Binding:
    args = tree.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        raise InlineError(tree, f"helper {tree.name} may only have positional-or-keyword parameters")
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise InlineError(call, f"{tree.name}(...) cannot take *args or **kwargs")
    if len(call.args) > len(names):
        raise InlineError(call, f"{tree.name} takes {len(names)} arguments, got {len(call.args)}")
    given = dict(zip(names, call.args))
    for keyword in call.keywords:
        if keyword.arg not in names:
            raise InlineError(keyword, f"{tree.name} has no parameter {keyword.arg!r}")
        if keyword.arg in given:
            raise InlineError(keyword, f"{tree.name} got {keyword.arg!r} twice")
        given[keyword.arg] = keyword.value
    defaults = dict(zip(names[len(names) - len(args.defaults):], args.defaults))
    for name in names:
        if name not in given and name not in defaults:
            raise InlineError(call, f"{tree.name} is missing argument {name!r}")
    return Binding({n: given[n] for n in names if n in given},
                   {n: defaults[n] for n in names if n not in given})


def names_of(tree: ast.FunctionDef) -> HelperNames:
    params = [a.arg for a in [*tree.args.posonlyargs, *tree.args.args]]
    assigned: set[str] = set()
    loaded: set[str] = set()
    for statement in tree.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                (loaded if isinstance(node.ctx, ast.Load) else assigned).add(node.id)
            elif isinstance(node, (ast.FunctionDef, ast.Lambda, ast.ClassDef, ast.Global,
                                   ast.Nonlocal)):
                raise InlineError(node, f"helper {tree.name} cannot define {type(node).__name__} "
                                        f"here")
    return HelperNames(params, assigned, loaded - set(params) - assigned)


class _Renamer(ast.NodeTransformer):
    def __init__(self, renames: dict[str, str], substitutions: dict[str, ast.expr]):
        self.renames = renames
        self.substitutions = substitutions

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if isinstance(node.ctx, ast.Load) and node.id in self.substitutions:
            return ast.copy_location(copy.deepcopy(self.substitutions[node.id]), node)
        if node.id in self.renames:
            return ast.copy_location(ast.Name(id=self.renames[node.id], ctx=node.ctx), node)
        return node


def inline_body(tree: ast.FunctionDef, call: ast.Call, renames: dict[str, str],
                substitutions: dict[str, ast.expr], targets: list[ast.expr] | None) -> list[ast.stmt]:
    """The helper's statements for one call: names renamed (``renames``), parameters bound to
    caller expressions replaced by them (``substitutions``), the docstring dropped, and a final
    ``return value`` assigned to ``targets`` (evaluated as a statement when there are none)."""
    body = list(tree.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    result = body.pop() if body and isinstance(body[-1], ast.Return) else None
    for statement in body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Return):
                raise InlineError(node, f"helper {tree.name} may return only as its last statement")
    renamer = _Renamer(renames, substitutions)
    out = [renamer.visit(copy.deepcopy(statement)) for statement in body]
    if result is not None and result.value is not None:
        value = renamer.visit(copy.deepcopy(result.value))
        if targets:
            out.append(ast.copy_location(ast.Assign(targets=targets, value=value), result))
        else:
            out.append(ast.copy_location(ast.Expr(value=value), result))
    elif targets:
        raise InlineError(call, f"helper {tree.name} returns no value to assign")
    return out
