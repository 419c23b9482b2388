"""Lowering raw PTX calls (``T.ptx.a.b.c(...)``): the instruction table's operand kinds, targets
and expected-transaction counts."""

from __future__ import annotations

import ast

import numpy as np

from ..errors import ContractError
from ..language.markers import PtxInstruction
from ..patterns import registry
from ..patterns.base import OrderEvent
from ..ptx import instructions as ptx_table
from .divergence import mark
from .emit import GLOBAL_ADDRESS, SHARED_ADDRESS, address_buffer
from .proxies import ProxyEvent
from .syntax import located, src
from .syntax import name as _name


class RawPtxLowering:
    """Raw PTX instructions (a part of :class:`KernelLowering`)."""

    # ------------------------------------------------------------------------------- raw PTX
    def raw_ptx(self, node: ast.Call, instr: PtxInstruction, statement: bool):
        location = self.loc(node)
        opcode = self.opcode_of(instr, node.func)
        spec = self._raw_spec(opcode, location)
        if node.keywords:
            raise ContractError(
                "raw PTX instructions take positional operands only",
                location,
                opcode=opcode,
                parameter=node.keywords[0].arg,
            )
        dests, args = self._raw_destinations(spec, list(node.args))
        try:
            ptx_table.check_operands(spec, len(args))
        except ContractError as exc:
            raise located(exc, location) from None
        operands = [
            self.ptx_operand(a, kind, opcode, i, spec.immediate_range)
            for i, (a, kind) in enumerate(zip(args, spec.inputs))
        ]
        call = self.call(self.asm_name(spec.asm()), *operands)
        if spec.warp_aligned:
            mark(call, f"{opcode} is .aligned: every thread of the warp must execute it together")
        self._record_raw_events(spec, opcode, location, args, operands)
        if not statement:
            if dests:
                raise self.error(node, f"{opcode} with destination operands is a statement")
            return call
        return self._raw_statement(spec, opcode, call, dests)

    def _raw_spec(self, opcode: str, location):
        """The instruction table's entry for ``opcode``; a tile-pattern opcode is told to use
        ``T.cuda.tile.apply``."""
        try:
            return ptx_table.lookup(opcode, self.target.name)
        except ContractError as exc:
            pattern = registry.pattern_for(opcode) if exc.parameter == "opcode" else None
            if pattern is not None:
                raise ContractError(
                    f"is a tile-pattern opcode of the {pattern.family} family: "
                    f"issue it with T.cuda.tile.apply(T.ptx[...], ...), which "
                    f"plans and checks its operands, not as a raw T.ptx call",
                    location,
                    opcode=opcode,
                    parameter="opcode",
                ) from None
            raise located(exc, location) from None

    def _raw_destinations(self, spec, args: list) -> tuple[list, list]:
        """(destination expressions, input operands): destinations written out one per output,
        or a whole local array for several outputs."""
        n_in, n_out = len(spec.inputs), len(spec.outputs)
        if n_out and len(args) == n_in + n_out:
            return args[:n_out], args[n_out:]
        if (
            n_out > 1
            and len(args) == n_in + 1
            and isinstance(args[0], ast.Name)
            and args[0].id in self.local_arrays
        ):
            dests = [
                ast.Subscript(value=_name(args[0].id), slice=ast.Constant(value=i), ctx=ast.Load())
                for i in range(n_out)
            ]
            return dests, args[1:]
        return [], args

    def _record_raw_events(self, spec, opcode: str, location, args: list, operands: list):
        """What the ordering, proxy, barrier and transaction-byte checks need of the call."""
        immediates = [
            o.value for o, kind in zip(operands, spec.inputs) if getattr(kind, "name", "") == "IMM"
        ]
        self.order_events.append(
            OrderEvent("ptx", location, opcode, immediate=immediates[0] if immediates else None)
        )
        if spec.proxy == ptx_table.ASYNC_SHARED_FENCE:
            self.proxy_events.append(ProxyEvent("fence", location))
        elif spec.proxy == ptx_table.GENERIC_SHARED_WRITE:
            buffer = address_buffer(operands[0])
            if buffer in self.shared:
                self.proxy_events.append(
                    ProxyEvent("write", location, (self.shared[buffer].buffer.name,))
                )
        if spec.initialises:
            self.barrier_inits.append(location)
        if spec.tx_count is not None:
            barrier, count_index = spec.tx_count
            count = self.static(args[count_index])
            self.tx_counts.append(
                (
                    location,
                    spec.opcode,
                    operands[barrier],
                    self.display(args[barrier]),
                    int(count) if isinstance(count, (int, np.integer)) else None,
                )
            )

    def _raw_statement(self, spec, opcode: str, call: ast.expr, dests: list) -> list:
        """The call as statements: its results assigned to the destinations."""
        if not dests:
            return [ast.Expr(value=call)]
        for i, (dest, kind) in enumerate(zip(dests, spec.outputs)):
            self.check_ptx_element(dest, kind.constraint == "f", opcode, f"destination {i}")
        if len(dests) == 1:
            return self.assign([dests[0]], call)
        tmp = self.fresh("out")
        stmts = [ast.Assign(targets=[_name(tmp, ast.Store())], value=call)]
        for i, dest in enumerate(dests):
            stmts.extend(
                self.assign(
                    [dest],
                    ast.Subscript(value=_name(tmp), slice=ast.Constant(value=i), ctx=ast.Load()),
                )
            )
        return stmts

    def opcode_of(self, instr: PtxInstruction, node: ast.expr) -> str:
        """The opcode ``instr`` spells; a bare ``T.ptx`` is an error at ``node``."""
        try:
            return instr.opcode
        except ContractError as exc:
            raise located(exc, self.loc(node)) from None

    def ptx_operand(
        self,
        node: ast.expr,
        kind,
        opcode: str,
        index: int,
        immediate_range: tuple[int, int, int] | None = None,
    ) -> ast.expr:
        kind_name = getattr(kind, "name", str(kind))
        if kind_name == "IMM":
            value = self.static(node)
            if not isinstance(value, int) or isinstance(value, bool):
                raise ContractError(
                    f"operand {index} must be a compile-time integer, got {src(node)!r}",
                    self.loc(node),
                    opcode=opcode,
                    parameter=f"operand {index}",
                )
            if immediate_range is not None:
                low, high, step = immediate_range
                if not low <= value <= high or value % step:
                    multiple = f", a multiple of {step}" if step > 1 else ""
                    raise ContractError(
                        f"operand {index} must be between {low} and {high}{multiple}, got {value}",
                        self.loc(node),
                        opcode=opcode,
                        parameter=f"operand {index}",
                    )
            return ast.Constant(value=value)
        if isinstance(node, ast.Name):
            if node.id in self.shared:
                if kind_name != "SHARED_ADDR":
                    raise ContractError(
                        f"operand {index} expects {kind_name}, got shared buffer {node.id!r}",
                        self.loc(node),
                        opcode=opcode,
                        parameter=f"operand {index}",
                    )
                return self.call(SHARED_ADDRESS, _name(node.id), ast.Constant(value=0))
            if node.id in self.tensormaps:
                return _name(node.id)
            if node.id in self.arrays:
                if kind_name != "GENERIC_PTR":
                    raise ContractError(
                        f"operand {index} expects {kind_name}, got tensor {node.id!r}",
                        self.loc(node),
                        opcode=opcode,
                        parameter=f"operand {index}",
                    )
                zeros = [ast.Constant(value=0)] * self.arrays[node.id].ndim
                return self.call(
                    GLOBAL_ADDRESS, _name(node.id), ast.Tuple(elts=zeros, ctx=ast.Load())
                )
        self.check_ptx_element(
            node, getattr(kind, "constraint", None) == "f", opcode, f"operand {index}"
        )
        return self.expr(node)
