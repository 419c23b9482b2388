"""The layout language: parsing, offsets, grouping, code-generation expressions and swizzles."""

import itertools
import re

import pytest

from jittile.axis import AxisStride, Mem, TCol, TLane
from jittile.layout import (
    ComposeLayout,
    LayoutSpec,
    R,
    S,
    TileLayout,
    byte_swizzle_mode,
    resolve_layout,
    row_major,
    swizzle,
)


def cells(shape):
    return itertools.product(*(range(e) for e in shape))


# --- axis tags ---------------------------------------------------------------------------------


def test_axis_stride():
    assert 32 @ TLane == AxisStride(32, TLane)
    assert 1 @ TCol == AxisStride(1, TCol)
    assert repr(32 @ TLane) == "32 @ TLane"
    assert repr(TCol) == "TCol"
    assert repr(AxisStride(16, Mem)) == "16"
    with pytest.raises(TypeError):
        1.5 @ TLane


# --- parsing -----------------------------------------------------------------------------------


def test_parse_tmem_layout():
    layout = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])
    assert layout.shard_shape == (128, 4)
    assert layout.shard_strides == (1 @ TLane, 1 @ TCol)
    assert layout.replicas == []
    assert not layout.is_memory
    assert repr(layout) == "TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])"


def test_parse_scalar_and_replicas():
    spec = S[8:1]
    assert spec == LayoutSpec(shard=((8, AxisStride(1, Mem)),))
    layout = TileLayout(S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane])
    assert layout.replicas == [(4, 32 @ TLane)]
    assert repr(layout) == "TileLayout(S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane])"


def test_parse_errors():
    with pytest.raises(TypeError, match="shape : strides"):
        S[(8, 16)]
    with pytest.raises(ValueError, match="2 extents but 1 strides"):
        S[(8, 16) : (1,)]
    with pytest.raises(ValueError, match="positive"):
        S[(0, 16) : (16, 1)]
    with pytest.raises(TypeError, match="layout stride"):
        S[8:1.0]
    with pytest.raises(TypeError, match="TileLayout takes"):
        TileLayout((8, 16))


# --- offsets -----------------------------------------------------------------------------------


def test_tmem_axis_offsets():
    layout = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])
    assert layout.axis_offsets((5, 3)) == {"mem": 0, "lane": 5, "col": 3}
    with pytest.raises(ValueError, match="tensor-memory"):
        layout.memory_offset((0, 0))


