"""The interpreter's tensor-memory model (jittile/interpreter/tmem.py), CPU only.

Expected values are worked by hand from the PTX ISA (descriptor table 40, canonical K-major layouts,
tcgen05.cp data paths, decompression formats, tcgen05.ld fragments); only the last test uses
jittile's descriptor encoder, to check it against the decoder.
"""

import numpy as np
import pytest

from jittile.interpreter.memory import MemoryFault, SharedMemory
from jittile.interpreter.tmem import TensorMemory, TmemFault, decode_smem_descriptor
from jittile.layout import resolve_layout, swizzle
from jittile.patterns.descriptors import SmemDescriptor, derive_walk
from jittile.patterns.tmem_copy_opcodes import parse_tcgen05_cp

VERSION = 1 << 46  # bits 46-48 = 0b001


def make_desc(start: int, lbo: int, sbo: int, swizzle_code: int = 0, base_offset: int = 0) -> int:
    """A descriptor assembled straight from PTX ISA Table 40 (fields are byte values >> 4)."""
    return (
        (start >> 4)
        | (lbo >> 4) << 16
        | (sbo >> 4) << 32
        | VERSION
        | base_offset << 49
        | swizzle_code << 61
    )


def put_words(smem: SharedMemory, address: int, words) -> None:
    smem.write(address, np.asarray(words, dtype="<u4"))


def tmem_with(ncols: int = 32) -> TensorMemory:
    tm = TensorMemory()
    assert tm.alloc(ncols) == 0
    return tm


def matrix(rows: int, words: int, tag: int = 0xA0000000) -> np.ndarray:
    return (tag + np.arange(rows)[:, None] * 0x100 + np.arange(words)[None, :]).astype(np.uint32)


# ------------------------------------------------------------------------- descriptor decoding
def test_decode_128b_swizzled_descriptor() -> None:
    # start 0x400 -> 0x40; LBO 128 -> 8 at bit 16; SBO 1024 -> 64 at bit 32; 0b001 at bit 46;
    # swizzle code 2 (128B) at bit 61.
    fields = decode_smem_descriptor(0x4000_4040_0008_0040)
    assert fields == {
        "start_address": 0x400,
        "leading_byte_offset": 128,
        "stride_byte_offset": 1024,
        "version": 1,
        "base_offset": 0,
        "lbo_mode": 0,
        "fixed_zero": 0,
        "swizzle": 2,
        "swizzle_mode": "128B",
        "reserved": 0,
    }


def test_decode_base_offset_lbo_mode_and_64b() -> None:
    # 64B (code 4) at 61, LBO mode bit 52, base offset 3 at 49, 0b001 at 46, SBO 512 -> 32,
    # LBO 16 -> 1, start 0x10 -> 1.
    fields = decode_smem_descriptor(0x8016_4020_0001_0001)
    assert (
        fields["start_address"],
        fields["leading_byte_offset"],
        fields["stride_byte_offset"],
    ) == (0x10, 16, 512)
    assert (fields["version"], fields["base_offset"], fields["lbo_mode"]) == (1, 3, 1)
    assert (fields["swizzle"], fields["swizzle_mode"]) == (4, "64B")


def test_decode_all_ones_reports_every_field() -> None:
    fields = decode_smem_descriptor(0xFFFF_FFFF_FFFF_FFFF)
    assert (
        fields["start_address"]
        == fields["leading_byte_offset"]
        == fields["stride_byte_offset"]
        == 0x3FFF0
    )  # 14 bits << 4: an 18-bit byte value
    assert (fields["version"], fields["base_offset"], fields["lbo_mode"]) == (7, 7, 1)
    assert (fields["fixed_zero"], fields["swizzle"], fields["swizzle_mode"]) == (0xFF, 7, "invalid")
    assert fields["reserved"] == 0xC000_C000  # bits 14-15 and 30-31


@pytest.mark.parametrize(
    "code, name",
    [
        (0, "none"),
        (1, "128B_atom32B"),
        (2, "128B"),
        (4, "64B"),
        (6, "32B"),
        (3, "invalid"),
        (5, "invalid"),
    ],
)
def test_decode_swizzle_codes(code, name) -> None:
    assert decode_smem_descriptor(code << 61 | VERSION)["swizzle_mode"] == name


def test_decode_rejects_values_wider_than_64_bits() -> None:
    with pytest.raises(TmemFault, match="64-bit"):
        decode_smem_descriptor(1 << 64)


