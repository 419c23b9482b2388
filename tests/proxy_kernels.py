"""Kernels of the barrier and proxy tests (module level so jittile can read their source): shared
images written by threads and stored by TMA or bulk copies, with and without the proxy fence,
and loads on barriers that are or are not armed with expect_tx."""
import jittile
from jittile import T
from jittile.layout import tiled_swizzle, wgmma_accumulator

STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
BULK_STORE = "cp.async.bulk.global.shared::cta.bulk_group"
LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
BULK_LOAD = "cp.async.bulk.shared::cta.global.mbarrier::complete_tx::bytes"
MULTICAST = ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
             ".multicast::cluster")
OUT = T.Tensor((8, 32), "float32")


@jittile.func
def store_image(Out, buf):
    """Lane 0 stores the (8, 32) image with TMA and waits until it has been read."""
    if T.cuda.lane_id() == 0:
        T.cuda.tile.apply(T.ptx[STORE], Out, buf, box=(8, 32), coords=(0, 0))  # async read
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def stored_image(Out: OUT, FENCE: T.constexpr):
    """Every lane writes its column, then lane 0 stores the image; ``FENCE`` says which proxy
    fence comes where: ``none``; ``all`` (every lane, after its writes: the store protocol);
    ``issuer`` (only the storing lane, after the barrier: on the path from every write to the
    read); ``one lane`` (only lane 0, before the barrier: textual order shows a fence, the
    interpreter whose it is); ``early`` (before the writes: it orders nothing); ``global`` (it
    does not cover shared memory)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((8, 32), "float32", align=128)
    if FENCE == "early":
        T.ptx.fence.proxy.async_.shared__cta()
    for r in range(8):
        buf[r, lane] = T.float32(r * 32 + lane)  # generic write
    if FENCE == "all":
        T.ptx.fence.proxy.async_.shared__cta()
    if FENCE == "one lane":
        if lane == 0:
            T.ptx.fence.proxy.async_.shared__cta()
    if FENCE == "global":
        T.ptx.fence.proxy.async_.global_()
    T.cuda.cta_sync()
    if FENCE == "issuer":
        if lane == 0:
            T.ptx.fence.proxy.async_()
    store_image(Out, buf)


@jittile.kernel
def st_shared_then_bulk_store(Out: T.Tensor((256,), "uint32"), FENCE: T.constexpr):
    """st.shared words stored with a bulk copy, fenced or not."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((256,), "uint32", align=128)
    for i in range(8):
        T.ptx.st.shared.b32(buf.ptr_to([i * 32 + lane]), T.uint32(i * 32 + lane))  # st.shared
    if FENCE:
        T.ptx.fence.proxy.async_.shared__cluster()
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(T.ptx[BULK_STORE], Out[0:256], buf)  # bulk read
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def loaded_then_stored(A: T.Tensor((8, 32), "float32"), Out: OUT):
    """A TMA load's bytes read by a TMA store: both are the async proxy, nothing to fence; the
    image is first zeroed by plain stores that the landing load replaces."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    for r in range(8):
        buf[r, lane] = T.float32(0)
    T.ptx.fence.proxy.async_.shared__cta()
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.mbarrier_init.release.cluster()
    T.cuda.cta_sync()
    if lane == 0:
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
        T.cuda.tile.apply(T.ptx[LOAD], buf, A, box=(8, 32), coords=(0, 0),
                          mbar=mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    store_image(Out, buf)


# ------------------------------------------------------------------------- armed barriers
@jittile.kernel
def unarmed(A: T.Tensor((8, 32), "float32"), Out: OUT):
    """A TMA load on a barrier nothing arms: the wait would hang."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
    T.cuda.cta_sync()
    if lane == 0:
        T.cuda.tile.apply(T.ptx[LOAD], buf, A, box=(8, 32), coords=(0, 0),
                          mbar=mbar.ptr_to([0]))  # the unarmed load
        T.ptx.mbarrier.arrive.shared.b64(mbar.ptr_to([0]))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for r in range(8):
        Out[r, lane] = buf[r, lane]


