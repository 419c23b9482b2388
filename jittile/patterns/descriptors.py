"""The sm_100 (tcgen05) shared-memory matrix descriptor, and deriving it from a shared layout.

tcgen05.cp (and tcgen05.mma) read shared memory through a 64-bit descriptor instead of a layout, so the
compiler must prove that the buffer's layout is exactly one of the address walks a descriptor can
express, then encode that walk. ``derive_walk`` does the proof from element addresses alone, so any
layout (plain, core-matrix tiled, swizzled, offset into a buffer) is handled by one rule set.

Address walk (tcgen05.cp contract): before swizzling, row ``r`` starts at
``(r // 8) * SDO + (r % 8) * (16 << swizzle)`` bytes from the origin; without swizzling word ``w`` adds
``(w // 4) * LDO + (w % 4) * 4``, with swizzling ``4 * w`` (LDO ignored); the physical address is the
swizzle of that linear address, relative to a period-aligned base.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .swizzle import SWIZZLE_SPAN, inverse_swizzled_origin, swizzle_address, swizzle_period


class DescriptorError(ValueError):
    """A shared region or descriptor field breaks a descriptor rule; names the parameter and the rule."""

    def __init__(self, parameter: str, rule: str, value: object):
        self.parameter = parameter
        self.rule = rule
        self.value = value
        super().__init__(f"{parameter}={value!r}: {rule}")


# PTX ISA 9.7.16.4.1 "Shared Memory Descriptor", Table 40 (tcgen05 shared memory descriptor layout):
#   bits  0-13  matrix-descriptor-encode(matrix start address)
#   bits 14-15  reserved
#   bits 16-29  matrix-descriptor-encode(leading dimension byte offset, or absolute address if bit 52)
#   bits 30-31  reserved
#   bits 32-45  matrix-descriptor-encode(stride dimension byte offset)
#   bits 46-48  fixed constant 0b001
#   bits 49-51  matrix base offset
#   bit  52     leading dimension stride mode (0 = relative byte offset, 1 = absolute byte address)
#   bits 53-60  fixed constant 0
#   bits 61-63  swizzle: 0 none, 1 128B with 32B atom, 2 128B, 4 64B, 6 32B (3, 5, 7 invalid)
# where matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4; start address, LDO and SDO are 16-byte
# aligned. Values of 2^18 and above would be silently truncated by that encoding, so they are rejected.
_SWIZZLE_FIELD = {0: 0, 1: 6, 2: 4, 3: 2}  # jittile mode (none/32B/64B/128B) -> bits 61-63
_FIELD_SWIZZLE = {v: k for k, v in _SWIZZLE_FIELD.items()}
_ADDRESS_LIMIT = 1 << 18
_VERSION = 0b001
_RESERVED_MASK = (0b11 << 14) | (0b11 << 30) | (0xFF << 53)


def check_address_field(name: str, value: int) -> None:
    if value < 0:
        raise DescriptorError(name, "descriptor strides and addresses are nonnegative", value)
    if value % 16:
        raise DescriptorError(name, "descriptor strides and addresses are 16-byte multiples", value)
    if value >= _ADDRESS_LIMIT:
        raise DescriptorError(name, "descriptor strides and addresses are below 2^18 bytes", value)


def check_descriptor_fields(
    start_address: int,
    leading: tuple[str, int],
    stride: tuple[str, int],
    swizzle: int,
    base_offset: int,
) -> None:
    """The fields every shared-matrix descriptor (tcgen05 and wgmma) shares: an encodable start
    address and two strides (``(name, bytes)``), a jittile swizzle mode, a 3-bit base offset."""
    check_address_field("start_address", start_address)
    check_address_field(*leading)
    check_address_field(*stride)
    if swizzle not in _SWIZZLE_FIELD:
        raise DescriptorError(
            "swizzle", "swizzle mode is 0, 1, 2 or 3 (none/32B/64B/128B)", swizzle
        )
    if not 0 <= base_offset <= 7:
        raise DescriptorError("base_offset", "matrix base offset is a 3-bit field", base_offset)


@dataclass(frozen=True)
class SmemDescriptor:
    """Fields of a tcgen05 shared-memory descriptor, in bytes; ``swizzle`` uses jittile modes 0..3."""

    start_address: int
    ldo: int
    sdo: int
    swizzle: int = 0
    base_offset: int = 0
    lbo_mode: int = 0

    def __post_init__(self) -> None:
        check_descriptor_fields(
            self.start_address, ("LDO", self.ldo), ("SDO", self.sdo), self.swizzle, self.base_offset
        )
        if self.lbo_mode not in (0, 1):
            raise DescriptorError(
                "lbo_mode", "leading dimension stride mode is one bit", self.lbo_mode
            )

    def encode(self) -> int:
        """The 64-bit descriptor value."""
        return (
            (self.start_address >> 4)
            | (self.ldo >> 4) << 16
            | (self.sdo >> 4) << 32
            | _VERSION << 46
            | self.base_offset << 49
            | self.lbo_mode << 52
            | _SWIZZLE_FIELD[self.swizzle] << 61
        )

    @classmethod
    def decode(cls, value: int) -> SmemDescriptor:
        """Fields of a 64-bit descriptor value; rejects values ``encode`` cannot produce."""
        if not 0 <= value < 1 << 64:
            raise DescriptorError("descriptor", "a descriptor is a 64-bit unsigned value", value)
        if (value >> 46) & 0b111 != _VERSION:
            raise DescriptorError(
                "descriptor", "bits 46-48 hold the fixed constant 0b001", hex(value)
            )
        if value & _RESERVED_MASK:
            raise DescriptorError(
                "descriptor", "reserved bits 14-15, 30-31 and 53-60 are zero", hex(value)
            )
        field = value >> 61
        if field not in _FIELD_SWIZZLE:
            raise DescriptorError(
                "descriptor",
                "swizzle field must be 0, 2, 4 or 6 (1, 128B with 32B atoms, "
                "has no jittile mode; 3, 5 and 7 are invalid)",
                field,
            )
        return cls(
            start_address=(value & 0x3FFF) << 4,
            ldo=((value >> 16) & 0x3FFF) << 4,
            sdo=((value >> 32) & 0x3FFF) << 4,
            swizzle=_FIELD_SWIZZLE[field],
            base_offset=(value >> 49) & 0b111,
            lbo_mode=(value >> 52) & 1,
        )


@dataclass(frozen=True)
class DescriptorWalk:
    """A descriptor address walk: swizzle mode, linear origin (bytes from the allocation base), LDO, SDO."""

    swizzle: int
    origin: int
    ldo: int
    sdo: int


def walk_address(walk: DescriptorWalk, row: int, word: int) -> int:
    """Physical byte address (from the allocation base) that ``walk`` reads for (row, b32 word)."""
    linear = walk.origin + (row // 8) * walk.sdo + (row % 8) * SWIZZLE_SPAN[walk.swizzle]
    if walk.swizzle:
        linear += 4 * word
    else:
        linear += (word // 4) * walk.ldo + (word % 4) * 4
    return swizzle_address(linear, walk.swizzle)


def _candidate(
    mode: int, address_of: Callable[[int, int], int], rows: int, words: int
) -> DescriptorWalk:
    """The only walk of ``mode`` that can match: origin, SDO and LDO read off three addresses.

    Unused strides get the values of a compact core-matrix block (the hardware never applies them):
    LDO is 16 (encoded 1) when swizzled, which the ISA "assumes" for K-major swizzled layouts
    (9.7.16.3.1.1), and 128 without swizzling, the next 8x16-byte core matrix directly after the first.
    SDO is the size of one 8-row group: 8 rows of the swizzle span (128 << mode) when swizzled; without
    swizzling 128 per core matrix along words when those are packed (LDO 128), else 128.
    """
    origin = inverse_swizzled_origin(address_of(0, 0), mode)
    if mode == 0 and words > 4:
        ldo = address_of(0, 4) - origin
    else:
        ldo = 16 if mode else 128
    if rows > 8:
        sdo = inverse_swizzled_origin(address_of(8, 0), mode) - origin
    else:
        sdo = 128 * -(-words // 4) if mode == 0 and ldo == 128 else 128 << mode
    return DescriptorWalk(mode, origin, ldo, sdo)


def _check_rules(
    walk: DescriptorWalk,
    physical_origin: int,
    rows: int,
    words: int,
    base_align: int,
    backing_bytes: int,
) -> None:
    """Raise the first tcgen05.cp descriptor rule that a matching walk breaks."""
    if physical_origin % 16:
        raise DescriptorError("origin", "shared origins must be 16-byte aligned", physical_origin)
    if base_align % 16:
        raise DescriptorError(
            "base_align",
            "the shared allocation must be 16-byte aligned for a descriptor start address",
            base_align,
        )
    for name, value in (("LDO", walk.ldo), ("SDO", walk.sdo)):
        check_address_field(name, value)
    period = swizzle_period(walk.swizzle)
    if walk.swizzle and base_align % period:
        raise DescriptorError(
            "base_align",
            f"a {SWIZZLE_SPAN[walk.swizzle]}B-swizzled shared allocation must be "
            f"aligned to the {period}-byte swizzle period",
            base_align,
        )
    walked_rows = -(-rows // 8) * 8
    end = max(walk_address(walk, r, w) for r in range(walked_rows) for w in range(words)) + 4
    if end > physical_origin + backing_bytes:
        need = f"the descriptor walks {walked_rows} rows, up to {end - physical_origin} bytes from the origin"
        if rows % 8:
            rule = f"a {rows}-row region still needs the eight-row backing block: {need}"
        else:
            rule = f"the walked eight-row blocks must lie inside the allocation: {need}"
        raise DescriptorError("backing_bytes", rule, backing_bytes)


def derive_walk(
    address_of: Callable[[int, int], int],
    rows: int,
    words: int,
    *,
    base_align: int,
    backing_bytes: int,
) -> DescriptorWalk:
    """The one descriptor walk that reads exactly ``address_of(row, word)`` for the whole region.

    ``address_of`` gives physical byte addresses relative to the allocation base (aligned to
    ``base_align`` bytes); ``backing_bytes`` is how many bytes the allocation holds from the region's
    origin onwards. Raises ``DescriptorError`` naming the rule that fails.
    """
    if rows < 1 or words < 1:
        raise ValueError(
            f"a descriptor region has at least one row and one word, got ({rows}, {words})"
        )
    cells = [(r, w) for r in range(rows) for w in range(words)]
    expected = [address_of(r, w) for r, w in cells]
    if min(expected) < 0:
        raise ValueError(
            "address_of must give byte addresses relative to the allocation base (nonnegative)"
        )
    matches: list[DescriptorWalk] = []
    closest: tuple[int, DescriptorWalk, int] | None = (
        None  # (first mismatch index, walk, walked address)
    )
    for mode in SWIZZLE_SPAN:
        walk = _candidate(mode, address_of, rows, words)
        for index, ((r, w), want) in enumerate(zip(cells, expected)):
            got = walk_address(walk, r, w)
            if got != want:
                if closest is None or index > closest[0]:
                    closest = (index, walk, got)
                break
        else:
            matches.append(walk)
    if not matches:
        index, walk, got = closest
        r, w = cells[index]
        raise DescriptorError(
            "layout",
            f"no descriptor address walk reproduces the shared layout; the closest, swizzle mode "
            f"{walk.swizzle} ({SWIZZLE_SPAN[walk.swizzle]}B rows) with origin {walk.origin}, LDO {walk.ldo}, "
            f"SDO {walk.sdo}, first diverges at row {r}, word {w}: the layout puts it at byte "
            f"{expected[index]}, the walk reads byte {got}",
            (r, w),
        )
    first_error: DescriptorError | None = None
    for walk in matches:
        try:
            _check_rules(walk, expected[0], rows, words, base_align, backing_bytes)
        except DescriptorError as error:
            first_error = first_error or error
        else:
            return walk
    raise first_error


def descriptor_for(walk: DescriptorWalk, base_address: int) -> SmemDescriptor:
    """The descriptor of ``walk`` for an allocation at shared address ``base_address``.

    The start address is the linear (pre-swizzle) origin; the hardware applies the swizzle. Per PTX ISA
    9.7.16.4.1 (Table 41) the base offset is 0 when the swizzle pattern starts on its period boundary
    (256/512/1024 B), else ``(pattern start >> 7) & 7``; the pattern starts at the allocation base.
    """
    start = base_address + walk.origin
    if start % 16:
        raise DescriptorError(
            "start_address", "descriptor start addresses are 16-byte aligned", start
        )
    base_offset = 0
    if walk.swizzle and base_address % swizzle_period(walk.swizzle):
        base_offset = (base_address >> 7) & 0b111
    return SmemDescriptor(start, walk.ldo, walk.sdo, walk.swizzle, base_offset)
