"""The sm_90 ``wgmma`` shared-matrix descriptor, and deriving it from a shared layout.

``wgmma.mma_async`` reads its A and B operands from shared memory through a 64-bit descriptor: a
start address, two strides and a swizzle mode that together describe a *canonical layout* (PTX ISA
9.7.15.5.1, "Matrix Descriptor Format" and "Shared Memory Matrix Layout"). The compiler must prove
that the operand region's layout is one of those walks, then encode it. ``derive_matrix_walk`` does
the proof from element addresses alone, so plain, swizzled, transposed and offset regions are all
handled by one rule set, and a layout no descriptor can express is refused with the first element
where the closest walk goes wrong.

A matrix is seen as ``(mn, k)``: ``mn`` is M for A and N for B. Core matrices are 8 rows of 16
bytes; ``T = 16 / element bytes`` elements fill one 16-byte row, ``S`` is the swizzle span in bytes
(32/64/128) and ``W = S / element bytes`` elements fill one swizzled row. Byte offsets of element
``(mn, k)`` from the start address, before the swizzle (CuTe notation of the PTX ISA's canonical
layouts in brackets):

- K-major, no swizzle ``((8,m),(T,2k)):((1T,SBO),(1,LBO))``:
  ``(mn % 8) * 16 + (mn // 8) * SBO + (k % T) * e + (k // T) * LBO``
- K-major, swizzled ``((8,m),(T,2k)):((S/16 T,SBO),(1,T))``:
  ``(mn % 8) * S + (mn // 8) * SBO + k * e`` (LBO unused, by convention 1)
- MN-major, no swizzle ``((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))``:
  ``(mn % T) * e + (mn // T) * SBO + (k % 8) * 16 + (k // 8) * LBO``
- MN-major, swizzled ``((T,S/16,m),(8,k)):((1,T,LBO),(S/16 T,SBO))``:
  ``(mn % W) * e + (mn // W) * LBO + (k % 8) * S + (k // 8) * SBO``

The physical address is the swizzle of that linear address relative to a period-aligned base.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from ..ir import START_ADDRESS_MASK
from .descriptors import DescriptorError, check_address_field, check_descriptor_fields
from .swizzle import SWIZZLE_SPAN, inverse_swizzled_origin, swizzle_address, swizzle_period

# PTX ISA 9.7.15.5.1.1, "Matrix Descriptor Format" (wgmma):
#   bits  0-13  matrix-descriptor-encode(matrix start address)
#   bits 16-29  matrix-descriptor-encode(leading dimension byte offset)
#   bits 32-45  matrix-descriptor-encode(stride dimension byte offset)
#   bits 49-51  matrix base offset (0 when the swizzle pattern starts on its period boundary)
#   bits 62-63  swizzle: 0 none, 1 128B, 2 64B, 3 32B
# matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4.
SWIZZLE_FIELD = {0: 0, 3: 1, 2: 2, 1: 3}  # jittile mode (none/32B/64B/128B) -> bits 62-63
_FIELD_SWIZZLE = {v: k for k, v in SWIZZLE_FIELD.items()}


class Major(StrEnum):
    """Which of a matrix operand's axes is contiguous in its core matrices."""

    K = "K"
    MN = "MN"


MAJORS = tuple(Major)


@dataclass(frozen=True)
class MatrixDescriptor:
    """Fields of a wgmma shared-matrix descriptor, in bytes; ``swizzle`` in jittile modes 0..3."""

    start_address: int
    lbo: int
    sbo: int
    swizzle: int = 0
    base_offset: int = 0

    def __post_init__(self) -> None:
        check_descriptor_fields(
            self.start_address, ("LBO", self.lbo), ("SBO", self.sbo), self.swizzle, self.base_offset
        )

    def encode(self) -> int:
        """The 64-bit descriptor value."""
        return (
            (self.start_address >> 4)
            | (self.lbo >> 4) << 16
            | (self.sbo >> 4) << 32
            | self.base_offset << 49
            | SWIZZLE_FIELD[self.swizzle] << 62
        )

    @classmethod
    def decode(cls, value: int) -> MatrixDescriptor:
        """Fields of a 64-bit descriptor value."""
        if not 0 <= value < 1 << 64:
            raise DescriptorError("descriptor", "a descriptor is a 64-bit unsigned value", value)
        return cls(
            start_address=(value & START_ADDRESS_MASK) << 4,
            lbo=((value >> 16) & 0x3FFF) << 4,
            sbo=((value >> 32) & 0x3FFF) << 4,
            swizzle=_FIELD_SWIZZLE[value >> 62],
            base_offset=(value >> 49) & 0b111,
        )


@dataclass(frozen=True)
class MatrixWalk:
    """A canonical layout: majorness, swizzle mode, linear origin (bytes from the allocation
    base), LBO and SBO."""

    major: Major
    swizzle: int
    origin: int
    lbo: int
    sbo: int

    def descriptor(self, base_address: int = 0) -> MatrixDescriptor:
        """The descriptor of this walk for an allocation at shared address ``base_address`` (a
        multiple of the swizzle period, so the base offset is 0)."""
        return MatrixDescriptor(base_address + self.origin, self.lbo, self.sbo, self.swizzle)


