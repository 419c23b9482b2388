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

from ..errors import CompileError, ContractError, JittileError
from ..language.markers import DeviceFunction
from .calls import check_calls
from .checks import body_problem
from .positions import HELPER_PREFIX
from .static import RUNTIME, FoldError, StaticScope, evaluate
from .syntax import name as _name


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
        raise InlineError(
            tree, f"helper {tree.name} may only have positional-or-keyword parameters"
        )
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    if any(isinstance(a, ast.Starred) for a in call.args) or any(
        k.arg is None for k in call.keywords
    ):
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
    defaults = dict(zip(names[len(names) - len(args.defaults) :], args.defaults))
    for name in names:
        if name not in given and name not in defaults:
            raise InlineError(call, f"{tree.name} is missing argument {name!r}")
    return Binding(
        {n: given[n] for n in names if n in given},
        {n: defaults[n] for n in names if n not in given},
    )


def names_of(tree: ast.FunctionDef) -> HelperNames:
    problem = body_problem(tree)
    if problem is not None:
        raise InlineError(*problem)
    params = [a.arg for a in [*tree.args.posonlyargs, *tree.args.args]]
    assigned: set[str] = set()
    loaded: set[str] = set()
    for statement in tree.body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                (loaded if isinstance(node.ctx, ast.Load) else assigned).add(node.id)
            elif isinstance(
                node, (ast.FunctionDef, ast.Lambda, ast.ClassDef, ast.Global, ast.Nonlocal)
            ):
                raise InlineError(
                    node, f"helper {tree.name} cannot define {type(node).__name__} here"
                )
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


