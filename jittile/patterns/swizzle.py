"""Byte-address math of the standard shared-memory swizzles (TMA, wgmma and tcgen05 descriptors).

Mode 0/1/2/3 = none/32B/64B/128B. The hardware XORs the 16-byte chunk index (address bits [4, 4+mode))
with the row index inside the repeating pattern (bits [7, 7+mode)); that is CUTLASS
``Swizzle<mode, 4, 3>`` on byte addresses. Only bits 4..6 change, so a swizzled address stays in the
same 128-byte row and the same 1024-byte block, and the map is its own inverse.
"""

from __future__ import annotations

SWIZZLE_SPAN: dict[int, int] = {0: 16, 1: 32, 2: 64, 3: 128}
"""Bytes of one swizzled row (the atom width): the chunks that one row's XOR permutes."""


def _check_mode(mode: int) -> None:
    if mode not in SWIZZLE_SPAN:
        raise ValueError(f"swizzle mode must be 0, 1, 2 or 3 (none/32B/64B/128B), got {mode!r}")


def swizzle_period(mode: int) -> int:
    """Bytes after which the pattern repeats (256/512/1024), i.e. the alignment a swizzled base needs.

    Mode 0 has no pattern; it returns the 16-byte granule that descriptors and TMA require anyway.
    """
    _check_mode(mode)
    return 16 if mode == 0 else 128 << mode


def swizzle_address(addr: int, mode: int) -> int:
    """Physical byte address of linear byte address ``addr`` (relative to a period-aligned base)."""
    _check_mode(mode)
    return addr ^ (((addr >> 7) & ((1 << mode) - 1)) << 4)


def inverse_swizzled_origin(physical_addr: int, mode: int) -> int:
    """The linear (pre-swizzle) byte address whose swizzled image is ``physical_addr``.

    Descriptors and walks start from this linear address; the swizzle is an involution, so this is the
    swizzle itself, named for what callers mean.
    """
    return swizzle_address(physical_addr, mode)
