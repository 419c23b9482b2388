"""Calls of the kernel language, checked before lowering: every call of a ``T`` function binds to
its signature (the one ``inspect.signature`` and ``help()`` show), and every name read from a
``T`` namespace exists (else a did-you-mean)."""

from __future__ import annotations

import ast
import inspect

from ..errors import CompileError, closest_name
from ..ir import LaunchConfig
from ..language import cuda as Lcuda
from ..language.markers import Intrinsic, Namespace, call_signature
from ..language.types import ScalarType, Tensor
from .static import RUNTIME, StaticScope, evaluate
from .syntax import src


def _resolve(node: ast.AST, scope: StaticScope):
    try:
        return evaluate(node, scope)
    except NameError:
        return RUNTIME


def is_language_callable(obj) -> bool:
    """``T.cuda.lane_id``, ``T.uint32``, ``T.Tensor``, ``T.cuda.LaunchConfig``..."""
    return isinstance(obj, (Intrinsic, ScalarType)) or obj is Tensor or obj is LaunchConfig


def is_language_namespace(obj) -> bool:
    return isinstance(obj, Namespace) or obj is Lcuda


def check_calls(tree: ast.AST, scope: StaticScope, location) -> None:
    """Raise a located :class:`CompileError` at the first misspelled ``T`` name or ``T`` call
    whose arguments do not bind (``location(node)`` places a node)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            base = _resolve(node.value, scope)
            if is_language_namespace(base) and not hasattr(base, node.attr):
                raise _unknown_name(node, base, location)
        elif isinstance(node, ast.Call):
            target = _resolve(node.func, scope)
            if is_language_callable(target):
                _bind(node, target, location)


def _unknown_name(node: ast.Attribute, base, location) -> CompileError:
    owner = src(node.value)
    close = closest_name(node.attr, dir(base))
    mean = f"; did you mean {owner}.{close}?" if close else ""
    return CompileError(
        f"{owner} has no name {node.attr!r}{mean} (`help({owner})` lists them)", location(node)
    )


def _bind(node: ast.Call, target, location) -> None:
    signature = call_signature(target)
    shown = f"{src(node.func)}{signature}"
    for arg in node.args:
        if isinstance(arg, ast.Starred):
            raise CompileError(
                f"{src(node.func)}(...) cannot take *{src(arg.value)}: kernel-"
                f"language calls are checked as written; the signature is {shown}",
                location(arg),
            )
    for keyword in node.keywords:
        if keyword.arg is None:
            raise CompileError(
                f"{src(node.func)}(...) cannot take **{src(keyword.value)}: kernel-"
                f"language calls are checked as written; the signature is {shown}",
                location(keyword),
            )
    try:
        signature.bind(*node.args, **{k.arg: k.value for k in node.keywords})
    except TypeError as exc:
        unknown = [k.arg for k in node.keywords if k.arg not in signature.parameters]
        close = closest_name(unknown[0], signature.parameters) if unknown else None
        mean = f" (did you mean {close}=?)" if close else ""
        raise CompileError(
            f"{src(node)}: {exc}{mean}; the signature is {shown}",
            location(_offending(node, signature, str(exc))),
        ) from None


def _offending(node: ast.Call, signature: inspect.Signature, reason: str) -> ast.AST:
    """The argument a binding error is about (an extra positional argument or a keyword), else
    the call."""
    for keyword in node.keywords:
        if repr(keyword.arg) in reason:
            return keyword
    kinds = [p.kind for p in signature.parameters.values()]
    if "too many positional" in reason and inspect.Parameter.VAR_POSITIONAL not in kinds:
        positional = sum(
            k in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            for k in kinds
        )
        return node.args[positional]
    return node
