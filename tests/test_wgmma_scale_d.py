"""A wgmma with a static ``scale_d=0`` discards the accumulator (``D = A @ B``) in the interpreter
as on the GPU, whatever the registers held; ``scale_d=1`` adds to them."""

import ml_dtypes
import numpy as np
import pytest

import jittile
from jittile import T
from jittile.layout import swizzle, tiled_swizzle, wgmma_accumulator

MMA = "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16"


def _product(scale_d: int):
    @jittile.kernel
    def product(
        A: T.Tensor((64, 16), "bfloat16"),
        B: T.Tensor((16, 64), "bfloat16"),
        D: T.Tensor((64, 64), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        tid = T.cuda.thread_idx("x")
        A_s = T.alloc_shared(
            (64, 16), "bfloat16", layout=swizzle(1, (64, 16), "bfloat16"), align=1024
        )
        B_s = T.alloc_shared(
            (16, 64), "bfloat16", layout=tiled_swizzle(3, (16, 64), "bfloat16"), align=1024
        )
        for c in range(8):
            A_s[tid // 2, (tid % 2) * 8 + c] = A[tid // 2, (tid % 2) * 8 + c]
            B_s[tid // 8, (tid % 8) * 8 + c] = B[tid // 8, (tid % 8) * 8 + c]
        T.ptx.fence.proxy.async_.shared__cta()
        T.cuda.cta_sync()
        acc = T.alloc_local((64, 64), "float32", layout=wgmma_accumulator)
        for i in T.unroll(acc.size):
            acc[i] = D[acc.row(i), acc.col(i)]
        T.ptx.wgmma.fence.sync.aligned()
        T.cuda.tile.apply(T.ptx[MMA], acc, A_s, B_s, scale_d=scale_d)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(0)
        for i in T.unroll(acc.size):
            D[acc.row(i), acc.col(i)] = acc[i]

    return product


@pytest.mark.parametrize("scale_d", [0, 1])
def test_static_scale_d(scale_d):
    rng = np.random.default_rng(4)
    a = rng.integers(-3, 4, (64, 16)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-3, 4, (16, 64)).astype(ml_dtypes.bfloat16)
    d = np.full((64, 64), 100.0, np.float32)
    _product(scale_d).interpret(a, b, d)
    expected = a.astype(np.float32) @ b.astype(np.float32) + 100.0 * scale_d
    np.testing.assert_array_equal(d, expected)
