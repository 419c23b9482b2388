"""Lowering element loads and stores of memory (shared buffers, tensors, local arrays) whose
element type is a narrow float.

Memory holds ``float16`` / ``bfloat16`` / ``float8_e4m3fn`` / ``float8_e5m2`` elements as their
bits. An element read yields the float32 value and an element write rounds to nearest even, each
through a generated conversion global (``("convert", "load"|"store", dtype)`` in the namespace:
inline PTX in the backend, :mod:`jittile.interpreter.floats` in the interpreter). ``buf.bits[i]``
reads and writes the bits themselves, as the unsigned integer of the element's width; it is the
only access to ``tf32`` and ``float4_e2m1fn`` elements.
"""

from __future__ import annotations

import ast

from ..dtypes import DType
from ..errors import ContractError
from .syntax import name as _name
from .syntax import src

BITS = "bits"


class ElementLowering:
    """Element accesses of the kernel body (a part of :class:`KernelLowering`)."""

    # ----------------------------------------------------------------------------- what it is
    def element_dtype(self, node: ast.expr) -> DType | None:
        """The element type of the memory ``node`` indexes (``buf[...]`` or ``buf.bits[...]``),
        None when ``node`` is no element of memory."""
        if not isinstance(node, ast.Subscript):
            return None
        base = node.value
        if isinstance(base, ast.Attribute) and base.attr == BITS:
            base = base.value
        if not isinstance(base, ast.Name):
            return None
        if base.id in self.shared:
            return self.shared[base.id].buffer.dtype
        if base.id in self.arrays:
            return self.arrays[base.id].dtype
        return self.local_dtypes.get(base.id)

    def is_raw_element(self, node: ast.expr) -> bool:
        """``buf.bits[...]`` of a memory name."""
        return (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == BITS
            and self.element_dtype(node) is not None
        )

    def is_float_element(self, node: ast.expr) -> bool:
        """An element whose access converts: ``buf[...]`` of a narrow float buffer."""
        dtype = self.element_dtype(node)
        return dtype is not None and dtype.converted and not self.is_raw_element(node)

    def is_special_store(self, node: ast.expr) -> bool:
        """Whether assigning to ``node`` needs more than Python's assignment: an element held as
        bits (converting, raw ``.bits``, or refused), possibly inside a tuple target."""
        if isinstance(node, (ast.Tuple, ast.List)):
            return any(self.is_special_store(e) for e in node.elts)
        dtype = self.element_dtype(node)
        return dtype is not None and (dtype.storage != dtype or self.is_raw_element(node))

    # ---------------------------------------------------------------------------------- loads
    def element_load(self, node: ast.Subscript) -> ast.expr:
        """A read of ``node``: the float32 value of a narrow float element, the bits of a
        ``.bits`` element, the element itself otherwise."""
        lowered = self.element(node)
        if self.is_float_element(node):
            return self.call(self.conversion_name("load", self.element_dtype(node)), lowered)
        return lowered

    def element(self, node: ast.Subscript) -> ast.Subscript:
        """The lowered subscript of the storage ``node`` addresses (``buf.bits[i]`` is
        ``buf[i]`` of the storage), after checking that the element may be accessed so."""
        dtype = self.element_dtype(node)
        if self.is_raw_element(node):
            if dtype.storage == dtype:
                memory = self.memory_kind(node.value.value)
                raise self.error(
                    node,
                    f"{src(node.value)}: .bits is the bit pattern of narrow "
                    f"float elements (float16, bfloat16, float8, tf32, "
                    f"float4), but {memory} {node.value.value.id!r} holds "
                    f"{dtype.name}; index it directly",
                )
            plain = ast.copy_location(
                ast.Subscript(value=node.value.value, slice=node.slice, ctx=ast.Load()), node
            )
            return self.subscript(plain)
        if dtype is not None and dtype.storage != dtype and not dtype.converted:
            base = node.value.id
            raise self.error(
                node,
                f"{self.memory_kind(node.value)} {base!r} holds {dtype.name}, "
                f"whose elements jittile does not convert to and from float32; "
                f"read or write their bits with {base}.bits[...]",
            )
        return self.subscript(node)

    # --------------------------------------------------------------------------------- stores
    def store_element(self, target: ast.Subscript, value: ast.expr) -> ast.stmt:
        """``target = value`` for a converting or raw-bits element: the value rounded into the
        format, or wrapped to the storage's unsigned integer."""
        dtype = self.element_dtype(target)
        lowered = self.element(target)
        lowered.ctx = ast.Store()
        self.note_generic_write(target)
        if self.is_raw_element(target):
            converted = self.cast(dtype.storage, value)
        else:
            converted = self.call(self.conversion_name("store", dtype), value)
        return ast.Assign(targets=[lowered], value=converted)

    def assign(self, targets: list[ast.expr], value: ast.expr) -> list[ast.stmt]:
        """``t1 = t2 = ... = value`` (``value`` lowered) with Python's order: the value once, then
        each target from left to right, tuples unpacked; element stores convert."""
        if not any(self.is_special_store(t) for t in targets):
            return [ast.Assign(targets=[self.store_target(t) for t in targets], value=value)]
        if len(targets) == 1 and not isinstance(targets[0], (ast.Tuple, ast.List)):
            return [self.store_element(targets[0], value)]
        held = self.fresh("v")
        out: list[ast.stmt] = [ast.Assign(targets=[_name(held, ast.Store())], value=value)]
        for target in targets:
            out.extend(self.unpack(target, held))
        return out

    def unpack(self, target: ast.expr, held: str) -> list[ast.stmt]:
        """Assign the value in variable ``held`` to ``target``, element by element."""
        if isinstance(target, (ast.Tuple, ast.List)):
            if any(isinstance(e, ast.Starred) for e in target.elts):
                raise self.error(
                    target,
                    "a starred target cannot take apart a value stored "
                    "into memory elements; assign the elements one by one",
                )
            parts = [self.fresh("v") for _ in target.elts]
            out: list[ast.stmt] = [
                ast.Assign(
                    targets=[
                        ast.Tuple(elts=[_name(p, ast.Store()) for p in parts], ctx=ast.Store())
                    ],
                    value=_name(held),
                )
            ]
            for element, part in zip(target.elts, parts):
                out.extend(self.unpack(element, part))
            return out
        if self.is_special_store(target):
            return [self.store_element(target, _name(held))]
        return [ast.Assign(targets=[self.store_target(target)], value=_name(held))]

    def augmented_store(self, node: ast.AugAssign) -> list[ast.stmt]:
        """``buf[i] op= value`` for a converting or raw-bits element: the index once, then a
        load, the operation and a store."""
        lowered = self.element(node.target)
        index = self.fresh("i")
        at = ast.Subscript(value=lowered.value, slice=_name(index), ctx=ast.Load())
        current: ast.expr = at
        if self.is_float_element(node.target):
            current = self.call(self.conversion_name("load", self.element_dtype(node.target)), at)
        update = ast.BinOp(left=current, op=node.op, right=self.expr(node.value))
        stored = self.store_element(node.target, update)
        stored.targets[0].slice = _name(index)
        return [ast.Assign(targets=[_name(index, ast.Store())], value=lowered.slice), stored]

    # ------------------------------------------------------------------------------- raw PTX
    def check_ptx_element(self, node: ast.expr, is_float: bool, opcode: str, what: str) -> None:
        """A raw PTX operand (``what``) that is a narrow float element passes its float32 value,
        so only to a float register (``is_float``): the bits need ``buf.bits[...]``."""
        if is_float or not self.is_float_element(node):
            return
        dtype = self.element_dtype(node)
        base = node.value.id
        raise ContractError(
            f"{what} is a register of bits, but {src(node)} is a {dtype.name} "
            f"element, which reads and writes as a float32 value; pass its bit "
            f"pattern as {base}.bits[{src(node.slice)}]",
            self.loc(node),
            opcode=opcode,
            parameter=what,
        )

    def conversion_name(self, direction: str, dtype: DType) -> str:
        """The global converting a ``dtype`` element on a load or a store."""
        name = f"__jt_{direction}_{dtype.name}"
        self.namespace[name] = ("convert", direction, dtype)
        return name
