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
        elif (isinstance(func, ast.Attribute) and func.attr == "syncthreads"
              and isinstance(func.value, ast.Name) and func.value.id == self.cuda):
            name = SYNC
        else:
            return node
        request = ast.Tuple(elts=[ast.Constant(value=name),
                                  ast.Tuple(elts=node.args, ctx=ast.Load())], ctx=ast.Load())
        return ast.copy_location(ast.Yield(value=request), node)


def thread_program(function: ast.FunctionDef, yielding: set[str], filename: str, cuda: str):
    """The code object of the kernel as a generator function: every call of an instruction
    global in ``yielding`` and every CTA barrier yields."""
    tree = _Yields(yielding, cuda).visit(_copy(function))
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


def start_thread(code: types.CodeType, globals_: dict, args: list):
    """A new generator running the kernel body for one thread with its own globals."""
    function = types.FunctionType(code, globals_)
    return function(*args)