def test_grouping_warpx2_01_23():
    # 64x128b.warpx2::01_23: logical row r -> lane 64*(r//32) + r%32, replicated 32 lanes apart.
    layout = TileLayout(S[(2, 32, 4) : (64 @ TLane, 1 @ TLane, 1 @ TCol)] + R[2 : 32 @ TLane])
    for r, c in cells((64, 4)):
        assert layout.axis_offsets((r, c), shape=(64, 4)) == {
            "mem": 0,
            "lane": 64 * (r // 32) + r % 32,
            "col": c,
        }
    assert layout.replica_offsets() == [
        {"mem": 0, "lane": 0, "col": 0},
        {"mem": 0, "lane": 32, "col": 0},
    ]
    # Without a shape, the shard shape is the logical shape.
    assert layout.axis_offsets((1, 3, 2)) == {"mem": 0, "lane": 67, "col": 2}


def test_replica_offsets_order():
    layout = TileLayout(S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[(2, 2) : (64 @ TLane, 8 @ TCol)])
    lanes_cols = [(o["lane"], o["col"]) for o in layout.replica_offsets()]
    assert lanes_cols == [(0, 0), (0, 8), (64, 0), (64, 8)]


@pytest.mark.parametrize(
    "shape, message",
    [
        ((64, 3), "do not group onto shape"),
        ((128, 2), "do not group onto shape"),
        ((2, 32), "left over"),
    ],
)
def test_grouping_errors(shape, message):
    layout = TileLayout(S[(2, 32, 4) : (64, 4, 1)])
    with pytest.raises(ValueError, match=message):
        layout.axis_offsets((0, 0), shape=shape)


def test_unit_factors_group_anywhere():
    layout = TileLayout(S[(1, 8, 1, 16, 1) : (999, 16, 999, 1, 999)])
    for r, c in cells((8, 16)):
        assert layout.memory_offset((r, c), shape=(8, 16)) == 16 * r + c
    assert layout.memory_offset((0, 3, 5), shape=(1, 8, 16)) == 53


def test_coordinate_checks():
    layout = row_major((8, 16))
    with pytest.raises(ValueError, match="outside extent"):
        layout.memory_offset((8, 0))
    with pytest.raises(ValueError, match="rank-2"):
        layout.memory_offset((1,))


def test_core_matrix_memory_offsets():
    # K-major core matrices: 16 groups of 8 rows (256 B apart), two 8x16B core matrices along words.
    layout = TileLayout(S[(16, 8, 2, 4) : (64, 4, 32, 1)])
    for r, w in cells((128, 8)):
        assert (
            layout.memory_offset((r, w), shape=(128, 8))
            == 64 * (r // 8) + 4 * (r % 8) + 32 * (w // 4) + w % 4
        )


# --- index_source ------------------------------------------------------------------------------

_ALLOWED = re.compile(r"^(?:\s|\d+|[A-Za-z_]\w*|\+|\*|//|%|\^|&|>>|<<|\(|\))*$")

LAYOUTS = [
    (row_major((8, 16)), (8, 16)),
    (TileLayout(S[(16, 8, 2, 4) : (64, 4, 32, 1)]), (128, 8)),
    (TileLayout(S[(2, 32, 4) : (0, 4, 1)]), (64, 4)),
    (swizzle(3, (16, 32), "float32"), (16, 32)),
    (swizzle(1, (8, 32), "int8"), (8, 32)),
    (swizzle(2, (8, 64), "float16"), (8, 64)),
    (ComposeLayout(0, 2, 4, row_major((4, 64))), (4, 64)),
]


@pytest.mark.parametrize("layout, shape", LAYOUTS)
def test_index_source_matches_memory_offset(layout, shape):
    names = ["i", "j"]
    source = layout.index_source(names, shape)
    assert _ALLOWED.match(source), source
    code = compile(source, "<index>", "eval")
    for i, j in cells(shape):
        assert eval(code, {"i": i, "j": j}) == layout.memory_offset((i, j), shape)
    # Compound coordinate expressions are parenthesised; literal coordinates fold.
    compound = layout.index_source(["a + 1", "b"], shape)
    for a, b in [(0, 0), (shape[0] - 2, shape[1] - 1)]:
        assert eval(compound, {"a": a, "b": b}) == layout.memory_offset((a + 1, b), shape)
    assert layout.index_source(["1", "3"], shape) == str(layout.memory_offset((1, 3), shape))


def test_index_source_simplifies():
    assert row_major((8, 16)).index_source(["i", "j"]) == "i * 16 + j"
    assert row_major((8, 16)).index_source(["0", "j"]) == "j"
    assert row_major((8, 16)).index_source(["i + 1", "2"]) == "(i + 1) * 16 + 2"
    core = TileLayout(S[(16, 8, 2, 4) : (64, 4, 32, 1)])
    assert (
        core.index_source(["r", "w"], (128, 8)) == "r // 8 * 64 + r % 8 * 4 + w // 4 * 32 + w % 4"
    )
    assert (
        swizzle(3, (64, 32), "float32").index_source(["r", "c"])
        == "(r * 32 + c) ^ ((((r * 32 + c) >> 5) & 7) << 2)"
    )
    assert (
        swizzle(1, (8, 32), "int8").index_source(["r", "c"])
        == "(r * 32 + c) ^ ((((r * 32 + c) >> 7) & 1) << 4)"
    )
    assert ComposeLayout(0, 2, 4, row_major((64,))).index_source(["k"]) == "k ^ ((k >> 4) & 3)"


# --- swizzle / ComposeLayout -------------------------------------------------------------------


def test_compose_formula():
    inner = row_major((8, 64))
    layout = ComposeLayout(1, 2, 3, inner)
    for r, c in cells((8, 64)):
        o = 64 * r + c
        assert layout.memory_offset((r, c)) == o ^ (((o >> 4) & 3) << 1)
    assert layout.shard_shape == (8, 64)


def test_swizzle_builds_compose():
    assert swizzle(0, (8, 16), "float32") == row_major((8, 16))
    assert swizzle(3, (64, 32), "float32") == ComposeLayout(2, 3, 3, row_major((64, 32)))
    assert swizzle(2, (64, 32), "float16") == ComposeLayout(3, 2, 3, row_major((64, 32)))
    assert swizzle(1, (64, 64), "uint8") == ComposeLayout(4, 1, 3, row_major((64, 64)))
    assert swizzle(3, (64, 8), "float64") == ComposeLayout(1, 3, 3, row_major((64, 8)))
    assert swizzle(3, (64, 32), "float32").swizzle_mode == 3


@pytest.mark.parametrize("mode, dtype", [(3, "float4_e2m1fn"), (4, "float32"), (-1, "float32")])
def test_swizzle_errors(mode, dtype):
    with pytest.raises(ValueError):
        swizzle(mode, (8, 16), dtype)


def test_compose_validation():
    with pytest.raises(ValueError, match="memory TileLayout"):
        ComposeLayout(2, 3, 3, TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)]))
    with pytest.raises(ValueError, match="exceeds atom_len"):
        ComposeLayout(2, 3, 2, row_major((8, 8)))


# --- resolve_layout / byte_swizzle_mode --------------------------------------------------------


def test_resolve_layout():
    assert resolve_layout("default", (16, 16), "uint32") == row_major((16, 16))
    assert resolve_layout(None, 16, "uint32") == row_major((16,))
    assert resolve_layout(S[(8, 16) : (16, 1)], (8, 16), "uint32") == row_major((8, 16))
    sw = swizzle(3, (64, 32), "float32")
    assert resolve_layout(sw, (64, 32), "float32") is sw
    assert resolve_layout(sw, (2048,), "float32") is sw  # the factors group onto a flat shape
    with pytest.raises(ValueError, match="2048 elements"):
        resolve_layout(sw, (64, 64), "float32")
    with pytest.raises(ValueError, match="do not group"):
        resolve_layout(TileLayout(S[(2, 32, 4) : (128, 4, 1)]), (16, 16), "float32")
    with pytest.raises(ValueError, match="4-byte elements but the buffer is float16"):
        resolve_layout(sw, (64, 32), "float16")
    with pytest.raises(ValueError, match="unknown layout name"):
        resolve_layout("swizzled", (8, 8), "float32")


def test_byte_swizzle_mode():
    assert byte_swizzle_mode(row_major((8, 16)), "uint32") == 0
    for mode in (1, 2, 3):
        for dtype in ("int8", "float16", "float32", "float64"):
            assert byte_swizzle_mode(swizzle(mode, (64, 64), dtype), dtype) == mode
    with pytest.raises(ValueError, match="no standard"):
        byte_swizzle_mode(swizzle(3, (64, 64), "float16"), "float32")
    with pytest.raises(ValueError, match="no standard"):
        byte_swizzle_mode(ComposeLayout(2, 2, 4, row_major((64, 64))), "float32")
    with pytest.raises(ValueError, match="not a memory layout"):
        byte_swizzle_mode(TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)]), "uint32")
