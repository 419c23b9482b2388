"""1 GiB fp32 matrix copy: jittile TMA copies (swizzled 64x64 tiles, unswizzled boxes, persistent
rings) vs D2D memcpy, Triton's TMA copy, a numba-cuda element copy and CuPy, in one run. Every
variant is checked exactly, then timed with CUDA events around 10 back-to-back calls (medians of 15
samples; the single-call median is recorded too). Bandwidth counts bytes read + written.

    PYTHONPATH=$PWD python3 bench/tma_copy.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

import jittile
from jittile import T
from jittile.layout import swizzle

M = N = 16384  # 1 GiB of float32
BM, BN = 64, 32


@jittile.kernel
def tma_copy(A: T.Tensor((None, None), "float32"), Out: T.Tensor((None, None), "float32")):
    """Each CTA moves a 64x64 tile as two swizzled 64x32 boxes: load, wait, store."""
    tid = T.cuda.thread_idx("x")
    row = T.cuda.block_idx("y") * 64
    col = T.cuda.block_idx("x") * 64
    buf = T.alloc_shared(
        (2, 64, 32), "float32", layout=swizzle(3, (2, 64, 32), "float32"), align=1024
    )
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(16384))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf,
            A,
            box=(64, 32),
            coords=(row, col),
            coord_steps=((0, 32),),
            swizzle=3,
            mbar=mbar.ptr_to([0]),
        )
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
            Out,
            buf,
            box=(64, 32),
            coords=(row, col),
            coord_steps=((0, 32),),
            swizzle=3,
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)


@jittile.kernel
def tma_copy_pipelined(
    A: T.Tensor((None, None), "float32"),
    Out: T.Tensor((None, None), "float32"),
    TILES_N: T.constexpr,
    NTILES: T.constexpr,
    STAGES: T.constexpr,
):
    """Persistent CTAs, one issuing thread, STAGES 64x64 tiles in flight: the stores of one round
    overlap the loads of the next (each stage is refilled once its store has read it)."""
    tid = T.cuda.thread_idx("x")
    cta = T.cuda.block_idx("x")
    nctas = T.cuda.grid_dim("x")
    buf = T.alloc_shared(
        (STAGES, 2, 64, 32),
        "float32",
        layout=swizzle(3, (STAGES, 2, 64, 32), "float32"),
        align=1024,
    )
    mbar = T.alloc_shared((STAGES,), "uint64")
    if tid == 0:
        for s in T.unroll(STAGES):
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([s]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        for s in T.unroll(STAGES):
            t = cta + s * nctas
            if t < NTILES:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([s]), T.uint32(16384))
                T.cuda.tile.apply(
                    T.ptx[
                        "cp.async.bulk.tensor.2d.shared::cta.global.tile"
                        ".mbarrier::complete_tx::bytes"
                    ],
                    buf[s],
                    A,
                    box=(64, 32),
                    coords=((t // TILES_N) * 64, (t % TILES_N) * 64),
                    coord_steps=((0, 32),),
                    swizzle=3,
                    mbar=mbar.ptr_to([s]),
                )
        phase = 0
        base = 0
        while cta + base * nctas < NTILES:
            for s in T.unroll(STAGES):
                t = cta + (base + s) * nctas
                if t < NTILES:
                    T.cuda.mbarrier_wait(mbar.ptr_to([s]), phase)
                    T.cuda.tile.apply(
                        T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
                        Out,
                        buf[s],
                        box=(64, 32),
                        coords=((t // TILES_N) * 64, (t % TILES_N) * 64),
                        coord_steps=((0, 32),),
                        swizzle=3,
                    )
                T.ptx.cp.async_.bulk.commit_group()
            for s in T.unroll(STAGES):
                t = cta + (base + STAGES + s) * nctas
                if t < NTILES:
                    T.ptx.cp.async_.bulk.wait_group.read(STAGES - 1 - s)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([s]), T.uint32(16384))
                    T.cuda.tile.apply(
                        T.ptx[
                            "cp.async.bulk.tensor.2d.shared::cta.global.tile"
                            ".mbarrier::complete_tx::bytes"
                        ],
                        buf[s],
                        A,
                        box=(64, 32),
                        coords=((t // TILES_N) * 64, (t % TILES_N) * 64),
                        coord_steps=((0, 32),),
                        swizzle=3,
                        mbar=mbar.ptr_to([s]),
                    )
            phase = phase ^ 1
            base = base + STAGES
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def tma_copy_box(
    A: T.Tensor((None, None), "float32"),
    Out: T.Tensor((None, None), "float32"),
    BM: T.constexpr,
    BN: T.constexpr,
    L2: T.constexpr,
):
    """One unswizzled (BM, BN) box per CTA (a plain copy needs no swizzle, so rows can be 1 KB)."""
    tid = T.cuda.thread_idx("x")
    row = T.cuda.block_idx("y") * BM
    col = T.cuda.block_idx("x") * BN
    buf = T.alloc_shared((BM, BN), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(BM * BN * 4))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf,
            A,
            box=(BM, BN),
            coords=(row, col),
            l2_promotion=L2,
            mbar=mbar.ptr_to([0]),
        )
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
            Out,
            buf,
            box=(BM, BN),
            coords=(row, col),
            l2_promotion=L2,
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)


RING_LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
RING_STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"


@jittile.func
def load_box(stage, A, bar, t, BM, BN, TILES_N):
    """Tile ``t`` of the (BM, BN) tiling of A into one ring stage, completing on ``bar``."""
    T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar, T.uint32(BM * BN * 4))
    T.cuda.tile.apply(
        T.ptx[RING_LOAD],
        stage,
        A,
        box=(BM, BN),
        coords=((t // TILES_N) * BM, (t % TILES_N) * BN),
        mbar=bar,
    )


@jittile.func
def store_box(Out, stage, t, BM, BN, TILES_N):
    """One ring stage back to tile ``t`` of Out (a bulk group the caller commits)."""
    T.cuda.tile.apply(
        T.ptx[RING_STORE],
        Out,
        stage,
        box=(BM, BN),
        coords=((t // TILES_N) * BM, (t % TILES_N) * BN),
    )


@jittile.func
def fill_ring(buf, mbar, A, cta, nctas, BM, BN, TILES_N, NTILES, STAGES):
    """A persistent CTA's barriers and its first STAGES loads (tiles cta, cta + nctas, ...)."""
    for s in T.unroll(STAGES):
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([s]), T.uint32(1))
    T.ptx.fence.proxy.async_.shared__cta()
    for s in T.unroll(STAGES):
        t = cta + s * nctas
        if t < NTILES:
            load_box(buf[s], A, mbar.ptr_to([s]), t, BM, BN, TILES_N)


