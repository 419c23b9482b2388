"""The interpreter's whole-array maps against the per-element rules they replace: a wgmma
operand's element-to-byte map against ``walk_address`` element by element, a fragment's
register-to-element map against ``FragmentLayout.element`` register by register, the operand
decoders against ml_dtypes, and the scalar bf16x2 conversion against the array rounding."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jittile.fragment import A_TYPES, ACCUMULATOR_TYPES, wgmma_a, wgmma_accumulator
from jittile.interpreter.instructions import _cvt_packed
from jittile.interpreter.operand_maps import fragment_elements, matrix_addresses
from jittile.interpreter.tma import bfloat16_bits
from jittile.interpreter.wgmma import _decode, _pack, _unpack
from jittile.patterns.matrix_descriptors import MatrixWalk, walk_address

ml_dtypes = pytest.importorskip("ml_dtypes")

_SIXTEENS = st.integers(0, (1 << 14) - 1).map(lambda v: v << 4)  # a 14-bit descriptor field


@settings(max_examples=300, deadline=None)
@given(
    major=st.sampled_from(["K", "MN"]),
    swizzle=st.integers(0, 3),
    origin=_SIXTEENS,
    lbo=_SIXTEENS,
    sbo=_SIXTEENS,
    element_bytes=st.sampled_from([1, 2, 4]),
    mn=st.integers(1, 72),
    k=st.integers(1, 40),
)
def test_matrix_map_is_the_walk_element_by_element(
    major, swizzle, origin, lbo, sbo, element_bytes, mn, k
):
    walk = MatrixWalk(major, swizzle, origin, lbo, sbo)
    addresses = matrix_addresses(walk, mn, k, element_bytes)
    assert addresses.shape == (mn, k) and addresses.dtype == np.int64
    expected = [[walk_address(walk, r, c, element_bytes) for c in range(k)] for r in range(mn)]
    assert addresses.tolist() == expected
    assert not addresses.flags.writeable  # shared by every instruction with these fields


@pytest.mark.parametrize(
    "layout, dtype",
    [(wgmma_accumulator, t) for t in ACCUMULATOR_TYPES] + [(wgmma_a, t) for t in A_TYPES],
)
@pytest.mark.parametrize("extent", [8, 32, 96, 256])
def test_fragment_map_is_the_layout_register_by_register(layout, dtype, extent):
    shape = (64, extent)
    if layout.problem(shape, dtype):
        pytest.skip(layout.problem(shape, dtype))
    count = layout.registers(shape, dtype)
    rows, columns = fragment_elements(layout, count, dtype)
    assert rows.shape == columns.shape == (128, count)
    for thread in range(128):
        for register in range(count):
            assert (rows[thread, register], columns[thread, register]) == layout.element(
                register, thread, dtype
            )


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # signalling NaNs
@pytest.mark.parametrize(
    "dtype", ["float8_e4m3fn", "float8_e5m2", "bfloat16", "float16", "int8", "uint8"]
)
def test_operand_decoding_matches_ml_dtypes(dtype):
    width = 1 if "8" in dtype else 2
    raw = np.arange(256**width, dtype=f"uint{8 * width}").view(np.uint8).reshape(-1, width)
    reference = np.dtype(getattr(ml_dtypes, dtype, dtype))
    expected = raw.copy().view(reference).astype(np.float64)
    got = _decode(raw, dtype)
    np.testing.assert_array_equal(got, expected)  # NaNs compare equal here


def test_tf32_operands_drop_the_low_mantissa_bits():
    raw = np.array([0x3F800001, 0x3F801FFF, 0x3F802000], dtype=np.uint32)
    got = _decode(raw.view(np.uint8).reshape(-1, 4), "tf32")[:, 0]
    assert got.tolist() == [1.0, 1.0, 1.0 + 2.0**-10]


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")  # signalling NaNs
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=8, max_size=8))
def test_register_words_unpack_and_pack_back(words):
    values = _unpack([words[:4], words[4:]], "float16")  # (lanes, registers, 2 halves)
    halves = np.array(words, dtype=np.uint32).view(np.uint16).reshape(2, 4, 2)
    np.testing.assert_array_equal(values, halves.view(np.float16).astype(np.float64))
    finite = np.isfinite(values).all(axis=-1)
    packed = np.array(_pack(values, "float16"))
    assert (packed[finite] == np.array(words).reshape(2, 4)[finite]).all()
    signed = _unpack([words], "int32")[0, :, 0]
    assert signed.tolist() == [w - (1 << 32) if w >> 31 else w for w in words]


_FLOAT32_BITS = st.one_of(
    st.integers(0, 2**32 - 1),
    st.sampled_from(
        [
            0x7F800000,
            0xFF800000,
            0x7FC00000,
            0xFFFFFFFF,
            0x7F7FFFFF,
            0x80000000,
            0x00000001,
            0x3F808000,
            0x3F818000,
            0x7F7F8000,
        ]
    ),
)


@settings(max_examples=500, deadline=None)
@given(hi=_FLOAT32_BITS, lo=_FLOAT32_BITS, relu=st.booleans())
def test_scalar_bf16x2_conversion_is_the_array_rounding(hi, lo, relu):
    halves = np.array([hi, lo], dtype=np.uint32).view(np.float32)
    opcode = "cvt.rn.relu.bf16x2.f32" if relu else "cvt.rn.bf16x2.f32"
    got = _cvt_packed(None, None, opcode, list(halves), "cvt")
    if relu:
        halves = np.where(halves < 0, np.float32(0), halves)
    expected = bfloat16_bits(halves)
    assert got == int(expected[0]) << 16 | int(expected[1])
    finite = ~np.isnan(halves)
    reference = halves.astype(ml_dtypes.bfloat16).view(np.uint16)  # round to nearest even
    assert (np.array([got >> 16, got & 0xFFFF])[finite] == reference[finite]).all()
