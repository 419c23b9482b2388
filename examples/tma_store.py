"""TMA store: threads fill a shared image, one thread stores it to global memory as two 8x32 boxes.

The store protocol of the specification: complete the shared initialization, make it visible to the
async proxy with ``fence.proxy.async.shared::cta``, issue the store, then ``commit_group`` and
``wait_group 0`` in the issuing thread. No mbarrier is involved.
"""

import numpy as np

import jittile
from jittile import T
from jittile.runtime import driver


@jittile.kernel
def tma_store(Out: T.Tensor((16, 32), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, 8, 32), "float32", layout="default", align=128)
    for g, r in T.grid(2, 8):
        shared[g, r, lane] = T.float32((g * 8 + r) * 32 + lane)
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
            Out,
            shared,
            box=(8, 32),
            coords=(0, 0),
            coord_steps=((8, 0),),
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def expected() -> np.ndarray:
    return np.arange(16 * 32, dtype=np.float32).reshape(16, 32)


def main() -> None:
    ck = tma_store.compile(target="sm_90a")
    print(ck.plan)
    out = np.full((16, 32), np.nan, dtype=np.float32)
    if driver.available():
        tma_store(out)
        where = "on the GPU"
    else:
        tma_store.interpret(out)
        where = "interpreted on the CPU (no GPU)"
    np.testing.assert_array_equal(out, expected())
    print(f"tma_store: OK, {where}")


if __name__ == "__main__":
    main()
