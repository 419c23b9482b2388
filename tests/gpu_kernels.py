"""Kernels shared by the GPU tests (module level so jittile can read their source)."""

import ml_dtypes
import numpy as np

import jittile
from jittile import T
from jittile.layout import swizzle


@jittile.kernel
def staged_copy(A, Out, N: T.constexpr, BLOCK: T.constexpr):
    """Each CTA copies BLOCK elements through shared memory (plain loads and stores)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=N // BLOCK, block=BLOCK))
    tid = T.cuda.thread_idx("x")
    base = T.cuda.block_idx("x") * BLOCK
    buf = T.alloc_shared((BLOCK,), "float32", align=16)
    buf[tid] = A[base + tid]
    T.cuda.cta_sync()
    Out[base + tid] = buf[BLOCK - 1 - tid]


@jittile.kernel
def cluster_big_smem(A, Out, Rank):
    """2-CTA clusters with 64 KB of shared memory each: every CTA stages 16384 floats."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=256, cluster=(2, 1, 1)))
    tid = T.cuda.thread_idx("x")
    cta = T.cuda.block_idx("x")
    buf = T.alloc_shared((16384,), "float32", align=1024)
    for k in range(64):
        buf[k * 256 + tid] = A[cta * 16384 + k * 256 + tid]
    T.cuda.cta_sync()
    for k in range(64):
        Out[cta * 16384 + k * 256 + tid] = buf[16383 - (k * 256 + tid)]
    if tid == 0:
        Rank[cta] = T.cuda.cluster_ctarank()
    T.cuda.cluster_sync()


@jittile.kernel
def tma_roundtrip(
    A,
    Out,
    LOAD: T.constexpr,
    STORE: T.constexpr,
    BOX: T.constexpr,
    COORDS: T.constexpr,
    NBYTES: T.constexpr,
):
    """TMA-load one box of A into shared memory, then TMA-store it to the same place in Out."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared(BOX, "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(NBYTES))
        T.cuda.tile.apply(T.ptx[LOAD], buf, A, box=BOX, coords=COORDS, mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    if tid == 0:
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.tile.apply(T.ptx[STORE], Out, buf, box=BOX, coords=COORDS)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def tma_reduce(A, Out, RED: T.constexpr, DTYPE: T.constexpr):
    """Threads stage a (16, 32) tile of A in shared memory; one thread reduces it into Out."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared((16, 32), DTYPE, align=128)
    for r in range(16):
        buf[r, tid] = A[r, tid]
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx[RED], Out, buf, box=(16, 32), coords=(8, 32))
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def reduction_reference(op: str, before, src):
    """What reduction ``op`` leaves in global memory (PTX ISA semantics of red/atom; ints wrap)."""
    if op == "inc":
        return np.where(before >= src, 0, before + 1).astype(before.dtype)
    if op == "dec":
        return np.where((before == 0) | (before > src), src, before - 1).astype(before.dtype)
    ufunc = {
        "add": np.add,
        "min": np.minimum,
        "max": np.maximum,
        "and": np.bitwise_and,
        "or": np.bitwise_or,
        "xor": np.bitwise_xor,
    }[op]
    return ufunc(before, src)


