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
    np.testing.assert_array_equal(
        c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32).T
    )


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
    with pytest.raises(
        jittile.InterpreterError, match="named barrier 1 for 96 threads, of which 64 arrived"
    ):
        _named(96).interpret(np.zeros(64, np.int32))


def _stmatrix(count: int, trans: bool):
    import jittile
    from jittile import T

    opcode = f"stmatrix.sync.aligned.m8n8.x{count}{'.trans' if trans else ''}.shared.b16"

    @jittile.kernel
    def store(Out: T.Tensor((8 * count, 8), "uint16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        tile = T.alloc_shared((8 * count, 8), "uint16", align=16)
        row = lane % (8 * count)  # lanes 8i..8i+7 address the rows of matrix i (others repeat)
        w0 = T.uint32(lane * 4 * 0x20002 + 0x10000)
        w1 = T.uint32((lane * 4 + 1) * 0x20002 + 0x10000)
        w2 = T.uint32((lane * 4 + 2) * 0x20002 + 0x10000)
        w3 = T.uint32((lane * 4 + 3) * 0x20002 + 0x10000)
        if count == 1:
            T.ptx[opcode](tile.ptr_to([row, 0]), w0)
        elif count == 2:
            T.ptx[opcode](tile.ptr_to([row, 0]), w0, w1)
        else:
            T.ptx[opcode](tile.ptr_to([row, 0]), w0, w1, w2, w3)
        T.cuda.cta_sync()
        for c in range(8):
            if lane < 8 * count:
                Out[lane, c] = tile[lane, c]

    return store


@pytest.mark.parametrize("count", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_stmatrix_stores_each_lanes_pairs_at_their_rows(count, trans):
    """PTX ISA (stmatrix): in matrix i, lane 4r + q holds row r, columns 2q and 2q + 1 (low half
    first) in its register i; .trans stores the transpose."""
    import numpy as np

    out = np.zeros((8 * count, 8), np.uint16)
    _stmatrix(count, trans).interpret(out)
    expected = np.zeros((count, 8, 8), np.uint16)
    for matrix in range(count):
        for lane in range(32):
            word = ((lane * 4 + matrix) * 0x20002 + 0x10000) & 0xFFFFFFFF
            r, q = divmod(lane, 4)
            expected[matrix, r, 2 * q : 2 * q + 2] = (word & 0xFFFF, word >> 16)
        if trans:
            expected[matrix] = expected[matrix].T
    np.testing.assert_array_equal(out, expected.reshape(8 * count, 8))


def test_the_examples_launch_interprets_ml_dtypes_arrays_without_a_gpu():
    """``gemm_bf16.launch(a, b, c)``, the entry point API.md names, on NumPy bf16 arrays: on the
    CPU interpreter where there is no GPU (on the H200 the GPU tests launch it)."""
    import gemm_bf16

    from jittile.runtime import driver

    if driver.available():
        pytest.skip("a GPU is present: tests/test_gpu_gemm.py launches the example there")
    m, n, k = 70, 136, 72
    rng = np.random.default_rng(1)
    a = rng.integers(-2, 3, (m, k)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-2, 3, (n, k)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, dtype=ml_dtypes.bfloat16)
    gemm_bf16.launch(a, b, c)
    np.testing.assert_array_equal(
        c.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32).T
    )
