"""The interpreter's TMA model (jittile/interpreter/tma.py) against expectations computed here
independently: NumPy slicing of padded arrays, the PTX ISA's swizzle tables cell by cell, the ISA's
reduction rules written out, and bit patterns the H200 produced for the same inputs (raw PTX over
cuTensorMapEncodeTiled descriptors).

Coordinates passed to ``tma_load``/``tma_store`` are in PTX order (innermost first); boxes and
slices in the tests' own arithmetic are in NumPy order (outermost first).
"""

import dataclasses
import math
import time

import numpy as np
import pytest

from jittile.dtypes import dtype
from jittile.interpreter.memory import GlobalMemory, MemoryFault, SharedMemory
from jittile.interpreter.tma import (
    TmaFault,
    bfloat16_bits,
    reduce_values,
    round_tf32,
    tma_load,
    tma_store,
)
from jittile.patterns.tma import representation
from jittile.patterns.tma_opcodes import parse_bulk_tensor
from jittile.runtime.tensormap import TensorMapFields

RNG = np.random.default_rng(7)
SENTINEL = 0xAA


def load_op(rank: int, mode: str = "tile"):
    return parse_bulk_tensor(
        f"cp.async.bulk.tensor.{rank}d.shared::cta.global.{mode}.mbarrier::complete_tx::bytes"
    )


def store_op(rank: int, mode: str = "tile"):
    return parse_bulk_tensor(f"cp.async.bulk.tensor.{rank}d.global.shared::cta.{mode}.bulk_group")


def reduce_op(rank: int, redop: str):
    return parse_bulk_tensor(
        f"cp.reduce.async.bulk.tensor.{rank}d.global.shared::cta.{redop}.tile.bulk_group"
    )


def place(memory: GlobalMemory, array: np.ndarray) -> int:
    buffer = memory.allocate("A", array.nbytes)
    memory.write(buffer.address, array)
    return buffer.address


def fetch(memory: GlobalMemory, address: int, like: np.ndarray) -> np.ndarray:
    return memory.read(address, like.nbytes).view(like.dtype).reshape(like.shape).copy()


def tensormap(
    array: np.ndarray,
    address: int,
    box,
    element_strides=None,
    *,
    data_type=None,
    swizzle=0,
    oob_fill=0,
) -> TensorMapFields:
    """The descriptor of a whole C-contiguous array; ``box`` and ``element_strides`` in NumPy
    order (outermost first), stored innermost first as the encoder takes them."""
    element_strides = element_strides or (1,) * array.ndim
    return TensorMapFields(
        data_type or array.dtype.name,
        address,
        array.shape[::-1],
        array.strides[:-1][::-1],
        tuple(box)[::-1],
        tuple(element_strides)[::-1],
        0,
        swizzle,
        0,
        oob_fill,
    )


def shared(size: int = 1 << 16) -> SharedMemory:
    smem = SharedMemory(size, (0, 0, 0))
    smem.data[:] = SENTINEL
    return smem


def image(smem: SharedMemory, address: int, like_dtype, shape) -> np.ndarray:
    nbytes = math.prod(shape) * np.dtype(like_dtype).itemsize
    return smem.data[address : address + nbytes].view(like_dtype).reshape(shape).copy()


def padded_box(a: np.ndarray, starts, box, steps=None, fill=0):
    """The box by slicing a copy of ``a`` padded with ``fill`` on every side (NumPy order)."""
    steps = steps or (1,) * a.ndim
    pads = [b * st + abs(s) for s, b, st in zip(starts, box, steps)]
    big = np.pad(a, [(p, p) for p in pads], constant_values=fill)
    return big[tuple(slice(p + s, p + s + b, st) for p, s, b, st in zip(pads, starts, box, steps))]


