"""Kernels of the bulk-copy GPU tests (module level so jittile can read their source)."""

from gpu_kernels import run_reduction

import jittile
from jittile import T

LOAD_CTA = "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes"
LOAD_CLUSTER = "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.global.shared::cta.bulk_group"
PREFETCH = "cp.async.bulk.prefetch.L2.global"
HINT = ".L2::cache_hint"


@jittile.kernel
def bulk_roundtrip(A, Out, LOAD: T.constexpr, STORE_OP: T.constexpr, HINTED: T.constexpr):
    """Each CTA loads row blockIdx of A (256 words) into shared memory with LOAD and stores it to
    the same row of Out with STORE_OP (both with an L2 policy when HINTED); row 0 is prefetched
    first."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
    lane = T.cuda.lane_id()
    row = T.cuda.block_idx("x")
    buf = T.alloc_shared((256,), "uint32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
    T.cuda.cta_sync()
    if lane == 0:
        if HINTED:
            policy = T.ptx["createpolicy.fractional.L2::evict_last.b64"]()
            T.cuda.tile.apply(T.ptx[PREFETCH + HINT], A[0, 0:256], cache_policy=policy)
            T.cuda.tile.apply(
                T.ptx[LOAD + HINT], buf, A[row, 0:256], mbar=mbar.ptr_to([0]), cache_policy=policy
            )
        else:
            T.cuda.tile.apply(T.ptx[PREFETCH], A[0, 0:256])
            T.cuda.tile.apply(T.ptx[LOAD], buf, A[row, 0:256], mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if lane == 0:
        if HINTED:
            policy = T.ptx["createpolicy.fractional.L2::evict_first.b64"]()
            T.cuda.tile.apply(T.ptx[STORE_OP + HINT], Out[row, 0:256], buf, cache_policy=policy)
        else:
            T.cuda.tile.apply(T.ptx[STORE_OP], Out[row, 0:256], buf)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def bulk_staged(A, Out):
    """A runtime stage index on the shared side and unannotated (dynamic) extents on the global
    side: the copy checks the global address' alignment at run time."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
    lane = T.cuda.lane_id()
    row = T.cuda.block_idx("x")
    buf = T.alloc_shared((2, 64), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    stage = row % 2
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(256))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(T.ptx[LOAD_CTA], buf[stage], A[row, 0:64], mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if lane == 0:
        T.cuda.tile.apply(T.ptx[STORE], Out[row, 0:64], buf[stage])
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def bulk_multicast(A, Out, CLUSTER: T.constexpr):
    """CTA 0 of the cluster multicasts one 1 KB row into every CTA's buffer."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=CLUSTER, block=32, cluster=(CLUSTER, 1, 1)))
    tid = T.cuda.thread_idx("x")
    rank = T.cuda.cluster_ctarank()
    buf = T.alloc_shared((256,), "uint32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
    T.cuda.cluster_sync()
    if tid == 0 and rank == 0:
        T.cuda.tile.apply(
            T.ptx[LOAD_CLUSTER + ".multicast::cluster"],
            buf,
            A[1, 0:256],
            mbar=mbar.ptr_to([0]),
            cta_mask=T.uint16((1 << CLUSTER) - 1),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for k in range(8):
        Out[rank, k * 32 + tid] = buf[k * 32 + tid]
    T.cuda.cluster_sync()


@jittile.kernel
def bulk_reduce(A, Out, RED: T.constexpr, DTYPE: T.constexpr):
    """Threads stage a (16, 32) tile of A; one thread reduces each row into rows 8..23, columns
    32..63 of Out with one bulk reduction per row (a runtime row index on both sides)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared((16, 32), DTYPE, align=128)
    for r in range(16):
        buf[r, tid] = A[r, tid]
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    if tid == 0:
        for r in range(16):
            T.cuda.tile.apply(T.ptx[RED], Out[8 + r, 32:64], buf[r])
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def reduction_opcode(op: str, type_: str) -> str:
    return f"cp.reduce.async.bulk.global.shared::cta.bulk_group.{op}.{type_}"


def run_bulk_reduction(op: str, type_: str, dtype: str, rng) -> tuple:
    """(result, expected) of ``bulk_reduce`` with ``.op.type`` over ``dtype`` elements."""
    opcode = reduction_opcode(op, type_)
    return run_reduction(
        op.split(".")[0], dtype, rng, lambda src, out: bulk_reduce(src, out, opcode, dtype)
    )
