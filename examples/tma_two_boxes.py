"""The seed's "two explicit 8x16 boxes" TMA load, ported to jittile.

Only the import, the decorator and the host lines differ from the specification's example.
"""

import numpy as np

import jittile
from jittile import T


@jittile.kernel
def tma_load(A: T.Tensor((16, 16), "uint32"), Out: T.Tensor((16, 16), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, 8, 16), "uint32", layout="default", align=128)
    mbar = T.alloc_shared((1,), "uint64", layout="default")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            shared,
            A,
            box=(8, 16),
            coords=(0, 0),
            coord_steps=((8, 0),),
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    T.cuda.cta_sync()
    for g, r in T.grid(2, 8):
        if lane < 16:
            Out[g * 8 + r, lane] = shared[g, r, lane]


def main() -> None:
    from jittile.runtime import driver

    x = np.arange(256, dtype="uint32").reshape(16, 16)
    out = np.zeros_like(x)
    if driver.available():
        tma_load(x, out)
        where = "on the GPU"
    else:
        tma_load.interpret(x, out)
        where = "interpreted on the CPU (no GPU)"
    np.testing.assert_array_equal(out, x)
    print(f"tma_two_boxes: OK, {where}")


if __name__ == "__main__":
    main()
