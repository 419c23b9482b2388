"""Byte-address swizzle math against hand-worked values and CUTLASS's Swizzle<B, M, S> definition."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jittile.layout import swizzle
from jittile.patterns.swizzle import (
    SWIZZLE_SPAN,
    inverse_swizzled_origin,
    swizzle_address,
    swizzle_period,
)


def cutlass_swizzle(addr: int, bits: int, base: int = 4, shift: int = 3) -> int:
    """CUTLASS Swizzle<B, M, S>: XOR the B bits at [M+S, M+S+B) down into [M, M+B)."""
    yyy_mask = ((1 << bits) - 1) << (base + shift)
    return addr ^ ((addr & yyy_mask) >> shift)


def test_span_and_period():
    assert SWIZZLE_SPAN == {0: 16, 1: 32, 2: 64, 3: 128}
    assert [swizzle_period(m) for m in range(4)] == [16, 256, 512, 1024]
    for m in (1, 2, 3):  # one period is eight rows of the span
        assert swizzle_period(m) == 8 * SWIZZLE_SPAN[m]


@pytest.mark.parametrize("bad", [-1, 4, "128B"])
def test_bad_mode(bad):
    with pytest.raises(ValueError, match="swizzle mode"):
        swizzle_address(0, bad)
    with pytest.raises(ValueError, match="swizzle mode"):
        swizzle_period(bad)


@pytest.mark.parametrize(
    "addr, mode, physical",
    [
        (0x000, 3, 0x000),  # row 0 of the pattern: no change
        (0x080, 3, 0x090),  # row 1, chunk 0 -> chunk 1
        (0x3F0, 3, 0x380),  # row 7, chunk 7 -> chunk 0
        (0x4A4, 3, 0x4B4),  # next 1024-byte block, row 1, chunk 2 (+4 bytes) -> chunk 3
        (0x080, 1, 0x090),  # 32B: row 1 flips chunk bit 4
        (0x100, 1, 0x100),  # 32B: bit 8 is outside the 1-bit row index
        (0x180, 2, 0x1B0),  # 64B: row 3 flips chunk bits 4-5
        (0x3F4, 0, 0x3F4),  # mode 0 is the identity
    ],
)
def test_hand_values(addr, mode, physical):
    assert swizzle_address(addr, mode) == physical
    assert inverse_swizzled_origin(physical, mode) == addr


@given(st.integers(0, 1 << 20), st.integers(0, 3))
def test_involution_and_block(addr, mode):
    physical = swizzle_address(addr, mode)
    assert swizzle_address(physical, mode) == addr
    assert physical // 1024 == addr // 1024
    assert physical // 128 == addr // 128
    assert physical % 16 == addr % 16
    assert physical == cutlass_swizzle(addr, mode)
    assert swizzle_address(inverse_swizzled_origin(addr, mode), mode) == addr


@pytest.mark.parametrize(
    "mode, shape, dtype, size",
    [
        (1, (16, 8), "uint32", 4),
        (2, (16, 32), "float16", 2),
        (3, (16, 128), "int8", 1),
        (3, (8, 16), "float64", 8),
        (3, (24, 32), "float32", 4),
    ],
)
def test_layout_swizzle_is_byte_swizzle(mode, shape, dtype, size):
    layout = swizzle(mode, shape, dtype)
    for r in range(shape[0]):
        for c in range(shape[1]):
            linear = (r * shape[1] + c) * size
            assert layout.memory_offset((r, c)) * size == swizzle_address(linear, mode)