def walk_offset(walk: MatrixWalk, mn: int, k: int, element_bytes: int) -> int:
    """Linear byte offset of element ``(mn, k)`` from the walk's start (the module's formulas)."""
    per_row = 16 // element_bytes
    span = SWIZZLE_SPAN[walk.swizzle]
    if walk.major == "K":
        if walk.swizzle == 0:
            return (
                (mn % 8) * 16
                + (mn // 8) * walk.sbo
                + (k % per_row) * element_bytes
                + (k // per_row) * walk.lbo
            )
        return (mn % 8) * span + (mn // 8) * walk.sbo + k * element_bytes
    if walk.swizzle == 0:
        return (
            (mn % per_row) * element_bytes
            + (mn // per_row) * walk.sbo
            + (k % 8) * 16
            + (k // 8) * walk.lbo
        )
    wide = span // element_bytes
    return (
        (mn % wide) * element_bytes + (mn // wide) * walk.lbo + (k % 8) * span + (k // 8) * walk.sbo
    )


def walk_address(walk: MatrixWalk, mn: int, k: int, element_bytes: int) -> int:
    """Physical byte address (from the allocation base) the walk reads for element ``(mn, k)``."""
    return swizzle_address(walk.origin + walk_offset(walk, mn, k, element_bytes), walk.swizzle)


def _candidate(
    major: Major,
    mode: int,
    address_of: Callable[[int, int], int],
    mn_extent: int,
    k_extent: int,
    element_bytes: int,
) -> MatrixWalk:
    """The only walk of ``(major, mode)`` that can match: origin and strides read off the
    addresses of three elements. A stride the region never crosses gets the compact value (it
    is never applied): 16 for the swizzled K-major LBO, which the ISA assumes to be 1 (encoded)."""
    span = SWIZZLE_SPAN[mode]
    origin = inverse_swizzled_origin(address_of(0, 0), mode)

    def step(mn: int, k: int) -> int:
        return inverse_swizzled_origin(address_of(mn, k), mode) - origin

    per_row = 16 // element_bytes
    if major == "K":
        sbo = step(8, 0) if mn_extent > 8 else 8 * span
        if mode:
            return MatrixWalk(major, mode, origin, 16, sbo)
        lbo = step(0, per_row) if k_extent > per_row else 128
        return MatrixWalk(major, mode, origin, lbo, sbo)
    wide = span // element_bytes
    if mode == 0:
        sbo = step(per_row, 0) if mn_extent > per_row else 128
        lbo = step(0, 8) if k_extent > 8 else 128
        return MatrixWalk(major, mode, origin, lbo, sbo)
    lbo = step(wide, 0) if mn_extent > wide else 8 * span
    sbo = step(0, 8) if k_extent > 8 else 8 * span
    return MatrixWalk(major, mode, origin, lbo, sbo)


def _check_rules(walk: MatrixWalk, base_align: int) -> None:
    if walk.origin % 16:
        raise DescriptorError("origin", "a matrix start address is 16-byte aligned", walk.origin)
    for name, value in (("LBO", walk.lbo), ("SBO", walk.sbo)):
        check_address_field(name, value)
    period = swizzle_period(walk.swizzle)
    if walk.swizzle and base_align % period:
        raise DescriptorError(
            "base_align",
            f"a {SWIZZLE_SPAN[walk.swizzle]}B-swizzled shared "
            f"allocation must be aligned to the {period}-byte swizzle period "
            f"(align={period})",
            base_align,
        )


def derive_matrix_walk(
    address_of: Callable[[int, int], int],
    mn_extent: int,
    k_extent: int,
    element_bytes: int,
    *,
    base_align: int,
    majors: tuple[Major, ...] = MAJORS,
) -> MatrixWalk:
    """The canonical walk that reads exactly ``address_of(mn, k)`` (physical bytes from the
    allocation base, which is ``base_align``-aligned) for every element of the
    ``mn_extent x k_extent`` matrix; only ``majors`` are tried. Raises ``DescriptorError``
    naming the rule that fails."""
    cells = [(mn, k) for mn in range(mn_extent) for k in range(k_extent)]
    expected = [address_of(mn, k) for mn, k in cells]
    closest = None  # (first mismatch index, walk, walked address)
    first_error = None
    for major in majors:
        for mode in SWIZZLE_SPAN:
            walk = _candidate(major, mode, address_of, mn_extent, k_extent, element_bytes)
            for index, ((mn, k), want) in enumerate(zip(cells, expected)):
                got = walk_address(walk, mn, k, element_bytes)
                if got != want:
                    if closest is None or index > closest[0]:
                        closest = (index, walk, got)
                    break
            else:
                try:
                    _check_rules(walk, base_align)
                except DescriptorError as error:
                    first_error = first_error or error
                    continue
                return walk
    if first_error is not None:
        raise first_error
    index, walk, got = closest
    mn, k = cells[index]
    raise DescriptorError(
        "layout",
        f"no canonical {' or '.join(m + '-major' for m in majors)} layout reproduces "
        f"the shared layout; the closest, {walk.major}-major with swizzle mode {walk.swizzle} "
        f"({SWIZZLE_SPAN[walk.swizzle]}B rows), origin {walk.origin}, LBO {walk.lbo}, SBO "
        f"{walk.sbo}, first diverges at element (mn {mn}, k {k}): the layout puts it at byte "
        f"{expected[index]}, the descriptor reads byte {got}",
        (mn, k),
    )
