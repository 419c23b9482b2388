"""A 4096x4096 float32 matrix copied tile by tile through 128B-swizzled shared memory.

Each CTA owns one (64, 32) tile: one thread TMA-loads it with swizzle=3 into a buffer whose layout is
the matching ``swizzle(3, ...)`` (aligned to the 1024-byte swizzle period), every thread waits on the
mbarrier, and the same thread TMA-stores the tile back, then commits and waits for the bulk group.
The grid walks the tiles through ``T.cuda.block_idx``; sizes are ``T.constexpr`` parameters.
"""

import numpy as np

import jittile
from jittile import T
from jittile.layout import swizzle
from jittile.runtime import driver

M = N = 4096
BM, BN = 64, 32  # 32 float32 = 128 bytes: one swizzle span per box row


@jittile.kernel
def swizzled_copy(
    A: T.Tensor(("m", "n"), "float32"),
    Out: T.Tensor(("m", "n"), "float32"),
    M: T.constexpr,
    N: T.constexpr,
    BM: T.constexpr,
    BN: T.constexpr,
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(N // BN, M // BM), block=32))
    lane = T.cuda.lane_id()
    row = T.cuda.block_idx("y") * BM
    col = T.cuda.block_idx("x") * BN
    tile = T.alloc_shared((BM, BN), "float32", layout=swizzle(3, (BM, BN), "float32"), align=1024)
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(BM * BN * 4))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            tile,
            A,
            box=(BM, BN),
            coords=(row, col),
            swizzle=3,
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
            Out,
            tile,
            box=(BM, BN),
            coords=(row, col),
            swizzle=3,
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def main() -> None:
    spec = T.Tensor((M, N), "float32")
    ck = swizzled_copy.compile(spec, spec, M, N, BM, BN, target="sm_90a")
    print(ck.plan)
    if driver.available():
        m, n, run, where = M, N, swizzled_copy, "on the GPU"
    else:  # the interpreter runs every thread in Python: a 256x256 instance
        m, n, run, where = 256, 256, swizzled_copy.interpret, "interpreted on the CPU (no GPU)"
    a = np.random.default_rng(0).standard_normal((m, n), dtype=np.float32)
    out = np.full_like(a, np.nan)
    run(a, out, m, n, BM, BN)
    np.testing.assert_array_equal(out, a)
    print(f"tma_swizzled_copy: OK, {where}")


if __name__ == "__main__":
    main()
