"""The seed's "one 128x128b copy and readback" tcgen05.cp example, ported to jittile.

Only the import lines, the decorator and the host lines differ from the specification's example.
No Blackwell GPU is needed to compile it: ``main()`` compiles for sm_100a, prints the instruction
plan and the UTCCP count of the SASS, and launches only on a device of compute capability >= 10.
"""

import numpy as np

import jittile
from jittile import T
from jittile.axis import TCol, TLane
from jittile.layout import S, TileLayout

tmem_layout = TileLayout(S[(128, 4) : (1 @ TLane, 1 @ TCol)])


@jittile.kernel(target="sm_100a")
def copy_to_tmem(A: T.Tensor((128, 4), "uint32"), Out: T.Tensor((128, 4), "uint32")):
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
            T.ptx["tcgen05.cp.cta_group::1.128x128b"],
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


def main() -> None:
    from jittile.backend.toolchain import sass_opcodes
    from jittile.runtime.driver import current_device_capability

    x = np.arange(512, dtype="uint32").reshape(128, 4)
    ck = copy_to_tmem.compile(target="sm_100a")
    print(ck.plan)
    utccp = sum(n for name, n in sass_opcodes(ck.sass).items() if name.startswith("UTCCP"))
    print(f"UTCCP instructions: {utccp}")
    out = np.zeros_like(x)
    capability = current_device_capability()
    if capability is None or capability[0] < 10:
        copy_to_tmem.interpret(x, out)  # no Blackwell device: the CPU interpreter runs it
        where = "interpreted on the CPU (no Blackwell device)"
    else:
        copy_to_tmem(x, out)
        where = "on the GPU"
    np.testing.assert_array_equal(out, x)
    print(f"tmem_copy_readback: OK, {where}")


if __name__ == "__main__":
    main()
