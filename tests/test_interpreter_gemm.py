"""examples/gemm_bf16.py on the CPU interpreter: every instruction it issues is modelled (TMA,
mbarriers, wgmma, named barriers, stmatrix, the TMA store), and a ragged product over a persistent
loop of 4 tiles on 2 CTAs comes out exact (small integers: every sum is representable)."""
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def test_the_gemm_example_interpreted_is_exact():
    import gemm_bf16

    m, n, k = 130, 264, 136
    rng = np.random.default_rng(0)
    a = rng.integers(-2, 3, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-2, 3, (n, k)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, dtype=ml_dtypes.bfloat16)
    gemm_bf16.gemm_bf16.interpret[(2,), (384,)](a, b, c, m, n, k)
    np.testing.assert_array_equal(c.astype(np.float32),
                                  a.astype(np.float32) @ b.astype(np.float32).T)


def _named(count: int):
    import jittile
    from jittile import T

    @jittile.kernel
    def named(Out: T.Tensor((64,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
        tid = T.cuda.thread_idx("x")
        flags = T.alloc_shared((64,), "int32")
        flags[tid] = tid
        T.ptx.bar.sync(1, count)
        Out[tid] = flags[63 - tid]

    return named


def test_named_barriers_wait_for_their_count():
    import jittile

    out = np.zeros(64, np.int32)
    _named(64).interpret(out)
    assert (out == np.arange(63, -1, -1)).all()
    with pytest.raises(jittile.InterpreterError, match="named barrier 1 for 96 threads, of "
                                                       "which 64 arrived"):
        _named(96).interpret(np.zeros(64, np.int32))
