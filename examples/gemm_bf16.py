"""A bf16 GEMM on Hopper tensor cores: ``C = A @ B.T`` (A is (M, K), B is (N, K), both K-major as
nn.Linear keeps its weights; fp32 accumulation, bf16 out).

The kernel is the classic warp-specialized persistent design, written in jittile:

- one *producer* warpgroup whose first thread
  streams 128x64 tiles of A and 256x64 tiles of B into a ``STAGES``-deep ring of 128B-swizzled
  shared buffers with TMA, each stage guarded by a ``full`` mbarrier (TMA transaction bytes) and
  an ``empty`` one (released by the consumers);
- two *consumer* warpgroups, each owning 64 rows of the 128x256 output tile
  as a register fragment, issuing four ``wgmma.mma_async.m64n256k16`` per stage (one tile call:
  the 64x64 K-slice expands into four instructions with advancing descriptors), keeping one
  wgmma group in flight while they release the stage before it;
- a persistent loop over output tiles (one CTA per SM), so the producer already loads the next
  tile while the consumers run the epilogue: round to bf16 pairs, store them into a swizzled
  shared tile, and write it with a TMA store that clips at M and N.

Registers: the 384-thread block gives every thread 168 registers, and the consumers' 128-float
accumulator plus their loop state fit in them (0 bytes of local memory), so the kernel needs no
``setmaxnreg`` (examples/attention_fwd.py uses it: jittile then assembles the kernel with a
standalone ptxas, as nvJitLink's ignores it). Its index arithmetic
stays 32-bit: a 64-bit division is a call, and a call makes ptxas serialize every wgmma (C7509).

M, N and K need not be multiples of the tile: TMA loads fill out-of-bounds elements with zeros
(they add nothing to the products) and TMA stores skip them. (TMA needs 16-byte row strides: K
and N multiples of 8.)
"""
import numpy as np

import jittile
from jittile import T
from jittile.layout import swizzle, wgmma_accumulator

BM, BN, BK = 128, 256, 64  # the CTA's output tile and the K-slice of one pipeline stage
STAGES = 4
EPILOGUE_N = 128  # the epilogue stages the tile in two 64x128 halves per warpgroup
GROUP_M = 8  # tiles run in bands of 8 row-blocks, so concurrent CTAs share A and B in L2
LOAD = "cp.async.bulk.tensor.2d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
MMA = "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16"
STAGE_BYTES = (BM + BN) * BK * 2


