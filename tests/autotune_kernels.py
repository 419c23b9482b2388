"""Kernels the autotuner tests tune (a file of their own: worker processes import it)."""

import jittile
from jittile import T


@jittile.autotune(
    configs=[
        jittile.Config({"WIDTH": 32}),
        jittile.Config({"WIDTH": 64}),
        jittile.Config({"WIDTH": 4096}),
    ],  # 4096 floats x 64 KB: too much
    key=["n"],
)
@jittile.kernel
def tiled_fill(Out: T.Tensor((None,), "float32"), n: T.int32, WIDTH: T.constexpr):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    buf = T.alloc_shared((WIDTH, 16), "float32")
    buf[0, 0] = 1.0
    T.cuda.cta_sync()
    if i < n:
        Out[i] = buf[0, 0] * WIDTH


@jittile.autotune(
    configs=[jittile.Config({"PER_THREAD": p}) for p in (1, 2, 4)], key=["n"], restore_value=["Out"]
)
@jittile.kernel
def strided_scale(
    X: T.Tensor((None,), "float32"),
    Out: T.Tensor((None,), "float32"),
    n: T.int32,
    PER_THREAD: T.constexpr,
):
    """Out[i] = 2 X[i], each thread taking PER_THREAD elements a block apart."""
    base = T.cuda.block_idx("x") * 256 * PER_THREAD + T.cuda.thread_idx("x")
    for j in T.unroll(PER_THREAD):
        i = base + j * 256
        if i < n:
            Out[i] = X[i] * 2.0
