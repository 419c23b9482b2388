"""Lowering register fragments: ``T.alloc_local(shape, dtype, layout=wgmma_accumulator)``.

A fragment becomes one scalar variable per 32-bit register of the thread, so that numba-cuda and
ptxas keep it in registers (an indexed local array would live in local memory). The kernel reads
and writes a register as ``frag[i]`` with a compile-time ``i``, asks where it sits in the tile with
``frag.row(i)`` / ``frag.col(i)`` and how many registers there are with ``frag.size``; tile calls
take the whole fragment as an operand (see :class:`~jittile.patterns.base.FragmentRegion`).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ..dtypes import DType
from ..dtypes import dtype as lookup_dtype
from ..fragment import FragmentLayout
from ..ir import Var
from ..patterns.base import FragmentRegion
from .emit import linear_index
from .static import RUNTIME
from .syntax import name as _name
from .syntax import src


@dataclass(frozen=True)
class FragmentVar:
    """A fragment of the kernel: its tile shape, element type, layout and register variables.
    It is the fragment's compile-time value, so ``frag.size`` and ``frag.shape`` fold."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    layout: FragmentLayout
    registers: tuple[str, ...]

    @property
    def size(self) -> int:
        """Registers per thread."""
        return len(self.registers)

    def region(self) -> FragmentRegion:
        return FragmentRegion(
            self.name,
            self.shape,
            self.dtype,
            self.layout,
            tuple(Var(r, f"{self.name}[{i}]", "local") for i, r in enumerate(self.registers)),
        )


class FragmentLowering:
    """Register fragments of the kernel body (a part of :class:`KernelLowering`)."""

    def alloc_fragment(
        self, name: str, call: ast.Call, shape: tuple, dtype: DType, layout: FragmentLayout
    ) -> list[ast.stmt]:
        problem = layout.problem(shape, dtype)
        if problem is not None:
            raise self.error(call, f"T.alloc_local {name!r}: {problem}")
        count = layout.registers(shape, dtype)
        registers = tuple(f"__jt_frag_{name}_{i}" for i in range(count))
        fragment = FragmentVar(name, shape, dtype, layout, registers)
        self.fragments[name] = fragment
        self.scope.statics[name] = fragment
        self.locals.update(registers)
        self.locals.update(_bases(fragment))
        zero = self.cast(self.register_dtype(fragment), ast.Constant(value=0))
        return [
            ast.Assign(
                targets=[
                    ast.Tuple(elts=[_name(r, ast.Store()) for r in registers], ctx=ast.Store())
                ],
                value=ast.Tuple(elts=[zero] * count, ctx=ast.Load()),
            ),
            *_thread_bases(fragment),
        ]

    @staticmethod
    def register_dtype(fragment: FragmentVar) -> DType:
        """What one register holds as a kernel value: float32 for f32 accumulators, int32 for
        s32 ones, else the packed 32-bit word (uint32)."""
        if fragment.layout.register_class(fragment.dtype) == "f":
            return lookup_dtype("float32")
        return lookup_dtype("int32" if fragment.dtype.name == "int32" else "uint32")

    def fragment_register(self, node: ast.Subscript, fragment: FragmentVar) -> str:
        """The register variable ``frag[i]`` names (``i`` a compile-time integer)."""
        index = self.static(node.slice)
        if index is RUNTIME or isinstance(index, bool) or not isinstance(index, int):
            raise self.error(
                node,
                f"register fragment {fragment.name!r} is indexed by a "
                f"compile-time integer (its registers are separate variables; "
                f"T.unroll makes a loop index one), got {src(node.slice)!r}",
            )
        if not 0 <= index < fragment.size:
            raise self.error(
                node,
                f"index {index} is outside register fragment "
                f"{fragment.name!r}, which has {fragment.size} registers per "
                f"thread ({fragment.name}.size)",
            )
        return fragment.registers[index]

    def fragment_coordinate(self, node: ast.Call, fragment: FragmentVar) -> ast.expr:
        """``frag.row(i)`` / ``frag.col(i)``: where the first element of register ``i`` of the
        running thread sits in the fragment's tile (the thread's base, computed once at the
        allocation, plus a constant)."""
        method = node.func.attr
        if len(node.args) != 1 or node.keywords:
            raise self.error(node, f"{fragment.name}.{method}(i) takes one register index")
        register = self.fragment_register(
            ast.copy_location(
                ast.Subscript(value=node.func.value, slice=node.args[0], ctx=ast.Load()), node
            ),
            fragment,
        )
        row, column, _ = fragment.layout.terms(fragment.registers.index(register), fragment.dtype)
        base_row, base_col = _bases(fragment)
        return _plus(_name(base_row), row) if method == "row" else _plus(_name(base_col), column)


def _bases(fragment: FragmentVar) -> tuple[str, str]:
    return f"__jt_frag_{fragment.name}_row", f"__jt_frag_{fragment.name}_col"


def _thread_bases(fragment: FragmentVar) -> list[ast.stmt]:
    """``row = 16 * warp + lane // 4`` and ``col = (lane % 4) * step`` of the running thread in
    its warpgroup (``step`` columns between the quads' first elements)."""
    thread = ast.BinOp(
        left=linear_index("threadIdx", "blockDim"), op=ast.Mod(), right=ast.Constant(value=128)
    )
    lane = ast.BinOp(left=thread, op=ast.Mod(), right=ast.Constant(value=32))
    warp_rows = ast.BinOp(
        left=ast.BinOp(left=thread, op=ast.FloorDiv(), right=ast.Constant(value=32)),
        op=ast.Mult(),
        right=ast.Constant(value=16),
    )
    row = ast.BinOp(
        left=warp_rows,
        op=ast.Add(),
        right=ast.BinOp(left=lane, op=ast.FloorDiv(), right=ast.Constant(value=4)),
    )
    _, _, step = fragment.layout.terms(0, fragment.dtype)
    col = ast.BinOp(
        left=ast.BinOp(left=lane, op=ast.Mod(), right=ast.Constant(value=4)),
        op=ast.Mult(),
        right=ast.Constant(value=step),
    )
    base_row, base_col = _bases(fragment)
    return [
        ast.Assign(targets=[_name(base_row, ast.Store())], value=row),
        ast.Assign(targets=[_name(base_col, ast.Store())], value=col),
    ]


def _plus(left: ast.expr, constant: int) -> ast.expr:
    return (
        left
        if constant == 0
        else ast.BinOp(left=left, op=ast.Add(), right=ast.Constant(value=constant))
    )
