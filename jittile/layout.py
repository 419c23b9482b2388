"""The layout language: where each logical element of a tile lives.

``S[shape : strides]`` lists shard factors (each logical element lives in exactly one place);
``R[shape : strides]`` lists explicit replicas (the whole shard repeats at these offsets, e.g. one TMEM
image multicast to four 32-lane groups). Strides are plain ints on the memory axis or ``k @ TLane`` /
``k @ TCol`` on the tensor-memory axes. Factors are flat and grouped onto a logical shape left to right,
so ``S[(2, 32, 4) : ...]`` describes a ``(64, 4)`` tile as well as a ``(2, 32, 4)`` one.

``ComposeLayout`` XOR-swizzles the memory offset of a memory layout; ``swizzle(mode, shape, dtype)`` builds
the standard TMA / shared-matrix-descriptor swizzles, so the same object drives index arithmetic, TMA
``swizzle=`` checks and tcgen05 descriptor derivation.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import product
from typing import Union

from .axis import AXES, AxisStride, Mem, as_axis_stride
from .dtypes import DType
from .dtypes import dtype as as_dtype
from .fragment import FragmentLayout, wgmma_a, wgmma_accumulator  # noqa: F401  (register layouts)

Shape = tuple[int, ...]
Factors = tuple[tuple[int, AxisStride], ...]


def _as_tuple(value: int | Sequence) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _as_shape(shape: int | Sequence[int]) -> Shape:
    extents = _as_tuple(shape)
    for extent in extents:
        if isinstance(extent, bool) or not isinstance(extent, int) or extent < 1:
            raise ValueError(f"shape extents must be positive ints, got {shape!r}")
    return extents


def _factors(key: object, kind: str) -> Factors:
    """Parse the slice ``shape : strides`` written inside ``S[...]`` or ``R[...]``."""
    if not isinstance(key, slice) or key.step is not None:
        raise TypeError(
            f"write {kind}[shape : strides], e.g. {kind}[(8, 16) : (16, 1)]; got {kind}[{key!r}]"
        )
    extents = _as_shape(key.start)
    strides = tuple(as_axis_stride(s) for s in _as_tuple(key.stop))
    if len(extents) != len(strides):
        raise ValueError(
            f"{kind}[{key.start!r} : {key.stop!r}]: {len(extents)} extents but {len(strides)} strides"
        )
    for stride in strides:
        if stride.stride < 0:
            raise ValueError(f"{kind}[...]: negative stride {stride!r} is not supported")
    return tuple(zip(extents, strides))


def _fmt(factors: Factors) -> str:
    extents = ", ".join(str(e) for e, _ in factors)
    strides = ", ".join(repr(s) for _, s in factors)
    if len(factors) == 1:
        return f"{extents} : {strides}"
    return f"({extents}) : ({strides})"


@dataclass(frozen=True)
class LayoutSpec:
    """What ``S[...]``, ``R[...]`` and their sums evaluate to: shard factors plus replica factors."""

    shard: Factors = ()
    replicas: Factors = ()

    def __add__(self, other: LayoutSpec) -> LayoutSpec:
        if not isinstance(other, LayoutSpec):
            return NotImplemented
        return LayoutSpec(self.shard + other.shard, self.replicas + other.replicas)

    def __repr__(self) -> str:
        parts = []
        if self.shard or not self.replicas:
            parts.append(f"S[{_fmt(self.shard)}]")
        if self.replicas:
            parts.append(f"R[{_fmt(self.replicas)}]")
        return " + ".join(parts)


class _SpecBuilder:
    """``S`` / ``R``: subscript syntax for layout factors."""

    def __init__(self, kind: str):
        self._kind = kind

    def __getitem__(self, key: slice) -> LayoutSpec:
        factors = _factors(key, self._kind)
        return LayoutSpec(shard=factors) if self._kind == "S" else LayoutSpec(replicas=factors)

    def __repr__(self) -> str:
        return self._kind


S = _SpecBuilder("S")
R = _SpecBuilder("R")


@functools.lru_cache(maxsize=1024)
def _group(factors: Shape, shape: Shape) -> tuple[tuple[int, ...], ...]:
    """Indices of the consecutive factors whose product is each logical extent (cached: descriptor
    derivation evaluates a layout at every element of a matrix)."""
    groups: list[tuple[int, ...]] = []
    i = 0
    for dim, extent in enumerate(shape):
        group: list[int] = []
        size = 1
        while size < extent and i < len(factors):
            size *= factors[i]
            group.append(i)
            i += 1
        if size != extent:
            raise ValueError(
                f"layout factors {factors} do not group onto shape {shape}: consecutive factors must "
                f"multiply to each extent, but the factors {tuple(factors[j] for j in group)} for axis {dim} "
                f"give {size}, not {extent}"
            )
        groups.append(tuple(group))
    if any(f != 1 for f in factors[i:]):
        raise ValueError(
            f"layout factors {factors} do not group onto shape {shape}: "
            f"factors {factors[i:]} are left over"
        )
    return tuple(groups)


_ATOM = re.compile(r"^(?:[A-Za-z_][A-Za-z_0-9.]*|\d+)$")


def _paren(expr: str) -> str:
    return expr if _ATOM.match(expr) else f"({expr})"


def _join(terms: list[str], constant: int) -> str:
    if constant:
        terms = terms + [str(constant)]
    return " + ".join(terms) if terms else "0"


@dataclass(frozen=True)
class TileLayout:
    """A layout made of shard factors and explicit replicas (``TileLayout(S[...] + R[...])``)."""

    spec: LayoutSpec

    def __post_init__(self) -> None:
        if not isinstance(self.spec, LayoutSpec):
            raise TypeError(f"TileLayout takes S[...] (+ R[...]), not {self.spec!r}")

    def __repr__(self) -> str:
        return f"TileLayout({self.spec!r})"

    @functools.cached_property
    def shard_shape(self) -> Shape:
        return tuple(e for e, _ in self.spec.shard)

    @property
    def shard_strides(self) -> tuple[AxisStride, ...]:
        return tuple(s for _, s in self.spec.shard)

    @property
    def replicas(self) -> list[tuple[int, AxisStride]]:
        return list(self.spec.replicas)

    @property
    def size(self) -> int:
        """Logical elements of one shard (replicas not counted)."""
        return math.prod(self.shard_shape)

    @functools.cached_property
    def is_memory(self) -> bool:
        """True when every stride is on the memory axis (a shared/local/global buffer layout)."""
        return all(s.axis == Mem for _, s in self.spec.shard + self.spec.replicas)

    @property
    def swizzle_mode(self) -> int:
        """A plain layout is the unswizzled mode 0 (see ``ComposeLayout.swizzle_mode``)."""
        return 0

    def _groups(self, shape: Sequence[int] | None) -> tuple[Shape, tuple[tuple[int, ...], ...]]:
        logical = self.shard_shape if shape is None else _as_shape(shape)
        return logical, _group(self.shard_shape, logical)

    def axis_offsets(
        self, coords: Sequence[int], shape: Sequence[int] | None = None
    ) -> dict[str, int]:
        """Offsets along each axis ("mem", "lane", "col") of the logical element at ``coords``."""
        logical, groups = self._groups(shape)
        coords = _as_tuple(coords)
        if len(coords) != len(logical):
            raise ValueError(
                f"{len(coords)} coordinates {coords} for a rank-{len(logical)} shape {logical}"
            )
        offsets = {axis.name: 0 for axis in AXES}
        for coord, extent, group in zip(coords, logical, groups):
            if not 0 <= coord < extent:
                raise ValueError(
                    f"coordinate {coord} is outside extent {extent} of shape {logical}"
                )
            for i in reversed(group):
                extent_i, stride = self.spec.shard[i]
                offsets[stride.axis.name] += (coord % extent_i) * stride.stride
                coord //= extent_i
        return offsets

    def replica_offsets(self) -> list[dict[str, int]]:
        """The offset of every replica, the zero one first, earlier replica factors outermost."""
        result = []
        for index in product(*(range(e) for e, _ in self.spec.replicas)):
            offsets = {axis.name: 0 for axis in AXES}
            for k, (_, stride) in zip(index, self.spec.replicas):
                offsets[stride.axis.name] += k * stride.stride
            result.append(offsets)
        return result

    def _require_memory(self) -> None:
        if not self.is_memory:
            raise ValueError(f"{self!r} has tensor-memory strides; it has no memory offset")

    def memory_offset(self, coords: Sequence[int], shape: Sequence[int] | None = None) -> int:
        """Element offset of ``coords`` in a memory layout."""
        self._require_memory()
        return self.axis_offsets(coords, shape)["mem"]

    def index_source(self, coord_srcs: Sequence[str], shape: Sequence[int] | None = None) -> str:
        """A Python/C integer expression of the memory offset, given coordinate expressions.

        Used by code generation; integer-literal coordinates fold to constants.
        """
        self._require_memory()
        logical, groups = self._groups(shape)
        if len(coord_srcs) != len(logical):
            raise ValueError(
                f"{len(coord_srcs)} coordinate expressions for a rank-{len(logical)} shape {logical}"
            )
        terms: list[str] = []
        constant = 0
        for src, group in zip(coord_srcs, groups):
            src = str(src).strip()
            if src.isdigit():
                value = int(src)
                for i in reversed(group):
                    extent_i, stride = self.spec.shard[i]
                    constant += (value % extent_i) * stride.stride
                    value //= extent_i
                continue
            split = [i for i in group if self.spec.shard[i][0] != 1]
            for k, i in enumerate(split):
                extent_i, stride = self.spec.shard[i]
                if stride.stride == 0:
                    continue
                inner = math.prod(self.spec.shard[j][0] for j in split[k + 1 :])
                expr = _paren(src)
                if inner != 1:
                    expr += f" // {inner}"
                if k:  # the outermost factor's coordinate is already below its extent
                    expr += f" % {extent_i}"
                if stride.stride != 1:
                    expr = f"{expr} * {stride.stride}"
                terms.append(expr)
        return _join(terms, constant)


def _xor_swizzle(offset: int, per_element: int, swizzle_len: int, atom_len: int) -> int:
    mask = (1 << swizzle_len) - 1
    return offset ^ (((offset >> (per_element + atom_len)) & mask) << per_element)


@dataclass(frozen=True)
class ComposeLayout:
    """An XOR swizzle of a memory layout's element offset ``o``.

    ``o ^ (((o >> (per_element + atom_len)) & (2**swizzle_len - 1)) << per_element)``: with
    ``per_element = log2(16 / element bytes)`` and ``atom_len = 3`` this is CUTLASS
    ``Swizzle<swizzle_len, 4, 3>`` on byte addresses, the TMA / tcgen05 hardware swizzle.
    """

    per_element: int
    swizzle_len: int
    atom_len: int
    tile_layout: TileLayout

    def __post_init__(self) -> None:
        for name in ("per_element", "swizzle_len", "atom_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"ComposeLayout {name} must be a nonnegative int, got {value!r}")
        if self.swizzle_len > self.atom_len:
            # The XOR source bits must lie above the swizzled bits, or the map is not a permutation.
            raise ValueError(
                f"ComposeLayout swizzle_len {self.swizzle_len} exceeds atom_len {self.atom_len}"
            )
        if not isinstance(self.tile_layout, TileLayout) or not self.tile_layout.is_memory:
            raise ValueError(
                f"ComposeLayout swizzles a memory TileLayout, not {self.tile_layout!r}"
            )

    def __repr__(self) -> str:
        return (
            f"ComposeLayout({self.per_element}, {self.swizzle_len}, {self.atom_len}, "
            f"{self.tile_layout!r})"
        )

    @property
    def shard_shape(self) -> Shape:
        return self.tile_layout.shard_shape

    @property
    def size(self) -> int:
        return self.tile_layout.size

    @property
    def is_memory(self) -> bool:
        return True

    @property
    def element_bytes(self) -> int | None:
        """Element size for which this is a 16-byte-granule swizzle, if any."""
        return 16 >> self.per_element if self.per_element <= 4 else None

    @property
    def swizzle_mode(self) -> int | None:
        """The standard swizzle (0..3 = none/32B/64B/128B) this is for ``element_bytes``, else None."""
        if self.swizzle_len == 0:
            return 0
        if self.atom_len == 3 and self.swizzle_len <= 3 and self.element_bytes is not None:
            return self.swizzle_len
        return None

    def axis_offsets(
        self, coords: Sequence[int], shape: Sequence[int] | None = None
    ) -> dict[str, int]:
        offsets = {axis.name: 0 for axis in AXES}
        offsets["mem"] = self.memory_offset(coords, shape)
        return offsets

    def memory_offset(self, coords: Sequence[int], shape: Sequence[int] | None = None) -> int:
        """Swizzled element offset of ``coords``."""
        offset = self.tile_layout.memory_offset(coords, shape)
        return _xor_swizzle(offset, self.per_element, self.swizzle_len, self.atom_len)

    def index_source(self, coord_srcs: Sequence[str], shape: Sequence[int] | None = None) -> str:
        """Expression of the swizzled offset (see ``TileLayout.index_source``)."""
        inner = self.tile_layout.index_source(coord_srcs, shape)
        if self.swizzle_len == 0:
            return inner
        if inner.isdigit():
            return str(_xor_swizzle(int(inner), self.per_element, self.swizzle_len, self.atom_len))
        o = _paren(inner)
        bits = f"({o} >> {self.per_element + self.atom_len}) & {(1 << self.swizzle_len) - 1}"
        if self.per_element:
            return f"{o} ^ (({bits}) << {self.per_element})"
        return f"{o} ^ ({bits})"


Layout = Union[TileLayout, ComposeLayout]  # noqa: UP007


def row_major(shape: int | Sequence[int]) -> TileLayout:
    """The compact C-order layout of ``shape`` (the ``"default"`` layout)."""
    extents = _as_shape(shape)
    strides = [math.prod(extents[i + 1 :]) for i in range(len(extents))]
    return TileLayout(LayoutSpec(shard=tuple(zip(extents, (as_axis_stride(s) for s in strides)))))


def swizzle(mode: int, shape: int | Sequence[int], dtype: str | DType) -> Layout:
    """The standard TMA / shared-matrix swizzle over a row-major tile: mode 0..3 = none/32B/64B/128B."""
    dt = as_dtype(dtype)
    if mode not in (0, 1, 2, 3):
        raise ValueError(f"swizzle mode must be 0, 1, 2 or 3 (none/32B/64B/128B), got {mode!r}")
    if dt.bits % 8 or dt.bytes > 16 or 16 % dt.bytes:
        raise ValueError(
            f"swizzle() needs a whole-byte element of at most 16 bytes; {dt.name} has {dt.bits} bits"
        )
    if mode == 0:
        return row_major(shape)
    return ComposeLayout((16 // dt.bytes).bit_length() - 1, mode, 3, row_major(shape))


def tiled_swizzle(mode: int, shape: int | Sequence[int], dtype: str | DType) -> Layout:
    """``swizzle(mode, ...)`` for tiles wider than one swizzled row: the last axis is cut into
    chunks of the swizzle span (16/32/64/128 bytes), and each chunk is its own row-major
    swizzled block of all the rows, the chunks one after another (leading axes outermost).

    It is the canonical layout of wgmma / tcgen05 descriptors: K-major tiles with K over the
    span, MN-major tiles, and with mode 0 the no-swizzle core-matrix layout (16-byte columns).
    Its bytes are those of span-wide TMA boxes loaded one after another, but a TMA shared operand
    must be one compact image per box: for TMA, allocate ``(chunks, rows, span)`` with
    ``swizzle(...)`` and pass ``coord_steps`` (a (64, 64) float32 tile under mode 3 is
    ``(2, 64, 32)``, ``box=(64, 32)``, ``coord_steps=((0, 32),)``)."""
    extents = _as_shape(shape)
    dt = as_dtype(dtype)
    wide = (16 << mode) // dt.bytes if mode else 16 // dt.bytes
    *lead, rows, cols = extents if len(extents) > 1 else (1, *extents)
    if cols <= wide:
        return swizzle(mode, shape, dtype)
    if cols % wide:
        raise ValueError(
            f"tiled_swizzle: the last extent {cols} is not a multiple of the "
            f"{wide} {dt.name} elements of one {16 << mode if mode else 16}-byte chunk"
        )
    block = rows * cols
    strides = [block * math.prod(lead[i + 1 :]) for i in range(len(lead))]
    factors = (*lead, rows, cols // wide, wide)
    spec = LayoutSpec(
        shard=tuple(zip(factors, (as_axis_stride(s) for s in (*strides, wide, rows * wide, 1))))
    )
    tile = TileLayout(spec)
    if mode == 0:
        return tile
    return ComposeLayout((16 // dt.bytes).bit_length() - 1, mode, 3, tile)


def resolve_layout(
    layout: Layout | LayoutSpec | str | None, shape: int | Sequence[int], dtype: str | DType
) -> Layout:
    """The layout of a buffer: row-major for ``"default"``/None, else ``layout`` checked against shape and dtype."""
    extents = _as_shape(shape)
    dt = as_dtype(dtype)
    if layout is None or (isinstance(layout, str) and layout == "default"):
        return row_major(extents)
    if isinstance(layout, str):
        raise ValueError(
            f'unknown layout name {layout!r}; use "default" or a TileLayout/ComposeLayout'
        )
    if isinstance(layout, LayoutSpec):
        layout = TileLayout(layout)
    if not isinstance(layout, (TileLayout, ComposeLayout)):
        raise TypeError(f'a layout is "default", a TileLayout or a ComposeLayout, not {layout!r}')
    if layout.size != math.prod(extents):
        raise ValueError(
            f"layout {layout!r} has {layout.size} elements (shard shape {layout.shard_shape}) "
            f"but the shape {extents} has {math.prod(extents)}"
        )
    _group(layout.shard_shape, extents)
    if (
        isinstance(layout, ComposeLayout)
        and layout.swizzle_mode
        and layout.element_bytes * 8 != dt.bits
    ):
        raise ValueError(
            f"{layout!r} swizzles {layout.element_bytes}-byte elements but the buffer is {dt.name}; "
            f"build it with swizzle(mode, shape, {dt.name!r})"
        )
    return layout


def byte_swizzle_mode(layout: Layout, dtype: str | DType) -> int:
    """Which standard TMA/descriptor swizzle (0..3) a shared layout of ``dtype`` elements implements."""
    dt = as_dtype(dtype)
    if isinstance(layout, TileLayout):
        if not layout.is_memory:
            raise ValueError(f"{layout!r} is not a memory layout; it has no byte swizzle")
        return 0
    if not isinstance(layout, ComposeLayout):
        raise TypeError(f"expected a TileLayout or ComposeLayout, got {layout!r}")
    mode = layout.swizzle_mode
    if mode is None or (mode and layout.element_bytes * 8 != dt.bits):
        raise ValueError(
            f"{layout!r} is no standard 32B/64B/128B swizzle for {dt.name} elements "
            f"(that would be {_swizzle_hint(dt)})"
        )
    return mode


def _swizzle_hint(dt: DType) -> str:
    """How the standard swizzles of ``dt`` are spelled, for error messages."""
    if dt.bits % 8 or dt.bytes > 16:
        return f"none: {dt.name} is not a whole-byte element of at most 16 bytes"
    per_element = (16 // dt.bytes).bit_length() - 1
    return f"ComposeLayout({per_element}, 1..3, 3, ...)"