def ptx_swizzle(linear: np.ndarray, base: int, mode: int) -> np.ndarray:
    """The PTX ISA's swizzle tables applied cell by cell: in the 128-byte line L of shared memory
    (absolute address // 128, the "swizzle base offset" for a base off the pattern's boundary),
    16-byte cell p holds cell p ^ (L mod 2^mode) of the unswizzled line."""
    out = linear.copy()
    for start in range(0, linear.size, 128):
        phase = ((base + start) // 128) % (1 << mode)
        for p in range(8):
            q = p ^ phase
            out[start + 16 * p : start + 16 * p + 16] = linear[start + 16 * q : start + 16 * q + 16]
    return out


# ------------------------------------------------------------------------------------ loads
def test_in_bounds_box_is_the_slice():
    """A 2-D box inside the tensor lands compact row-major; the payload is the box's bytes."""
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((40, 72)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(16, 32))
    payload = tma_load(fields, load_op(2), (8, 4), None, memory, smem, 256)
    assert payload == 16 * 32 * 4
    np.testing.assert_array_equal(image(smem, 256, np.float32, (16, 32)), a[4:20, 8:40])
    assert np.all(smem.data[:256] == SENTINEL) and np.all(smem.data[256 + 2048 :] == SENTINEL)


@pytest.mark.parametrize("starts", [(1, 1, 2, 3, 8), (2, 3, 4, 5, 16), (-1, 0, -2, 4, -8)])
def test_rank5_box_including_out_of_bounds(starts):
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((3, 4, 5, 6, 24)).astype(np.float32)
    box = (2, 2, 2, 2, 8)
    fields = tensormap(a, place(memory, a), box)
    assert tma_load(fields, load_op(5), starts[::-1], None, memory, smem, 0) == 16 * 8 * 4
    np.testing.assert_array_equal(image(smem, 0, np.float32, box), padded_box(a, starts, box))


def test_box_partly_out_of_bounds_is_zero_filled():
    """Negative coordinates and a box running past the end: outside elements are zeros."""
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((40, 40)).astype(np.float32) + 5
    fields = tensormap(a, place(memory, a), box=(16, 16))
    for starts in ((32, 32), (-4, 30), (-20, -20)):
        tma_load(fields, load_op(2), starts[::-1], None, memory, smem, 0)
        got = image(smem, 0, np.float32, (16, 16))
        np.testing.assert_array_equal(got, padded_box(a, starts, (16, 16)))


def test_oob_fill_nan_is_the_oob_nan_pattern():
    """NaN fill writes the OOB-NaN, 0x7FF7 in every 16 bits (the H200's float32 value
    0x7FF77FF7); inside elements are unchanged."""
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((40, 40)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(16, 16), oob_fill=1)
    tma_load(fields, load_op(2), (32, 32), None, memory, smem, 0)
    got = image(smem, 0, np.float32, (16, 16))
    np.testing.assert_array_equal(got[:8, :8], a[32:, 32:])
    outside = np.ones((16, 16), bool)
    outside[:8, :8] = False
    assert np.all(np.isnan(got[outside]))
    assert np.all(got.view(np.uint32)[outside] == 0x7FF77FF7)


def test_oob_nan_for_16_and_64_bit_formats():
    memory, smem = GlobalMemory(), shared()
    for kind, ones in ((np.float16, 0x3C00), (np.float64, 0x3FF0000000000000)):
        a = np.ones((8, 64 // np.dtype(kind).itemsize), kind)
        fields = tensormap(a, place(memory, a), box=(8, a.shape[1]), oob_fill=1)
        tma_load(fields, load_op(2), (0, 4), None, memory, smem, 0)
        bits = smem.data[:512].view(np.uint16 if kind == np.float16 else np.uint64)
        assert bits[0] == ones and bits[-1] == (
            0x7FF7 if kind == np.float16 else 0x7FF77FF77FF77FF7
        )


def test_element_stride_two_on_the_outer_dimension():
    """Element strides take every s-th element of an outer dimension; the image has ceil(box /
    s) of them. The innermost stride is ignored by the hardware: whole box rows."""
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((64, 128)).astype(np.float32)
    address = place(memory, a)
    fields = tensormap(a, address, box=(15, 64), element_strides=(2, 1))
    assert tma_load(fields, load_op(2), (16, 8), None, memory, smem, 0) == 8 * 64 * 4
    np.testing.assert_array_equal(image(smem, 0, np.float32, (8, 64)), a[8:23:2, 16:80])
    inner = tensormap(a, address, box=(16, 64), element_strides=(2, 2))
    assert tma_load(inner, load_op(2), (16, 8), None, memory, smem, 0) == 8 * 64 * 4
    np.testing.assert_array_equal(image(smem, 0, np.float32, (8, 64)), a[8:24:2, 16:80])


def test_element_strides_past_the_end():
    """A strided element past the tensor's end is out of bounds even when the box start is in."""
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((10, 6, 8)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(8, 5, 8), element_strides=(3, 2, 1))
    tma_load(fields, load_op(3), (0, 2, 4), None, memory, smem, 0)
    expected = padded_box(a, (4, 2, 0), (8, 5, 8), (3, 2, 1))
    np.testing.assert_array_equal(image(smem, 0, np.float32, (3, 3, 8)), expected)


@pytest.mark.parametrize("mode", [1, 2, 3])
@pytest.mark.parametrize("base", [0, 3 * 128])
def test_swizzle_modes(mode, base):
    """Rows of exactly the span (32/64/128 bytes), swizzled by absolute shared address: a base
    off the pattern's period starts at the ISA's non-zero base offset."""
    memory, smem = GlobalMemory(), shared()
    cols = (16 << mode) // 4
    a = RNG.standard_normal((64, 2 * cols)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(24, cols), swizzle=mode)
    assert tma_load(fields, load_op(2), (cols, 8), None, memory, smem, base) == 24 * cols * 4
    linear = np.ascontiguousarray(a[8:32, cols : 2 * cols]).view(np.uint8).reshape(-1)
    got = smem.data[base : base + linear.size]
    np.testing.assert_array_equal(got, ptx_swizzle(linear, base, mode))


def test_swizzled_rows_narrower_than_the_span_land_at_the_span_pitch():
    """A 64-byte inner box under the 128-byte swizzle: each row takes a 128-byte line, its four
    cells permuted in the line, the other four cells untouched (as on the H200)."""
    memory, smem = GlobalMemory(), shared()
    a = np.arange(16 * 16, dtype=np.uint32).reshape(16, 16)
    fields = tensormap(a, place(memory, a), box=(8, 16), swizzle=3)
    assert tma_load(fields, load_op(2), (0, 1), None, memory, smem, 0) == 8 * 64
    lines = smem.data[: 8 * 128].reshape(8, 8, 16)
    for line in range(8):
        for cell in range(8):
            source = cell ^ line
            if source < 4:
                want = a[1 + line, 4 * source : 4 * source + 4].view(np.uint8)
                np.testing.assert_array_equal(lines[line, cell], want)
            else:
                assert np.all(lines[line, cell] == SENTINEL)


@pytest.mark.parametrize("interleave", [1, 2])
def test_interleave_channel_slices(interleave):
    """(N, C_slices, W, Ci) uint16 with Ci one 16- or 32-byte slice: the descriptor is (W,
    C_slices, N) innermost first, each W position one slice; one C slice per issue. 32-byte
    interleave goes with the 32-byte swizzle."""
    memory, smem = GlobalMemory(), shared()
    ci = 8 * interleave
    slice_bytes = 2 * ci
    a = RNG.integers(0, 2**16, size=(2, 3, 8, ci), dtype=np.uint16)
    swizzle = 1 if interleave == 2 else 0
    fields = TensorMapFields(
        "uint16",
        place(memory, a),
        (8, 3, 2),
        (8 * slice_bytes, 3 * 8 * slice_bytes),
        (8, 1, 1),
        (1, 1, 1),
        interleave,
        swizzle,
        0,
        0,
    )
    op = load_op(3)
    assert tma_load(fields, op, (0, 2, 1), None, memory, smem, 0) == 8 * slice_bytes
    linear = np.ascontiguousarray(a[1, 2]).view(np.uint8).reshape(-1)
    want = ptx_swizzle(linear, 0, swizzle) if swizzle else linear
    np.testing.assert_array_equal(smem.data[: linear.size], want)
    wide_c = dataclasses.replace(fields, box=(8, 2, 1))  # still one C slice per issue
    smem.data[:] = SENTINEL
    assert tma_load(wide_c, op, (0, 2, 1), None, memory, smem, 0) == 8 * slice_bytes
    np.testing.assert_array_equal(smem.data[: linear.size], want)
    assert np.all(smem.data[linear.size :] == SENTINEL)
    # W 4..11 of slice 1: the last four slices are past the end, zero filled
    tma_load(fields, op, (4, 1, 0), None, memory, smem, 0)
    linear = np.zeros((8, ci), np.uint16)
    linear[:4] = a[0, 1, 4:8]
    linear = linear.view(np.uint8).reshape(-1)
    want = ptx_swizzle(linear, 0, swizzle) if swizzle else linear
    np.testing.assert_array_equal(smem.data[: linear.size], want)


def test_gather4_rows():
    """.tile::gather4: four rows of box[0] elements starting at one column; a row or column
    outside the tensor is zero filled."""
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((40, 64)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(1, 32))
    rows = (5, 39, 41, -2)
    assert (
        tma_load(fields, load_op(2, "tile::gather4"), (40,), rows, memory, smem, 128) == 4 * 32 * 4
    )
    want = np.zeros((4, 32), np.float32)
    want[0, :24] = a[5, 40:]
    want[1, :24] = a[39, 40:]
    np.testing.assert_array_equal(image(smem, 128, np.float32, (4, 32)), want)


def test_tf32_loads_round_to_nearest_even():
    """A tf32 descriptor rounds float32 to 10 mantissa bits, ties to even; NaNs become
    0x7FFFE000 (inputs and outputs as the H200 loaded them)."""
    given = [
        0x3F800FFF,
        0x3F801000,
        0x3F803000,
        0x3F801001,
        0x3F800001,
        0x7F800000,
        0x7FC00001,
        0x7F800001,
        0x00000FFF,
        0x00001000,
        0x00003000,
        0x807FFFFF,
        0x7F7FF000,
        0x7F7FFFFF,
        0xBF801800,
        0x3F81F000,
        0xFFC00001,
        0xFF800001,
        0x80001000,
        0x80003000,
        0xFF7FF000,
        0,
        0,
        0,
    ]
    loaded = [
        0x3F800000,
        0x3F800000,
        0x3F804000,
        0x3F802000,
        0x3F800000,
        0x7F800000,
        0x7FFFE000,
        0x7FFFE000,
        0x00000000,
        0x00000000,
        0x00004000,
        0x80800000,
        0x7F800000,
        0x7F800000,
        0xBF802000,
        0x3F820000,
        0x7FFFE000,
        0x7FFFE000,
        0x80000000,
        0x80004000,
        0xFF800000,
        0,
        0,
        0,
    ]
    memory, smem = GlobalMemory(), shared()
    a = np.array(given, np.uint32).reshape(3, 8)
    fields = tensormap(a, place(memory, a), box=(3, 8), data_type="tf32")
    tma_load(fields, load_op(2), (0, 0), None, memory, smem, 0)
    np.testing.assert_array_equal(image(smem, 0, np.uint32, (24,)), np.array(loaded, np.uint32))
    np.testing.assert_array_equal(round_tf32(np.array(given, np.uint32)), loaded)


def test_packed_fp4_groups_land_in_the_low_half_of_16_byte_blocks():
    """16U4_ALIGN16B: each 8 bytes of packed values (sixteen FP4) fill the low half of a 16-byte
    shared block; the high half is the ISA's uninitialised padding (left as it was). The inner
    dimension counts 4-bit values; the payload is the global bytes."""
    memory, smem = GlobalMemory(), shared()
    a = RNG.integers(0, 256, size=(4, 128), dtype=np.uint8)  # 4 rows of 256 FP4 values
    fields = TensorMapFields(
        "float4_e2m1fn", place(memory, a), (256, 4), (128,), (128, 2), (1, 1), 0, 0, 0, 0
    )
    assert tma_load(fields, load_op(2), (128, 1), None, memory, smem, 0) == 2 * 64
    blocks = smem.data[: 2 * 128].reshape(2, 8, 16)
    np.testing.assert_array_equal(blocks[:, :, :8], a[1:3, 64:128].reshape(2, 8, 8))
    assert np.all(blocks[:, :, 8:] == SENTINEL)
    with pytest.raises(TmaFault, match="multiple of 128"):
        tma_load(fields, load_op(2), (64, 1), None, memory, smem, 0)


def test_payload_is_the_contracts_representation():
    """What complete_tx adds equals patterns/tma.py's payload for the same descriptor."""
    memory, smem = GlobalMemory(), shared(1 << 18)
    a = np.zeros((4, 6, 8, 64), np.float32)
    address = place(memory, a)
    cases = [((2, 3, 4, 64), (1, 1, 1, 1)), ((4, 5, 7, 32), (2, 3, 4, 1)), ((1, 1, 1, 4), None)]
    for box, strides in cases:
        fields = tensormap(a, address, box, strides)
        got = tma_load(fields, load_op(4), (0, 0, 0, 0), None, memory, smem, 0)
        want = representation(
            load_op(4), None, dtype("float32"), "float32", box, strides or (1,) * 4, 0
        ).payload_bytes
        assert got == want
    il = TensorMapFields("uint16", address, (8, 3, 2), (256, 768), (8, 1, 1), (1, 1, 1), 2, 1, 0, 0)
    assert (
        tma_load(il, load_op(3), (0, 0, 0), None, memory, smem, 0)
        == representation(
            load_op(3), None, dtype("uint16"), "uint16", (1, 1, 8), (1, 1, 1), 2
        ).payload_bytes
    )
    gather = TensorMapFields("float32", address, (64, 192), (256,), (32, 1), (1, 1), 0, 0, 0, 0)
    op = load_op(2, "tile::gather4")
    assert (
        tma_load(gather, op, (0,), (0, 1, 2, 3), memory, smem, 0)
        == representation(op, None, dtype("float32"), "float32", (1, 32), (1, 1), 0).payload_bytes
    )
    packed = TensorMapFields(
        "float4_e2m1fn", address, (512, 48), (256,), (128, 8), (1, 1), 0, 3, 0, 0
    )
    assert (
        tma_load(packed, load_op(2), (0, 0), None, memory, smem, 0)
        == representation(
            load_op(2), None, dtype("uint8"), "float4_e2m1fn", (8, 128), (1, 1), 0
        ).payload_bytes
    )


def test_a_64x64_box_is_fast():
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((128, 128)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(64, 64))
    start = time.perf_counter()
    for _ in range(20):
        tma_load(fields, load_op(2), (32, 32), None, memory, smem, 0)
    assert (time.perf_counter() - start) / 20 < 0.01


# ----------------------------------------------------------------------------------- stores
def test_store_round_trip_through_a_swizzled_image():
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((64, 64)).astype(np.float32)
    out = np.full_like(a, -1.0)
    fields = tensormap(a, place(memory, a), box=(16, 32), swizzle=3)
    out_address = place(memory, out)
    out_fields = tensormap(out, out_address, box=(16, 32), swizzle=3)
    tma_load(fields, load_op(2), (32, 8), None, memory, smem, 1024)
    assert tma_store(out_fields, store_op(2), (32, 8), None, memory, smem, 1024) is None
    want = out.copy()
    want[8:24, 32:64] = a[8:24, 32:64]
    np.testing.assert_array_equal(fetch(memory, out_address, out), want)


def test_store_past_the_end_writes_only_inside_elements():
    memory, smem = GlobalMemory(), shared()
    out = np.full((16, 16), -1, np.int32)
    address = place(memory, out)
    smem.data[:1024] = np.arange(256, dtype=np.int32).view(np.uint8)
    tma_store(tensormap(out, address, box=(16, 16)), store_op(2), (8, 8), None, memory, smem, 0)
    want = out.copy()
    want[8:, 8:] = np.arange(256).reshape(16, 16)[:8, :8]
    np.testing.assert_array_equal(fetch(memory, address, out), want)


def test_scatter4_rows():
    memory, smem = GlobalMemory(), shared()
    out = np.zeros((12, 48), np.float32)
    address = place(memory, out)
    rows = RNG.standard_normal((4, 32)).astype(np.float32)
    smem.data[:512] = rows.view(np.uint8).reshape(-1)
    fields = tensormap(out, address, box=(1, 32))
    tma_store(fields, store_op(2, "tile::scatter4"), (8,), (1, 7, 3, 9), memory, smem, 0)
    want = out.copy()
    want[[1, 7, 3, 9], 8:40] = rows
    np.testing.assert_array_equal(fetch(memory, address, out), want)


def test_tf32_stores_move_bits_unchanged():
    memory, smem = GlobalMemory(), shared()
    bits = np.array([0x3F801000, 0x3F803000, 0x7FC00001, 0x3F800FFF], np.uint32)
    out = np.zeros((1, 4), np.uint32)
    address = place(memory, out)
    smem.data[:16] = bits.view(np.uint8)
    tma_store(
        tensormap(out, address, (1, 4), data_type="tf32"),
        store_op(2),
        (0, 0),
        None,
        memory,
        smem,
        0,
    )
    np.testing.assert_array_equal(fetch(memory, address, out)[0], bits)


# ------------------------------------------------------------------------------- reductions
def _ptx_reference(op: str, before: np.ndarray, src: np.ndarray) -> np.ndarray:
    """The PTX ISA's red/atom rules, element by element on Python integers / float32."""
    kind = before.dtype
    if kind.kind == "f":
        return (before + src).astype(kind)
    bits = kind.itemsize * 8
    out = []
    for old, value in zip(before.ravel().tolist(), src.ravel().tolist()):
        if op == "add":
            result = old + value
        elif op == "min":
            result = min(old, value)
        elif op == "max":
            result = max(old, value)
        elif op == "inc":
            result = 0 if old >= value else old + 1
        elif op == "dec":
            result = value if old == 0 or old > value else old - 1
        else:
            u_old, u_value = old % 2**bits, value % 2**bits
            result = {"and": u_old & u_value, "or": u_old | u_value, "xor": u_old ^ u_value}[op]
        out.append(result % 2**bits)  # wrap, then reinterpret
    return np.array(out, np.uint64).astype(f"uint{bits}").view(kind).reshape(before.shape)


REDUCTION_CASES = [
    ("add", "uint32"),
    ("add", "int32"),
    ("add", "float32"),
    ("min", "uint32"),
    ("min", "int32"),
    ("max", "uint32"),
    ("max", "int32"),
    ("inc", "uint32"),
    ("dec", "uint32"),
    ("and", "uint32"),
    ("and", "int32"),
    ("or", "uint32"),
    ("or", "int32"),
    ("xor", "uint32"),
    ("xor", "int32"),
]


@pytest.mark.parametrize("op, kind", REDUCTION_CASES)
def test_reduction(op, kind):
    """Reduce an (8, 32) shared tile into rows 4..11 of a (16, 32) tensor."""
    memory, smem = GlobalMemory(), shared()
    if op in ("inc", "dec"):
        before = RNG.integers(0, 10, size=(16, 32)).astype(kind)
        src = RNG.integers(0, 8, size=(8, 32)).astype(kind)
        before[4, :3] = (0, 5, 7)  # dec at 0; inc/dec at old == src; old > src
        src[0, :3] = (3, 5, 2)
    elif kind == "float32":
        before = RNG.standard_normal((16, 32)).astype(kind)
        src = RNG.standard_normal((8, 32)).astype(kind)
    else:
        info = np.iinfo(kind)
        before = RNG.integers(info.min, info.max, size=(16, 32), endpoint=True).astype(kind)
        src = RNG.integers(info.min, info.max, size=(8, 32), endpoint=True).astype(kind)
        before[4, 0], src[0, 0] = info.max, info.max  # add wraps
    address = place(memory, before)
    smem.data[: src.nbytes] = src.view(np.uint8).reshape(-1)
    fields = tensormap(before, address, box=(8, 32))
    tma_store(fields, reduce_op(2, op), (0, 4), None, memory, smem, 0)
    want = before.copy()
    want[4:12] = _ptx_reference(op, before[4:12], src)
    np.testing.assert_array_equal(fetch(memory, address, before), want)


# Bit patterns the H200 produced for cp.reduce.async.bulk.tensor (and cp.reduce.async.bulk)
# on these operands: subnormals kept, ties to even, -0 < +0 for min/max, a NaN operand of
# min/max ignored, canonical NaNs.
F16_OLD = [
    0x0001,
    0x7BFF,
    0x7E01,
    0x3C00,
    0x8000,
    0x0000,
    0x3C00,
    0x7E01,
    0xFC00,
    0x3C01,
    0x0001,
    0x8001,
]
F16_SRC = [
    0x0001,
    0x7BFF,
    0x3C00,
    0x3C00,
    0x0000,
    0x8000,
    0x7E02,
    0x7E01,
    0x7C00,
    0x3C00,
    0x0001,
    0x0001,
]
BF16_OLD = [
    0x0001,
    0x7F7F,
    0x7FC1,
    0x3F80,
    0x8000,
    0x0000,
    0x3F80,
    0x7FC1,
    0xFF80,
    0x3F81,
    0x0001,
    0x8001,
]
BF16_SRC = [
    0x0001,
    0x7F7F,
    0x3F80,
    0x3F80,
    0x0000,
    0x8000,
    0x7FC2,
    0x7FC1,
    0x7F80,
    0x3F80,
    0x0001,
    0x0001,
]
H200_HALF = {
    ("add", "float16"): [
        0x0002,
        0x7C00,
        0x7FFF,
        0x4000,
        0x0000,
        0x0000,
        0x7FFF,
        0x7FFF,
        0x7FFF,
        0x4000,
        0x0002,
        0x0000,
    ],
    ("min", "float16"): [
        0x0001,
        0x7BFF,
        0x3C00,
        0x3C00,
        0x8000,
        0x8000,
        0x3C00,
        0x7FFF,
        0xFC00,
        0x3C00,
        0x0001,
        0x8001,
    ],
    ("max", "float16"): [
        0x0001,
        0x7BFF,
        0x3C00,
        0x3C00,
        0x0000,
        0x0000,
        0x3C00,
        0x7FFF,
        0x7C00,
        0x3C01,
        0x0001,
        0x0001,
    ],
    ("add", "bfloat16"): [
        0x0002,
        0x7F80,
        0x7FFF,
        0x4000,
        0x0000,
        0x0000,
        0x7FFF,
        0x7FFF,
        0x7FFF,
        0x4000,
        0x0002,
        0x0000,
    ],
    ("min", "bfloat16"): [
        0x0001,
        0x7F7F,
        0x3F80,
        0x3F80,
        0x8000,
        0x8000,
        0x3F80,
        0x7FFF,
        0xFF80,
        0x3F80,
        0x0001,
        0x8001,
    ],
    ("max", "bfloat16"): [
        0x0001,
        0x7F7F,
        0x3F80,
        0x3F80,
        0x0000,
        0x0000,
        0x3F80,
        0x7FFF,
        0x7F80,
        0x3F81,
        0x0001,
        0x0001,
    ],
}


@pytest.mark.parametrize("op, kind", sorted(H200_HALF))
def test_half_reductions_match_the_h200(op, kind):
    old, src = (F16_OLD, F16_SRC) if kind == "float16" else (BF16_OLD, BF16_SRC)
    memory, smem = GlobalMemory(), shared()
    before = np.array(old + [0] * 4, np.uint16).reshape(1, 16)
    address = place(memory, before)
    smem.data[:32] = np.array(src + [0] * 4, np.uint16).view(np.uint8)
    tma_store(
        tensormap(before, address, (1, 16), data_type=kind),
        reduce_op(2, op),
        (0, 0),
        None,
        memory,
        smem,
        0,
    )
    np.testing.assert_array_equal(fetch(memory, address, before)[0, :12], H200_HALF[op, kind])


def test_float32_and_float64_additions_match_the_h200():
    old = np.array(
        [
            0x00000001,
            0x00400000,
            0x3F800000,
            0x80000000,
            0x7FC00001,
            0x7F800000,
            0x00800000,
            0x80000000,
        ],
        np.uint32,
    )
    src = np.array(
        [
            0x00000001,
            0x00400000,
            0x00000001,
            0x00000000,
            0x3F800000,
            0xFF800000,
            0x80400000,
            0x80000000,
        ],
        np.uint32,
    )
    want = [
        0x00000002,
        0x00800000,
        0x3F800000,
        0x00000000,
        0x7FFFFFFF,
        0x7FFFFFFF,
        0x00400000,
        0x80000000,
    ]
    got = reduce_values("add", "f32", old.view(np.uint8), src.view(np.uint8)).view(np.uint32)
    np.testing.assert_array_equal(got, want)
    old = np.array([1, 0x7FF8000000000001, 0x7FF0000000000000, 0x8000000000000000], np.uint64)
    src = np.array([1, 0x3FF0000000000000, 0xFFF0000000000000, 0x8000000000000000], np.uint64)
    want = [2, 0x7FF8000000000001, 0xFFF8000000000000, 0x8000000000000000]
    got = reduce_values("add", "f64", old.view(np.uint8), src.view(np.uint8)).view(np.uint64)
    np.testing.assert_array_equal(got, want)


def test_bfloat16_rounding_from_float32():
    """Ties to even on the 16 dropped bits, overflow to infinity, NaN -> 0x7FFF."""
    given = np.array(
        [
            0x3F808000,
            0x3F818000,
            0x3F808001,
            0x3F807FFF,
            0x7F7FFFFF,
            0x7FC00001,
            0x80000000,
            0x00008000,
            0x00018000,
            0xFF7F8000,
        ],
        np.uint32,
    )
    want = [0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x7F80, 0x7FFF, 0x8000, 0x0000, 0x0002, 0xFF80]
    np.testing.assert_array_equal(bfloat16_bits(given.view(np.float32)), want)


# ----------------------------------------------------------------------------------- faults
def test_shared_destination_out_of_range_faults_and_writes_nothing():
    memory, smem = GlobalMemory(), shared(8192)
    a = RNG.standard_normal((64, 32)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(32, 32))
    with pytest.raises(TmaFault, match="outside CTA"):
        tma_load(fields, load_op(2), (0, 0), None, memory, smem, 4096 + 128)
    assert np.all(smem.data == SENTINEL)


def test_misaligned_shared_address_faults():
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((32, 32)).astype(np.float32)
    fields = tensormap(a, place(memory, a), box=(8, 32))
    for op in (load_op(2), store_op(2)):
        call = tma_load if op.kind == "load" else tma_store
        with pytest.raises(TmaFault, match="128-byte aligned"):
            call(fields, op, (0, 0), None, memory, smem, 64)


def test_negative_store_and_reduction_coordinates_fault():
    memory, smem = GlobalMemory(), shared()
    out = np.zeros((16, 16), np.uint32)
    address = place(memory, out)
    fields = tensormap(out, address, box=(8, 8))
    for op in (store_op(2), reduce_op(2, "add")):
        with pytest.raises(TmaFault, match="non-negative"):
            tma_store(fields, op, (-8, 0), None, memory, smem, 0)
    np.testing.assert_array_equal(fetch(memory, address, out), 0)


def test_reduction_the_hardware_does_not_define_faults():
    memory, smem = GlobalMemory(), shared()
    out = np.zeros((16, 16), np.float32)
    fields = tensormap(out, place(memory, out), box=(8, 8))
    with pytest.raises(TmaFault, match="not defined for a float32"):
        tma_store(fields, reduce_op(2, "min"), (0, 0), None, memory, smem, 0)


def test_a_descriptor_beyond_its_allocation_is_a_memory_fault():
    memory, smem = GlobalMemory(), shared()
    a = RNG.standard_normal((32, 32)).astype(np.float32)
    fields = TensorMapFields(
        "float32", place(memory, a), (32, 64), (128,), (32, 8), (1, 1), 0, 0, 0, 0
    )
    tma_load(fields, load_op(2), (0, 24), None, memory, smem, 0)
    with pytest.raises(MemoryFault):
        tma_load(fields, load_op(2), (0, 40), None, memory, smem, 0)
