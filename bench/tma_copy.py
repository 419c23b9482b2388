"""1 GiB fp32 matrix copy: jittile TMA (64x64 tiles, 128B swizzle) vs D2D memcpy, Triton's TMA copy,
a numba-cuda element copy and CuPy, in one run. Bandwidth counts bytes read + written.

    PYTHONPATH=$PWD python3 bench/tma_copy.py
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

import jittile  # noqa: E402
from jittile import T  # noqa: E402
from jittile.layout import swizzle  # noqa: E402

M = N = 16384  # 1 GiB of float32
BM, BN = 64, 32


@jittile.kernel
def tma_copy(A: T.Tensor((None, None), "float32"), Out: T.Tensor((None, None), "float32")):
    """Each CTA moves a 64x64 tile as two swizzled 64x32 boxes: load, wait, store."""
    tid = T.cuda.thread_idx("x")
    row = T.cuda.block_idx("y") * 64
    col = T.cuda.block_idx("x") * 64
    buf = T.alloc_shared((2, 64, 32), "float32", layout=swizzle(3, (2, 64, 32), "float32"),
                         align=1024)
    mbar = T.alloc_shared((1,), "uint64")
    if tid == 0:
        T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([0]), T.uint32(16384))
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"],
            buf, A, box=(64, 32), coords=(row, col), coord_steps=((0, 32),), swizzle=3,
            mbar=mbar.ptr_to([0]))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
                          Out, buf, box=(64, 32), coords=(row, col), coord_steps=((0, 32),),
                          swizzle=3)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)


@jittile.kernel
def tma_copy_pipelined(A: T.Tensor((None, None), "float32"), Out: T.Tensor((None, None), "float32"),
                       TILES_N: T.constexpr, NTILES: T.constexpr, STAGES: T.constexpr):
    """Persistent CTAs, one issuing thread, STAGES 64x64 tiles in flight: the stores of one round
    overlap the loads of the next (each stage is refilled once its store has read it)."""
    tid = T.cuda.thread_idx("x")
    cta = T.cuda.block_idx("x")
    nctas = T.cuda.grid_dim("x")
    buf = T.alloc_shared((STAGES, 2, 64, 32), "float32",
                         layout=swizzle(3, (STAGES, 2, 64, 32), "float32"), align=1024)
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
                    T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile"
                          ".mbarrier::complete_tx::bytes"],
                    buf[s], A, box=(64, 32), coords=((t // TILES_N) * 64, (t % TILES_N) * 64),
                    coord_steps=((0, 32),), swizzle=3, mbar=mbar.ptr_to([s]))
        phase = 0
        base = 0
        while cta + base * nctas < NTILES:
            for s in T.unroll(STAGES):
                t = cta + (base + s) * nctas
                if t < NTILES:
                    T.cuda.mbarrier_wait(mbar.ptr_to([s]), phase)
                    T.cuda.tile.apply(
                        T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
                        Out, buf[s], box=(64, 32), coords=((t // TILES_N) * 64,
                                                           (t % TILES_N) * 64),
                        coord_steps=((0, 32),), swizzle=3)
                T.ptx.cp.async_.bulk.commit_group()
            for s in T.unroll(STAGES):
                t = cta + (base + STAGES + s) * nctas
                if t < NTILES:
                    T.ptx.cp.async_.bulk.wait_group.read(STAGES - 1 - s)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([s]), T.uint32(16384))
                    T.cuda.tile.apply(
                        T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile"
                              ".mbarrier::complete_tx::bytes"],
                        buf[s], A, box=(64, 32), coords=((t // TILES_N) * 64,
                                                         (t % TILES_N) * 64),
                        coord_steps=((0, 32),), swizzle=3, mbar=mbar.ptr_to([s]))
            phase = phase ^ 1
            base = base + STAGES
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def tma_copy_box(A: T.Tensor((None, None), "float32"), Out: T.Tensor((None, None), "float32"),
                 BM: T.constexpr, BN: T.constexpr, L2: T.constexpr):
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
            buf, A, box=(BM, BN), coords=(row, col), l2_promotion=L2, mbar=mbar.ptr_to([0]))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        T.cuda.tile.apply(T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
                          Out, buf, box=(BM, BN), coords=(row, col), l2_promotion=L2)
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group.read(0)


@jittile.kernel
def tma_copy_ring(A: T.Tensor((None, None), "float32"), Out: T.Tensor((None, None), "float32"),
                  BM: T.constexpr, BN: T.constexpr, TILES_N: T.constexpr, NTILES: T.constexpr,
                  STAGES: T.constexpr):
    """Persistent CTAs over unswizzled (BM, BN) boxes with a STAGES-deep ring: each stage is
    reloaded as soon as the store that read it has finished reading."""
    tid = T.cuda.thread_idx("x")
    cta = T.cuda.block_idx("x")
    nctas = T.cuda.grid_dim("x")
    buf = T.alloc_shared((STAGES, BM, BN), "float32", align=128)
    mbar = T.alloc_shared((STAGES,), "uint64")
    if tid == 0:
        for s in T.unroll(STAGES):
            T.ptx.mbarrier.init.shared.b64(mbar.ptr_to([s]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        for s in T.unroll(STAGES):
            t = cta + s * nctas
            if t < NTILES:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([s]), T.uint32(BM * BN * 4))
                T.cuda.tile.apply(
                    T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile"
                          ".mbarrier::complete_tx::bytes"],
                    buf[s], A, box=(BM, BN), coords=((t // TILES_N) * BM, (t % TILES_N) * BN),
                    mbar=mbar.ptr_to([s]))
        phase = 0
        base = 0
        while cta + base * nctas < NTILES:
            for s in T.unroll(STAGES):
                t = cta + (base + s) * nctas
                if t < NTILES:
                    T.cuda.mbarrier_wait(mbar.ptr_to([s]), phase)
                    T.cuda.tile.apply(
                        T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"],
                        Out, buf[s], box=(BM, BN), coords=((t // TILES_N) * BM,
                                                           (t % TILES_N) * BN))
                T.ptx.cp.async_.bulk.commit_group()
                tn = t + STAGES * nctas
                if tn < NTILES:
                    T.ptx.cp.async_.bulk.wait_group.read(0)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(mbar.ptr_to([s]),
                                                               T.uint32(BM * BN * 4))
                    T.cuda.tile.apply(
                        T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile"
                              ".mbarrier::complete_tx::bytes"],
                        buf[s], A, box=(BM, BN), coords=((tn // TILES_N) * BM,
                                                         (tn % TILES_N) * BN),
                        mbar=mbar.ptr_to([s]))
            phase = phase ^ 1
            base = base + STAGES
        T.ptx.cp.async_.bulk.wait_group(0)


@jittile.kernel
def tma_copy_streaming(A: T.Tensor((None, None), "float32"),
                       Out: T.Tensor((None, None), "float32"), BM: T.constexpr, BN: T.constexpr):
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
            T.ptx["cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
                  ".L2::cache_hint"],
            buf, A, box=(BM, BN), coords=(row, col), cache_policy=policy, mbar=mbar.ptr_to([0]))
        T.cuda.mbarrier_wait(mbar.ptr_to([0]), 0)
        T.cuda.tile.apply(
            T.ptx["cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group.L2::cache_hint"],
            Out, buf, box=(BM, BN), coords=(row, col), cache_policy=policy)
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
    results = {}

    def bw(entry):
        entry["TB_per_s"] = 2 * nbytes / (entry["median_ms"] * 1e-3) / 1e12
        return entry

    results["memcpy_d2d"] = bw(common.time_gpu(
        lambda: cupy.cuda.runtime.memcpyAsync(out.data.ptr, a.data.ptr, nbytes, 3, 0)))

    launch = tma_copy[(N // 64, M // 64), 32]
    out.fill(np.nan)
    launch(a, out)
    cupy.cuda.runtime.deviceSynchronize()
    assert bool((out == a).all()), "jittile TMA copy is wrong"
    results["jittile_tma_64x64_sw128"] = bw(common.time_gpu(lambda: launch(a, out)))

    for bm, bn, l2 in ((64, 128, 0), (32, 256, 0), (128, 128, 0), (16, 256, 0), (64, 256, 0)):
        run = tma_copy_box[(N // bn, M // bm), 32]
        out.fill(np.nan)
        run(a, out, bm, bn, l2)
        cupy.cuda.runtime.deviceSynchronize()
        assert bool((out == a).all()), f"jittile {bm}x{bn} copy is wrong"
        results[f"jittile_tma_{bm}x{bn}_sw0_l2p{l2}"] = bw(common.time_gpu(
            lambda: run(a, out, bm, bn, l2)))

    for bm, bn in ((32, 256), (64, 128)):
        run = tma_copy_streaming[(N // bn, M // bm), 32]
        out.fill(np.nan)
        run(a, out, bm, bn)
        cupy.cuda.runtime.deviceSynchronize()
        assert bool((out == a).all()), f"jittile streaming {bm}x{bn} copy is wrong"
        results[f"jittile_tma_{bm}x{bn}_sw0_evict_first"] = bw(common.time_gpu(
            lambda: run(a, out, bm, bn)))

    sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
    for bm, bn, stages, per_sm in ((32, 256, 4, 1), (16, 256, 4, 3), (32, 256, 2, 3)):
        tn, nt = N // bn, (M // bm) * (N // bn)
        run = tma_copy_ring[sms * per_sm, 32]
        out.fill(np.nan)
        run(a, out, bm, bn, tn, nt, stages)
        cupy.cuda.runtime.deviceSynchronize()
        assert bool((out == a).all()), f"jittile ring copy {bm}x{bn}x{stages} is wrong"
        results[f"jittile_tma_ring_{bm}x{bn}_{stages}stages_{per_sm}cta_per_sm"] = bw(
            common.time_gpu(lambda: run(a, out, bm, bn, tn, nt, stages)))

    tiles_n, ntiles = N // 64, (M // 64) * (N // 64)
    for stages, per_sm in ((4, 3), (3, 4), (2, 6)):
        run = tma_copy_pipelined[sms * per_sm, 32]
        out.fill(np.nan)
        run(a, out, tiles_n, ntiles, stages)
        cupy.cuda.runtime.deviceSynchronize()
        assert bool((out == a).all()), f"jittile pipelined copy ({stages} stages) is wrong"
        results[f"jittile_tma_pipelined_{stages}stages_{per_sm}cta_per_sm"] = bw(common.time_gpu(
            lambda: run(a, out, tiles_n, ntiles, stages)))

    try:
        import torch

        ta = torch.as_tensor(a, device="cuda")
        to = torch.empty_like(ta)
        make = triton_copy()
        best = None
        for bm, bn in ((64, 64), (128, 64), (64, 128), (128, 128), (32, 128)):
            run = make(ta, to, bm, bn)
            entry = bw(common.time_gpu(run))
            entry["box"] = [bm, bn]
            results[f"triton_tma_{bm}x{bn}"] = entry
            if best is None or entry["median_ms"] < best["median_ms"]:
                best = entry
        assert bool((to == ta).all()), "Triton copy is wrong"
        results["triton_tma_best"] = best
    except Exception as exc:
        results["triton_tma_best"] = {"error": repr(exc)}

    from numba import cuda as ncuda

    @ncuda.jit
    def numba_copy(src, dst):
        i = ncuda.grid(1)
        if i < src.size:
            dst[i] = src[i]

    na, no = ncuda.as_cuda_array(a.ravel()), ncuda.as_cuda_array(out.ravel())
    blocks = (M * N + 255) // 256
    results["numba_cuda_elementwise"] = bw(common.time_gpu(lambda: numba_copy[blocks, 256](na, no)))
    results["cupy_copyto"] = bw(common.time_gpu(lambda: cupy.copyto(out, a)))

    memcpy = results["memcpy_d2d"]["median_ms"]
    ratios = {k: memcpy / v["median_ms"] for k, v in results.items() if "median_ms" in v}
    common.save("tma_copy", {"bytes": nbytes, "shape": [M, N], "results": results,
                             "ratio_vs_memcpy": ratios})


if __name__ == "__main__":
    main()