def run_reduction(op: str, dtype: str, rng, reduce=None) -> tuple:
    """Reduce a random (16, 32) tile into rows 8..23, columns 32..63 of a random (32, 64) array
    with ``reduce(src, out)`` (default: ``tma_reduce``); returns (result, expected) as NumPy
    arrays (bfloat16 as ml_dtypes arrays, compared as float32)."""
    opcode = f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group"
    if reduce is None:

        def reduce(src, out):
            tma_reduce(src, out, opcode, dtype)

    if dtype == "bfloat16":  # ml_dtypes arrays; the reference adds in float32, rounds once
        src = rng.standard_normal((16, 32)).astype(ml_dtypes.bfloat16)
        out = rng.standard_normal((32, 64)).astype(ml_dtypes.bfloat16)
        before = out.astype(np.float32)
        reduce(src, out)
        region = reduction_reference(op, before[8:24, 32:64], src.astype(np.float32))
        expected = before.copy()
        expected[8:24, 32:64] = region.astype(ml_dtypes.bfloat16).astype(np.float32)
        return out.astype(np.float32), expected
    if op in ("inc", "dec"):
        src = rng.integers(0, 8, size=(16, 32)).astype(dtype)
        out = rng.integers(0, 10, size=(32, 64)).astype(dtype)
    elif np.dtype(dtype).kind == "u":
        src = rng.integers(0, 2**31, size=(16, 32)).astype(dtype)
        out = rng.integers(0, 2**31, size=(32, 64)).astype(dtype)
    elif np.dtype(dtype).kind == "i":
        src = rng.integers(-1000, 1000, size=(16, 32)).astype(dtype)
        out = rng.integers(-1000, 1000, size=(32, 64)).astype(dtype)
    else:
        src = rng.standard_normal((16, 32)).astype(dtype)
        out = rng.standard_normal((32, 64)).astype(dtype)
    before = out.copy()
    reduce(src, out)
    expected = before.copy()
    expected[8:24, 32:64] = reduction_reference(op, before[8:24, 32:64], src)
    return out, expected


@jittile.kernel
def tma_swizzled(A, Out, SW: T.constexpr, COLS: T.constexpr):
    """Two (32, COLS) boxes via coord_steps plus one sub-region load, all swizzled; threads read the
    image back through the buffer's layout."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared(
        (3, 32, COLS), "float32", layout=swizzle(SW, (3, 32, COLS), "float32"), align=1024
    )
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(3 * 32 * COLS * 4))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf[0:2],
            A,
            box=(32, COLS),
            coords=(0, 0),
            coord_steps=((32, 0),),
            swizzle=SW,
            mbar=mbar.ptr_to([0]),
        )
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf[2],
            A,
            box=(32, COLS),
            coords=(64, COLS),
            swizzle=SW,
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for g, r in T.grid(3, 32):
        if tid < COLS:
            Out[g, r, tid] = buf[g, r, tid]


@jittile.kernel
def tma_load_2d(
    A,
    Out,
    BOX: T.constexpr,
    COORDS: T.constexpr,
    ES: T.constexpr,
    FILL: T.constexpr,
    FMT: T.constexpr,
    IMG: T.constexpr,
):
    """One 2-D load with element strides / OOB fill / format; threads copy the image out."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared(IMG, "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(IMG[0] * IMG[1] * 4))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf,
            A,
            box=BOX,
            coords=COORDS,
            element_strides=ES,
            oob_fill=FILL,
            format=FMT,
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for r in range(IMG[0]):
        c = tid
        while c < IMG[1]:
            Out[r, c] = buf[r, c]
            c += 32


@jittile.kernel
def tma_multicast(A, Out, CLUSTER: T.constexpr):
    """CTA 0 of each cluster multicasts one (16, 32) box to every CTA of the cluster."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=CLUSTER, block=32, cluster=(CLUSTER, 1, 1)))
    tid = T.cuda.thread_idx("x")
    rank = T.cuda.cluster_ctarank()
    buf = T.alloc_shared((16, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(2048))
    T.cuda.cluster_sync()
    if tid == 0 and rank == 0:
        T.cuda.tile.apply(
            T.ptx[
                "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                ".multicast::cluster"
            ],
            buf,
            A,
            box=(16, 32),
            coords=(16, 0),
            cta_mask=T.uint16((1 << CLUSTER) - 1),
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for r in range(16):
        Out[rank, r, tid] = buf[r, tid]
    T.cuda.cluster_sync()


@jittile.kernel
def cluster_arrivals(Out, CLUSTER: T.constexpr):
    """Rank 0 arrives on the mbarrier of every CTA of its cluster through ``mapa`` (its own
    included); each CTA waits on its own barrier, then writes rank + 1. An arrival that stayed
    in rank 0 would over-arrive its barrier and leave the other CTAs waiting."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=CLUSTER, block=32, cluster=(CLUSTER, 1, 1)))
    tid = T.cuda.thread_idx("x")
    rank = T.cuda.cluster_ctarank()
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cluster_sync()
    if tid == 0 and rank == 0:
        for r in range(CLUSTER):
            T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(
                T.ptx.mapa.shared__cluster.u32(mbar.ptr_to([0]), T.uint32(r))
            )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    Out[T.cuda.block_idx("x"), tid] = rank + 1
    T.cuda.cluster_sync()


