"""Kernels the autotuner tests tune (a file of their own: worker processes import it)."""
import jittile
from jittile import T


@jittile.autotune(configs=[jittile.Config({"WIDTH": 32}), jittile.Config({"WIDTH": 64}),
                           jittile.Config({"WIDTH": 4096})],  # 4096 floats x 64 KB: too much
                  key=["n"])
@jittile.kernel
def tiled_fill(Out: T.Tensor((None,), "float32"), n: T.int32, WIDTH: T.constexpr):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    buf = T.alloc_shared((WIDTH, 16), "float32")
    buf[0, 0] = 1.0
    T.cuda.cta_sync()
    if i < n:
        Out[i] = buf[0, 0] * WIDTH
