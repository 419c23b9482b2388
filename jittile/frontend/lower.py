"""Lower a kernel's AST to a plain Python function that numba-cuda can compile.

The kernel language disappears here: thread indices become ``numba.cuda`` special registers, shared
buffers become 1-D views into jittile's planned shared block indexed through their layouts, raw PTX
calls and tile calls become calls of generated inline-asm intrinsics. The lowered function refers to
those intrinsics by generated global names; :class:`Lowered.namespace` describes each one and the
backend materialises them, so this module never imports numba.
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import itertools
import re
import types as pytypes
from dataclasses import dataclass

import numpy as np

from .. import language as L
from ..dtypes import DType, dtype as lookup_dtype
from ..errors import CompileError, ContractError, JittileWarning, Location
from ..language import cuda as Lcuda
from ..language.markers import DeviceFunction, Intrinsic, PtxInstruction
from ..language.types import ScalarType, Tensor
from ..ir import (ArgumentAlignment, ArrayParam, BinOp, ConstexprParam, HostParam, HostTensorMap,
                  KernelIR, ScalarParam, SiteRecord, Special, TensorMapParam, Var)
from ..patterns import registry
from ..patterns.base import (CallSite, GlobalRegion, SharedBuffer, SharedRegion, TensorMapOperand,
                             TmemRegion)
from ..ptx import builtins, instructions as ptx_table
from ..ptx.asm import AsmCall
from ..targets import Target
from .accounting import check_transaction_bytes
from .emit import CUDA, GLOBAL_ADDRESS, SHARED_ADDRESS, linear_index, render
from .source import KernelSource
from .static import RUNTIME, StaticScope, evaluate

_AXES = ("x", "y", "z")


@dataclass
class SharedVar:
    buffer: SharedBuffer
    view: str  # global name of the view intrinsic


@dataclass
class TmemVar:
    tensor: Tensor
    base: str


@dataclass
class Lowered:
    """The lowered function's AST, the generated globals it needs, and the kernel facts."""

    function: ast.FunctionDef
    namespace: dict  # global name -> ("asm", AsmCall) | ("smem", buffer) | ("type", dtype) | ...
    ir: KernelIR
    shared_buffers: list  # SharedBuffer per T.alloc_shared, in allocation order
    warnings: list  # the JittileWarning messages lowering issued

    @property
    def source(self) -> str:
        return ast.unparse(self.function)


def _name(id_: str, ctx=None) -> ast.Name:
    return ast.Name(id=id_, ctx=ctx or ast.Load())


def _parse_expr(source: str) -> ast.expr:
    return ast.parse(source, mode="eval").body


def _parse_stmts(source: str) -> list[ast.stmt]:
    return ast.parse(source).body


def _src(node: ast.AST) -> str:
    return ast.unparse(node)


def _align_up(value: int, align: int) -> int:
    return (value + align - 1) // align * align


