"""Lowering kernel expressions: values, indexing, calls of the kernel language's functions."""

from __future__ import annotations

import ast
import types as pytypes

import numpy as np

from .. import language as L
from ..dtypes import dtype as lookup_dtype
from ..errors import CompileError
from ..language import cuda as Lcuda
from ..language.markers import DeviceFunction, Intrinsic, PtxInstruction
from ..language.types import ScalarType
from ..patterns.base import OrderEvent, SharedBuffer
from ..ptx import builtins
from .divergence import mark
from .emit import CUDA, GLOBAL_ADDRESS, SHARED_ADDRESS, linear_index
from .math_calls import is_math
from .positions import Origin, tag
from .static import RUNTIME
from .syntax import name as _name
from .syntax import parse_expr, src
from .unsupported import unsupported

_AXES = ("x", "y", "z")


def is_number(value) -> bool:
    """Whether a static value is a kernel number: a Python or NumPy bool, int or float."""
    return isinstance(value, (bool, int, float, np.bool_, np.integer, np.floating))


def fits_64_bits(value) -> bool:
    """Whether a number is a kernel value: a float, or an int in int64's or uint64's range."""
    return not isinstance(value, int) or -(2**63) <= value < 2**64


class ExpressionLowering:
    """Expressions of the kernel body (a part of :class:`KernelLowering`)."""

    # ------------------------------------------------------------------------------ expressions
    def expr(self, node: ast.expr) -> ast.expr:
        """The lowered form of a user expression, tagged with where it came from."""
        return tag(self._expr(node), Origin(self.loc(node), node))

    def _expr(self, node: ast.expr) -> ast.expr:
        if isinstance(node, ast.Call):
            return self.call_expr(node)
        if isinstance(node, ast.Name):
            self.check_value_name(node)
        value = self.static(node)
        if is_number(value):
            if not fits_64_bits(value):
                raise self.error(
                    node,
                    f"the integer {src(node)} = {value} does not fit in 64 bits "
                    f"(kernel integers are int64 or uint64)",
                )
            if isinstance(value, np.generic):  # a typed scalar such as T.uint32(1): keep its type
                return self.cast(lookup_dtype(value.dtype.name), ast.Constant(value=value.item()))
            return ast.Constant(value=value)
        if isinstance(node, ast.Name):
            if value is RUNTIME:
                return _name(node.id)
            raise self.error(node, f"{node.id!r} ({type(value).__name__}) is not a kernel value")
        if value is not RUNTIME and not isinstance(node, ast.Tuple):
            raise self.error(
                node,
                f"{src(node)!r} is a compile-time {type(value).__name__}, not a "
                f"kernel value: kernels compute with ints, floats and bools",
            )
        if isinstance(node, ast.Subscript):
            return self.element_load(node)
        if isinstance(node, ast.BinOp):
            return ast.BinOp(left=self.expr(node.left), op=node.op, right=self.expr(node.right))
        if isinstance(node, ast.UnaryOp):
            return ast.UnaryOp(op=node.op, operand=self.expr(node.operand))
        if isinstance(node, ast.BoolOp):
            return ast.BoolOp(op=node.op, values=[self.expr(v) for v in node.values])
        if isinstance(node, ast.Compare):
            return ast.Compare(
                left=self.expr(node.left),
                ops=node.ops,
                comparators=[self.expr(c) for c in node.comparators],
            )
        if isinstance(node, ast.IfExp):
            test = self.static(node.test)
            if test is not RUNTIME:  # a choice made at compile time: only its branch is lowered
                return self.expr(node.body if test else node.orelse)
            return ast.IfExp(
                test=self.expr(node.test), body=self.expr(node.body), orelse=self.expr(node.orelse)
            )
        if isinstance(node, ast.Tuple):
            return ast.Tuple(elts=[self.expr(e) for e in node.elts], ctx=ast.Load())
        if isinstance(node, ast.Attribute):
            raise self.error(node, f"attribute {src(node)!r} is not a kernel value")
        raise unsupported(node, self.loc(node), "expression")

    def memory_kind(self, node: ast.expr) -> str | None:
        """What memory a bare name stands for ("shared buffer", "tensor", "local array"), or
        None for anything else."""
        if not isinstance(node, ast.Name):
            return None
        if node.id in self.shared:
            return "shared buffer"
        if node.id in self.arrays:
            return "tensor"
        if node.id in self.fragments:
            return "register fragment"
        return "local array" if node.id in self.local_arrays else None

    def check_value_name(self, node: ast.Name) -> None:
        """Refuse a name that stands for memory where a scalar value is needed."""
        kind = self.memory_kind(node)
        if kind == "shared buffer":
            raise self.error(
                node,
                f"shared buffer {node.id!r} cannot be used as a value; index it "
                f"or take buf.ptr_to([...])",
            )
        if kind is not None:
            raise self.error(
                node,
                f"{kind} {node.id!r} cannot be used as a value; index one "
                f"element ({node.id}[...]) or pass it whole as a tile-call "
                f"operand",
            )

    def check_indices(self, node: ast.Subscript, name: str, indices: list[ast.expr]) -> None:
        """A tensor or local array is indexed by one integer per axis, static ones inside the
        static extents."""
        if name in self.arrays:
            kind, shape = "tensor", self.arrays[name].static_shape
        elif name in self.local_arrays:
            kind, shape = "local array", self.local_arrays[name]
        else:
            return
        if len(indices) != len(shape):
            raise self.error(
                node,
                f"{kind} {name!r} has rank {len(shape)}, indexed with "
                f"{len(indices)} indices; index every axis",
            )
        self.check_static_indices(indices, shape, f"{kind} {name!r}")

    def check_static_indices(self, indices: list[ast.expr], shape: tuple, what: str) -> None:
        """Compile-time indices are integers inside the static extents (None: unknown)."""
        for index, extent in zip(indices, shape):
            value = self.static(index)
            if value is RUNTIME:
                continue
            if not isinstance(value, int):
                raise self.error(
                    index,
                    f"index {src(index)!r} of {what} is a "
                    f"{type(value).__name__}; indices are integers",
                )
            if extent is not None and not -extent <= value < extent:
                raise self.error(index, f"index {value} is outside axis extent {extent} of {what}")

    def subscript(self, node: ast.Subscript) -> ast.expr:
        base = node.value
        if isinstance(base, ast.Name) and base.id in self.fragments:
            self.order_events.append(OrderEvent("access", self.loc(node), fragments=(base.id,)))
            return _name(self.fragment_register(node, self.fragments[base.id]))
        indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(base, ast.Name) and base.id in self.shared:
            buf = self.shared[base.id].buffer
            flat = self.shared_index(node, buf, indices)
            self.check_static_indices(indices, buf.shape, f"shared buffer {base.id!r}")
            return ast.Subscript(value=_name(base.id), slice=flat, ctx=ast.Load())
        if isinstance(base, ast.Name) and (base.id in self.arrays or base.id in self.locals):
            if any(isinstance(i, ast.Slice) for i in indices):
                raise self.error(node, "slices of tensors are only allowed as tile-call operands")
            self.check_indices(node, base.id, indices)
            lowered = [self.expr(i) for i in indices]
            index = lowered[0] if len(lowered) == 1 else ast.Tuple(elts=lowered, ctx=ast.Load())
            return ast.Subscript(value=_name(base.id), slice=index, ctx=ast.Load())
        raise self.error(node, f"cannot index {src(base)!r}")

    def shared_index(self, node: ast.AST, buf: SharedBuffer, indices: list[ast.expr]) -> ast.expr:
        if len(indices) != len(buf.shape):
            raise self.error(
                node,
                f"shared buffer {buf.name!r} has rank {len(buf.shape)}, indexed "
                f"with {len(indices)} indices",
            )
        if any(isinstance(i, ast.Slice) for i in indices):
            raise self.error(node, "shared-buffer slices are only allowed as tile-call operands")
        sources = [src(self.expr(i)) for i in indices]
        return parse_expr(buf.layout.index_source(sources, buf.shape))

    def call_expr(self, node: ast.Call) -> ast.expr:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "ptr_to":
            return self.ptr_to(node)
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("row", "col")
            and isinstance(func.value, ast.Name)
            and func.value.id in self.fragments
        ):
            return self.fragment_coordinate(node, self.fragments[func.value.id])
        target = self.resolve(func)
        if isinstance(target, ScalarType):
            return self.cast(target.dtype, self.expr(node.args[0]))
        if isinstance(target, PtxInstruction):
            return self.raw_ptx(node, target, statement=False)
        if isinstance(target, Intrinsic):
            return self.intrinsic_expr(node, target)
        if target in (min, max, abs):
            wanted = "one value" if target is abs else "two or more values"
            if node.keywords or (len(node.args) != 1 if target is abs else len(node.args) < 2):
                raise self.error(
                    node, f"{target.__name__}() in a kernel takes {wanted}, positionally"
                )
            return ast.Call(
                func=_name(target.__name__), args=[self.expr(a) for a in node.args], keywords=[]
            )
        if target is RUNTIME:
            raise self.error(node, f"cannot resolve call target {src(func)!r}")
        if isinstance(target, DeviceFunction):
            raise self.error(
                node,
                f"call the helper {src(func)} as a statement or as the whole "
                f"right side of an assignment",
            )
        if isinstance(target, pytypes.FunctionType):
            raise self.error(
                node,
                f"{src(func)!r} cannot be called inside a kernel; decorate it "
                f"with @jittile.func to inline it",
            )
        raise CompileError(
            f"{src(func)!r} cannot be called inside a kernel",
            self.loc(node),
            hint="a kernel calls the kernel language (T...), min, max, abs and "
            "@jittile.func helpers; compute this value on the host and pass "
            "it in as an argument (a T.constexpr parameter when it is a "
            "compile-time constant)",
        )

    def intrinsic_expr(self, node: ast.Call, target: Intrinsic) -> ast.expr:
        reg = lambda obj, attr: ast.Attribute(  # noqa: E731
            value=ast.Attribute(value=_name(CUDA), attr=obj, ctx=ast.Load()),
            attr=attr,
            ctx=ast.Load(),
        )
        if is_math(target):
            return self.math_call(node, target)
        if target in Lcuda.ATOMICS:
            return self.atomic_call(node, target)
        if target is Lcuda.threadfence:
            return self.fence_call(node)
        axis = None
        if node.args:
            axis = self.static(node.args[0])
        if target is Lcuda.lane_id:
            return ast.Attribute(value=_name(CUDA), attr="laneid", ctx=ast.Load())
        if target in (Lcuda.thread_idx, Lcuda.block_idx, Lcuda.block_dim, Lcuda.grid_dim):
            obj = {
                Lcuda.thread_idx: "threadIdx",
                Lcuda.block_idx: "blockIdx",
                Lcuda.block_dim: "blockDim",
                Lcuda.grid_dim: "gridDim",
            }[target]
            if axis is None and target in (Lcuda.thread_idx, Lcuda.block_idx):
                return linear_index(obj, "blockDim" if obj == "threadIdx" else "gridDim")
            if axis not in _AXES:
                raise self.error(
                    node, f"{target.qualname} axis must be 'x', 'y' or 'z', got {axis!r}"
                )
            return reg(obj, axis)
        if target is Lcuda.warp_id:
            return ast.BinOp(
                left=linear_index("threadIdx", "blockDim"),
                op=ast.FloorDiv(),
                right=ast.Constant(value=32),
            )
        if target is Lcuda.cluster_ctarank:
            return self.call(self.asm_name(builtins.CLUSTER_CTARANK))
        if target is Lcuda.cta_sync:
            return mark(
                ast.Call(
                    func=ast.Attribute(value=_name(CUDA), attr="syncthreads", ctx=ast.Load()),
                    args=[],
                    keywords=[],
                ),
                "T.cuda.cta_sync() is a barrier every thread of the block must reach",
            )
        if target is Lcuda.cluster_sync:
            return mark(
                self.call(self.asm_name(builtins.CLUSTER_SYNC)),
                "T.cuda.cluster_sync() is a barrier every thread of the cluster must reach",
            )
        if target is Lcuda.mbarrier_wait:
            return self.call(
                self.asm_name(builtins.MBARRIER_WAIT), *[self.expr(a) for a in node.args]
            )
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
            return self.call(
                GLOBAL_ADDRESS,
                _name(base.id),
                ast.Tuple(elts=[self.expr(i) for i in indices], ctx=ast.Load()),
            )
        raise self.error(
            node, f"{src(base)!r} has no ptr_to: only shared buffers and tensor parameters do"
        )

    def address_of(self, node: ast.Call) -> ast.expr:
        arg = node.args[0]
        if isinstance(arg, ast.Name) and arg.id in self.shared:
            return self.call(SHARED_ADDRESS, _name(arg.id), ast.Constant(value=0))
        if (
            isinstance(arg, ast.Subscript)
            and isinstance(arg.value, ast.Name)
            and arg.value.id in self.shared
        ):
            lowered = self.subscript(arg)
            return self.call(SHARED_ADDRESS, lowered.value, lowered.slice)
        if isinstance(arg, ast.Name) and arg.id in self.arrays:
            zeros = [ast.Constant(value=0)] * self.arrays[arg.id].ndim
            return self.call(GLOBAL_ADDRESS, _name(arg.id), ast.Tuple(elts=zeros, ctx=ast.Load()))
        raise self.error(
            node,
            f"T.address_of({src(arg)}) needs a shared buffer, a shared element "
            f"or a tensor parameter",
        )
