"""jittile.fragment_algebra: row reductions, row scaling and the accumulator -> A-fragment
conversion, interpreted against NumPy; their contracts (layout, shape, dtype) both ways; and the
code they compile to (shuffles and min/max, no local memory)."""

import math_kernels
import ml_dtypes
import numpy as np
import pytest

import jittile
from jittile import T
from jittile.fragment_algebra import (
    exp2_rows,
    row_max,
    row_sum,
    scale_rows,
    thread_row_sum,
    to_bf16_a,
    to_f16_a,
)
from jittile.interpreter.math import fma_f32
from jittile.layout import wgmma_a, wgmma_accumulator

N = 32


@jittile.kernel
def reductions(
    X: T.Tensor((64, N), "float32"), Out: T.Tensor((4, 64), "float32"), scale: T.float32
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    acc = T.alloc_local((64, N), "float32", layout=wgmma_accumulator)
    for i in T.unroll(acc.size):
        acc[i] = X[acc.row(i), acc.col(i)]
    top_max, bottom_max = row_max(acc)
    top_sum, bottom_sum = row_sum(acc)
    exp2_rows(acc, scale, top_max, bottom_max)
    top_exp, bottom_exp = thread_row_sum(acc)
    scale_rows(acc, top_sum, bottom_sum)
    top_scaled, bottom_scaled = thread_row_sum(acc)
    Out[0, acc.row(0)] = top_max
    Out[0, acc.row(2)] = bottom_max
    Out[1, acc.row(0)] = top_sum
    Out[1, acc.row(2)] = bottom_sum
    if T.cuda.lane_id() % 4 == 0:  # the quad's first thread: its own registers only
        Out[2, acc.row(0)] = top_exp
        Out[2, acc.row(2)] = bottom_exp
        Out[3, acc.row(0)] = top_scaled
        Out[3, acc.row(2)] = bottom_scaled


def test_row_reductions_scaling_and_exp2_match_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, N)).astype(np.float32)
    out = np.zeros((4, 64), np.float32)
    reductions.interpret(x, out, np.float32(0.7))
    np.testing.assert_array_equal(out[0], x.max(1))
    np.testing.assert_allclose(out[1], x.sum(1), rtol=1e-6, atol=1e-6)
    mine = np.concatenate([x[:, 8 * c : 8 * c + 2] for c in range(N // 8)], axis=1)  # lane q = 0
    exp = np.exp2(mine * 0.7 - x.max(1, keepdims=True) * 0.7)
    np.testing.assert_allclose(out[2], exp.sum(1), rtol=1e-5)
    np.testing.assert_allclose(out[3], (exp * x.sum(1, keepdims=True)).sum(1), rtol=1e-5)


def test_row_reductions_compile_to_shuffles_without_local_memory():
    ck = reductions.compile(
        T.Tensor((64, N), "float32"), T.Tensor((4, 64), "float32"), np.float32(1), target="sm_90a"
    )
    sass = ck.sass
    assert "SHFL.BFLY" in sass and "FMNMX" in sass and "MUFU.EX2" in sass
    assert ck.metadata["local_bytes"] == 0


@jittile.kernel
def exponentials(
    X: T.Tensor((64, N), "float32"),
    Y: T.Tensor((64, N), "float32"),
    scale: T.float32,
    FMA_EVERY: T.constexpr,
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    acc = T.alloc_local((64, N), "float32", layout=wgmma_accumulator)
    for i in T.unroll(acc.size):
        acc[i] = X[acc.row(i), acc.col(i)]
    top_max, bottom_max = row_max(acc)
    exp2_rows(acc, scale, top_max, bottom_max, fma_every=FMA_EVERY)
    for i in T.unroll(acc.size):
        Y[acc.row(i), acc.col(i)] = acc[i]


def _fma_columns(every: int) -> np.ndarray:
    """The columns whose registers (groups of four: 8 columns, both rows) take T.exp2_fma."""
    columns = np.arange(N)
    return (columns // 8) % every == every - 1


@pytest.mark.parametrize("every", [2, 4])
def test_exp2_rows_takes_a_share_on_the_fma_pipes(every):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, N)) * 4).astype(np.float32)
    y = np.zeros_like(x)
    scale = np.float32(0.7)
    exponentials.interpret(x, y, scale, every)
    shift = -x.max(1, keepdims=True) * scale
    argument = np.vectorize(fma_f32, otypes=[np.float32])(x, scale, shift)
    on_fma = np.broadcast_to(_fma_columns(every), x.shape)
    assert np.array_equal(y[on_fma], math_kernels.exp2_fma_reference(argument[on_fma]))
    np.testing.assert_allclose(y[~on_fma], np.exp2(argument[~on_fma].astype(np.float64)), 2e-7)
    specs = (T.Tensor((64, N), "float32"),) * 2 + (np.float32(1),)
    builds = [exponentials.compile(*specs, k, target="sm_90a") for k in (0, every)]
    mufu = [build.sass.count("MUFU.EX2") for build in builds]
    assert mufu == [64 * N // 128, 64 * N // 128 * (every - 1) // every]


def _conversion_kernel(atype: str, convert):
    @jittile.kernel
    def convert_kernel(X: T.Tensor((64, N), "float32"), Words: T.Tensor((64, N // 2), "uint32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        acc = T.alloc_local((64, N), "float32", layout=wgmma_accumulator)
        a = T.alloc_local((64, N), atype, layout=wgmma_a)
        for i in T.unroll(acc.size):
            acc[i] = X[acc.row(i), acc.col(i)]
        convert(acc, a)
        for m in T.unroll(a.size):
            Words[a.row(m), a.col(m) // 2] = a[m]

    return convert_kernel


@pytest.mark.parametrize(
    "atype, convert, numpy_type",
    [("bfloat16", to_bf16_a, ml_dtypes.bfloat16), ("float16", to_f16_a, np.float16)],
)
def test_accumulator_converts_to_the_a_fragment_of_its_columns(atype, convert, numpy_type):
    """Register a[m] holds columns (col, col + 1) of its row, the first in the low half: the
    A-fragment layout, rounded to nearest even."""
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((64, N)) * 3).astype(np.float32)
    words = np.zeros((64, N // 2), np.uint32)
    _conversion_kernel(atype, convert).interpret(x, words)
    expected = np.ascontiguousarray(x.astype(numpy_type)).view(np.uint16).view(np.uint32)
    np.testing.assert_array_equal(words, expected)


def _compile(body):
    kernel = jittile.kernel(body)
    return kernel.compile(T.Tensor((64, N), "float32"), target="sm_90a")


def test_a_reduction_of_an_a_fragment_is_refused():
    def wrong_layout(X: T.Tensor((64, N), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        a = T.alloc_local((64, N), "bfloat16", layout=wgmma_a)
        top, bottom = row_max(a)
        X[0, 0] = top + bottom

    with pytest.raises(
        jittile.CompileError,
        match=r"row_max\(acc=\.\.\.\): must be a float32 "
        r"wgmma_accumulator.*wgmma_a",
    ):
        _compile(wrong_layout)


def test_a_reduction_of_a_float16_accumulator_is_refused():
    def wrong_dtype(X: T.Tensor((64, N), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        acc = T.alloc_local((64, N), "float16", layout=wgmma_accumulator)
        scale_rows(acc, 1.0, 2.0)

    with pytest.raises(jittile.CompileError, match=r"scale_rows\(acc=\.\.\.\).*float16"):
        _compile(wrong_dtype)


def test_a_conversion_into_a_narrower_fragment_is_refused():
    def wrong_shape(X: T.Tensor((64, N), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        acc = T.alloc_local((64, N), "float32", layout=wgmma_accumulator)
        a = T.alloc_local((64, 16), "bfloat16", layout=wgmma_a)
        to_bf16_a(acc, a)

    with pytest.raises(
        jittile.CompileError,
        match=r"to_bf16_a\(a=\.\.\.\): must have the "
        r"accumulator's shape \(64, 32\).*\(64, 16\)",
    ):
        _compile(wrong_shape)


def test_a_conversion_into_the_other_type_is_refused():
    def wrong_dtype(X: T.Tensor((64, N), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        acc = T.alloc_local((64, N), "float32", layout=wgmma_accumulator)
        a = T.alloc_local((64, N), "float16", layout=wgmma_a)
        to_bf16_a(acc, a)

    with pytest.raises(
        jittile.CompileError,
        match=r"to_bf16_a\(a=\.\.\.\): must be a bfloat16 "
        r"wgmma_a fragment.*float16",
    ):
        _compile(wrong_dtype)


def test_a_runtime_value_is_not_an_accumulator():
    def runtime(X: T.Tensor((64, N), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
        top, bottom = row_sum(X[0, 0])
        X[0, 1] = top + bottom

    with pytest.raises(jittile.CompileError, match=r"row_sum\(acc=\.\.\.\): must be"):
        _compile(runtime)