class KernelLowering:
    """One kernel specialization being lowered (source + argument kinds + target)."""

    def __init__(self, source: KernelSource, params: list, target: Target, launch_override=None):
        self.source = source
        self.target = target
        self.params = params
        self.namespace: dict[str, tuple] = {CUDA: ("cuda",), SHARED_ADDRESS: ("saddr",),
                                            GLOBAL_ADDRESS: ("gaddr",)}
        self._asm_names: dict[AsmCall, str] = {}
        self._counter = itertools.count()
        self.shared: dict[str, SharedVar] = {}
        self.tmem: dict[str, TmemVar] = {}
        self.locals: set[str] = set()
        self.arrays = {p.name: p for p in params if isinstance(p, ArrayParam)}
        self.scalars = {p.name: p for p in params if isinstance(p, ScalarParam)}
        self.tensormaps = {p.name: p for p in params if isinstance(p, TensorMapParam)}
        statics = {p.name: p.value for p in params if isinstance(p, ConstexprParam)}
        runtime = {p.name for p in params if not isinstance(p, ConstexprParam)}
        assigned = _assignment_counts(source.tree)
        runtime |= set(assigned)
        self.scope = StaticScope(source.globals, source.closure, statics, runtime)
        self._static_candidates = {n for n, c in assigned.items() if c == 1}
        self.ir = KernelIR(source.name, params)
        self._shared_cursor = 0
        self._buffers: list[SharedBuffer] = []
        self._host_params: dict[HostTensorMap, HostParam] = {}
        self._launch_override = launch_override
        self.tx_counts: list = []  # (location, barrier key, barrier text, bytes or None)
        self.value_keys: dict[str, str] = {}  # temporary -> its lowered expression
        self._unrolled: set[str] = set()  # T.unroll loop names in scope
        self._inlining: list[DeviceFunction] = []

    # ----------------------------------------------------------------------------------- helpers
    def loc(self, node: ast.AST) -> Location:
        return self.source.location(node)

    def error(self, node: ast.AST, message: str) -> CompileError:
        return CompileError(message, self.loc(node))

    def static(self, node: ast.AST):
        try:
            return evaluate(node, self.scope)
        except NameError as exc:
            raise self.error(node, f"name {exc.args[0]!r} is not defined") from None

    def resolve(self, node: ast.AST):
        """The Python object a call target names (through globals, so aliases work), or RUNTIME."""
        try:
            return evaluate(node, self.scope)
        except NameError:
            return RUNTIME

    def fresh(self, prefix: str = "v") -> str:
        return f"__jt_{prefix}{next(self._counter)}"

    def asm_name(self, call: AsmCall) -> str:
        if call not in self._asm_names:
            name = f"__jt_asm{len(self._asm_names)}"
            self._asm_names[call] = name
            self.namespace[name] = ("asm", call)
        return self._asm_names[call]

    def type_name(self, dtype: DType) -> str:
        name = f"__jt_t_{dtype.name}"
        self.namespace[name] = ("type", dtype)
        return name

    def cast(self, dtype: DType, node: ast.expr) -> ast.expr:
        return ast.Call(func=_name(self.type_name(dtype)), args=[node], keywords=[])

    def call(self, fname: str, *args: ast.expr) -> ast.Call:
        return ast.Call(func=_name(fname), args=list(args), keywords=[])

    # ------------------------------------------------------------------------------ entry point
    def lower(self) -> Lowered:
        tree = self.source.tree
        body = self.block(tree.body)
        args = [ast.arg(arg=p.name) for p in self.ir.runtime_params]
        for host in self.ir.host_tensormaps:
            args.append(ast.arg(arg=host.param))
        fn = ast.FunctionDef(
            name=self.source.name, args=ast.arguments(posonlyargs=[], args=args, kwonlyargs=[],
                                                      kw_defaults=[], defaults=[]),
            body=body or [ast.Pass()], decorator_list=[], returns=None, type_params=[])
        ast.copy_location(fn, tree)
        ast.fix_missing_locations(fn)
        self.ir.shared_bytes = self._shared_cursor
        if self._launch_override is not None:
            self.ir.launch = self._launch_override
        for var in self.shared.values():
            self.namespace[var.view] = ("smem", var.buffer)
        warned = check_transaction_bytes(self.ir.sites, self.tx_counts, self.value_keys)
        return Lowered(fn, self.namespace, self.ir, self._buffers, warned)

    # ------------------------------------------------------------------------------- statements
    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            out.extend(self.statement(stmt))
        return out

    def statement(self, node: ast.stmt) -> list[ast.stmt]:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise self.error(node, f"{type(node).__name__} statements are not supported in kernels")
        result = method(node)
        for stmt in result:
            if not hasattr(stmt, "lineno"):
                ast.copy_location(stmt, node)
        return result

    def stmt_Pass(self, node):
        return [node]

    def stmt_Break(self, node):
        return [node]

    def stmt_Continue(self, node):
        return [node]

    def stmt_Return(self, node):
        if node.value is not None:
            raise self.error(node, "kernels cannot return a value")
        return [node]

    def stmt_Expr(self, node: ast.Expr):
        value = node.value
        if isinstance(value, ast.Constant):  # docstring
            return []
        if isinstance(value, ast.Call):
            target = self.resolve(value.func)
            if target is L.device_entry:
                self.device_entry(value)
                return []
            if target is Lcuda.tile.apply:
                return self.tile_apply(value)
            if isinstance(target, PtxInstruction):
                return self.raw_ptx(value, target, statement=True)
            if isinstance(target, DeviceFunction):
                return self.inline(value, target, None)
        return [ast.Expr(value=self.expr(value))]

    def stmt_Assign(self, node: ast.Assign):
        if isinstance(node.value, ast.Call) and len(node.targets) == 1 and isinstance(
                node.targets[0], ast.Name):
            name = node.targets[0].id
            target = self.resolve(node.value.func)
            if target is L.alloc_shared:
                return self.alloc_shared(name, node.value)
            if target is L.alloc_local:
                return self.alloc_local(name, node.value)
            if target is Lcuda.decl_tmem:
                return self.decl_tmem(name, node.value)
        if isinstance(node.value, ast.Call) and isinstance(self.resolve(node.value.func),
                                                           DeviceFunction):
            return self.inline(node.value, self.resolve(node.value.func), node.targets)
        value = self.static(node.value)
        if (value is not RUNTIME and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id in self._static_candidates
                and isinstance(value, (int, float, bool, tuple, str))):
            self.scope.statics[node.targets[0].id] = value
            if not isinstance(value, (int, float, bool)):
                return []
        targets = [self.store_target(t) for t in node.targets]
        return [ast.Assign(targets=targets, value=self.expr(node.value))]

    def stmt_AnnAssign(self, node: ast.AnnAssign):
        if node.value is None:
            return []
        return self.stmt_Assign(ast.copy_location(ast.Assign(targets=[node.target], value=node.value),
                                                  node))

    def stmt_AugAssign(self, node: ast.AugAssign):
        return [ast.AugAssign(target=self.store_target(node.target), op=node.op,
                              value=self.expr(node.value))]

    def store_target(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Name):
            if node.id in self.shared or node.id in self.arrays:
                raise self.error(node, f"cannot rebind {node.id!r}")
            self.locals.add(node.id)
            return _name(node.id, ast.Store())
        if isinstance(node, ast.Tuple):
            return ast.Tuple(elts=[self.store_target(e) for e in node.elts], ctx=ast.Store())
        if isinstance(node, ast.Subscript):
            lowered = self.subscript(node)
            lowered.ctx = ast.Store()
            return lowered
        raise self.error(node, "unsupported assignment target")

    def stmt_If(self, node: ast.If):
        test = self.static(node.test)
        if test is not RUNTIME:
            return self.block(node.body if test else node.orelse)
        return [ast.If(test=self.expr(node.test), body=self.block(node.body) or [ast.Pass()],
                       orelse=self.block(node.orelse))]

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
                raise self.error(node, f"T.grid with {len(it.args)} extents needs as many loop names")
            body = self.block(node.body)
            for name, extent in reversed(list(zip(names, it.args))):
                self.locals.add(name.id)
                rng = ast.Call(func=_name("range"), args=[self.expr(extent)], keywords=[])
                body = [ast.copy_location(ast.For(target=_name(name.id, ast.Store()), iter=rng,
                                                  body=body, orelse=[]), node)]
            return body
        if isinstance(it, ast.Call) and self.resolve(it.func) is L.unroll:
            return self.unrolled_for(node)
        if isinstance(it, ast.Call) and self.resolve(it.func) is range:
            return [ast.For(target=self.store_target(node.target),
                            iter=ast.Call(func=_name("range"), args=[self.expr(a) for a in it.args],
                                          keywords=[]),
                            body=self.block(node.body), orelse=[])]
        raise self.error(node, "kernel loops iterate over range(...) or T.grid(...)")

    def unrolled_for(self, node: ast.For) -> list[ast.stmt]:
        """``for s in T.unroll(...)``: one copy of the body per value, ``s`` static in each."""
        if not isinstance(node.target, ast.Name):
            raise self.error(node, "T.unroll binds a single loop name")
        bounds = [self.static(a) for a in node.iter.args]
        if not bounds or not all(isinstance(b, int) and not isinstance(b, bool) for b in bounds):
            raise self.error(node.iter, "T.unroll(...) takes compile-time integers, like range()")
        name = node.target.id
        out: list[ast.stmt] = []
        self._unrolled.add(name)
        for value in range(*bounds):
            self.scope.statics[name] = value
            out.extend(self.block(copy.deepcopy(node.body)))
        self.scope.statics.pop(name, None)
        self._unrolled.discard(name)
        return out

    # ------------------------------------------------------------------- @jittile.func helpers
    def inline(self, call: ast.Call, helper: DeviceFunction, targets) -> list[ast.stmt]:
        """A helper call, replaced by the helper's body lowered in place.

        Arguments that name a shared buffer, tensor, TMEM tensor or TensorMap, or a region of one,
        are substituted; compile-time values become statics; runtime values are evaluated once,
        into a temporary. The helper's free names resolve in its own module; its locals are
        renamed apart; errors and plan entries point into its file.
        """
        from .inline import InlineError, bind, inline_body, names_of

        if helper in self._inlining:
            raise self.error(call, f"helper {helper.__qualname__} calls itself; helpers are "
                                   f"inlined, so they cannot recurse")
        source = helper.source
        tree = source.tree

        def located(exc: InlineError) -> CompileError:
            where = source if any(n is exc.node for n in ast.walk(tree)) else self.source
            return CompileError(str(exc), where.location(exc.node))

        try:
            binding = bind(tree, call)
            names = names_of(tree)
        except InlineError as exc:
            raise located(exc) from None
        prefix = self.fresh("h") + "_"
        own_scope = StaticScope(source.globals, source.closure, {}, set())
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
                prelude += self.statement(ast.copy_location(
                    ast.Assign(targets=[_name(renames[param], ast.Store())], value=arg), call))
        for param, default in binding.defaults.items():
            renames[param] = prefix + param
            try:
                value = evaluate(default, own_scope)
            except NameError as exc:
                raise CompileError(f"name {exc.args[0]!r} is not defined",
                                   source.location(default)) from None
            if value is RUNTIME or param in names.assigned:
                raise CompileError(f"helper {tree.name}: the default of {param!r} must be a "
                                   f"compile-time value the body does not rebind",
                                   source.location(default))
            self.scope.statics[renames[param]] = value
        counts = _assignment_counts(tree)
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
        caller, self.source = self.source, source
        self._inlining.append(helper)
        try:
            return prelude + self.block(body)
        finally:
            self.source = caller
            self._inlining.pop()

    def _is_operand(self, node: ast.expr) -> bool:
        """Whether a helper argument is a shared buffer, tensor, TMEM tensor or TensorMap, a region
        of one (slices, or fewer indices than a shared buffer has axes) or an address in one
        (``buf.ptr_to([...])``): those are substituted into the helper (so tile calls see the
        operand, and byte accounting the barrier, as written); anything else, an element
        included, is a value."""
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "ptr_to"):
            node = node.func.value
        base = node.value if isinstance(node, ast.Subscript) else node
        if not isinstance(base, ast.Name):
            return False
        name = base.id
        if not (name in self.shared or name in self.arrays or name in self.tmem
                or name in self.tensormaps):
            return False
        if base is node:
            return True
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(isinstance(i, ast.Slice) for i in indices) or name in self.tmem:
            return True
        return name in self.shared and len(indices) < len(self.shared[name].buffer.shape)

    # ------------------------------------------------------------------------------ allocations
    def alloc_shared(self, name: str, call: ast.Call) -> list[ast.stmt]:
        from ..layout import resolve_layout

        args = self.static_args(call, ("shape", "dtype", "layout", "align"),
                                {"layout": "default", "align": None}, "T.alloc_shared")
        shape = args["shape"]
        if isinstance(shape, int):
            shape = (shape,)
        if not isinstance(shape, tuple) or not shape or not all(
                isinstance(e, int) and e > 0 for e in shape):
            raise self.error(call, f"T.alloc_shared shape must be a static tuple of positive ints, "
                                   f"got {shape!r}")
        dtype = self.dtype_arg(call, args["dtype"])
        align = args["align"]
        if align is None:
            align = max(dtype.bytes, 8)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise self.error(call, f"T.alloc_shared align= must be a positive power of two, got "
                                   f"{align!r}")
        try:
            layout = resolve_layout(args["layout"], shape, dtype)
        except ValueError as exc:
            raise self.error(call, f"T.alloc_shared layout: {exc}") from None
        offset = _align_up(self._shared_cursor, align)
        probe = SharedBuffer(name, shape, dtype, layout, align, offset, self.loc(call))
        self._shared_cursor = offset + probe.nbytes
        self.ir.shared_align = max(self.ir.shared_align, align)
        view = f"__jt_smem_{name}_{len(self.shared)}"
        self.shared[name] = SharedVar(probe, view)
        self._buffers.append(probe)
        return [ast.Assign(targets=[_name(name, ast.Store())], value=self.call(view))]

    def alloc_local(self, name: str, call: ast.Call) -> list[ast.stmt]:
        args = self.static_args(call, ("shape", "dtype", "layout"), {"layout": "default"},
                                "T.alloc_local")
        shape = args["shape"] if isinstance(args["shape"], tuple) else (args["shape"],)
        dtype = self.dtype_arg(call, args["dtype"])
        self.locals.add(name)
        alloc = ast.Call(
            func=ast.Attribute(value=ast.Attribute(value=_name(CUDA), attr="local", ctx=ast.Load()),
                               attr="array", ctx=ast.Load()),
            args=[ast.Constant(value=shape), _name(self.type_name(dtype))], keywords=[])
        return [ast.Assign(targets=[_name(name, ast.Store())], value=alloc)]

    def decl_tmem(self, name: str, call: ast.Call) -> list[ast.stmt]:
        if len(call.args) != 1:
            raise self.error(call, "T.cuda.decl_tmem(address, ty_args=[T.Tensor(...)]) takes one "
                                   "address")
        kw = {k.arg: k.value for k in call.keywords}
        ty_args = self.static(kw["ty_args"]) if "ty_args" in kw else RUNTIME
        if (ty_args is RUNTIME or not isinstance(ty_args, tuple) or len(ty_args) != 1
                or not isinstance(ty_args[0], Tensor)):
            raise self.error(call, "T.cuda.decl_tmem needs ty_args=[T.Tensor(shape, dtype, "
                                   "scope='tmem', layout=...)]")
        tensor = ty_args[0]
        if tensor.scope != "tmem":
            raise self.error(call, f"T.cuda.decl_tmem tensor scope must be 'tmem', got "
                                   f"{tensor.scope!r}")
        self.tmem[name] = TmemVar(tensor, name)
        self.locals.add(name)
        return [ast.Assign(targets=[_name(name, ast.Store())],
                           value=self.cast(lookup_dtype("uint32"), self.expr(call.args[0])))]

    def device_entry(self, call: ast.Call) -> None:
        kw = {k.arg: k.value for k in call.keywords}
        if "launch" not in kw:
            raise self.error(call, "T.device_entry needs launch=T.cuda.LaunchConfig(grid=..., "
                                   "block=...)")
        launch = self.static(kw["launch"])
        if not isinstance(launch, Lcuda.LaunchConfig):
            raise self.error(call, "T.device_entry launch= must be a static T.cuda.LaunchConfig")
        self.ir.launch = launch

    def static_args(self, call: ast.Call, names: tuple, defaults: dict, what: str) -> dict:
        values = dict(defaults)
        if len(call.args) > len(names):
            raise self.error(call, f"{what} takes at most {len(names)} positional arguments")
        for name, arg in zip(names, call.args):
            values[name] = arg
        for kw in call.keywords:
            if kw.arg not in names:
                raise self.error(kw, f"{what} has no parameter {kw.arg!r}")
            values[kw.arg] = kw.value
        out = {}
        for name in names:
            if name not in values:
                raise self.error(call, f"{what} needs {name}=")
            node = values[name]
            value = self.static(node) if isinstance(node, ast.AST) else node
            if value is RUNTIME:
                raise self.error(node, f"{what} {name}= must be a compile-time value")
            out[name] = value
        return out

    def dtype_arg(self, node: ast.AST, value) -> DType:
        try:
            return lookup_dtype(value)
        except Exception as exc:
            raise self.error(node, str(exc)) from None

    # ------------------------------------------------------------------------------ expressions
    def expr(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Call):
            return self.call_expr(node)
        if isinstance(node, ast.Name) and node.id in self.shared:
            raise self.error(node, f"shared buffer {node.id!r} cannot be used as a value; index it "
                                   f"or take buf.ptr_to([...])")
        value = self.static(node)
        if isinstance(value, (bool, int, float)):
            return ast.Constant(value=value)
        if isinstance(node, ast.Name):
            if value is RUNTIME:
                return _name(node.id)
            raise self.error(node, f"{node.id!r} ({type(value).__name__}) is not a kernel value")
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.BinOp):
            return ast.BinOp(left=self.expr(node.left), op=node.op, right=self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            return ast.UnaryOp(op=node.op, operand=self.expr(node.operand))
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(op=node.op, values=[self.expr(v) for v in node.values])
        if isinstance(node, ast.Compare):
            return ast.Compare(left=self.expr(node.left), ops=node.ops,
                               comparators=[self.expr(c) for c in node.comparators])
        if isinstance(node, ast.IfExp):
            return ast.IfExp(test=self.expr(node.test), body=self.expr(node.body),
                             orelse=self.expr(node.orelse))
        if isinstance(node, ast.Tuple):
            return ast.Tuple(elts=[self.expr(e) for e in node.elts], ctx=ast.Load())
        if isinstance(node, ast.Attribute):
            raise self.error(node, f"attribute {_src(node)!r} is not a kernel value")
        raise self.error(node, f"{type(node).__name__} expressions are not supported in kernels")

    def subscript(self, node: ast.Subscript) -> ast.Subscript:
        base = node.value
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(base, ast.Name) and base.id in self.shared:
            buf = self.shared[base.id].buffer
            flat = self.shared_index(node, buf, indices)
            return ast.Subscript(value=_name(base.id), slice=flat, ctx=ast.Load())
        if isinstance(base, ast.Name) and (base.id in self.arrays or base.id in self.locals):
            if any(isinstance(i, ast.Slice) for i in indices):
                raise self.error(node, "slices of tensors are only allowed as tile-call operands")
            lowered = [self.expr(i) for i in indices]
            index = lowered[0] if len(lowered) == 1 else ast.Tuple(elts=lowered, ctx=ast.Load())
            return ast.Subscript(value=_name(base.id), slice=index, ctx=ast.Load())
        raise self.error(node, f"cannot index {_src(base)!r}")

    def shared_index(self, node: ast.AST, buf: SharedBuffer, indices: list[ast.expr]) -> ast.expr:
        if len(indices) != len(buf.shape):
            raise self.error(node, f"shared buffer {buf.name!r} has rank {len(buf.shape)}, indexed "
                                   f"with {len(indices)} indices")
        if any(isinstance(i, ast.Slice) for i in indices):
            raise self.error(node, "shared-buffer slices are only allowed as tile-call operands")
        sources = [_src(self.expr(i)) for i in indices]
        return _parse_expr(buf.layout.index_source(sources, buf.shape))

    def call_expr(self, node: ast.Call) -> ast.expr:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "ptr_to":
            return self.ptr_to(node)
        target = self.resolve(func)
        if isinstance(target, ScalarType):
            if len(node.args) != 1:
                raise self.error(node, f"{target!r}(x) converts one value")
            return self.cast(target.dtype, self.expr(node.args[0]))
        if isinstance(target, PtxInstruction):
            return self.raw_ptx(node, target, statement=False)
        if isinstance(target, Intrinsic):
            return self.intrinsic_expr(node, target)
        if target in (min, max, abs):
            return ast.Call(func=_name(target.__name__), args=[self.expr(a) for a in node.args],
                            keywords=[])
        if target is RUNTIME:
            raise self.error(node, f"cannot resolve call target {_src(func)!r}")
        if isinstance(target, DeviceFunction):
            raise self.error(node, f"call the helper {_src(func)} as a statement or as the whole "
                                   f"right side of an assignment")
        if isinstance(target, pytypes.FunctionType):
            raise self.error(node, f"{_src(func)!r} cannot be called inside a kernel; decorate it "
                                   f"with @jittile.func to inline it")
        raise self.error(node, f"{_src(func)!r} cannot be called inside a kernel")

    def intrinsic_expr(self, node: ast.Call, target: Intrinsic) -> ast.expr:
        reg = lambda obj, attr: ast.Attribute(  # noqa: E731
            value=ast.Attribute(value=_name(CUDA), attr=obj, ctx=ast.Load()), attr=attr,
            ctx=ast.Load())
        axis = None
        if node.args:
            axis = self.static(node.args[0])
        if target is Lcuda.lane_id:
            return ast.Attribute(value=_name(CUDA), attr="laneid", ctx=ast.Load())
        if target in (Lcuda.thread_idx, Lcuda.block_idx, Lcuda.block_dim, Lcuda.grid_dim):
            obj = {Lcuda.thread_idx: "threadIdx", Lcuda.block_idx: "blockIdx",
                   Lcuda.block_dim: "blockDim", Lcuda.grid_dim: "gridDim"}[target]
            if axis is None and target in (Lcuda.thread_idx, Lcuda.block_idx):
                return linear_index(obj, "blockDim" if obj == "threadIdx" else "gridDim")
            if axis not in _AXES:
                raise self.error(node, f"{target.qualname} axis must be 'x', 'y' or 'z', got "
                                       f"{axis!r}")
            return reg(obj, axis)
        if target is Lcuda.warp_id:
            return ast.BinOp(left=linear_index("threadIdx", "blockDim"), op=ast.FloorDiv(),
                             right=ast.Constant(value=32))
        if target is Lcuda.cluster_ctarank:
            return self.call(self.asm_name(builtins.CLUSTER_CTARANK))
        if target is Lcuda.cta_sync:
            return ast.Call(func=ast.Attribute(value=_name(CUDA), attr="syncthreads",
                                               ctx=ast.Load()), args=[], keywords=[])
        if target is Lcuda.cluster_sync:
            return self.call(self.asm_name(builtins.CLUSTER_SYNC))
        if target is Lcuda.mbarrier_wait:
            if len(node.args) != 2:
                raise self.error(node, "T.cuda.mbarrier_wait(mbar_ptr, phase) takes two arguments")
            return self.call(self.asm_name(builtins.MBARRIER_WAIT), *[self.expr(a) for a in node.args])
        if target is L.address_of:
            return self.address_of(node)
        raise self.error(node, f"{target.qualname} cannot be used here")

    def ptr_to(self, node: ast.Call) -> ast.expr:
        base = node.func.value
        if len(node.args) != 1 or not isinstance(node.args[0], (ast.List, ast.Tuple)):
            raise self.error(node, "buf.ptr_to([i, j, ...]) takes one list of indices")
        indices = node.args[0].elts
        if isinstance(base, ast.Name) and base.id in self.shared:
            buf = self.shared[base.id].buffer
            return self.call(SHARED_ADDRESS, _name(base.id), self.shared_index(node, buf, indices))
        if isinstance(base, ast.Name) and base.id in self.arrays:
            return self.call(GLOBAL_ADDRESS, _name(base.id),
                             ast.Tuple(elts=[self.expr(i) for i in indices], ctx=ast.Load()))
        raise self.error(node, f"{_src(base)!r} has no ptr_to: only shared buffers and tensor "
                               f"parameters do")

    def address_of(self, node: ast.Call) -> ast.expr:
        if len(node.args) != 1:
            raise self.error(node, "T.address_of(x) takes one buffer or element")
        arg = node.args[0]
        if isinstance(arg, ast.Name) and arg.id in self.shared:
            return self.call(SHARED_ADDRESS, _name(arg.id), ast.Constant(value=0))
        if isinstance(arg, ast.Subscript) and isinstance(arg.value, ast.Name) and \
                arg.value.id in self.shared:
            lowered = self.subscript(arg)
            return self.call(SHARED_ADDRESS, lowered.value, lowered.slice)
        if isinstance(arg, ast.Name) and arg.id in self.arrays:
            zeros = [ast.Constant(value=0)] * self.arrays[arg.id].ndim
            return self.call(GLOBAL_ADDRESS, _name(arg.id), ast.Tuple(elts=zeros, ctx=ast.Load()))
        raise self.error(node, f"T.address_of({_src(arg)}) needs a shared buffer, a shared element "
                               f"or a tensor parameter")

    # ------------------------------------------------------------------------------- raw PTX
    def raw_ptx(self, node: ast.Call, instr: PtxInstruction, statement: bool):
        location = self.loc(node)
        opcode = instr.opcode
        try:
            spec = ptx_table.lookup(opcode, self.target.name)
        except ContractError as exc:
            pattern = registry.pattern_for(opcode) if exc.parameter == "opcode" else None
            if pattern is not None:
                raise ContractError(f"is a tile-pattern opcode of the {pattern.family} family: "
                                    f"issue it with T.cuda.tile.apply(T.ptx[...], ...), which "
                                    f"plans and checks its operands, not as a raw T.ptx call",
                                    location, opcode=opcode, parameter="opcode") from None
            raise _located(exc, location) from None
        n_in, n_out = len(spec.inputs), len(spec.outputs)
        args = list(node.args)
        if node.keywords:
            raise ContractError("raw PTX instructions take positional operands only", location,
                                opcode=opcode, parameter=node.keywords[0].arg)
        dests: list[ast.expr] = []
        if n_out and len(args) == n_in + n_out:
            dests, args = args[:n_out], args[n_out:]
        elif n_out > 1 and len(args) == n_in + 1 and isinstance(args[0], ast.Name) and \
                args[0].id in self.locals:
            dests = [ast.Subscript(value=_name(args[0].id), slice=ast.Constant(value=i),
                                   ctx=ast.Load()) for i in range(n_out)]
            args = args[1:]
        try:
            ptx_table.check_operands(spec, len(args))
        except ContractError as exc:
            raise _located(exc, location) from None
        operands = [self.ptx_operand(a, kind, opcode, i) for i, (a, kind) in
                    enumerate(zip(args, spec.inputs))]
        call = self.call(self.asm_name(spec.asm()), *operands)
        if spec.tx_count is not None:
            barrier, count_index = spec.tx_count
            count = self.static(args[count_index])
            self.tx_counts.append((location, spec.opcode, _src(operands[barrier]),
                                   self.display(args[barrier]),
                                   int(count) if isinstance(count, (int, np.integer)) else None))
        if not statement:
            if dests:
                raise self.error(node, f"{opcode} with destination operands is a statement")
            return call
        if not dests:
            return [ast.Expr(value=call)]
        if len(dests) == 1:
            return [ast.Assign(targets=[self.store_target(dests[0])], value=call)]
        tmp = self.fresh("out")
        stmts = [ast.Assign(targets=[_name(tmp, ast.Store())], value=call)]
        for i, dest in enumerate(dests):
            stmts.append(ast.Assign(targets=[self.store_target(dest)],
                                    value=ast.Subscript(value=_name(tmp),
                                                        slice=ast.Constant(value=i),
                                                        ctx=ast.Load())))
        return stmts

    def ptx_operand(self, node: ast.expr, kind, opcode: str, index: int) -> ast.expr:
        kind_name = getattr(kind, "name", str(kind))
        if kind_name == "IMM":
            value = self.static(node)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ContractError(f"operand {index} must be a compile-time integer, got "
                                    f"{_src(node)!r}", self.loc(node), opcode=opcode,
                                    parameter=f"operand {index}")
            return ast.Constant(value=value)
        if isinstance(node, ast.Name):
            if node.id in self.shared:
                if kind_name != "SHARED_ADDR":
                    raise ContractError(f"operand {index} expects {kind_name}, got shared buffer "
                                        f"{node.id!r}", self.loc(node), opcode=opcode,
                                        parameter=f"operand {index}")
                return self.call(SHARED_ADDRESS, _name(node.id), ast.Constant(value=0))
            if node.id in self.tensormaps:
                return _name(node.id)
            if node.id in self.arrays:
                if kind_name != "GENERIC_PTR":
                    raise ContractError(f"operand {index} expects {kind_name}, got tensor "
                                        f"{node.id!r}", self.loc(node), opcode=opcode,
                                        parameter=f"operand {index}")
                zeros = [ast.Constant(value=0)] * self.arrays[node.id].ndim
                return self.call(GLOBAL_ADDRESS, _name(node.id),
                                 ast.Tuple(elts=zeros, ctx=ast.Load()))
        return self.expr(node)

    # ------------------------------------------------------------------------------ tile calls
    def tile_apply(self, node: ast.Call) -> list[ast.stmt]:
        location = self.loc(node)
        if not node.args:
            raise ContractError("T.cuda.tile.apply needs T.ptx[opcode] as its first argument",
                                location, parameter="opcode")
        instr = self.resolve(node.args[0])
        if not isinstance(instr, PtxInstruction):
            raise ContractError(f"first argument must be T.ptx[opcode], got {_src(node.args[0])!r}",
                                self.loc(node.args[0]), parameter="opcode")
        opcode = instr.opcode
        pattern = registry.pattern_for(opcode)
        if pattern is None:
            near = registry.closest_family(opcode)
            mean = f" (did you mean '{near}...'?)" if near else ""
            raise ContractError(
                f"no tile pattern handles this opcode{mean}; known families: "
                f"{', '.join(registry.family_names())}", location, opcode=opcode, parameter="opcode")
        prelude: list[ast.stmt] = []
        operands = [self.tile_operand(a, opcode, i, prelude) for i, a in enumerate(node.args[1:])]
        params: dict[str, object] = {}
        param_locations = {f"operand {i}": self.loc(a) for i, a in enumerate(node.args[1:])}
        scope = "thread"
        for kw in node.keywords:
            if kw.arg is None:
                raise ContractError("**kwargs are not allowed in tile calls", self.loc(kw),
                                    opcode=opcode)
            param_locations[kw.arg] = self.loc(kw.value)
            if kw.arg == "scope":
                scope = self.static(kw.value)
                if not isinstance(scope, str):
                    raise ContractError(f"must be a static string, got {_src(kw.value)!r}",
                                        self.loc(kw.value), opcode=opcode, parameter="scope")
                continue
            params[kw.arg] = self.tile_param(kw.value, prelude)
        site = CallSite(location, opcode, operands, params, param_locations, self.target, scope)
        lowering = pattern.lower(site, self)
        self.ir.sites.append(SiteRecord(location, opcode, pattern.family, lowering.plan,
                                        lowering.predicate))
        emits = [ast.Expr(value=self.call(self.asm_name(record.asm),
                                          *[render(v, self.asm_name) for _, v in record.operands]))
                 for record in lowering.plan]
        for stmt in emits:
            ast.copy_location(stmt, node)
        if lowering.predicate is not None and emits:
            emits = [ast.If(test=render(lowering.predicate, self.asm_name), body=emits,
                            orelse=[])]
        return prelude + emits

    def tile_param(self, node: ast.expr, prelude: list[ast.stmt]):
        """A keyword value: static where it folds, else runtime temporaries (per tuple element)."""
        value = self.static(node)
        if value is not RUNTIME:
            return value
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.tile_param(e, prelude) for e in node.elts)
        return self.temporary(node, prelude)

    def temporary(self, node: ast.expr, prelude: list[ast.stmt]) -> Var:
        """Evaluate ``node`` once into a fresh temporary (appended to ``prelude``)."""
        tmp = self.fresh()
        lowered = self.expr(node)
        prelude.append(ast.copy_location(
            ast.Assign(targets=[_name(tmp, ast.Store())], value=lowered), node))
        self.value_keys[tmp] = _src(lowered)
        return Var(tmp, self.display(node))

    def display(self, node: ast.expr) -> str:
        """``node`` as the user wrote it, with the index of each enclosing ``T.unroll`` folded in
        (each unrolled stage is its own barrier) and the renaming of inlined helpers undone."""
        statics, unrolled = self.scope.statics, self._unrolled

        class Fold(ast.NodeTransformer):
            def visit_Name(self, name: ast.Name):
                value = statics.get(name.id)
                if name.id in unrolled and isinstance(value, int):
                    return ast.copy_location(ast.Constant(value=value), name)
                return name

        return _HELPER_NAME.sub("", _src(Fold().visit(copy.deepcopy(node))))

    def tile_operand(self, node: ast.expr, opcode: str, index: int, prelude: list[ast.stmt]):
        base, indices = node, None
        if isinstance(node, ast.Subscript):
            base = node.value
            indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(base, ast.Name):
            name = base.id
            if name in self.shared:
                buf = self.shared[name].buffer
                runtime: list = []
                origin, shape, axes = self.region(node, indices, buf.shape, opcode, index,
                                                  runtime, prelude)
                return SharedRegion(buf, origin, shape, axes, tuple(runtime))
            if name in self.arrays:
                param = self.arrays[name]
                return self.global_region(node, param, indices, opcode, index, prelude)
            if name in self.tensormaps and indices is None:
                return TensorMapOperand(name)
            if name in self.tmem:
                var = self.tmem[name]
                origin, shape, axes = self.region(node, indices, var.tensor.shape, opcode, index)
                return TmemRegion(name, Var(var.base, name, "local"), var.tensor.shape,
                                  lookup_dtype(var.tensor.dtype),
                                  var.tensor.layout, origin, shape, axes)
        raise ContractError(
            f"operand {index} ({_src(node)!r}) must be a shared buffer or region, a tensor "
            f"parameter or region, a jittile.TensorMap parameter or a TMEM tensor",
            self.loc(node), opcode=opcode, parameter=f"operand {index}")

    def region(self, node, indices, shape, opcode, index, runtime: list | None = None,
               prelude: list | None = None):
        """Static origin, shape and kept axes of ``buf[indices]`` (ints drop an axis, slices keep).

        Where ``runtime`` is given (shared operands), an axis may be indexed by a runtime
        integer: it is evaluated once into a temporary (in ``prelude``), appended to ``runtime``
        as ``(Var, axis)``, and its origin is 0.
        """
        if indices is None:
            return (0,) * len(shape), tuple(shape), tuple(range(len(shape)))
        if len(indices) > len(shape):
            raise ContractError(f"operand {index} indexes {len(indices)} axes of a rank-"
                                f"{len(shape)} buffer", self.loc(node), opcode=opcode,
                                parameter=f"operand {index}")
        origin, out_shape, axes = [], [], []
        for axis, extent in enumerate(shape):
            idx = indices[axis] if axis < len(indices) else ast.Slice()
            value = self.static(idx)
            if value is RUNTIME and runtime is not None and not isinstance(idx, ast.Slice):
                runtime.append((self.temporary(idx, prelude), axis))
                origin.append(0)
                continue
            if value is RUNTIME:
                raise ContractError(f"operand {index} region bounds must be compile-time values, "
                                    f"got {_src(idx)!r}", self.loc(idx), opcode=opcode,
                                    parameter=f"operand {index}")
            if isinstance(value, slice):
                start, stop, step = value.indices(extent)
                if step != 1 or stop <= start:
                    raise ContractError(f"operand {index} slice {_src(idx)!r} must be a non-empty "
                                        f"unit-step range", self.loc(idx), opcode=opcode,
                                        parameter=f"operand {index}")
                origin.append(start)
                out_shape.append(stop - start)
                axes.append(axis)
            elif isinstance(value, int):
                if not 0 <= value < extent:
                    raise ContractError(f"operand {index} index {value} is outside extent {extent}",
                                        self.loc(idx), opcode=opcode, parameter=f"operand {index}")
                origin.append(value)
            else:
                raise ContractError(f"operand {index} index {_src(idx)!r} must be an int or slice",
                                    self.loc(idx), opcode=opcode, parameter=f"operand {index}")
        return tuple(origin), tuple(out_shape), tuple(axes)

    def global_region(self, node, param: ArrayParam, indices, opcode, index,
                      prelude: list) -> GlobalRegion:
        """``A`` or ``A[...]``: per axis a static slice (kept) or an integer index (dropped; a
        runtime one is evaluated once into a temporary)."""
        ndim = param.ndim
        if indices is None:
            return GlobalRegion(param.name, param.dtype, ndim, param.static_shape, (0,) * ndim,
                                (None,) * ndim, (False,) * ndim, param.layout)

        def fail(message: str, where) -> ContractError:
            return ContractError(f"operand {index}: {message}", self.loc(where), opcode=opcode,
                                 parameter=f"operand {index}")

        if len(indices) != ndim:
            raise fail(f"a global region indexes every axis of the rank-{ndim} tensor "
                       f"{param.name!r} (got {_src(node)!r})", node)
        starts, extents, dropped = [], [], []
        for idx, static_extent in zip(indices, param.static_shape):
            value = self.static(idx)
            if not isinstance(idx, ast.Slice):
                if value is RUNTIME:
                    value = self.temporary(idx, prelude)
                elif not isinstance(value, int) or isinstance(value, bool) or value < 0 or (
                        static_extent is not None and value >= static_extent):
                    raise fail(f"index {_src(idx)!r} must be an integer inside the axis (extent "
                               f"{static_extent})", idx)
                starts.append(value)
                extents.append(1)
                dropped.append(True)
                continue
            if value is RUNTIME or value.step not in (None, 1):
                raise fail(f"region bounds must be compile-time, unit step, got {_src(idx)!r}",
                           idx)
            start = value.start or 0
            if start < 0 or (value.stop is not None and value.stop <= start):
                raise fail(f"slice {_src(idx)!r} is empty or negative", idx)
            starts.append(start)
            extents.append(None if value.stop is None else value.stop - start)
            dropped.append(False)
        return GlobalRegion(param.name, param.dtype, ndim, param.static_shape, tuple(starts),
                            tuple(extents), tuple(dropped), param.layout)

    # --------------------------------------------- services for patterns (LoweringContext)
    def host_setup(self, item, text: str) -> HostParam | None:
        if isinstance(item, ArgumentAlignment):
            if item not in self.ir.alignments:
                self.ir.alignments.append(item)
            return None
        if item not in self._host_params:
            param = f"__jt_tmap{len(self._host_params)}"
            self._host_params[item] = HostParam(param, text)
            self.ir.host_tensormaps.append(dataclasses.replace(item, param=param))
        return self._host_params[item]

    def group_indices(self, scope: str) -> list:
        launch = self.ir.launch
        if scope == "thread":
            return []
        if scope == "warp":
            return [(32, Special("lane"))]
        if scope == "warpgroup":
            return [(128, BinOp("%", Special("thread"), 128))]
        if scope == "cta":
            if launch is None:
                raise CompileError("scope='cta' needs a static block size from T.device_entry")
            return [(launch.threads, Special("thread"))]
        if scope == "cluster":
            if launch is None or launch.cluster is None:
                raise CompileError("scope='cluster' needs a cluster from T.device_entry")
            size = launch.cluster[0] * launch.cluster[1] * launch.cluster[2]
            return [(size, Special("cluster_rank"))]
        raise CompileError(f"unknown scope {scope!r}: expected thread, warp, warpgroup, cta or "
                           f"cluster")


_HELPER_NAME = re.compile(r"__jt_h\d+_")


def _located(exc: ContractError, location: Location) -> ContractError:
    return ContractError(exc.rule, exc.location or location, opcode=exc.opcode,
                         parameter=exc.parameter)


def _assignment_counts(tree: ast.FunctionDef) -> dict[str, int]:
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


def lower_kernel(source: KernelSource, params: list, target: Target, launch=None) -> Lowered:
    """Lower one specialization of a kernel."""
    return KernelLowering(source, params, target, launch).lower()


