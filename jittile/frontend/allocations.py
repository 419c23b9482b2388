"""Lowering allocations and launch declarations: shared buffers planned by jittile, local arrays,
TMEM tensors, ``T.device_entry``."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from .. import language as L
from .. import targets
from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..fragment import FragmentLayout
from ..language import cuda as Lcuda
from ..language.markers import call_signature
from ..language.types import Tensor
from ..patterns.base import SharedBuffer
from .emit import CUDA
from .static import RUNTIME
from .syntax import align_up
from .syntax import name as _name


@dataclass
class SharedVar:
    buffer: SharedBuffer
    view: str  # global name of the view intrinsic


@dataclass
class TmemVar:
    tensor: Tensor
    base: str


def launch_problem(launch) -> str | None:
    """What no supported target can launch in ``launch`` (a LaunchConfig), or None."""
    if launch.threads > targets.MAX_THREADS_PER_BLOCK:
        return (
            f"block {launch.block} has {launch.threads} threads, over the "
            f"{targets.MAX_THREADS_PER_BLOCK} a block may have"
        )
    for what, dims, limits in (
        ("block", launch.block, targets.MAX_BLOCK_DIMS),
        ("grid", launch.grid, targets.MAX_GRID_DIMS),
    ):
        for axis, extent, limit in zip("xyz", dims, limits):
            if extent > limit:
                return f"{what} extent {extent} on axis {axis} is over the {limit} it may have"
    if launch.cluster is not None:
        ctas = launch.cluster[0] * launch.cluster[1] * launch.cluster[2]
        if ctas > targets.MAX_CLUSTER_CTAS:
            return (
                f"cluster {launch.cluster} has {ctas} CTAs, over the "
                f"{targets.MAX_CLUSTER_CTAS} a portable cluster may have"
            )
    return None


class AllocationLowering:
    """Allocations of the kernel body (a part of :class:`KernelLowering`)."""

    # ------------------------------------------------------------------------------ allocations
    def alloc_shared(self, name: str, call: ast.Call) -> list[ast.stmt]:
        from ..layout import resolve_layout

        args = self.static_args(call, L.alloc_shared, "T.alloc_shared")
        shape = args["shape"]
        if isinstance(shape, int):
            shape = (shape,)
        if (
            not isinstance(shape, tuple)
            or not shape
            or not all(isinstance(e, int) and e > 0 for e in shape)
        ):
            raise self.error(
                call, f"T.alloc_shared shape must be a static tuple of positive ints, got {shape!r}"
            )
        dtype = self.dtype_arg(call, args["dtype"])
        align = args["align"]
        if align is None:
            align = max(dtype.bytes, 8)
        if not isinstance(align, int) or align <= 0 or align & (align - 1):
            raise self.error(
                call, f"T.alloc_shared align= must be a positive power of two, got {align!r}"
            )
        try:
            layout = resolve_layout(args["layout"], shape, dtype)
        except ValueError as exc:
            raise self.error(call, f"T.alloc_shared layout: {exc}") from None
        offset = align_up(self._shared_cursor, align)
        probe = SharedBuffer(name, shape, dtype, layout, align, offset, self.loc(call))
        self._shared_cursor = offset + probe.nbytes
        self.ir.shared_align = max(self.ir.shared_align, align)
        self.ir.shared_bytes = self._shared_cursor
        self.check_shared_limit(call, probe)
        view = f"__jt_smem_{name}_{len(self.shared)}"
        self.shared[name] = SharedVar(probe, view)
        self._buffers.append(probe)
        return [ast.Assign(targets=[_name(name, ast.Store())], value=self.call(view))]

    def check_shared_limit(self, call: ast.Call, buffer: SharedBuffer) -> None:
        """The shared memory planned so far, as a launch requests it, within the target's
        maximum per block."""
        requested = max(self.ir.launch_shared_bytes, self.ir.shared_bytes)
        limit = self.target.max_shared_bytes
        if requested <= limit:
            return
        slack = requested - self.ir.shared_bytes
        detail = f" plus {slack} bytes of alignment slack" if slack else ""
        raise self.error(
            call,
            f"shared memory: with {buffer.name!r} ({buffer.nbytes} bytes) the "
            f"kernel's buffers need {self.ir.shared_bytes} bytes{detail}, over "
            f"the {limit} bytes ({limit // 1024} KB) one block may use on "
            f"{self.target.name}; use smaller buffers or fewer stages",
        )

    def alloc_local(self, name: str, call: ast.Call) -> list[ast.stmt]:
        args = self.static_args(call, L.alloc_local, "T.alloc_local")
        shape = args["shape"] if isinstance(args["shape"], tuple) else (args["shape"],)
        if not shape or not all(
            isinstance(e, int) and not isinstance(e, bool) and e > 0 for e in shape
        ):
            raise self.error(
                call,
                f"T.alloc_local shape must be a static tuple of positive ints, "
                f"got {args['shape']!r}",
            )
        dtype = self.dtype_arg(call, args["dtype"])
        layout = args["layout"]
        if isinstance(layout, FragmentLayout):
            return self.alloc_fragment(name, call, shape, dtype, layout)
        if not (isinstance(layout, str) and layout == "default"):
            raise self.error(
                call,
                f'T.alloc_local layout is "default" (a per-thread array) or '
                f"a register-fragment layout (jittile.layout.wgmma_accumulator, "
                f"wgmma_a), got {layout!r}",
            )
        self.locals.add(name)
        self.local_arrays[name] = shape
        self.local_dtypes[name] = dtype
        storage = f"__jt_s_{dtype.name}"
        self.namespace[storage] = ("storage", dtype)
        alloc = ast.Call(
            func=ast.Attribute(
                value=ast.Attribute(value=_name(CUDA), attr="local", ctx=ast.Load()),
                attr="array",
                ctx=ast.Load(),
            ),
            args=[ast.Constant(value=shape), _name(storage)],
            keywords=[],
        )
        return [ast.Assign(targets=[_name(name, ast.Store())], value=alloc)]

    def decl_tmem(self, name: str, call: ast.Call) -> list[ast.stmt]:
        kw = {k.arg: k.value for k in call.keywords}
        ty_args = self.static(kw["ty_args"])
        if (
            ty_args is RUNTIME
            or not isinstance(ty_args, tuple)
            or len(ty_args) != 1
            or not isinstance(ty_args[0], Tensor)
        ):
            raise self.error(
                call,
                "T.cuda.decl_tmem needs ty_args=[T.Tensor(shape, dtype, scope='tmem', layout=...)]",
            )
        tensor = ty_args[0]
        if tensor.scope != "tmem":
            raise self.error(
                call, f"T.cuda.decl_tmem tensor scope must be 'tmem', got {tensor.scope!r}"
            )
        self.tmem[name] = TmemVar(tensor, name)
        self.locals.add(name)
        return [
            ast.Assign(
                targets=[_name(name, ast.Store())],
                value=self.cast(lookup_dtype("uint32"), self.expr(call.args[0])),
            )
        ]

    def device_entry(self, call: ast.Call) -> None:
        (launch_node,) = [k.value for k in call.keywords]  # the signature: (*, launch)
        launch = self.static(launch_node)
        if not isinstance(launch, Lcuda.LaunchConfig):
            raise self.error(call, "T.device_entry launch= must be a static T.cuda.LaunchConfig")
        problem = launch_problem(launch)
        if problem is not None:
            raise self.error(launch_node, f"T.device_entry launch: {problem}")
        if self._launch_override is None:  # kernel[grid, block] launches with its own block
            self.ir.launch = launch

    def static_args(self, call: ast.Call, target, what: str) -> dict:
        """The compile-time value of each parameter of ``target``'s signature (defaults filled
        in); the call was checked against that signature (frontend/calls.py)."""
        bound = call_signature(target).bind(*call.args, **{k.arg: k.value for k in call.keywords})
        bound.apply_defaults()
        out = {}
        for name, node in bound.arguments.items():
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
