"""Lower a kernel's AST to a plain Python function that numba-cuda can compile.

The kernel language disappears here: thread indices become ``numba.cuda`` special registers, shared
buffers become 1-D views into jittile's planned shared block indexed through their layouts, raw PTX
calls and tile calls become calls of generated inline-asm intrinsics. The lowered function refers to
those intrinsics by generated global names; :class:`Lowered.namespace` describes each one and the
backend materialises them, so this module never imports numba.
"""

from __future__ import annotations

import ast
import itertools
import warnings
from dataclasses import dataclass

from .. import language as L
from ..dtypes import DType
from ..errors import CompileError, JittileWarning, Location
from ..ir import (
    ArrayParam,
    ConstexprParam,
    HostParam,
    HostTensorMap,
    KernelIR,
    ScalarParam,
    TensorMapParam,
)
from ..language import cuda as Lcuda
from ..language.markers import DeviceFunction, PtxInstruction
from ..patterns.base import SharedBuffer
from ..ptx.asm import AsmCall
from ..targets import Target
from .accounting import check_armed_barriers, check_transaction_bytes
from .allocations import AllocationLowering, SharedVar, TmemVar
from .atomics import AtomicLowering
from .calls import check_calls
from .checks import body_problem
from .divergence import divergent_operations
from .elements import ElementLowering
from .emit import CUDA, DESCRIPTOR_WORD, GLOBAL_ADDRESS, SHARED_ADDRESS
from .expressions import ExpressionLowering, fits_64_bits, is_number
from .fragments import FragmentLowering
from .inline import HelperInlining, assignment_counts
from .loops import LoopLowering, statement_count
from .math_calls import MathLowering
from .ordering import check_ordering
from .positions import HELPER_PREFIX, Origin, number_lines, tag
from .proxies import ProxyEvent, check_proxy_fences
from .raw_ptx import RawPtxLowering
from .source import KernelSource
from .static import RUNTIME, FoldError, StaticScope, evaluate
from .syntax import name as _name
from .tile_calls import TileCallLowering
from .unsupported import unsupported


@dataclass
class Lowered:
    """The lowered function's AST, the generated globals it needs, and the kernel facts."""

    function: ast.FunctionDef
    namespace: dict  # global name -> ("asm", AsmCall) | ("smem", buffer) | ("type", dtype) | ...
    ir: KernelIR
    shared_buffers: list  # SharedBuffer per T.alloc_shared, in allocation order
    warnings: list  # the JittileWarning messages lowering issued
    positions: dict  # line of ``function`` -> Origin: the user's code that line came from
    shared_views: dict  # shared buffer variable -> the generated name of its array view
    fragments: dict  # register fragment name -> its register variables, in register order

    @property
    def source(self) -> str:
        return ast.unparse(self.function)


