"""The lowered kernel as a program the interpreter can step: one generator per thread.

The frontend's lowered function (the same one numba-cuda compiles) is rewritten so that every
instruction that can block its thread becomes a ``yield``: the plan records (``__jt_rN_K``) and
raw or built-in asm statements (``__jt_asmN``) that wait or run as warp collectives, and each
CTA barrier (``cuda.syncthreads()``). The scheduler receives ``(global name, operand values)``,
carries the instruction out and sends its result back. The other instructions stay calls of
their globals, which run them on the spot (:mod:`.threads`). Positions in the rewritten code
are the kernel's own (file and line), so a thread's suspended frame says where it is.
"""

from __future__ import annotations

import ast
import types
import weakref
from dataclasses import dataclass

from .. import scalars

SYNC = "__jt_syncthreads"


class _Yields(ast.NodeTransformer):
    """Calls of the named instruction globals (and ``cuda.syncthreads()``) -> ``yield``."""

    def __init__(self, names: set[str], cuda: str):
        self.names = names
        self.cuda = cuda

    def visit_Call(self, node: ast.Call):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Name) and func.id in self.names:
            name = func.id
        elif (
            isinstance(func, ast.Attribute)
            and func.attr == "syncthreads"
            and isinstance(func.value, ast.Name)
            and func.value.id == self.cuda
        ):
            name = SYNC
        else:
            return node
        request = ast.Tuple(
            elts=[ast.Constant(value=name), ast.Tuple(elts=node.args, ctx=ast.Load())],
            ctx=ast.Load(),
        )
        return ast.copy_location(ast.Yield(value=request), node)


class _Arithmetic(ast.NodeTransformer):
    """Arithmetic operators -> calls of :func:`jittile.scalars.binop` / ``unop``, which compute
    with numba's result types (NumPy's differ: ``int32 * int32`` stays 32-bit there); an
    augmented assignment evaluates its target's object and index once, as Python does."""

    def visit_BinOp(self, node: ast.BinOp):
        self.generic_visit(node)
        name = type(node.op).__name__
        if name not in scalars.BINARY:
            return node
        return ast.copy_location(_call(scalars.BINOP, name, node.left, node.right), node)

    def visit_UnaryOp(self, node: ast.UnaryOp):
        self.generic_visit(node)
        name = type(node.op).__name__
        if name not in scalars.UNARY:
            return node
        return ast.copy_location(_call(scalars.UNOP, name, node.operand), node)

    def visit_AugAssign(self, node: ast.AugAssign):
        self.generic_visit(node)
        name = type(node.op).__name__
        if name not in scalars.BINARY:
            return node
        target = node.target
        if isinstance(target, ast.Name):
            value = _call(scalars.BINOP, name, ast.Name(id=target.id, ctx=ast.Load()), node.value)
            return ast.copy_location(ast.Assign(targets=[target], value=value), node)
        # o[i] op= v (or o.a op= v): o and i into temporaries first
        held = [ast.Assign(targets=[_store(_OBJECT)], value=target.value)]
        if isinstance(target, ast.Subscript):
            held.append(ast.Assign(targets=[_store(_INDEX)], value=target.slice))
            place = lambda ctx: ast.Subscript(value=_load(_OBJECT), slice=_load(_INDEX), ctx=ctx)  # noqa: E731
        else:
            place = lambda ctx: ast.Attribute(value=_load(_OBJECT), attr=target.attr, ctx=ctx)  # noqa: E731
        value = _call(scalars.BINOP, name, place(ast.Load()), node.value)
        held.append(ast.Assign(targets=[place(ast.Store())], value=value))
        return [ast.copy_location(statement, node) for statement in held]


_OBJECT, _INDEX = "__jt_aug_object", "__jt_aug_index"


def _load(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def _store(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Store())


def _call(helper: str, operator_name: str, *operands: ast.expr) -> ast.Call:
    """``helper(<operator>, *operands)``."""
    op = _load(scalars.operator_global(operator_name))
    return ast.Call(func=_load(helper), args=[op, *operands], keywords=[])


def thread_program(function: ast.FunctionDef, yielding: set[str], filename: str, cuda: str):
    """The code object of the kernel as a generator function: its arithmetic typed as numba
    types it, and every call of an instruction global in ``yielding`` and every CTA barrier
    a yield."""
    tree = _Arithmetic().visit(_copy(function))
    tree = _Yields(yielding, cuda).visit(tree)
    # a kernel that issues nothing must still be a generator
    tree.body.append(ast.copy_location(ast.Expr(value=ast.Yield(value=None)), tree.body[-1]))
    ast.fix_missing_locations(tree)
    module = ast.Module(body=[tree], type_ignores=[])
    code = compile(module, filename, "exec")
    return next(c for c in code.co_consts if isinstance(c, types.CodeType))


def _copy(node):
    """A copy of an AST (the lowered function may share nodes with the kernel's source tree);
    nodes are plain attribute holders, so this is several times faster than ``deepcopy``."""
    if isinstance(node, ast.AST):
        new = node.__class__.__new__(node.__class__)
        new.__dict__.update({key: _copy(value) for key, value in node.__dict__.items()})
        return new
    if isinstance(node, list):
        return [_copy(value) for value in node]
    return node


@dataclass(frozen=True)
class Program:
    """One specialization as the interpreter runs it: the lowering, the threads' code, and the
    instruction globals that run as plain calls."""

    lowered: object  # frontend.lower.Lowered
    code: types.CodeType
    direct: tuple[str, ...]


# kernel -> {(params, target name, launch): (GlobalsWatch, Program)}
_PROGRAMS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def program_for(kernel, params: list, target, launch) -> Program:
    """The program of one specialization of ``kernel``, lowered once and kept while the globals
    and closure values its code reads stay the same (the rule of the kernel's compiled
    specializations, jittile/watch.py); after a change the kernel and its helpers are parsed
    anew, since a parsed source holds the closure's values."""
    from ..frontend.source import load_source
    from ..watch import GlobalsWatch

    programs = _PROGRAMS.setdefault(kernel, {})
    key = (tuple(params), target.name, launch)
    found = programs.get(key)
    if found is None:
        source = kernel.source
    elif not found[0].changed():
        return found[1]
    else:
        for helper in found[0].helpers:
            helper.reread()
        source = load_source(kernel.pyfunc)
    watch = GlobalsWatch(source)  # made before lowering, so a change during it is seen later
    program = _lower(source, params, target, launch)
    programs[key] = (watch, program)
    return program


def _lower(source, params: list, target, launch) -> Program:
    from ..frontend.emit import CUDA
    from ..frontend.lower import lower_kernel
    from .instructions import blocks

    lowered = lower_kernel(source, params, target, launch)
    instructions = [
        name for name, spec in lowered.namespace.items() if spec[0] in ("asm", "record")
    ]
    yielding = {name for name in instructions if blocks(lowered.ir, lowered.namespace, name)}
    code = thread_program(lowered.function, yielding, source.filename, CUDA)
    return Program(lowered, code, tuple(n for n in instructions if n not in yielding))