@jittile.func
def tile_origin(tile, tiles_m, tiles_n):
    """(row, column) of output tile ``tile``: column-major within bands of GROUP_M row-blocks.
    The divisions are 32-bit: a 64-bit one is a call into ptxas' runtime, and a call in the
    kernel makes ptxas serialize every wgmma."""
    band_tiles = T.uint32(GROUP_M * tiles_n)
    first = T.uint32(tile) // band_tiles * GROUP_M
    rows = T.uint32(min(tiles_m - first, GROUP_M))
    within = T.uint32(tile) % band_tiles
    return (first + within % rows) * BM, (within // rows) * BN


@jittile.kernel
def gemm_bf16(A: T.Tensor((None, None), "bfloat16"), B: T.Tensor((None, None), "bfloat16"),
              C: T.Tensor((None, None), "bfloat16"), M: T.int32, N: T.int32, K: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=132, block=384))
    tid = T.cuda.thread_idx("x")
    warpgroup = T.cuda.warp_id() // 4
    A_s = T.alloc_shared((STAGES, 2, 64, BK), "bfloat16",
                         layout=swizzle(3, (STAGES, 2, 64, BK), "bfloat16"), align=1024)
    B_s = T.alloc_shared((STAGES, BN, BK), "bfloat16",
                         layout=swizzle(3, (STAGES, BN, BK), "bfloat16"), align=1024)
    C_s = T.alloc_shared((2, 64, EPILOGUE_N), "bfloat16", align=1024)
    full = T.alloc_shared((STAGES,), "uint64")
    empty = T.alloc_shared((STAGES,), "uint64")
    if tid == 0:
        for s in T.unroll(STAGES):
            T.ptx.mbarrier.init.shared.b64(full.ptr_to([s]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(empty.ptr_to([s]), T.uint32(2))
        T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    tiles_m = (M + BM - 1) // BM
    tiles_n = (N + BN - 1) // BN
    tiles = tiles_m * tiles_n
    k_tiles = (K + BK - 1) // BK
    if warpgroup == 0:  # producer
        if tid == 0:
            loaded = 0
            job = T.cuda.block_idx("x")
            while job < tiles:
                m0, n0 = tile_origin(job, tiles_m, tiles_n)
                for kt in range(k_tiles):
                    s = loaded % STAGES
                    T.cuda.mbarrier_wait(empty.ptr_to([s]), ((loaded // STAGES) & 1) ^ 1)
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(full.ptr_to([s]),
                                                              T.uint32(STAGE_BYTES))
                    T.cuda.tile.apply(T.ptx[LOAD], A_s[s], A, box=(64, BK), coords=(m0, kt * BK),
                                      coord_steps=((64, 0),), swizzle=3, mbar=full.ptr_to([s]))
                    T.cuda.tile.apply(T.ptx[LOAD], B_s[s], B, box=(BN, BK), coords=(n0, kt * BK),
                                      swizzle=3, mbar=full.ptr_to([s]))
                    loaded += 1
                job += T.cuda.grid_dim("x")
    else:  # consumers: warpgroup 1 computes rows 0..63 of the tile, warpgroup 2 rows 64..127
        half = warpgroup - 1
        leader = tid % 128 == 0
        lane = T.cuda.lane_id()
        # stmatrix: lanes 8i..8i+7 address the rows of matrix i (rows +8 for odd i, columns +8
        # for i >= 2) of the warp's 16 rows
        row = (T.cuda.warp_id() % 4) * 16 + lane % 8 + 8 * ((lane // 8) % 2)
        acc = T.alloc_local((64, BN), "float32", layout=wgmma_accumulator)
        it = 0
        tile = T.cuda.block_idx("x")
        while tile < tiles:
            for kt in range(k_tiles):
                s = it % STAGES
                T.cuda.mbarrier_wait(full.ptr_to([s]), (it // STAGES) & 1)
                T.ptx.wgmma.fence.sync.aligned()
                T.cuda.tile.apply(T.ptx[MMA], acc, A_s[s, half], B_s[s].T, scale_d=kt)
                T.ptx.wgmma.commit_group.sync.aligned()
                T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous stage's MMAs are done
                if kt > 0 and leader:
                    T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([(it + STAGES - 1) % STAGES]))
                it += 1
            T.ptx.wgmma.wait_group.sync.aligned(0)
            if leader:
                T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([(it + STAGES - 1) % STAGES]))
            for p in T.unroll(BN // EPILOGUE_N):
                if leader:
                    T.ptx.cp.async_.bulk.wait_group.read(0)  # the last store has read C_s
                T.ptx.bar.sync(1 + half, 128)
                for j in T.unroll(EPILOGUE_N // 16):  # 16 columns: four 8x8 matrices
                    r = 8 * (p * EPILOGUE_N // 16 + j)  # their first accumulator register
                    col = 16 * j + 8 * (lane // 16)
                    T.ptx.stmatrix.sync.aligned.m8n8.x4.shared.b16(
                        C_s.ptr_to([half, row, col]),
                        T.ptx.cvt.rn.bf16x2.f32(acc[r + 1], acc[r]),
                        T.ptx.cvt.rn.bf16x2.f32(acc[r + 3], acc[r + 2]),
                        T.ptx.cvt.rn.bf16x2.f32(acc[r + 5], acc[r + 4]),
                        T.ptx.cvt.rn.bf16x2.f32(acc[r + 7], acc[r + 6]))
                T.ptx.fence.proxy.async_.shared__cta()
                T.ptx.bar.sync(1 + half, 128)
                if leader:
                    m0, n0 = tile_origin(tile, tiles_m, tiles_n)
                    T.cuda.tile.apply(T.ptx[STORE], C, C_s[half], box=(64, EPILOGUE_N),
                                      coords=(m0 + 64 * half, n0 + p * EPILOGUE_N))
                    T.ptx.cp.async_.bulk.commit_group()
            tile += T.cuda.grid_dim("x")
        if leader:
            T.ptx.cp.async_.bulk.wait_group(0)


def launch(a, b, c, sms: int = 132) -> None:
    """``c = a @ b.T`` for device arrays (torch or CuPy), one persistent CTA per SM. Without a
    GPU it runs on the CPU interpreter (NumPy ``ml_dtypes.bfloat16`` arrays), one CTA per output
    tile at most: the persistent loop computes the same tiles with any number of CTAs."""
    from jittile.runtime import driver

    m, k = a.shape
    n = b.shape[0]
    if driver.available():
        gemm_bf16[(sms,), (384,)](a, b, c, m, n, k)
        return
    tiles = -(-m // BM) * -(-n // BN)
    gemm_bf16.interpret[(min(sms, tiles),), (384,)](a, b, c, m, n, k)


def main() -> None:
    ck = gemm_bf16.compile(T.Tensor((None, None), "bfloat16"), T.Tensor((None, None), "bfloat16"),
                           T.Tensor((None, None), "bfloat16"), np.int32(1), np.int32(1),
                           np.int32(1), target="sm_90a")
    hgmma = [line.split(";")[0].split("*/")[-1].strip() for line in ck.sass.splitlines()
             if "HGMMA" in line]
    print(f"gemm_bf16: {len(hgmma)} HGMMA per stage ({hgmma[0]}), "
          f"{ck.metadata['registers']} registers, {ck.metadata['local_bytes']} bytes of local "
          f"memory, {ck.metadata['shared_bytes']} bytes of shared memory")
    from jittile.runtime import driver

    if not driver.available():
        print("gemm_bf16: no GPU here; compiled only (gemm_bf16.interpret[(2,), (384,)](a, b, c, "
              "m, n, k) runs it on the CPU interpreter, ml_dtypes.bfloat16 NumPy arrays or bf16 "
              "torch tensors in and out)")
        return
    import torch

    for m, n, k in ((512, 768, 320), (300, 520, 200)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        launch(a, b, c, torch.cuda.get_device_properties(0).multi_processor_count)
        expected = (a.float() @ b.float().T)
        error = (c.float() - expected).abs().max().item()
        assert error <= 0.02 * expected.abs().max().item(), error
        print(f"gemm_bf16 {m}x{n}x{k}: OK on the GPU (max |error| {error:.3g})")


if __name__ == "__main__":
    main()