@jittile.kernel
def tma_copy_ring(
    A: T.Tensor((None, None), "float32"),
    Out: T.Tensor((None, None), "float32"),
    BM: T.constexpr,
    BN: T.constexpr,
    TILES_N: T.constexpr,
    NTILES: T.constexpr,
    STAGES: T.constexpr,
):
    """Persistent CTAs over unswizzled (BM, BN) boxes with a STAGES-deep ring: each stage is
    reloaded as soon as the store that read it has finished reading."""
    tid = T.cuda.thread_idx("x")
    cta = T.cuda.block_idx("x")
    nctas = T.cuda.grid_dim("x")
    buf = T.alloc_shared((STAGES, BM, BN), "float32", align=128)
    mbar = T.alloc_shared((STAGES,), "uint64")
    if tid == 0:
        fill_ring(buf, mbar, A, cta, nctas, BM, BN, TILES_N, NTILES, STAGES)
        phase = 0
        base = 0
        while cta + base * nctas < NTILES:
            for s in T.unroll(STAGES):
                t = cta + (base + s) * nctas
                if t < NTILES:
                    T.cuda.mbarrier_wait(mbar.ptr_to([s]), phase)
                    store_box(Out, buf[s], t, BM, BN, TILES_N)
                T.ptx.cp.async_.bulk.commit_group()
                tn = t + STAGES * nctas
                if tn < NTILES:
                    T.ptx.cp.async_.bulk.wait_group.read(0)
                    load_box(buf[s], A, mbar.ptr_to([s]), tn, BM, BN, TILES_N)
            phase = phase ^ 1
            base = base + STAGES
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def tma_copy_ring_lagged(
    A: T.Tensor((None, None), "float32"),
    Out: T.Tensor((None, None), "float32"),
    BM: T.constexpr,
    BN: T.constexpr,
    TILES_N: T.constexpr,
    NTILES: T.constexpr,
    STAGES: T.constexpr,
):
    """tma_copy_ring, but a stage is refilled one step after its store was issued
    (``wait_group.read(1)``), so a store stays in flight while the next stage's load lands."""
    tid = T.cuda.thread_idx("x")
    cta = T.cuda.block_idx("x")
    nctas = T.cuda.grid_dim("x")
    buf = T.alloc_shared((STAGES, BM, BN), "float32", align=128)
    mbar = T.alloc_shared((STAGES,), "uint64")
    if tid == 0:
        fill_ring(buf, mbar, A, cta, nctas, BM, BN, TILES_N, NTILES, STAGES)
        phase = 0
        base = 0
        while cta + base * nctas < NTILES:
            for s in T.unroll(STAGES):
                t = cta + (base + s) * nctas
                if t < NTILES:
                    T.cuda.mbarrier_wait(mbar.ptr_to([s]), phase)
                    store_box(Out, buf[s], t, BM, BN, TILES_N)
                T.ptx.cp.async_.bulk.commit_group()
                # The stage stored one step ago takes its next tile once that store has read it.
                previous = (s + STAGES - 1) % STAGES
                tp = cta + (base + s - 1 + STAGES) * nctas
                if base + s > 0:
                    if tp < NTILES:
                        T.ptx.cp.async_.bulk.wait_group.read(1)
                        load_box(buf[previous], A, mbar.ptr_to([previous]), tp, BM, BN, TILES_N)
            phase = phase ^ 1
            base = base + STAGES
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def tma_copy_streaming(
    A: T.Tensor((None, None), "float32"),
    Out: T.Tensor((None, None), "float32"),
    BM: T.constexpr,
    BN: T.constexpr,
):
    """tma_copy_box with an L2 evict-first cache policy on both the load and the store: the data
    is touched once, so it should not displace anything in L2."""
    tid = T.cuda.thread_idx("x")
    row = T.cuda.block_idx("y") * BM
    col = T.cuda.block_idx("x") * BN
    buf = T.alloc_shared((BM, BN), "float32", align=128)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        policy = T.ptx["createpolicy.fractional.L2::evict_first.b64"]()
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(BM * BN * 4))
        T.cuda.tile.apply(
            T.ptx[
                "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
                ".L2::cache_hint"
            ],
            buf,
            A,
            box=(BM, BN),
            coords=(row, col),
            cache_policy=policy,
            mbar=mbar.ptr_to([0]),
        )
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group.L2::cache_hint"],
            Out,
            buf,
            box=(BM, BN),
            coords=(row, col),
            cache_policy=policy,
        )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)


