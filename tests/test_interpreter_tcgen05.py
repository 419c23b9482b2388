"""tcgen05.cp on the interpreter, every shape x cta_group::1 x swizzle mode, with and without
decompression, read back by tcgen05.ld and compared with a NumPy reference written from the PTX
ISA's description of each shape (rows to lanes, replicas) and decompression format: the
interpreter decodes the descriptor bits the compiler encoded, so this checks the encoder too."""

import numpy as np
import pytest

import jittile
from jittile import T
from jittile.axis import TCol, TLane
from jittile.layout import R, S, TileLayout, swizzle

# Per shape: rows and b32 words of one atom, and the TMEM layout stating its lanes and replicas.
SHAPES = {
    "128x256b": (128, 8, S[(128, 8) : (1 @ TLane, 1 @ TCol)]),
    "4x256b": (4, 8, S[(4, 8) : (32 @ TLane, 1 @ TCol)]),
    "128x128b": (128, 4, S[(128, 4) : (1 @ TLane, 1 @ TCol)]),
    "64x128b.warpx2::02_13": (64, 4, S[(64, 4) : (1 @ TLane, 1 @ TCol)] + R[2 : 64 @ TLane]),
    "64x128b.warpx2::01_23": (
        64,
        4,
        S[(2, 32, 4) : (64 @ TLane, 1 @ TLane, 1 @ TCol)] + R[2 : 32 @ TLane],
    ),
    "32x128b.warpx4": (32, 4, S[(32, 4) : (1 @ TLane, 1 @ TCol)] + R[4 : 32 @ TLane]),
}
SPAN_WORDS = {1: 8, 2: 16, 3: 32}  # 32/64/128-byte swizzle rows in b32 words


def lanes_of(shape: str, row: int) -> list[int]:
    """PTX ISA, tcgen05.cp shapes: the TMEM lanes row ``row`` of the source lands in (the data
    path layout, then the warpx2/warpx4 multicast copies)."""
    if shape == "4x256b":
        return [32 * row]
    if shape == "64x128b.warpx2::02_13":  # warps 0,2 and 1,3 receive the same 64 rows
        return [row, row + 64]
    if shape == "64x128b.warpx2::01_23":  # rows 0-31 to warps 0 and 1, rows 32-63 to 2 and 3
        base = row if row < 32 else row + 32
        return [base, base + 32]
    if shape == "32x128b.warpx4":
        return [row + 32 * w for w in range(4)]
    return [row]


def expand(row: np.ndarray, decompress: str) -> np.ndarray:
    """PTX ISA decompression of one row of 16-byte source chunks: b4x16_p64 = sixteen 4-bit values
    then 8 padding bytes, b6x16_p32 = sixteen 6-bit values then 4 padding bytes; each value
    becomes one byte in the destination, the 4-bit one at bits 5..2, the 6-bit one at 6..1."""
    if not decompress:
        return row
    out = []
    for chunk in row.view(np.uint8).reshape(-1, 16):
        bits = int.from_bytes(chunk.tobytes(), "little")
        width, shift = (4, 2) if "b4x16" in decompress else (6, 1)
        out += [((bits >> (width * i)) & ((1 << width) - 1)) << shift for i in range(16)]
    return np.array(out, dtype=np.uint8).view(np.uint32)


def form(shape: str, mode: int, decompress: str):
    rows, words, tlayout = SHAPES[shape]
    buffer_rows = max(rows, 8)
    width = SPAN_WORDS.get(mode, words)
    if mode:
        slayout = swizzle(mode, (buffer_rows, width), "uint32")
    elif words == 8:  # 32-byte rows: the canonical layout keeps each 16-byte column of core
        # matrices contiguous (8 rows x 16 B), the two columns one block of rows apart
        slayout = TileLayout(S[(buffer_rows, 2, 4) : (4, 4 * buffer_rows, 1)])
    else:
        slayout = "default"
    align = {0: 16, 1: 256, 2: 512, 3: 1024}[mode]
    opcode = f"tcgen05.cp.cta_group::1.{shape}{decompress}"
    layout = TileLayout(tlayout)

    @jittile.kernel(target="sm_100a")
    def copy(A: T.Tensor((buffer_rows, width), "uint32"), Out: T.Tensor((128, words), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        warp = T.cuda.warp_id()
        shared = T.alloc_shared((buffer_rows, width), "uint32", layout=slayout, align=align)
        address = T.alloc_shared((1,), "uint32", layout="default")
        mbar = T.alloc_shared((1,), "uint64", layout="default")
        if warp == 0:
            T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(
                T.address_of(address), T.uint32(32)
            )
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        if tid < buffer_rows:
            for j in range(width):
                shared[tid, j] = A[tid, j]
        T.cuda.cta_sync()
        T.ptx.fence.proxy.async_.shared__cta()
        mem = T.cuda.decl_tmem(
            address[0], ty_args=[T.Tensor((rows, words), "uint32", scope="tmem", layout=layout)]
        )
        if tid == 0:
            T.cuda.tile.apply(T.ptx[opcode], mem, shared[0:rows, 0:words])
            T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.shared__cluster.b64(
                mbar.ptr_to([0])
            )
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        T.ptx.tcgen05.fence__after_thread_sync()
        word = T.alloc_local((1,), "uint32", layout="default")
        for j in range(words):
            T.ptx["tcgen05.ld.sync.aligned.32x32b.x1.b32"](word[0], address[0] + T.uint32(j))
            T.ptx.tcgen05.wait__ld.sync.aligned()
            Out[tid, j] = word[0]
        T.cuda.cta_sync()
        if warp == 0:
            T.ptx.tcgen05.relinquish_alloc_permit.cta_group__1.sync.aligned()
            T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(address[0], T.uint32(32))

    return copy, buffer_rows, width, rows, words


CASES = [
    (s, m, d)
    for s in SHAPES
    for m in (0, 1, 2, 3)
    for d in ("", ".b8x16.b4x16_p64", ".b8x16.b6x16_p32")
]


@pytest.mark.parametrize(
    "shape, mode, decompress", CASES, ids=[f"{s}-sw{m}{d or '-plain'}" for s, m, d in CASES]
)
def test_copy_and_readback_match_the_isa(shape, mode, decompress):
    kernel, buffer_rows, width, rows, words = form(shape, mode, decompress)
    rng = np.random.default_rng(hash((shape, mode, decompress)) % 2**32)
    a = rng.integers(0, 2**32, size=(buffer_rows, width), dtype=np.uint32)
    out = np.full((128, words), 0xDEADBEEF, dtype=np.uint32)
    kernel.interpret(a, out)
    expected = np.zeros((128, words), dtype=np.uint32)
    for row in range(rows):
        for lane in lanes_of(shape, row):
            expected[lane] = expand(a[row, :words], decompress)[:words]
    np.testing.assert_array_equal(out, expected)