@jittile.kernel
def ring(A: T.Tensor((4, 256), "uint32"), Out: T.Tensor((4, 256), "uint32"),
         ARM: T.constexpr):
    """Bulk loads through a two-stage ring of barriers indexed at run time; ``ARM`` picks the
    arming instruction's form (None: none)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=4, block=32))
    lane = T.cuda.lane_id()
    row = T.cuda.block_idx("x")
    buf = T.alloc_shared((2, 256), "uint32", align=128)
    full = T.alloc_shared((2,), "uint64")
    s = row % 2
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
    T.cuda.cta_sync()
    if lane == 0:
        if ARM == "arrive":
            T.ptx.mbarrier.arrive.expect_tx.release.cta.shared__cta.b64(full.ptr_to([s]),
                                                                        T.uint32(1024))
        if ARM == "expect":
            T.ptx.mbarrier.expect_tx.relaxed.cta.shared.b64(full.ptr_to([s]), T.uint32(1024))
            T.ptx.mbarrier.arrive.shared.b64(full.ptr_to([s]))
        T.cuda.tile.apply(T.ptx[BULK_LOAD], buf[s], A[row, 0:256], mbar=full.ptr_to([s]))
    T.cuda.mbarrier_wait(full.ptr_to([s]), 0)
    for i in range(8):
        Out[row, i * 32 + lane] = buf[s, i * 32 + lane]


@jittile.func
def arm(bar, nbytes):
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar, T.uint32(nbytes))


@jittile.func
def load_on(buf, A, bar):
    T.cuda.tile.apply(T.ptx[LOAD], buf, A, box=(8, 32), coords=(0, 0), mbar=bar)  # helper load


@jittile.kernel
def through_helpers(A: T.Tensor((8, 32), "float32"), Out: OUT, ARMED: T.constexpr):
    """The barrier armed (or not) and the load issued in helpers, unrolled over two stages."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    buf = T.alloc_shared((2, 8, 32), "float32", align=128)
    mbar = T.alloc_shared((2,), "uint64")
    if lane == 0:
        for s in T.unroll(2):
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([s]), T.uint32(1))
    T.cuda.cta_sync()
    if lane == 0:
        for s in T.unroll(2):
            if ARMED:
                arm(mbar.ptr_to([s]), 1024)
            load_on(buf[s], A, mbar.ptr_to([s]))
    for s in T.unroll(2):
        T.cuda.mbarrier_wait(mbar.ptr_to([s]), 0)
        for r in range(8):
            Out[r, lane] = buf[s, r, lane]


@jittile.kernel
def multicast(A: T.Tensor((8, 32), "float32"), Out: T.Tensor((2, 8, 32), "float32"),
              ARMED: T.constexpr):
    """Rank 0 multicasts one box to both CTAs of the cluster; each CTA arms its own barrier."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=32, cluster=(2, 1, 1)))
    lane = T.cuda.lane_id()
    rank = T.cuda.cluster_ctarank()
    buf = T.alloc_shared((8, 32), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if lane == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        if ARMED:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(1024))
        else:
            T.ptx.mbarrier.arrive.shared.b64(mbar.ptr_to([0]))
    T.cuda.cluster_sync()
    if lane == 0 and rank == 0:
        T.cuda.tile.apply(T.ptx[MULTICAST], buf, A, box=(8, 32), coords=(0, 0),
                          mbar=mbar.ptr_to([0]), cta_mask=T.uint16(3))
    T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
    for r in range(8):
        Out[rank, r, lane] = buf[r, lane]
    T.cuda.cluster_sync()


# --------------------------------------------------------------------------- wgmma operands
MMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16"
A_LAYOUT = tiled_swizzle(0, (64, 16), "bfloat16")
B_LAYOUT = tiled_swizzle(0, (8, 16), "bfloat16")


@jittile.kernel
def mma_of_written_operands(A: T.Tensor((64, 16), "uint16"), B: T.Tensor((8, 16), "uint16"),
                            D: T.Tensor((64, 8), "float32"), FENCE: T.constexpr):
    """One warpgroup copies A and B (bf16 bits) into shared memory with plain stores and
    multiplies them, D = A @ B.T, with or without the proxy fence."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    A_s = T.alloc_shared((64, 16), "bfloat16", layout=A_LAYOUT, align=1024)
    B_s = T.alloc_shared((8, 16), "bfloat16", layout=B_LAYOUT, align=1024)
    for i in range(tid, 64 * 16, 128):
        A_s.bits[i // 16, i % 16] = A[i // 16, i % 16]  # A's generic write
    if tid < 128:
        B_s.bits[tid // 16, tid % 16] = B[tid // 16, tid % 16]
    if FENCE:
        T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    acc = T.alloc_local((64, 8), "float32", layout=wgmma_accumulator)
    T.ptx.wgmma.fence.sync.aligned()
    T.cuda.tile.apply(T.ptx[MMA], acc, A_s, B_s.T, scale_d=0)  # the MMA reads A and B
    T.ptx.wgmma.commit_group.sync.aligned()
    T.ptx.wgmma.wait_group.sync.aligned(0)
    for i in T.unroll(acc.size):
        D[acc.row(i), acc.col(i)] = acc[i]
