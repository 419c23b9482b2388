"""Kernels of the interpreter tests (module level so jittile can read their source)."""

import jittile
from jittile import T

LOAD = "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes"


@jittile.kernel
def reverse_rows(A: T.Tensor((4, 32), "float32"), Out: T.Tensor((4, 32), "float32")):
    """Each CTA reverses one row through shared memory: cta_sync is a real barrier."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
    tid = T.cuda.thread_idx("x")
    row = T.cuda.block_idx("x")
    buf = T.alloc_shared((32,), "float32", align=16)
    buf[tid] = A[row, tid] * T.float32(1.5)
    T.cuda.cta_sync()
    Out[row, tid] = buf[31 - tid]


@jittile.kernel
def wrapping(Out: T.Tensor((4,), "uint32"), F: T.Tensor((2,), "float32")):
    """uint32 wraparound and float32 rounding as the GPU computes them."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    x = T.uint32(4294967295)
    Out[0] = x + T.uint32(1)
    Out[1] = T.uint32(0) - T.uint32(1)
    Out[2] = T.uint32(-1)
    Out[3] = T.uint32(3000000000) * T.uint32(2)
    F[0] = T.float32(16777216.0) + T.float32(1.0)
    F[1] = T.float32(0.1)


@jittile.kernel
def expects_too_much(A: T.Tensor((256,), "uint32"), Out: T.Tensor((256,), "uint32")):
    """expect_tx says 2048 bytes, the load moves 1024: the wait never completes."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((256,), "uint32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(2048))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(T.ptx[LOAD], buf, A[0:256], mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)  # waits forever
    Out[lane] = buf[lane]


@jittile.kernel
def reads_too_early(A: T.Tensor((256,), "uint32"), Out: T.Tensor((256,), "uint32")):
    """Every lane reads the load's destination before waiting on its barrier."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((256,), "uint32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if lane == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
        T.cuda.tile.apply(T.ptx[LOAD], buf, A[0:256], mbar=mbar.ptr_to([0]))
    Out[lane] = buf[lane]  # the race
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)


@jittile.kernel
def half_warp_elect(Out: T.Tensor((32,), "uint32")):
    """elect.sync over the full warp, reached by half of it."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    if lane < 16:
        Out[lane] = T.ptx.elect.sync(T.uint32(0xFFFFFFFF))


@jittile.kernel
def elected(Out: T.Tensor((32,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    if lane >= 4:
        Out[lane] = T.ptx.elect.sync(T.uint32(0xFFFFFFF0))


@jittile.kernel
def out_of_bounds(Out: T.Tensor((32,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    Out[lane + 1] = lane  # lane 31 writes past the end


@jittile.kernel
def bulk_rows(A: T.Tensor((4, 256), "uint32"), Out: T.Tensor((4, 256), "uint32")):
    """Bulk copies through a two-stage shared ring with a runtime stage index."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
    lane = T.cuda.lane_id()
    row = T.cuda.block_idx("x")
    buf = T.alloc_shared((2, 256), "uint32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    stage = row % 2
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(T.ptx[LOAD], buf[stage], A[row, 0:256], mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if lane == 0:
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.global.shared::cta.bulk_group"], Out[row, 0:256], buf[stage]
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def bulk_bf16(A: T.Tensor((256,), "bfloat16"), Out: T.Tensor((256,), "bfloat16")):
    """A bulk copy of bfloat16 data (raw 16-bit storage) in and out."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((256,), "bfloat16", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(512))
        T.cuda.tile.apply(T.ptx[LOAD], buf, A[0:256], mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if lane == 0:
        T.cuda.tile.apply(T.ptx["cp.async.bulk.global.shared::cta.bulk_group"], Out[0:256], buf)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def count_into(values, out, n: T.int32):
    """out[0] = the number of values (none read where n is 0)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    total = 0
    for i in range(n):
        total += values[i] * 0 + 1
    out[0] = total