def triton_copy():
    import triton
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    @triton.jit
    def kernel(a_desc, o_desc, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        pid_m = tl.program_id(1)
        pid_n = tl.program_id(0)
        tile = a_desc.load([pid_m * BLOCK_M, pid_n * BLOCK_N])
        o_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], tile)

    def make(a, out, bm, bn):
        a_desc = TensorDescriptor.from_tensor(a, [bm, bn])
        o_desc = TensorDescriptor.from_tensor(out, [bm, bn])
        grid = (a.shape[1] // bn, a.shape[0] // bm)
        return lambda: kernel[grid](a_desc, o_desc, BLOCK_M=bm, BLOCK_N=bn)

    return make


def main() -> None:
    import cupy
    import numpy as np

    nbytes = M * N * 4
    a = cupy.random.standard_normal((M, N), dtype=cupy.float32)
    out = cupy.full_like(a, np.nan)
    # The same bytes as rows of 256 floats: a (BM, 256) box of this view is BM KB of contiguous
    # memory, where a box of the (M, N) matrix is BM rows 64 KB apart.
    rows = M * N // 256
    a_rows, out_rows = a.reshape(rows, 256), out.reshape(rows, 256)
    results = {}

    def measure(name: str, run, **facts) -> None:
        """Check ``run`` copies exactly (output poisoned first), then time it."""
        out.fill(np.nan)
        run()
        cupy.cuda.runtime.deviceSynchronize()
        assert bool((out == a).all()), f"{name} copy is wrong"
        entry = common.time_gpu(run)
        entry["TB_per_s"] = 2 * nbytes / (entry["median_ms"] * 1e-3) / 1e12
        results[name] = dict(entry, **facts)

    measure(
        "memcpy_d2d", lambda: cupy.cuda.runtime.memcpyAsync(out.data.ptr, a.data.ptr, nbytes, 3, 0)
    )
    measure("cupy_copyto", lambda: cupy.copyto(out, a))

    launch = tma_copy[(N // 64, M // 64), 32]
    measure("jittile_tma_64x64_sw128", lambda: launch(a, out))

    for bm, bn, l2 in ((64, 128, 0), (32, 256, 0), (128, 128, 0), (64, 256, 0)):
        run = tma_copy_box[(N // bn, M // bm), 32]
        measure(f"jittile_tma_{bm}x{bn}_sw0_l2p{l2}", lambda: run(a, out, bm, bn, l2))  # noqa: B023
    for bm, l2 in ((32, 0), (64, 0), (128, 0), (32, 3)):
        run = tma_copy_box[(1, rows // bm), 32]
        measure(
            f"jittile_tma_rows256_{bm}x256_l2p{l2}",
            lambda: run(a_rows, out_rows, bm, 256, l2),  # noqa: B023
            view=[rows, 256],
        )
    for bm, bn in ((32, 256),):
        run = tma_copy_streaming[(N // bn, M // bm), 32]
        measure(f"jittile_tma_{bm}x{bn}_sw0_evict_first", lambda: run(a, out, bm, bn))  # noqa: B023

    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    for kernel, label in ((tma_copy_ring, "ring"), (tma_copy_ring_lagged, "ring_lagged")):
        for bm, stages, per_sm in ((32, 4, 1), (32, 2, 3), (64, 3, 1)):
            tn, nt = 1, rows // bm
            run = kernel[sms * per_sm, 32]
            measure(
                f"jittile_tma_{label}_rows256_{bm}x256_{stages}stages_{per_sm}cta_per_sm",
                lambda: run(a_rows, out_rows, bm, 256, tn, nt, stages),  # noqa: B023
                view=[rows, 256],
            )

    tiles_n, ntiles = N // 64, (M // 64) * (N // 64)
    for stages, per_sm in ((4, 3),):
        run = tma_copy_pipelined[sms * per_sm, 32]
        measure(
            f"jittile_tma_pipelined_{stages}stages_{per_sm}cta_per_sm",
            lambda: run(a, out, tiles_n, ntiles, stages),  # noqa: B023
        )

    try:
        import torch

        ta, to = torch.as_tensor(a, device="cuda"), torch.as_tensor(out, device="cuda")
        make = triton_copy()
        for bm, bn in ((64, 64), (64, 128), (128, 128), (32, 256)):
            measure(f"triton_tma_{bm}x{bn}", make(ta, to, bm, bn), box=[bm, bn])
        for bm in (32, 64):
            measure(
                f"triton_tma_rows256_{bm}x256",
                make(ta.view(rows, 256), to.view(rows, 256), bm, 256),
                box=[bm, 256],
                view=[rows, 256],
            )
    except ImportError as exc:
        results["triton"] = {"error": repr(exc)}

    from numba import cuda as ncuda

    @ncuda.jit
    def numba_copy(src, dst):
        i = ncuda.grid(1)
        if i < src.size:
            dst[i] = src[i]

    na, no = ncuda.as_cuda_array(a.ravel()), ncuda.as_cuda_array(out.ravel())
    blocks = (M * N + 255) // 256
    measure("numba_cuda_elementwise", lambda: numba_copy[blocks, 256](na, no))

    memcpy = results["memcpy_d2d"]["median_ms"]
    ratios = {k: memcpy / v["median_ms"] for k, v in results.items() if "median_ms" in v}
    best = {
        prefix: max((k for k in ratios if k.startswith(prefix)), key=ratios.get)
        for prefix in ("jittile", "triton")
        if any(k.startswith(prefix) for k in ratios)
    }
    common.save(
        "tma_copy",
        {
            "bytes": nbytes,
            "shape": [M, N],
            "results": results,
            "ratio_vs_memcpy": ratios,
            "best": {p: {"variant": k, "ratio": ratios[k]} for p, k in best.items()},
        },
    )


if __name__ == "__main__":
    main()
