"""The operand model and the contract every tile-pattern module implements.

The frontend hands a pattern a :class:`CallSite`: the opcode text, operands already classified as
shared regions, global regions, caller-encoded TensorMaps or tensor-memory regions, and the keyword
parameters split into static values and runtime values (each runtime value is the name of a
temporary that the lowered kernel has already computed). The pattern checks the site against its
opcode's contract and returns a :class:`Lowering`: the instruction plan (one record per native
instruction), the host setup it needs, and the statements that issue the plan.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol

from ..dtypes import DType
from ..errors import ContractError, Location
from ..ptx.asm import AsmCall
from ..targets import Target


@dataclass(frozen=True)
class SharedBuffer:
    """A ``T.alloc_shared`` buffer: logical shape, dtype, layout object and planned placement."""

    name: str
    shape: tuple[int, ...]
    dtype: DType
    layout: object
    align: int
    offset: int  # byte offset inside jittile's shared block, whose base is aligned to ``align``
    location: Location

    @property
    def nbytes(self) -> int:
        return layout_span(self.layout, self.shape) * self.dtype.bytes

    def element_offset(self, coords: tuple[int, ...]) -> int:
        """Physical element offset of logical ``coords`` (the layout's swizzle included)."""
        return self.layout.memory_offset(tuple(coords), self.shape)


def layout_span(layout, shape) -> int:
    """Elements a layout occupies: one past its largest offset. Strides are non-negative, so the
    unswizzled maximum is at the last coordinate; an XOR swizzle only permutes bits below
    ``per_element + swizzle_len``, so rounding up to that granule covers every swizzled offset."""
    inner = getattr(layout, "tile_layout", layout)
    span = inner.memory_offset(tuple(e - 1 for e in shape), shape) + 1
    if inner is not layout:
        granule = 1 << (layout.per_element + layout.swizzle_len)
        span = (span + granule - 1) // granule * granule
    return span


@dataclass(frozen=True)
class SharedRegion:
    """A rectangular sub-region of a shared buffer: ``origin`` per buffer axis and the region shape
    (axes indexed by an integer are dropped from ``shape``; ``axes`` maps region axes to buffer axes).
    ``runtime_indices`` holds ``(Value, buffer axis)`` for axes indexed by a runtime integer (a
    pipeline stage, say): their ``origin`` is 0 and the pattern adds the index times that axis'
    byte step at run time."""

    buffer: SharedBuffer
    origin: tuple[int, ...]
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    runtime_indices: tuple = ()

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype

    def buffer_coords(self, coords: tuple[int, ...]) -> tuple[int, ...]:
        full = list(self.origin)
        for axis, value in zip(self.axes, coords):
            full[axis] += value
        return tuple(full)

    def byte_address(self, coords: tuple[int, ...]) -> int:
        """Byte offset of region element ``coords`` from the buffer base (physical, swizzled)."""
        return self.buffer.element_offset(self.buffer_coords(coords)) * self.buffer.dtype.bytes


@dataclass(frozen=True)
class GlobalRegion:
    """A kernel tensor parameter or a rectangular region of it (static starts and extents)."""

    param: str
    dtype: DType
    ndim: int
    static_shape: tuple  # the parameter's extents, None where dynamic
    starts: tuple[int, ...]
    extents: tuple  # the region's extents, None where it runs to the parameter's end

    @property
    def is_whole(self) -> bool:
        return all(s == 0 for s in self.starts) and all(e is None for e in self.extents)


@dataclass(frozen=True)
class TensorMapOperand:
    """A caller-encoded ``jittile.TensorMap`` kernel argument: opaque, its fields are the caller's."""

    param: str


@dataclass(frozen=True)
class TmemRegion:
    """A ``T.cuda.decl_tmem`` tensor (or a region of it): ``base`` is the runtime TMEM address temp."""

    name: str
    base: str
    shape: tuple[int, ...]
    dtype: DType
    layout: object
    origin: tuple[int, ...]
    region_shape: tuple[int, ...]
    axes: tuple[int, ...]  # which tensor axes the region keeps (integer indices drop one)


@dataclass(frozen=True)
class Value:
    """A call parameter: a static Python value, or a runtime temporary (``source``) with its static
    value when the frontend could fold it."""

    source: str | None
    static: object = None
    text: str = ""  # the expression as the user wrote it, for diagnostics and barrier matching

    @property
    def is_static(self) -> bool:
        return self.source is None


@dataclass
class CallSite:
    """One ``T.cuda.tile.apply`` call, classified by the frontend."""

    location: Location
    opcode: str
    operands: list
    params: dict[str, object]  # static values, or Value / tuple[Value, ...] for runtime ones
    param_locations: dict[str, Location]
    target: Target
    scope: str = "thread"

    def error(self, message: str, parameter: str | None = None) -> ContractError:
        location = self.param_locations.get(parameter, self.location) if parameter else self.location
        return ContractError(message, location, opcode=self.opcode, parameter=parameter)


@dataclass(frozen=True)
class PlanRecord:
    """One native instruction of a call site's expansion: the single source of truth that code
    generation prints and ``ck.plan`` shows."""

    opcode: str
    instance: tuple[int, ...]  # repeat-axis index (group axes are runtime)
    coords: tuple  # PTX-order coordinates: ints where static, strings where runtime
    shared_offset: int  # bytes from the shared block base (static part)
    bytes: int
    fields: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Emit:
    """A statement of the lowered kernel: ``asm`` applied to Python-source operand expressions."""

    asm: AsmCall
    operands: tuple[str, ...]


@dataclass(frozen=True)
class HostTensorMap:
    """A TensorMap jittile encodes on the host at launch for a global region, passed as the kernel's
    grid-constant parameter ``param``."""

    param: str
    tensor: str
    region_starts: tuple[int, ...]
    region_extents: tuple
    data_type: str  # descriptor format: a dtype name, "tf32", "float4_e2m1fn"
    box: tuple[int, ...]  # outer-to-inner, as written
    element_strides: tuple[int, ...]
    interleave: int
    swizzle: int
    l2_promotion: int
    oob_fill: int


@dataclass
class Lowering:
    """What a pattern returns for one checked call site."""

    plan: list[PlanRecord]
    emits: list[Emit]
    predicate: str | None = None  # runtime temp gating every emit
    notes: list[str] = field(default_factory=list)


class LoweringContext(Protocol):
    """Services the frontend offers patterns while they lower a call site."""

    def tensormap_param(self, region: GlobalRegion, fields: dict) -> str:
        """Name of the grid-constant TensorMap parameter for ``region`` encoded with ``fields``."""

    def tensormap_pointer(self, param: str) -> str:
        """Source of the generic address of a TensorMap parameter."""

    def shared_address(self, buffer: SharedBuffer, byte_offset: str) -> str:
        """Source of the 32-bit shared address of ``buffer`` plus ``byte_offset`` (a source)."""

    def group_indices(self, scope: str) -> list[tuple[int, str]]:
        """(extent, source of the running thread's index) per group axis of ``scope``."""


class TilePattern(Protocol):
    """An opcode family: claims opcodes, checks call sites and lowers them."""

    family: str

    def claims(self, opcode: str) -> bool: ...

    def lower(self, site: CallSite, ctx: LoweringContext) -> Lowering: ...


def source_sum(terms: list[str], const: int) -> str:
    """Python source adding runtime ``terms`` and a constant (the constant dropped when zero)."""
    parts = list(terms)
    if const or not parts:
        parts.append(str(const))
    return parts[0] if len(parts) == 1 else "(" + " + ".join(parts) + ")"


SCOPE_GROUP_AXES = {"thread": 0, "warp": 1, "warpgroup": 1, "cta": 1, "cluster": 1}


def static_tuple(site: CallSite, name: str, value, length: int | None = None,
                 check: Callable[[int], bool] | None = None, rule: str = "") -> tuple[int, ...]:
    """Validate a static integer tuple parameter (each entry optionally checked)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value,)
    if isinstance(value, Value) or (isinstance(value, (tuple, list))
                                    and any(isinstance(v, Value) for v in value)):
        raise site.error("must be a compile-time value (a literal, a T.constexpr parameter or "
                         "arithmetic on them)", name)
    if not isinstance(value, (tuple, list)) or not all(isinstance(v, int) and not isinstance(v, bool)
                                                        for v in value):
        raise site.error(f"must be a static tuple of integers, got {value!r}", name)
    value = tuple(value)
    if length is not None and len(value) != length:
        raise site.error(f"needs {length} entries (one per opcode dimension), got {len(value)}: "
                         f"{value!r}", name)
    if check is not None:
        for v in value:
            if not check(v):
                raise site.error(f"{rule}, got {v} in {value!r}", name)
    return value