class KernelLowering(
    ExpressionLowering,
    AtomicLowering,
    ElementLowering,
    AllocationLowering,
    FragmentLowering,
    HelperInlining,
    LoopLowering,
    MathLowering,
    RawPtxLowering,
    TileCallLowering,
):
    """One kernel specialization being lowered (source + argument kinds + target)."""

    def __init__(self, source: KernelSource, params: list, target: Target, launch_override=None):
        self.source = source
        self.target = target
        self.params = params
        self.namespace: dict[str, tuple] = {
            CUDA: ("cuda",),
            SHARED_ADDRESS: ("saddr",),
            GLOBAL_ADDRESS: ("gaddr",),
            DESCRIPTOR_WORD: ("mdesc",),
        }
        self._asm_names: dict[AsmCall, str] = {}
        self._counter = itertools.count()
        self.shared: dict[str, SharedVar] = {}
        self.tmem: dict[str, TmemVar] = {}
        self.locals: set[str] = set()
        self.local_arrays: dict[str, tuple] = {}  # T.alloc_local name -> shape
        self.local_dtypes: dict[str, DType] = {}  # T.alloc_local name -> element type
        self.fragments: dict = {}  # T.alloc_local register fragment name -> FragmentVar
        self.arrays = {p.name: p for p in params if isinstance(p, ArrayParam)}
        self.scalars = {p.name: p for p in params if isinstance(p, ScalarParam)}
        self.tensormaps = {p.name: p for p in params if isinstance(p, TensorMapParam)}
        statics = {p.name: p.value for p in params if isinstance(p, ConstexprParam)}
        runtime = {p.name for p in params if not isinstance(p, ConstexprParam)}
        assigned = assignment_counts(source.tree)
        runtime |= set(assigned)
        self.scope = StaticScope(source.globals, source.closure, statics, runtime)
        self._static_candidates = {n for n, c in assigned.items() if c == 1}
        self.ir = KernelIR(source.name, params)
        self._shared_cursor = 0
        self._buffers: list[SharedBuffer] = []
        self._host_params: dict[HostTensorMap, HostParam] = {}
        self._launch_override = launch_override
        self.tx_counts: list = []  # (location, opcode, lowered barrier, barrier text, bytes)
        self.barrier_inits: list = []  # location per mbarrier initialisation
        self.proxy_events: list[ProxyEvent] = []  # generic writes, proxy fences, async reads
        self.order_events: list = []  # OrderEvent per tile call, raw PTX, fragment access
        self.value_keys: dict[str, ast.expr] = {}  # temporary -> its lowered expression
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
        except FoldError as exc:
            raise self.error(exc.node, exc.message) from None

    def resolve(self, node: ast.AST):
        """The Python object a call target names (through globals, so aliases work), or RUNTIME."""
        try:
            return evaluate(node, self.scope)
        except NameError:
            return RUNTIME
        except FoldError as exc:
            raise self.error(exc.node, exc.message) from None

    def fresh(self, prefix: str = "v") -> str:
        return f"__jt_{prefix}{next(self._counter)}"

    def record_name(self, site: int, index: int) -> str:
        """The global that issues plan record ``index`` of tile call ``site``: the backend binds
        it to the record's asm, the interpreter to the record's semantics."""
        name = f"__jt_r{site}_{index}"
        self.namespace[name] = ("record", site, index)
        return name

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
        problem = body_problem(tree)  # first: it bounds the nesting every later walk recurses on
        if problem is not None:
            raise self.error(*problem)
        check_calls(tree, self.scope, self.loc)
        if self._launch_override is not None:  # what the body's checks see is how it launches
            self.ir.launch = self._launch_override
        body = self.block(tree.body)
        args = [ast.arg(arg=p.name) for p in self.ir.runtime_params]
        for host in self.ir.host_tensormaps:
            args.append(ast.arg(arg=host.param))
        fn = ast.FunctionDef(
            name=self.source.name,
            args=ast.arguments(
                posonlyargs=[], args=args, kwonlyargs=[], kw_defaults=[], defaults=[]
            ),
            body=body or [ast.Pass()],
            decorator_list=[],
            returns=None,
            type_params=[],
        )
        self.check_statement_budget(tree, statement_count(fn.body))
        ast.copy_location(fn, tree)
        ast.fix_missing_locations(fn)
        tag(fn, Origin(self.loc(tree), tree))
        positions = number_lines(fn)
        self.ir.shared_bytes = self._shared_cursor
        if self._launch_override is not None:
            self.ir.launch = self._launch_override
        for var in self.shared.values():
            self.namespace[var.view] = ("smem", var.buffer)
        if self.barrier_inits:  # a kernel that initialises no barrier is a fragment
            check_armed_barriers(self.ir.sites, self.tx_counts, self.value_keys)
        warned = check_transaction_bytes(self.ir.sites, self.tx_counts, self.value_keys)
        warned += warn_divergent_operations(fn)
        warned += check_ordering(self.ir.sites, self.order_events)
        warned += check_proxy_fences(self.proxy_events)
        return Lowered(
            fn,
            self.namespace,
            self.ir,
            self._buffers,
            warned,
            positions,
            {name: var.view for name, var in self.shared.items()},
            {name: frag.registers for name, frag in self.fragments.items()},
        )

    # ------------------------------------------------------------------------------- statements
    def block(self, stmts: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in stmts:
            out.extend(self.statement(stmt))
        return out

    def statement(self, node: ast.stmt) -> list[ast.stmt]:
        method = getattr(self, f"stmt_{type(node).__name__}", None)
        if method is None:
            raise unsupported(node, self.loc(node), "statement")
        result = method(node)
        origin = Origin(self.loc(node), node)
        for stmt in result:
            if not hasattr(stmt, "lineno"):
                ast.copy_location(stmt, node)
            tag(stmt, origin)
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
        if (
            isinstance(node.value, ast.Call)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            name = node.targets[0].id
            target = self.resolve(node.value.func)
            if target is L.alloc_shared:
                return self.alloc_shared(name, node.value)
            if target is L.alloc_local:
                return self.alloc_local(name, node.value)
            if target is Lcuda.decl_tmem:
                return self.decl_tmem(name, node.value)
        if isinstance(node.value, ast.Call) and isinstance(
            self.resolve(node.value.func), DeviceFunction
        ):
            return self.inline(node.value, self.resolve(node.value.func), node.targets)
        value = self.static(node.value)
        single = (
            node.targets[0]
            if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            else None
        )
        if value is not RUNTIME and single is not None:
            if single.id in self._static_candidates:
                self.scope.statics[single.id] = value
                if not is_number(value) or not fits_64_bits(value):
                    return []  # folded wherever it is used
                return [
                    ast.Assign(targets=[self.store_target(single)], value=self.expr(node.value))
                ]
            if not _has_runtime_form(value):
                raise self.error(node, self._rebound_static(single.id, value))
        return self.assign(node.targets, self.expr(node.value))

    def _rebound_static(self, name: str, value) -> str:
        """Why a compile-time-only value cannot go into ``name``, which is assigned more than once
        (and so is a run-time variable)."""
        shown = HELPER_PREFIX.sub("", name)
        lines = sorted(
            {
                n.lineno
                for n in ast.walk(self.source.tree)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and n.id == shown
            }
        )
        where = f" (lines {', '.join(map(str, lines))})" if len(lines) > 1 else ""
        return (
            f"{shown!r} is assigned more than once{where}, which makes it a run-time variable, "
            f"but this value ({type(value).__name__} {value!r}) exists only at compile time; "
            f"give each compile-time value its own name, assigned once"
        )

    def stmt_AnnAssign(self, node: ast.AnnAssign):
        if node.value is None:
            return []
        return self.stmt_Assign(
            ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)
        )

    def stmt_AugAssign(self, node: ast.AugAssign):
        if self.is_special_store(node.target):
            return self.augmented_store(node)
        return [
            ast.AugAssign(
                target=self.store_target(node.target), op=node.op, value=self.expr(node.value)
            )
        ]

    def store_target(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Name):
            if (
                node.id in self.shared
                or node.id in self.arrays
                or node.id in self.local_arrays
                or node.id in self.fragments
            ):
                raise self.error(
                    node,
                    f"cannot rebind {node.id!r}: it names memory (a shared "
                    f"buffer, tensor, local array or register fragment); use "
                    f"another name",
                )
            self.locals.add(node.id)
            return _name(node.id, ast.Store())
        if isinstance(node, ast.Tuple):
            return ast.Tuple(elts=[self.store_target(e) for e in node.elts], ctx=ast.Store())
        if isinstance(node, ast.Subscript):
            lowered = self.subscript(node)
            lowered.ctx = ast.Store()
            self.note_generic_write(node)
            return lowered
        raise self.error(node, "unsupported assignment target")

    def note_generic_write(self, target: ast.Subscript) -> None:
        """Record a store into a shared buffer's element (``buf[i]`` or ``buf.bits[i]``): a write
        through the generic proxy, for the proxy-fence check (jittile/frontend/proxies.py)."""
        base = target.value
        if isinstance(base, ast.Attribute) and base.attr == "bits":
            base = base.value
        if isinstance(base, ast.Name) and base.id in self.shared:
            self.proxy_events.append(
                ProxyEvent("write", self.loc(target), (self.shared[base.id].buffer.name,))
            )

    def stmt_If(self, node: ast.If):
        test = self.static(node.test)
        if test is not RUNTIME:
            return self.block(node.body if test else node.orelse)
        return [
            ast.If(
                test=self.expr(node.test),
                body=self.block(node.body) or [ast.Pass()],
                orelse=self.block(node.orelse),
            )
        ]


def warn_divergent_operations(function: ast.FunctionDef) -> list[str]:
    """A JittileWarning at each warp- or block-synchronous operation that runs under a
    lane-dependent condition; returns the messages."""
    messages = []
    for where, rule, condition, cause in divergent_operations(function):
        message = (
            f"{where.location}: {rule}, but it runs under a condition that differs between "
            f"the lanes of a warp ({condition.location}: {condition.text!r}); issue it "
            f"where the whole warp runs, e.g. under a condition on T.cuda.warp_id()"
        )
        if cause is not None:
            name, assignment, under = cause
            message += (
                f". It differs because {HELPER_PREFIX.sub('', name)!r} is assigned under "
                f"{under.text!r} at {assignment.location}: the check follows names, not "
                f"program order, so if that assignment never reaches this code, give the name "
                f"another name there"
            )
        messages.append(message)
        warnings.warn_explicit(
            JittileWarning(message), JittileWarning, where.location.filename, where.location.lineno
        )
    return messages


def _has_runtime_form(value) -> bool:
    """Whether a static value can also live in a run-time variable: numbers and tuples of them."""
    if isinstance(value, tuple):
        return all(_has_runtime_form(v) for v in value)
    return is_number(value)


def lower_kernel(source: KernelSource, params: list, target: Target, launch=None) -> Lowered:
    """Lower one specialization of a kernel."""
    return KernelLowering(source, params, target, launch).lower()