@jittile.kernel
def tma_predicated(A, Out, P):
    """A load gated by a runtime predicate; shared memory is pre-filled with -1."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    go = P != 0
    buf = T.alloc_shared((8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    for r in range(8):
        buf[r, tid] = -1.0
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    if tid == 0:
        if go:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf,
            A,
            box=(8, 32),
            coords=(0, 0),
            mbar=mbar.ptr_to([0]),
            pred=go,
        )
    if go:
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    T.cuda.cta_sync()
    for r in range(8):
        Out[r, tid] = buf[r, tid]


@jittile.kernel
def tma_cache_hint(A, Out):
    """A load with an L2 cache-policy operand made by createpolicy."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared((8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if tid == 0:
        policy = T.ptx["createpolicy.fractional.L2::evict_last.b64"]()
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
        T.cuda.tile.apply(
            T.ptx[
                "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
                ".L2::cache_hint"
            ],
            buf,
            A,
            box=(8, 32),
            coords=(8, 0),
            mbar=mbar.ptr_to([0]),
            cache_policy=policy,
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for r in range(8):
        Out[r, tid] = buf[r, tid]


@jittile.kernel
def tma_interleaved(A, Out, IL: T.constexpr, SW: T.constexpr):
    """The seed's interleave example: uint16 slices of 16 (IL=1) or 32 (IL=2) bytes, box (1, 1, 8),
    three channel slices by a leading repeat with coord_steps ((0, 1, 0),)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared(
        (3, 1, 1, 8, 8 * IL),
        "uint16",
        layout=swizzle(SW, (3, 1, 1, 8, 8 * IL), "uint16"),
        align=256,
    )
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(3 * 8 * 16 * IL))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.3d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf,
            A,
            box=(1, 1, 8),
            coords=(1, 0, 0),
            coord_steps=((0, 1, 0),),
            interleave=IL,
            swizzle=SW,
            mbar=mbar.ptr_to([0]),
        )
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for s, w in T.grid(3, 8):
        if tid < 8 * IL:
            Out[s, w, tid] = buf[s, 0, 0, w, tid]


@jittile.kernel(target="sm_100a")
def blackwell_only(A):
    """A plain kernel built for sm_100a: an H200 must refuse it before the launch."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    A[T.cuda.thread_idx("x")] = 1.0


@jittile.func
def load_rows(dst, src, row, bar):
    """A @jittile.func helper: one (8, 32) box into dst (a stage of the caller's buffer)."""
    T.cuda.tile.apply(
        T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
        dst,
        src,
        box=(8, 32),
        coords=(row, 0),
        mbar=bar,
    )


@jittile.kernel
def tma_with_helper(A, Out):
    """Rows 8..23 of A through a helper called once per unrolled stage."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.thread_idx("x")
    buf = T.alloc_shared((2, 8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if tid == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(2048))
        for s in T.unroll(2):
            load_rows(buf[s], A, 8 + s * 8, mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for s, r in T.grid(2, 8):
        Out[s * 8 + r, tid] = buf[s, r, tid]


@jittile.kernel
def tma_runtime_stage(A, Out):
    """Eight (8, 32) tiles of A through a two-stage ring indexed by the runtime stage t % 2."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    ring = T.alloc_shared((2, 8, 32), "float32", align=128)
    full = T.alloc_shared((2,), "uint64")
    for s in T.unroll(2):
        if lane == 0:
            T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
    T.cuda.cta_sync()
    for t in range(8):
        stage = t % 2
        if lane == 0:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(full.ptr_to([stage]), T.uint32(1024))
            T.cuda.tile.apply(
                T.ptx[
                    "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
                ],
                ring[stage],
                A,
                box=(8, 32),
                coords=(t * 8, 0),
                mbar=full.ptr_to([stage]),
            )
        T.cuda.mbarrier_wait(full.ptr_to([stage]), (t // 2) % 2)
        for r in range(8):
            Out[t * 8 + r, lane] = ring[stage, r, lane]
        T.cuda.cta_sync()
