"""tcgen05 shared-memory descriptors: encoding by hand, and walks derived from layouts."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jittile.dtypes import dtype as as_dtype
from jittile.layout import ComposeLayout, S, TileLayout, row_major, swizzle
from jittile.patterns.descriptors import (
    DescriptorError,
    DescriptorWalk,
    SmemDescriptor,
    derive_walk,
    descriptor_for,
    walk_address,
)
from jittile.patterns.swizzle import swizzle_address

# --- encoding ----------------------------------------------------------------------------------
# Hand-packed per PTX ISA 9.7.16.4.1 Table 40: [0,14) start>>4, [16,30) LDO>>4, [32,46) SDO>>4,
# [46,49) = 0b001, [49,52) base offset, bit 52 LBO mode, [61,64) swizzle (0 none, 6 32B, 4 64B, 2 128B).
ENCODED = [
    # start 0x400 -> 0x40; LDO 128 -> 8 << 16 = 0x8_0000; SDO 128 -> 8 << 32 = 0x8_0000_0000;
    # 1 << 46 = 0x4000_0000_0000.
    (SmemDescriptor(0x400, 128, 128, 0), 0x0000_4008_0008_0040),
    # start 0x2400 -> 0x240; LDO 16 -> 1 << 16; SDO 1024 -> 0x40 << 32 = 0x40_0000_0000;
    # 1 << 46; 128B swizzle: 2 << 61 = 0x4000_0000_0000_0000.
    (SmemDescriptor(0x2400, 16, 1024, 3), 0x4000_4040_0001_0240),
    # start 0 ; LDO 16 -> 0x1_0000; SDO 512 -> 0x20 << 32; 1 << 46; 64B swizzle: 4 << 61 = 0x8000_...
    (SmemDescriptor(0, 16, 512, 2), 0x8000_4020_0001_0000),
    # start 0x3FFF0 -> 0x3FFF; LDO 256 -> 0x10 << 16 = 0x10_0000; SDO 0x3FFF0 -> 0x3FFF << 32;
    # 1 << 46 = 0x4000 << 32 (so bits 32-47 read 0x7FFF); base offset 5 << 49 = 0xA << 48;
    # LBO mode 1 << 52 = 0x10 << 48; 32B swizzle: 6 << 61 = 0xC000 << 48.
    (SmemDescriptor(0x3FFF0, 256, 0x3FFF0, 1, base_offset=5, lbo_mode=1), 0xC01A_7FFF_0010_3FFF),
]


@pytest.mark.parametrize("desc, value", ENCODED)
def test_encode_by_hand(desc, value):
    assert desc.encode() == value
    assert SmemDescriptor.decode(value) == desc


@given(
    st.integers(0, 0x3FFF),
    st.integers(0, 0x3FFF),
    st.integers(0, 0x3FFF),
    st.integers(0, 3),
    st.integers(0, 7),
    st.integers(0, 1),
)
def test_round_trip(start, ldo, sdo, mode, base_offset, lbo_mode):
    desc = SmemDescriptor(start << 4, ldo << 4, sdo << 4, mode, base_offset, lbo_mode)
    value = desc.encode()
    assert 0 <= value < 1 << 64
    assert (value >> 46) & 7 == 1
    assert SmemDescriptor.decode(value) == desc


@pytest.mark.parametrize(
    "value, rule",
    [
        (0x0000_0008_0008_0040, "0b001"),  # bits 46-48 cleared
        (0x0000_4008_0008_C040, "reserved"),  # bit 15 set
        (0x0020_4008_0008_0040, "reserved"),  # bit 53 set
        (0x2000_4008_0008_0040, "swizzle field"),  # field 1: 128B with 32B atoms
        (0x6000_4008_0008_0040, "swizzle field"),  # field 3: invalid
        (1 << 64, "64-bit"),
    ],
)
def test_decode_rejects(value, rule):
    with pytest.raises(DescriptorError, match=rule):
        SmemDescriptor.decode(value)


@pytest.mark.parametrize(
    "kwargs, parameter",
    [
        (dict(start_address=8, ldo=16, sdo=16), "start_address"),
        (dict(start_address=0, ldo=1 << 18, sdo=16), "LDO"),
        (dict(start_address=0, ldo=16, sdo=-16), "SDO"),
        (dict(start_address=0, ldo=16, sdo=16, swizzle=4), "swizzle"),
        (dict(start_address=0, ldo=16, sdo=16, base_offset=8), "base_offset"),
        (dict(start_address=0, ldo=16, sdo=16, lbo_mode=2), "lbo_mode"),
    ],
)
def test_field_checks(kwargs, parameter):
    with pytest.raises(DescriptorError) as info:
        SmemDescriptor(**kwargs)
    assert info.value.parameter == parameter
    assert isinstance(info.value, ValueError)


# --- walks derived from layouts ----------------------------------------------------------------


def region(layout, dtype, row0=0, col0=0, shape=None):
    """address_of(row, word) of a region of a 2-D buffer, in bytes from the allocation base."""
    size = as_dtype(dtype).bytes
    per_word = 4 // size
    return lambda r, w: layout.memory_offset((row0 + r, col0 + w * per_word), shape) * size


CASES = [
    # name, layout, dtype, buffer shape, region origin (row, col), rows, words, expected walk
    (
        "K-major 16B rows",
        row_major((128, 4)),
        "uint32",
        (128, 4),
        (0, 0),
        128,
        4,
        DescriptorWalk(0, 0, 128, 128),
    ),
    (
        "core matrices, LDO 128",
        TileLayout(S[(16, 8, 2, 4) : (64, 4, 32, 1)]),
        "uint32",
        (128, 8),
        (0, 0),
        128,
        8,
        DescriptorWalk(0, 0, 128, 256),
    ),
    (
        "core matrices, LDO 2048",
        TileLayout(S[(16, 8, 2, 4) : (32, 4, 512, 1)]),
        "uint32",
        (128, 8),
        (0, 0),
        128,
        8,
        DescriptorWalk(0, 0, 2048, 128),
    ),
    (
        "core matrices, 64 rows from row 64",
        TileLayout(S[(16, 8, 2, 4) : (64, 4, 32, 1)]),
        "uint32",
        (128, 8),
        (64, 0),
        64,
        8,
        DescriptorWalk(0, 2048, 128, 256),
    ),
    (
        "32B swizzle",
        swizzle(1, (128, 8), "uint32"),
        "uint32",
        (128, 8),
        (0, 0),
        128,
        8,
        DescriptorWalk(1, 0, 16, 256),
    ),
    (
        "64B swizzle, words 4..7",
        swizzle(2, (128, 16), "uint32"),
        "uint32",
        (128, 16),
        (0, 4),
        128,
        4,
        DescriptorWalk(2, 16, 16, 512),
    ),
    (
        "128B swizzle, row 8, words 8..15",
        swizzle(3, (128, 32), "uint32"),
        "uint32",
        (128, 32),
        (8, 8),
        64,
        8,
        DescriptorWalk(3, 1024 + 32, 16, 1024),
    ),
    (
        "128B swizzle from row 2 (mid-pattern phase)",
        swizzle(3, (128, 32), "uint32"),
        "uint32",
        (128, 32),
        (2, 0),
        64,
        4,
        DescriptorWalk(3, 256, 16, 1024),
    ),
    (
        "128B swizzle, float16",
        swizzle(3, (64, 64), "float16"),
        "float16",
        (64, 64),
        (0, 0),
        64,
        4,
        DescriptorWalk(3, 0, 16, 1024),
    ),
    (
        "128B swizzle atoms 2048 B apart",
        ComposeLayout(2, 3, 3, TileLayout(S[(16, 8, 32) : (512, 32, 1)])),
        "uint32",
        (128, 32),
        (0, 0),
        128,
        4,
        DescriptorWalk(3, 0, 16, 2048),
    ),
    (
        "4-row 32B rows in a 256-byte block",
        swizzle(1, (8, 8), "uint32"),
        "uint32",
        (8, 8),
        (0, 0),
        4,
        8,
        DescriptorWalk(1, 0, 16, 256),
    ),
]


@pytest.mark.parametrize(
    "name, layout, dtype, shape, origin, rows, words, expected", CASES, ids=[c[0] for c in CASES]
)
def test_walk_reproduces_layout(name, layout, dtype, shape, origin, rows, words, expected):
    address_of = region(layout, dtype, *origin, shape=shape)
    size = as_dtype(dtype).bytes
    total = size * (
        1
        + max(layout.memory_offset((r, c), shape) for r in range(shape[0]) for c in range(shape[1]))
    )
    walk = derive_walk(
        address_of, rows, words, base_align=1024, backing_bytes=total - address_of(0, 0)
    )
    assert walk == expected
    base = 0x8000
    value = descriptor_for(walk, base).encode()
    decoded = SmemDescriptor.decode(value)
    assert decoded.base_offset == 0  # the allocation base starts the swizzle pattern
    rebuilt = DescriptorWalk(
        decoded.swizzle, decoded.start_address - base, decoded.ldo, decoded.sdo
    )
    for r in range(rows):
        for w in range(words):
            assert walk_address(rebuilt, r, w) == address_of(r, w), (r, w)


def test_walk_address_formula():
    walk = DescriptorWalk(0, 32, 256, 1024)
    assert walk_address(walk, 9, 6) == 32 + 1024 + 16 + 256 + 8
    swizzled = DescriptorWalk(3, 0, 16, 1024)
    # Row 1 word 5: linear 128 + 20 = 148 (chunk 1) -> chunk 1 ^ row 1 = 0 -> byte 132.
    assert walk_address(swizzled, 1, 5) == 132
    assert walk_address(swizzled, 9, 5) == swizzle_address(1024 + 148, 3)


def test_descriptor_for():
    walk = DescriptorWalk(3, 1024 + 32, 16, 1024)
    desc = descriptor_for(walk, 0x8000)
    assert desc == SmemDescriptor(0x8000 + 1024 + 32, 16, 1024, 3, 0)
    # Pattern starting off its 1024-byte boundary: base offset = (start of pattern >> 7) & 7.
    assert descriptor_for(DescriptorWalk(3, 0, 16, 1024), 0x480).base_offset == 1
    assert descriptor_for(DescriptorWalk(0, 0, 128, 128), 0x480).base_offset == 0
    with pytest.raises(DescriptorError, match="16-byte aligned"):
        descriptor_for(DescriptorWalk(0, 0, 128, 128), 0x408)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 3),
    st.integers(0, 7),
    st.integers(1, 64),
    st.integers(1, 64),
    st.sampled_from([4, 8]),
    st.sampled_from([4, 8, 16, 64, 128]),
)
def test_derive_inverts_walk(mode, chunk, sdo_units, ldo_units, words, rows):
    # The addresses of any legal walk give back a walk that reads exactly the same bytes.
    if mode:
        walk = DescriptorWalk(mode, 16 * chunk, 16, (128 << mode) * sdo_units)
    else:
        walk = DescriptorWalk(0, 16 * chunk, 128 * ldo_units, 128 * sdo_units)
    derived = derive_walk(
        lambda r, w: walk_address(walk, r, w), rows, words, base_align=1024, backing_bytes=1 << 22
    )
    for r in range(rows):
        for w in range(words):
            assert walk_address(derived, r, w) == walk_address(walk, r, w)


# --- rules: violated and just satisfied --------------------------------------------------------


def cm(sdo=128, ldo=128, origin=0):
    """K-major core-matrix addresses: 8 rows of 16 B, groups SDO apart, word quads LDO apart."""
    return lambda r, w: origin + (r // 8) * sdo + (r % 8) * 16 + (w // 4) * ldo + (w % 4) * 4


def derive(address_of, rows=128, words=4, base_align=1024, backing_bytes=1 << 20):
    return derive_walk(address_of, rows, words, base_align=base_align, backing_bytes=backing_bytes)


def rule(parameter, text, fn, *args, **kwargs):
    with pytest.raises(DescriptorError, match=text) as info:
        fn(*args, **kwargs)
    assert info.value.parameter == parameter
    return info.value


def test_no_walk_matches():
    # Row-major 32-byte rows without a swizzle: no mode walks it; 32B swizzle gets furthest.
    error = rule(
        "layout", "no descriptor address walk", derive, region(row_major((128, 8)), "uint32")
    )
    assert error.value == (4, 0)
    assert "swizzle mode 1" in str(error) and "row 4, word 0" in str(error)
    # Just satisfied: the same 32-byte rows with the 32B swizzle applied.
    assert derive(region(swizzle(1, (128, 8), "uint32"), "uint32"), words=8).swizzle == 1


def test_origin_alignment():
    rule("origin", "16-byte aligned", derive, cm(origin=4))
    assert derive(cm(origin=16)).origin == 16
    rule("base_align", "16-byte aligned", derive, cm(), base_align=8)
    assert derive(cm(), base_align=16).swizzle == 0


def test_stride_rules():
    rule("SDO", "16-byte multiples", derive, cm(sdo=136))
    assert derive(cm(sdo=144)).sdo == 144
    rule("SDO", "nonnegative", derive, cm(sdo=-128, origin=15 * 128))
    assert derive(cm(sdo=0), rows=16).sdo == 0
    rule("LDO", "below 2\\^18", derive, cm(ldo=1 << 18), rows=8, words=8)
    assert derive(cm(ldo=(1 << 18) - 16), rows=8, words=8).ldo == (1 << 18) - 16
    rule("SDO", "below 2\\^18", derive, cm(sdo=1 << 18), rows=16)
    assert derive(cm(sdo=(1 << 18) - 16), rows=16).sdo == (1 << 18) - 16


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_swizzled_base_alignment(mode):
    period = 128 << mode
    address_of = region(swizzle(mode, (128, 4 << mode), "uint32"), "uint32")
    rule("base_align", f"{period}-byte swizzle period", derive, address_of, base_align=period // 2)
    assert derive(address_of, base_align=period).swizzle == mode


def test_four_row_region_needs_eight_row_block():
    # 4x256b from a (4, 8) uint32 row-major buffer: its 32-byte rows are the 32B-swizzle walk, whose
    # eight-row block is 256 bytes, but the buffer holds 128.
    address_of = region(row_major((4, 8)), "uint32")
    error = rule(
        "backing_bytes",
        "eight-row backing block",
        derive,
        address_of,
        rows=4,
        words=8,
        base_align=256,
        backing_bytes=128,
    )
    assert "256 bytes" in str(error)
    assert derive(address_of, rows=4, words=8, base_align=256, backing_bytes=256).swizzle == 1
    # Unswizzled 16-byte rows: the core-matrix block is 128 bytes.
    rule("backing_bytes", "eight-row backing block", derive, cm(), rows=4, backing_bytes=64)
    assert derive(cm(), rows=4, backing_bytes=128) == DescriptorWalk(0, 0, 128, 128)
    # Region rows that are whole 8-row groups must still lie inside the allocation.
    rule("backing_bytes", "inside the allocation", derive, cm(), rows=16, backing_bytes=255)


def test_unused_stride_defaults():
    # Unused SDO (<= 8 rows): one compact 8-row group; unused LDO (<= 4 words or swizzled): 128 / 16.
    assert derive(cm(), rows=8, words=8) == DescriptorWalk(0, 0, 128, 256)
    assert derive(cm(ldo=4096), rows=8, words=8) == DescriptorWalk(0, 0, 4096, 128)
    assert derive(cm(), rows=8, words=4) == DescriptorWalk(0, 0, 128, 128)
    assert derive(
        region(swizzle(3, (8, 32), "uint32"), "uint32"), rows=8, words=8
    ) == DescriptorWalk(3, 0, 16, 1024)
