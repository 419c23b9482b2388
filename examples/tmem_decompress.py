"""The seed's readback example with native FP4 decompression: tcgen05.cp...128x128b.b8x16.b4x16_p64.

The kernel is the "one 128x128b copy and readback" example with the opcode explicitly replaced, as
the specification describes. The b32 footprint is unchanged; each 16-byte shared block holds sixteen
packed 4-bit values (8 bytes) followed by 8 bytes of padding, and TMEM receives sixteen expanded
bytes, each value shifted left by two (two low zero bits). The reference compares the expanded
values, not the original words or padding. No Blackwell GPU is needed to compile it: ``main()``
compiles for sm_100a, prints the plan and the UTCCP count, and launches only on compute capability
>= 10.
"""

import numpy as np

import jittile
from jittile import T
from jittile.axis import TCol, TLane
from jittile.layout import S, TileLayout

tmem_layout = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])


@jittile.kernel(target="sm_100a")
def decompress_to_tmem(A: T.Tensor((128, 4), "uint32"), Out: T.Tensor((128, 4), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    warp = T.cuda.warp_id()
    shared = T.alloc_shared((128, 4), "uint32", layout="default", align=16)
    address = T.alloc_shared((1,), "uint32", layout="default")
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    if warp == 0:
        T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(
            T.address_of(address), T.uint32(32)
        )
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    for j in range(4):
        shared[tid, j] = A[tid, j]
    T.cuda.cta_sync()
    T.ptx.fence.proxy.async_.shared__cta()
    mem = T.cuda.decl_tmem(
        address[0], ty_args=[T.Tensor((128, 4), "uint32", scope="tmem", layout=tmem_layout)]
    )
    if tid == 0:
        T.cuda.tile.apply(
            T.ptx["tcgen05.cp.cta_group::1.128x128b.b8x16.b4x16_p64"],
            mem,
            shared,
        )
        T.ptx.tcgen05.commit.cta_group__1.mbarrier__arrive__one.shared__cluster.b64(
            mbar.ptr_to([0])
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    T.ptx.tcgen05.fence__after_thread_sync()
    word = T.alloc_local((1,), "uint32", layout="default")
    for j in range(4):
        T.ptx["tcgen05.ld.sync.aligned.32x32b.x1.b32"](word[0], address[0] + T.uint32(j))
        T.ptx.tcgen05.wait__ld.sync.aligned()
        Out[tid, j] = word[0]
    T.cuda.cta_sync()
    if warp == 0:
        T.ptx.tcgen05.relinquish_alloc_permit.cta_group__1.sync.aligned()
        T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(address[0], T.uint32(32))


def pack_fp4(values: np.ndarray) -> np.ndarray:
    """(128, 16) 4-bit codes -> (128, 4) uint32 words in the b4x16_p64 format: per row one 16-byte
    block, sixteen nibbles (value 2i in the low nibble of byte i) then eight padding bytes."""
    nibbles = values.astype(np.uint8) & 0xF
    packed = nibbles[:, 0::2] | (nibbles[:, 1::2] << 4)  # (128, 8) bytes
    block = np.zeros((values.shape[0], 16), dtype=np.uint8)
    block[:, :8] = packed
    block[:, 8:] = 0xEE  # padding: must not reach TMEM
    return block.view("<u4").copy()


def expand_fp4(values: np.ndarray) -> np.ndarray:
    """What TMEM holds: sixteen bytes per row, each 4-bit value with two low zero bits."""
    return ((values.astype(np.uint8) & 0xF) << 2).view(np.uint8).reshape(-1, 16).view("<u4").copy()


def main() -> None:
    from jittile.backend.toolchain import sass_opcodes
    from jittile.runtime.driver import current_device_capability

    codes = (np.arange(128 * 16) % 16).astype(np.uint8).reshape(128, 16)
    x = pack_fp4(codes)
    ck = decompress_to_tmem.compile(target="sm_100a")
    print(ck.plan)
    utccp = sum(n for name, n in sass_opcodes(ck.sass).items() if name.startswith("UTCCP"))
    print(f"UTCCP instructions: {utccp}")
    out = np.zeros_like(x)
    capability = current_device_capability()
    if capability is None or capability[0] < 10:
        decompress_to_tmem.interpret(x, out)  # no Blackwell device: the CPU interpreter runs it
        where = "interpreted on the CPU (no Blackwell device)"
    else:
        decompress_to_tmem(x, out)
        where = "on the GPU"
    np.testing.assert_array_equal(out, expand_fp4(codes))
    print(f"tmem_decompress: OK, {where}")


if __name__ == "__main__":
    main()
