"""TMA reduction: add a shared 16x32 image into rows 4..19 of an initialized global matrix.

``cp.reduce.async.bulk.tensor...add`` combines each shared element with the global element it lands
on; the destination must already hold the intended starting value. The protocol is the store's:
fence the shared writes into the async proxy, issue, ``commit_group``, ``wait_group 0``.
"""

import numpy as np

import jittile
from jittile import T
from jittile.runtime import driver


@jittile.kernel
def tma_reduce_add(Out: T.Tensor((24, 32), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    shared = T.alloc_shared((2, 8, 32), "float32", layout="default", align=128)
    for g, r in T.grid(2, 8):
        shared[g, r, lane] = T.float32((g * 8 + r) * 32 + lane)
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"],
            Out,
            shared,
            box=(8, 32),
            coords=(4, 0),
            coord_steps=((8, 0),),
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def initial() -> np.ndarray:
    return np.full((24, 32), 0.5, dtype=np.float32)


def expected() -> np.ndarray:
    out = initial()
    out[4:20] += np.arange(16 * 32, dtype=np.float32).reshape(16, 32)
    return out


def main() -> None:
    ck = tma_reduce_add.compile(target="sm_90a")
    print(ck.plan)
    out = initial()
    if driver.available():
        tma_reduce_add(out)
        where = "on the GPU"
    else:
        tma_reduce_add.interpret(out)
        where = "interpreted on the CPU (no GPU)"
    np.testing.assert_array_equal(out, expected())
    print(f"tma_reduce_add: OK, {where}")


if __name__ == "__main__":
    main()