@pytest.mark.parametrize(
    "desc, match",
    [
        (make_desc(0, 128, 128) & ~VERSION, "bits 46-48"),  # a Hopper-style descriptor
        (make_desc(0, 128, 128) | 1 << 55, "bits 53-60"),
        (make_desc(0, 128, 128) | 1 << 14, "overflowed"),
        (make_desc(0, 128, 128, swizzle_code=3), "invalid"),
        (make_desc(0, 128, 128, swizzle_code=1), "Table 53"),
        (make_desc(0, 128, 128) | 1 << 52, "sm_103a"),
    ],
)
def test_copy_rejects_broken_descriptors(desc, match) -> None:
    tm, smem = tmem_with(), SharedMemory(4096, (0, 0, 0))
    with pytest.raises(TmemFault, match=match):
        tm.copy_from_shared(parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x128b"), 0, desc, smem)


# ------------------------------------------------------------------- tcgen05.cp address walks
def test_128x256b_non_swizzled_k_major() -> None:
    """Canonical K-major, no swizzle: ((8,m),(T,2k)):((1T,SBO),(1,LBO)). Here the sixteen 8x16-byte
    core matrices of the first 16 bytes of every row come first (SBO 128 apart), then the second
    column of core matrices at LBO = 2048."""
    base = 0x100
    smem = SharedMemory(base + 4096, (0, 0, 0))
    m = matrix(128, 8)
    for r in range(128):
        for c in range(2):
            put_words(
                smem, base + c * 2048 + (r // 8) * 128 + (r % 8) * 16, m[r, 4 * c : 4 * c + 4]
            )
    desc = 0x0000_4008_0080_0010  # start 0x100 -> 0x10, LBO 2048 -> 0x80, SBO 128 -> 8, 0b001
    assert desc == make_desc(base, 2048, 128)
    tm = tmem_with()
    tm.copy_from_shared(parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x256b"), 4, desc, smem)
    np.testing.assert_array_equal(tm.cells[:, 4:12], m)
    assert not tm.cells[:, :4].any() and not tm.cells[:, 12:].any()


def test_128x256b_128b_swizzle() -> None:
    """128B swizzle: row r of an 8-row group is the 128-byte line at (r//8)*SBO + (r%8)*128, and
    its logical 16-byte chunk k sits in physical chunk k ^ (r % 8)."""
    base = 0x800  # 1024-byte aligned: the pattern starts here, base offset 0
    smem = SharedMemory(base + 16 * 1024, (0, 0, 0))
    m = matrix(128, 8)
    for r in range(128):
        for k in range(2):
            line = base + (r // 8) * 1024 + (r % 8) * 128
            put_words(smem, line + 16 * (k ^ (r % 8)), m[r, 4 * k : 4 * k + 4])
    desc = 0x4000_4040_0001_0080  # start 0x800 -> 0x80, LBO "assumed 1", SBO 1024 -> 64, 128B
    assert desc == make_desc(base, 16, 1024, swizzle_code=2)
    tm = tmem_with()
    tm.copy_from_shared(parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x256b"), 0, desc, smem)
    np.testing.assert_array_equal(tm.cells[:, :8], m)


def test_128b_swizzle_start_advanced_along_k() -> None:
    """Advancing the start address by 16 bytes per K step inside a 128B-swizzled row (the usual
    idiom) reads logical chunk 3 of every row: the XOR uses the address bits."""
    base = 0x400
    smem = SharedMemory(base + 16 * 1024, (0, 0, 0))
    m = matrix(128, 32)
    for r in range(128):
        line = base + (r // 8) * 1024 + (r % 8) * 128
        for k in range(8):
            put_words(smem, line + 16 * (k ^ (r % 8)), m[r, 4 * k : 4 * k + 4])
    tm = tmem_with()
    tm.copy_from_shared(
        parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x128b"),
        0,
        make_desc(base + 3 * 16, 16, 1024, swizzle_code=2),
        smem,
    )
    np.testing.assert_array_equal(tm.cells[:, :4], m[:, 12:16])


def test_128x256b_32b_swizzle() -> None:
    """32B swizzle (256-byte pattern): rows 0-3 of each 8-row group are plain, rows 4-7 swap their
    two 16-byte chunks."""
    base = 0x200
    smem = SharedMemory(base + 4096, (0, 0, 0))
    m = matrix(128, 8)
    for r in range(128):
        line = base + (r // 8) * 256 + (r % 8) * 32
        for k in range(2):
            put_words(smem, line + 16 * (k ^ (1 if r % 8 >= 4 else 0)), m[r, 4 * k : 4 * k + 4])
    tm = tmem_with()
    tm.copy_from_shared(
        parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x256b"),
        0,
        make_desc(base, 16, 256, swizzle_code=6),
        smem,
    )
    np.testing.assert_array_equal(tm.cells[:, :8], m)


def test_swizzle_pattern_off_its_boundary_uses_the_base_offset() -> None:
    """Table 41: a 128B pattern starting at 0x980 (not 1024-aligned) has base offset
    (0x980 >> 7) & 7 = 3; pattern rows count from that start."""
    start = 0x980
    smem = SharedMemory(start + 16 * 1024, (0, 0, 0))
    m = matrix(8, 4)
    for r in range(8):
        put_words(smem, start + r * 128 + 16 * (0 ^ r), m[r])
    tm = tmem_with()
    op = parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x128b")
    tm.copy_from_shared(op, 0, make_desc(start, 16, 1024, swizzle_code=2, base_offset=3), smem)
    np.testing.assert_array_equal(tm.cells[:8, :4], m)


# ----------------------------------------------------------------------- tcgen05.cp data paths
def test_4x256b_writes_one_row_per_lane_quarter() -> None:
    smem = SharedMemory(1024, (0, 0, 0))
    m = matrix(4, 8)
    for r in range(4):  # rows 0-3 of a core-matrix pair: chunk 1 one core matrix (LBO 128) on
        put_words(smem, r * 16, m[r, :4])
        put_words(smem, 128 + r * 16, m[r, 4:])
    tm = tmem_with()
    taddr = 3 << 16 | 8  # lane 3, column 8
    tm.copy_from_shared(
        parse_tcgen05_cp("tcgen05.cp.cta_group::1.4x256b"), taddr, make_desc(0, 128, 256), smem
    )
    for r, lane in enumerate((3, 35, 67, 99)):
        np.testing.assert_array_equal(tm.cells[lane, 8:16], m[r])
    written = np.zeros((128, 512), dtype=bool)
    written[[3, 35, 67, 99], 8:16] = True
    assert not tm.cells[~written].any()


def test_32x128b_warpx4_replicates_into_every_quarter() -> None:
    smem = SharedMemory(1024, (0, 0, 0))
    m = matrix(32, 4)
    put_words(smem, 0, m)  # 32 rows of 16 bytes back to back: SBO 128
    tm = tmem_with()
    tm.copy_from_shared(
        parse_tcgen05_cp("tcgen05.cp.cta_group::1.32x128b.warpx4"), 0, make_desc(0, 0, 128), smem
    )
    for quarter in range(4):
        np.testing.assert_array_equal(tm.cells[32 * quarter : 32 * quarter + 32, :4], m)


@pytest.mark.parametrize(
    "multicast, halves",
    [
        ("warpx2::02_13", {0: 0, 1: 1, 2: 0, 3: 1}),  # warps 0/2 get rows 0-31, 1/3 rows 32-63
        ("warpx2::01_23", {0: 0, 1: 0, 2: 1, 3: 1}),  # warps 0/1 get rows 0-31, 2/3 rows 32-63
    ],
)
def test_64x128b_warp_pairs(multicast, halves) -> None:
    smem = SharedMemory(2048, (0, 0, 0))
    m = matrix(64, 4)
    put_words(smem, 0, m)
    tm = tmem_with()
    tm.copy_from_shared(
        parse_tcgen05_cp(f"tcgen05.cp.cta_group::1.64x128b.{multicast}"),
        0,
        make_desc(0, 0, 128),
        smem,
    )
    for quarter, half in halves.items():
        np.testing.assert_array_equal(
            tm.cells[32 * quarter : 32 * quarter + 32, :4], m[32 * half : 32 * half + 32]
        )


# --------------------------------------------------------------------------- decompression
FP4_GROUPS = [
    # sixteen nibbles (value 2i low in byte i), then 8 padding bytes -> holders 00xxxx00
    (
        bytes([0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]) + b"\xee" * 8,
        [0x0C080400, 0x1C181410, 0x2C282420, 0x3C383430],
    ),  # value i -> 4*i
    (
        bytes([0xF0, 0x0F, 0x81, 0x18, 0, 0, 0, 0]) + b"\x5a" * 8,
        [0x003C3C00, 0x04202004, 0, 0],
    ),  # values 0,F,F,0,1,8,8,1,0... -> 00,3C,3C,00,04,20,20,04
]
FP6_GROUPS = [
    # 16 x 6 bits little-endian in 12 bytes, then 4 padding bytes -> holders 0xxxxxx0.
    # (1,2,3,4): 0x01 | 0x02<<6 | 0x03<<12 | 0x04<<18 = 0x103081 -> 81 30 10
    # (3F,0,20,15): 0x56003F -> 3F 00 56; (2A,15,3F,3F): 0xFFF56A -> 6A F5 FF;
    # (0,0,0,10): 0x400000 -> 00 00 40
    (
        bytes([0x81, 0x30, 0x10, 0x3F, 0x00, 0x56, 0x6A, 0xF5, 0xFF, 0x00, 0x00, 0x40])
        + b"\xcc" * 4,
        [0x08060402, 0x2A40007E, 0x7E7E2A54, 0x20000000],
    ),
]


@pytest.mark.parametrize("fmt, groups", [("b4x16_p64", FP4_GROUPS), ("b6x16_p32", FP6_GROUPS)])
def test_decompression_128x128b(fmt, groups) -> None:
    smem = SharedMemory(2048, (0, 0, 0))
    for row, (src, _) in enumerate(groups):
        smem.write(16 * row, np.frombuffer(src, dtype=np.uint8))
    tm = tmem_with()
    tm.copy_from_shared(
        parse_tcgen05_cp(f"tcgen05.cp.cta_group::1.128x128b.b8x16.{fmt}"),
        0,
        make_desc(0, 0, 128),
        smem,
    )
    for row, (_, want) in enumerate(groups):
        assert [int(w) for w in tm.cells[row, :4]] == want
    assert not tm.cells[len(groups) :, :4].any()  # all-zero sources expand to zero


def test_decompression_expands_each_16_byte_chunk_of_a_row() -> None:
    smem = SharedMemory(8192, (0, 0, 0))
    (fp6, want6), (fp4, want4) = FP6_GROUPS[0], FP4_GROUPS[0]
    smem.write(0, np.frombuffer(fp6, dtype=np.uint8))
    smem.write(2048, np.frombuffer(fp6, dtype=np.uint8))  # chunk 1 of row 0 at LBO 2048
    tm = tmem_with()
    tm.copy_from_shared(
        parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x256b.b8x16.b6x16_p32"),
        0,
        make_desc(0, 2048, 128),
        smem,
    )
    assert [int(w) for w in tm.cells[0, :8]] == want6 + want6
    smem.write(16, np.frombuffer(fp4, dtype=np.uint8))  # row 1, chunk 0
    tm.copy_from_shared(
        parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x256b.b8x16.b4x16_p64"),
        0,
        make_desc(0, 2048, 128),
        smem,
    )
    assert [int(w) for w in tm.cells[1, :4]] == want4


# ---------------------------------------------------------------------------- tcgen05.ld/st
def numbered() -> TensorMemory:
    tm = tmem_with(64)
    tm.cells[:] = np.arange(128)[:, None] * 1000 + np.arange(512)[None, :]
    return tm


@pytest.mark.parametrize(
    "warp, lane, taddr, want",
    [
        (0, 0, 8, [8, 9, 10, 11]),
        (1, 5, 8, [37008, 37009, 37010, 37011]),  # lane 32*1 + 5
        (5, 5, 8, [37008, 37009, 37010, 37011]),  # warp 5 is warp 1 of its warpgroup
        (1, 5, 32 << 16 | 8, [37008, 37009, 37010, 37011]),  # taddr naming the warp's own quarter
        (2, 31, 64 << 16, [95000, 95001, 95002, 95003]),
    ],
)
def test_32x32b_x4_load(warp, lane, taddr, want) -> None:
    assert numbered().load("32x32b", 4, False, taddr, warp, lane) == want


def test_32x32b_pack16_joins_the_low_halves_of_column_pairs() -> None:
    tm = tmem_with()
    tm.cells[3, :4] = [0xAAAA1111, 0xBBBB2222, 0xCCCC3333, 0xDDDD4444]
    assert tm.load("32x32b", 2, True, 0, 0, 3) == [0x22221111, 0x44443333]


@pytest.mark.parametrize(
    "shape, num, lane, taddr, want",
    [
        ("16x256b", 1, 5, 0, [1002, 1003, 9002, 9003]),  # lanes t//4 (+8), words 2*(t%4) + {0,1}
        ("16x256b", 2, 5, 0, [1002, 1003, 9002, 9003, 1010, 1011, 9010, 9011]),
        ("16x128b", 2, 6, 0, [1002, 9002, 1006, 9006]),  # lanes t//4 (+8), word t%4 (+4)
        ("16x64b", 2, 3, 0, [8001, 8003]),  # lane 8*(t%2) + t//4, words 2j + (t//2)%2
        ("16x64b", 1, 4, 0, [1000]),
        ("16x256b", 1, 5, 16 << 16, [17002, 17003, 25002, 25003]),  # upper 16 lanes of warp 0
    ],
)
def test_16_lane_fragments(shape, num, lane, taddr, want) -> None:
    assert numbered().load(shape, num, False, taddr, 0, lane) == want


def test_store_is_the_inverse_of_load() -> None:
    tm = tmem_with()
    tm.store("16x128b", 1, False, 0, 3, 6, [0xDEADBEEF, 0x01234567])
    assert tm.cells[96 + 1, 2] == 0xDEADBEEF and tm.cells[96 + 9, 2] == 0x01234567
    assert tm.load("16x128b", 1, False, 0, 3, 6) == [0xDEADBEEF, 0x01234567]
    tm.store("32x32b", 1, True, 4, 0, 7, [0xBEEF1234])
    assert list(tm.cells[7, 4:6]) == [0x1234, 0xBEEF]  # zero-extended 16-bit halves
    assert tm.load("32x32b", 1, True, 4, 0, 7) == [0xBEEF1234]
    with pytest.raises(ValueError, match="2 registers"):
        tm.store("16x128b", 1, False, 0, 0, 0, [1])


@pytest.mark.parametrize(
    "shape, taddr, warp, match",
    [
        ("32x32b", 64 << 16, 1, "may access lanes 32..63"),
        ("16x64b", 20 << 16, 0, "cross the 32-lane quarter"),
        ("32x32b", 1 << 16, 0, "cross the 32-lane quarter"),
        ("32x32b", 62, 0, "column 64 is not allocated"),  # x4 from column 62 of a 64-column range
    ],
)
def test_load_faults(shape, taddr, warp, match) -> None:
    with pytest.raises(TmemFault, match=match):
        numbered().load(shape, 4, False, taddr, warp, 0)


# ------------------------------------------------------------------------------- allocation
def test_alloc_dealloc_relinquish() -> None:
    tm = TensorMemory()
    assert tm.alloc(128) == 0
    assert tm.alloc(128) == 128
    assert tm.alloc(64) == 256
    tm.dealloc(128, 128)
    assert tm.alloc(32) == 128  # the lowest free range
    assert tm.allocations == {0: 128, 128: 32, 256: 64}
    tm.relinquish()
    with pytest.raises(TmemFault, match="relinquish_alloc_permit"):
        tm.alloc(32)
    for start, n in ((0, 128), (128, 32), (256, 64)):
        tm.dealloc(start, n)  # deallocation stays legal
    tm.check_exit()


@pytest.mark.parametrize("ncols", [0, 16, 48, 1024])
def test_alloc_size_rules(ncols) -> None:
    with pytest.raises(TmemFault, match=f"{ncols} columns: nCols must be a power of two"):
        TensorMemory().alloc(ncols)


def test_alloc_beyond_512_columns() -> None:
    tm = TensorMemory()
    tm.alloc(512)
    with pytest.raises(TmemFault, match="no free range of 512 columns.*0..511"):
        tm.alloc(512)


def test_alloc_sizes_may_not_increase() -> None:
    tm = TensorMemory()
    tm.alloc(32)
    with pytest.raises(TmemFault, match="64 columns after an allocation of 32"):
        tm.alloc(64)


@pytest.mark.parametrize("taddr, ncols", [(32, 32), (0, 64), (1 << 16, 32)])
def test_dealloc_must_match_an_allocation(taddr, ncols) -> None:
    tm = tmem_with()
    with pytest.raises(TmemFault, match="does not match an allocation; allocated columns: 0..31"):
        tm.dealloc(taddr, ncols)


def test_exit_with_live_allocation_and_mixed_cta_groups() -> None:
    tm = tmem_with()
    with pytest.raises(TmemFault, match="still allocated"):
        tm.check_exit()
    with pytest.raises(TmemFault, match="cta_group::2.*cta_group::1"):
        tm.dealloc(0, 32, cta_group=2)


@pytest.mark.parametrize(
    "opcode, taddr, match",
    [
        ("tcgen05.cp.cta_group::1.128x256b", 28, "column 32 is not allocated"),
        ("tcgen05.cp.cta_group::1.128x128b", 1 << 16, "lanes 1..128"),
        ("tcgen05.cp.cta_group::1.4x256b", 32 << 16, "lanes 32..128"),
        ("tcgen05.cp.cta_group::1.32x128b.warpx4", 1 << 16, "lanes 1..128"),
    ],
)
def test_copy_outside_the_allocation_faults_and_writes_nothing(opcode, taddr, match) -> None:
    tm, smem = tmem_with(), SharedMemory(4096, (0, 0, 0))
    smem.data[:] = 0xFF
    with pytest.raises(TmemFault, match=match):
        tm.copy_from_shared(parse_tcgen05_cp(opcode), taddr, make_desc(0, 2048, 128), smem)
    assert not tm.cells.any()


def test_copy_source_outside_shared_memory() -> None:
    tm, smem = tmem_with(), SharedMemory(2048, (0, 0, 0))
    with pytest.raises(MemoryFault, match="source row 127, 16-byte chunk 0.*0x800"):
        tm.copy_from_shared(
            parse_tcgen05_cp("tcgen05.cp.cta_group::1.128x128b"), 0, make_desc(16, 0, 128), smem
        )


# ------------------------------------------------- cross-check of jittile's descriptor encoder
@pytest.mark.parametrize(
    "layout, shape, first_word, opcode, base, align",
    [
        ("default", (128, 4), 0, "128x128b", 0x30, 16),  # the seed example's buffer
        (swizzle(1, (128, 8), "uint32"), (128, 8), 0, "128x256b", 0x100, 256),
        (swizzle(2, (128, 16), "uint32"), (128, 16), 4, "128x256b", 0x200, 512),
        (swizzle(3, (128, 32), "uint32"), (128, 32), 8, "128x256b", 0x400, 1024),
    ],
)
def test_encoder_descriptor_reproduces_the_logical_matrix(
    layout, shape, first_word, opcode, base, align
) -> None:
    """The compiler's way (tmem_copy's _shared_atom and _generate): derive the walk from the
    buffer's layout, OR the buffer's shared address >> 4 into the static fields. The decoder and
    the copy must land exactly the logical region in TMEM."""
    op = parse_tcgen05_cp(f"tcgen05.cp.cta_group::1.{opcode}")
    layout = resolve_layout(layout, shape, "uint32")
    nbytes = 4 * shape[0] * shape[1]
    logical = matrix(*shape)
    smem = SharedMemory(base + nbytes, (0, 0, 0))
    for r in range(shape[0]):
        for w in range(shape[1]):
            put_words(smem, base + 4 * layout.memory_offset((r, w), shape), [logical[r, w]])

    def address_of(row: int, word: int) -> int:
        return 4 * layout.memory_offset((row, first_word + word), shape)

    walk = derive_walk(
        address_of, op.rows, op.words, base_align=align, backing_bytes=nbytes - address_of(0, 0)
    )
    desc = SmemDescriptor(0, walk.ldo, walk.sdo, walk.swizzle).encode() | (
        ((base + walk.origin) >> 4) & 0x3FFF
    )
    tm = tmem_with()
    tm.copy_from_shared(op, 0, desc, smem)
    np.testing.assert_array_equal(
        tm.cells[:, : op.words], logical[:, first_word : first_word + op.words]
    )


@pytest.mark.parametrize(
    "shape, num, pack",
    [
        ("32x32b", 4, False),
        ("32x32b", 2, True),
        ("16x64b", 2, False),
        ("16x128b", 2, False),
        ("16x256b", 2, False),
        ("16x256b", 1, True),
    ],
)
def test_a_warp_moves_as_one_array_what_its_lanes_move_one_by_one(shape, num, pack) -> None:
    tm = numbered()
    lanes = list(range(32))
    taddr = 4 if shape == "32x32b" else 16 << 16 | 4  # the 16-lane shapes: the upper half
    warp = tm.load_warp(shape, num, pack, taddr, 0, lanes)
    assert warp == [tm.load(shape, num, pack, taddr, 0, lane) for lane in lanes]
    one_by_one = tmem_with(64)
    together = tmem_with(64)
    values = [[(lane << 20) + 7 * r + 1 for r in range(len(warp[0]))] for lane in lanes]
    for lane in lanes:
        one_by_one.store(shape, num, pack, 8, 0, lane, values[lane])
    together.store_warp(shape, num, pack, 8, 0, lanes, values)
    np.testing.assert_array_equal(together.cells, one_by_one.cells)
    assert together.cells.any()