def inline_body(
    tree: ast.FunctionDef,
    call: ast.Call,
    renames: dict[str, str],
    substitutions: dict[str, ast.expr],
    targets: list[ast.expr] | None,
) -> list[ast.stmt]:
    """The helper's statements for one call: names renamed (``renames``), parameters bound to
    caller expressions replaced by them (``substitutions``), the docstring dropped, and a final
    ``return value`` assigned to ``targets`` (evaluated as a statement when there are none)."""
    body = list(tree.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
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


def assignment_counts(tree: ast.FunctionDef) -> dict[str, int]:
    counts: dict[str, int] = {}

    def add(target):
        if isinstance(target, ast.Name):
            counts[target.id] = counts.get(target.id, 0) + 1
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                add(elt)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                add(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            add(node.target)
            if isinstance(node, ast.AugAssign):
                add(node.target)
        elif isinstance(node, ast.For):
            add(node.target)
            add(node.target)
    return counts


def without_helper_names(exc: JittileError) -> JittileError:
    """``exc`` with inlining's renaming (``__jt_h3_x`` for a helper's ``x``) undone in its
    message; ``exc`` itself when it names no renamed name."""
    if not HELPER_PREFIX.search(str(exc)):
        return exc
    if isinstance(exc, ContractError):
        return ContractError(
            HELPER_PREFIX.sub("", exc.rule),
            exc.location,
            opcode=exc.opcode,
            parameter=exc.parameter and HELPER_PREFIX.sub("", exc.parameter),
        )
    return type(exc)(HELPER_PREFIX.sub("", exc.message), exc.location)


class HelperInlining:
    """``@jittile.func`` calls inlined into the kernel (a part of :class:`KernelLowering`)."""

    # ------------------------------------------------------------------- @jittile.func helpers
    def inline(self, call: ast.Call, helper: DeviceFunction, targets) -> list[ast.stmt]:
        """A helper call, replaced by the helper's body lowered in place.

        Arguments that name a shared buffer, tensor, TMEM tensor or TensorMap, or a region of one,
        are substituted; compile-time values become statics; runtime values are evaluated once,
        into a temporary. The helper's free names resolve in its own module; its locals are
        renamed apart; errors and plan entries point into its file.
        """
        if helper in self._inlining:
            raise self.error(
                call,
                f"helper {helper.__qualname__} calls itself; helpers are inlined, "
                f"so they cannot recurse",
            )
        source, tree = helper.source, helper.source.tree

        def located(exc: InlineError) -> CompileError:
            where = source if any(n is exc.node for n in ast.walk(tree)) else self.source
            return CompileError(str(exc), where.location(exc.node))

        try:
            binding = bind(tree, call)
            names = names_of(tree)
        except InlineError as exc:
            raise located(exc) from None
        if helper.requires is not None:
            self._check_requirements(call, tree.name, helper.requires, binding.arguments)
        prefix = self.fresh("h") + "_"
        own_scope = StaticScope(source.globals, source.closure, {}, set())
        check_calls(
            tree,
            StaticScope(source.globals, source.closure, {}, set(names.params) | names.assigned),
            source.location,
        )
        renames: dict[str, str] = {}
        substitutions: dict[str, ast.expr] = {}
        prelude: list[ast.stmt] = []
        for param, arg in binding.arguments.items():
            if param not in names.assigned and self._is_operand(arg):
                substitutions[param] = arg
                continue
            renames[param] = prefix + param
            value = self.static(arg)
            if value is not RUNTIME and param not in names.assigned:
                self.scope.statics[renames[param]] = value
            else:
                self.scope.runtime_names.add(renames[param])
                prelude += self.statement(
                    ast.copy_location(
                        ast.Assign(targets=[_name(renames[param], ast.Store())], value=arg), call
                    )
                )
        self._bind_defaults(tree, source, binding.defaults, names, prefix, own_scope, renames)
        counts = assignment_counts(tree)
        for name in names.assigned - set(renames):
            renames[name] = prefix + name
            self.scope.runtime_names.add(renames[name])
            if counts.get(name) == 1:
                self._static_candidates.add(renames[name])
        for name in names.free:
            try:
                value = own_scope.lookup(name)
            except NameError:
                use = next(n for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == name)
                raise CompileError(f"name {name!r} is not defined", source.location(use)) from None
            renames[name] = prefix + name
            self.scope.statics[renames[name]] = value
        try:
            body = inline_body(tree, call, renames, substitutions, targets)
        except InlineError as exc:
            raise located(exc) from None
        return prelude + self._helper_body(helper, body)

    def _bind_defaults(
        self, tree, source, defaults: dict, names, prefix: str, own_scope, renames: dict
    ) -> None:
        """A helper's defaults for the parameters its call leaves out: compile-time values the
        body does not rebind, evaluated in the helper's own module."""
        for param, default in defaults.items():
            renames[param] = prefix + param
            try:
                value = evaluate(default, own_scope)
            except NameError as exc:
                raise CompileError(
                    f"name {exc.args[0]!r} is not defined", source.location(default)
                ) from None
            except FoldError as exc:
                raise CompileError(exc.message, source.location(exc.node)) from None
            if value is RUNTIME or param in names.assigned:
                raise CompileError(
                    f"helper {tree.name}: the default of {param!r} must be a "
                    f"compile-time value the body does not rebind",
                    source.location(default),
                )
            self.scope.statics[renames[param]] = value

    def _check_requirements(
        self, call: ast.Call, helper_name: str, requires, arguments: dict[str, ast.expr]
    ) -> None:
        """A helper's contract on its arguments' compile-time values, told at the call."""
        broken = requires({param: self.static(arg) for param, arg in arguments.items()})
        if broken is not None:
            param, problem = broken
            raise self.error(arguments.get(param, call), f"{helper_name}({param}=...): {problem}")

    def _helper_body(self, helper: DeviceFunction, body: list[ast.stmt]) -> list[ast.stmt]:
        """The helper's renamed statements lowered in its own source (errors point into its file
        and name its own variables)."""
        caller, self.source = self.source, helper.source
        self._inlining.append(helper)
        try:
            return self.block(body)
        except JittileError as exc:
            plain = without_helper_names(exc)
            if plain is exc:
                raise
            raise plain from None
        finally:
            self.source = caller
            self._inlining.pop()

    def _is_operand(self, node: ast.expr) -> bool:
        """Whether a helper argument is a shared buffer, tensor, TMEM tensor or TensorMap, a region
        of one (slices, or fewer indices than a shared buffer has axes) or an address in one
        (``buf.ptr_to([...])``), or a whole local array or register fragment: those are
        substituted into the helper (so tile calls see the operand, and byte accounting the
        barrier, as written); anything else, an element included, is a value."""
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "ptr_to"
        ):
            node = node.func.value
        base = node.value if isinstance(node, ast.Subscript) else node
        if not isinstance(base, ast.Name):
            return False
        name = base.id
        if base is node and (name in self.fragments or name in self.local_arrays):
            return True  # a local array or register fragment, whole: the helper indexes it
        if not (
            name in self.shared
            or name in self.arrays
            or name in self.tmem
            or name in self.tensormaps
            or name in self.fragments
        ):
            return False
        if base is node:
            return True
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(i, ast.Slice) for i in indices) or name in self.tmem:
            return True
        return name in self.shared and len(indices) < len(self.shared[name].buffer.shape)
