"""Lowering tile calls (``T.cuda.tile.apply``): operands classified into regions, parameters into
static values and runtime Vars, the pattern's plan printed into the kernel; and the services
patterns use while they lower (host setup, group indices)."""

from __future__ import annotations

import ast
import copy
import dataclasses

from ..dtypes import dtype as lookup_dtype
from ..errors import CompileError, ContractError, JittileError
from ..ir import ArgumentAlignment, ArrayParam, BinOp, HostParam, SiteRecord, Special, Var
from ..language.markers import PtxInstruction
from ..patterns import registry
from ..patterns.base import (
    CallSite,
    FragmentRegion,
    GlobalRegion,
    OrderEvent,
    SharedRegion,
    TensorMapOperand,
    TmemRegion,
)
from .emit import render
from .positions import HELPER_PREFIX
from .proxies import ProxyEvent
from .static import RUNTIME
from .syntax import located, src
from .syntax import name as _name


class TileCallLowering:
    """Tile calls of the kernel body (a part of :class:`KernelLowering`)."""

    # ------------------------------------------------------------------------------ tile calls
    def tile_apply(self, node: ast.Call) -> list[ast.stmt]:
        location = self.loc(node)
        instr = self.resolve(node.args[0])  # bound to T.cuda.tile.apply's signature (calls.py)
        if not isinstance(instr, PtxInstruction):
            raise ContractError(
                f"first argument must be T.ptx[opcode], got {src(node.args[0])!r}",
                self.loc(node.args[0]),
                parameter="opcode",
            )
        opcode = self.opcode_of(instr, node.args[0])
        pattern = registry.pattern_for(opcode)
        if pattern is None:
            near = registry.closest_family(opcode)
            mean = f" (did you mean '{near}...'?)" if near else ""
            raise ContractError(
                f"no tile pattern handles this opcode{mean}; known families: "
                f"{', '.join(registry.family_names())}",
                location,
                opcode=opcode,
                parameter="opcode",
            )
        prelude: list[ast.stmt] = []
        operands = [self.tile_operand(a, opcode, i, prelude) for i, a in enumerate(node.args[1:])]
        params: dict[str, object] = {}
        param_locations = {f"operand {i}": self.loc(a) for i, a in enumerate(node.args[1:])}
        scope = "thread"
        for kw in node.keywords:
            param_locations[kw.arg] = self.loc(kw.value)
            if kw.arg == "scope":
                scope = self.static(kw.value)
                if not isinstance(scope, str):
                    raise ContractError(
                        f"must be a static string, got {src(kw.value)!r}",
                        self.loc(kw.value),
                        opcode=opcode,
                        parameter="scope",
                    )
                continue
            params[kw.arg] = self.tile_param(kw.value, prelude, opcode, kw.arg)
        if not pattern.accepts_transposed:
            self._refuse_transposed(node, pattern, opcode, operands)
        site = CallSite(location, opcode, operands, params, param_locations, self.target, scope)
        try:
            lowering = pattern.lower(site, self)
        except JittileError as exc:  # located at its parameter by the pattern, else at the call
            if exc.location is not None:
                raise
            if isinstance(exc, ContractError):
                raise located(exc, location) from None
            raise CompileError(exc.message, location) from None
        self.ir.sites.append(
            SiteRecord(location, opcode, pattern.family, lowering.plan, lowering.predicate)
        )
        reads = pattern.async_shared_reads(site)
        if reads:
            self.proxy_events.append(ProxyEvent("read", location, reads, opcode))
        self.order_events.append(
            OrderEvent(
                "tile",
                location,
                opcode,
                fragments=tuple(o.name for o in operands if isinstance(o, FragmentRegion)),
            )
        )
        site_index = len(self.ir.sites) - 1
        emits = [
            self.issue(self.record_name(site_index, k), record)
            for k, record in enumerate(lowering.plan)
        ]
        for stmt in emits:
            ast.copy_location(stmt, node)
        if lowering.predicate is not None and emits:
            emits = [ast.If(test=render(lowering.predicate, self.asm_name), body=emits, orelse=[])]
        return prelude + emits

    def _refuse_transposed(self, node: ast.Call, pattern, opcode: str, operands: list) -> None:
        """A family that moves regions in their own axis order takes no ``.T`` region."""
        for i, operand in enumerate(operands):
            if isinstance(operand, SharedRegion) and operand.transposed:
                raise ContractError(
                    f"operand {i} is a transposed shared region (.T); "
                    f"{pattern.family} moves regions in their buffer's own "
                    f"axis order",
                    self.loc(node.args[1 + i]),
                    opcode=opcode,
                    parameter=f"operand {i}",
                )

    def issue(self, global_name: str, record) -> ast.stmt:
        """The statement issuing one plan record: a call, assigned to the registers it writes."""
        call = self.call(global_name, *[render(v, self.asm_name) for _, v in record.operands])
        if not record.results:
            return ast.Expr(value=call)
        targets = [_name(v.name, ast.Store()) for v in record.results]
        target = targets[0] if len(targets) == 1 else ast.Tuple(elts=targets, ctx=ast.Store())
        return ast.Assign(targets=[target], value=call)

    def tile_param(self, node: ast.expr, prelude: list[ast.stmt], opcode: str, parameter: str):
        """A keyword value: static where it folds, else runtime temporaries (per tuple element)."""
        kind = self.memory_kind(node)
        if kind is not None:
            raise ContractError(
                f"takes a value, got {kind} {node.id!r}; pass an element, an "
                f"address (buf.ptr_to([...])) or a number",
                self.loc(node),
                opcode=opcode,
                parameter=parameter,
            )
        value = self.static(node)
        if value is not RUNTIME:
            return value
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.tile_param(e, prelude, opcode, parameter) for e in node.elts)
        return self.temporary(node, prelude)

    def temporary(self, node: ast.expr, prelude: list[ast.stmt]) -> Var:
        """Evaluate ``node`` once into a fresh temporary (appended to ``prelude``)."""
        tmp = self.fresh()
        lowered = self.expr(node)
        prelude.append(
            ast.copy_location(ast.Assign(targets=[_name(tmp, ast.Store())], value=lowered), node)
        )
        self.value_keys[tmp] = lowered
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

        return HELPER_PREFIX.sub("", src(Fold().visit(copy.deepcopy(node))))

    def tile_operand(self, node: ast.expr, opcode: str, index: int, prelude: list[ast.stmt]):
        if isinstance(node, ast.IfExp):  # a choice made at compile time
            test = self.static(node.test)
            if test is not RUNTIME:
                chosen = node.body if test else node.orelse
                return self.tile_operand(chosen, opcode, index, prelude)
        if isinstance(node, ast.Attribute) and node.attr == "T":
            region = self.tile_operand(node.value, opcode, index, prelude)
            if not isinstance(region, SharedRegion) or len(region.shape) != 2:
                raise ContractError(
                    f"operand {index}: .T transposes a two-axis shared region, "
                    f"got {src(node.value)!r}",
                    self.loc(node),
                    opcode=opcode,
                    parameter=f"operand {index}",
                )
            return region.transpose()
        if isinstance(node, ast.Name) and node.id in self.fragments:
            return self.fragments[node.id].region()
        base, indices = node, None
        if isinstance(node, ast.Subscript):
            base = node.value
            indices = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if isinstance(base, ast.Name):
            name = base.id
            if name in self.shared:
                buf = self.shared[name].buffer
                runtime: list = []
                origin, shape, axes = self.region(
                    node, indices, buf.shape, opcode, index, runtime, prelude
                )
                return SharedRegion(buf, origin, shape, axes, tuple(runtime))
            if name in self.arrays:
                param = self.arrays[name]
                return self.global_region(node, param, indices, opcode, index, prelude)
            if name in self.tensormaps and indices is None:
                return TensorMapOperand(name)
            if name in self.tmem:
                var = self.tmem[name]
                origin, shape, axes = self.region(node, indices, var.tensor.shape, opcode, index)
                return TmemRegion(
                    name,
                    Var(var.base, name, "local"),
                    var.tensor.shape,
                    lookup_dtype(var.tensor.dtype),
                    var.tensor.layout,
                    origin,
                    shape,
                    axes,
                )
        raise ContractError(
            f"operand {index} ({src(node)!r}) must be a shared buffer or region, a tensor "
            f"parameter or region, a jittile.TensorMap parameter, a TMEM tensor or a register "
            f"fragment",
            self.loc(node),
            opcode=opcode,
            parameter=f"operand {index}",
        )

    def region(
        self,
        node,
        indices,
        shape,
        opcode,
        index,
        runtime: list | None = None,
        prelude: list | None = None,
    ):
        """Static origin, shape and kept axes of ``buf[indices]`` (ints drop an axis, slices keep).

        Where ``runtime`` is given (shared operands), an axis may be indexed by a runtime
        integer: it is evaluated once into a temporary (in ``prelude``), appended to ``runtime``
        as ``(Var, axis)``, and its origin is 0.
        """
        if indices is None:
            return (0,) * len(shape), tuple(shape), tuple(range(len(shape)))
        if len(indices) > len(shape):
            raise ContractError(
                f"operand {index} indexes {len(indices)} axes of a rank-{len(shape)} buffer",
                self.loc(node),
                opcode=opcode,
                parameter=f"operand {index}",
            )
        origin, out_shape, axes = [], [], []
        for axis, extent in enumerate(shape):
            idx = indices[axis] if axis < len(indices) else ast.Slice()
            value = self.static(idx)
            if value is RUNTIME and runtime is not None and not isinstance(idx, ast.Slice):
                runtime.append((self.temporary(idx, prelude), axis))
                origin.append(0)
                continue
            if value is RUNTIME:
                raise ContractError(
                    f"operand {index} region bounds must be compile-time values, got {src(idx)!r}",
                    self.loc(idx),
                    opcode=opcode,
                    parameter=f"operand {index}",
                )
            if isinstance(value, slice):
                start, stop, step = value.indices(extent)
                if step != 1 or stop <= start:
                    raise ContractError(
                        f"operand {index} slice {src(idx)!r} must be a non-empty unit-step range",
                        self.loc(idx),
                        opcode=opcode,
                        parameter=f"operand {index}",
                    )
                origin.append(start)
                out_shape.append(stop - start)
                axes.append(axis)
            elif isinstance(value, int):
                if not 0 <= value < extent:
                    raise ContractError(
                        f"operand {index} index {value} is outside extent {extent}",
                        self.loc(idx),
                        opcode=opcode,
                        parameter=f"operand {index}",
                    )
                origin.append(value)
            else:
                raise ContractError(
                    f"operand {index} index {src(idx)!r} must be an int or slice",
                    self.loc(idx),
                    opcode=opcode,
                    parameter=f"operand {index}",
                )
        return tuple(origin), tuple(out_shape), tuple(axes)

    def global_region(
        self, node, param: ArrayParam, indices, opcode, index, prelude: list
    ) -> GlobalRegion:
        """``A`` or ``A[...]``: per axis a static slice (kept) or an integer index (dropped; a
        runtime one is evaluated once into a temporary)."""
        ndim = param.ndim
        if indices is None:
            return GlobalRegion(
                param.name,
                param.dtype,
                ndim,
                param.static_shape,
                (0,) * ndim,
                (None,) * ndim,
                (False,) * ndim,
                param.layout,
            )

        def fail(message: str, where) -> ContractError:
            return ContractError(
                f"operand {index}: {message}",
                self.loc(where),
                opcode=opcode,
                parameter=f"operand {index}",
            )

        if len(indices) != ndim:
            raise fail(
                f"a global region indexes every axis of the rank-{ndim} tensor "
                f"{param.name!r} (got {src(node)!r})",
                node,
            )
        starts, extents, dropped = [], [], []
        for idx, static_extent in zip(indices, param.static_shape):
            value = self.static(idx)
            if not isinstance(idx, ast.Slice):
                if value is RUNTIME:
                    value = self.temporary(idx, prelude)
                elif (
                    not isinstance(value, int)
                    or isinstance(value, bool)
                    or value < 0
                    or (static_extent is not None and value >= static_extent)
                ):
                    raise fail(
                        f"index {src(idx)!r} must be an integer inside the axis (extent "
                        f"{static_extent})",
                        idx,
                    )
                starts.append(value)
                extents.append(1)
                dropped.append(True)
                continue
            if value is RUNTIME or value.step not in (None, 1):
                raise fail(f"region bounds must be compile-time, unit step, got {src(idx)!r}", idx)
            start = value.start or 0
            if start < 0 or (value.stop is not None and value.stop <= start):
                raise fail(f"slice {src(idx)!r} is empty or negative", idx)
            starts.append(start)
            extents.append(None if value.stop is None else value.stop - start)
            dropped.append(False)
        return GlobalRegion(
            param.name,
            param.dtype,
            ndim,
            param.static_shape,
            tuple(starts),
            tuple(extents),
            tuple(dropped),
            param.layout,
        )

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
        raise CompileError(
            f"unknown scope {scope!r}: expected thread, warp, warpgroup, cta or cluster"
        )
