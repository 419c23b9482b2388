"""``T.exp2`` ... ``T.tanh`` and ``T.cuda.shfl_*`` (issue #24): each compiles to its native PTX
instruction, and the interpreter gives the PTX ISA's result against NumPy, bit for bit for the
exact forms and shuffles, within the stated error for the approximate forms."""

import math_kernels as mk
import numpy as np
import pytest

import jittile
from jittile import T
from jittile.interpreter.math import fma_f32, shuffle_source


def _arrays():
    x = mk.special_values()
    return x, np.full_like(x, 7.0)


def _run(function: str, approx: bool):
    x, y = _arrays()
    mk.unary.interpret(x, y, function, approx)
    return x, y


def _issues(kernel, opcode: str, *args) -> bool:
    """Whether the kernel's PTX (for ``args``) has an ``opcode`` instruction (a compiled or an
    inline-asm line)."""
    ptx = kernel.compile(*args, target="sm_90a").ptx
    return any(line.split()[:1] == [opcode] for line in ptx.splitlines())


@pytest.mark.parametrize("key", mk.EXACT, ids=lambda k: mk.EXACT[k][0])
def test_exact_forms_are_the_correctly_rounded_result(key):
    mk.check_exact(key, *_run(*key))


@pytest.mark.parametrize("key", mk.APPROX, ids=lambda k: "-".join(mk.APPROX[k][0]))
def test_approximate_forms_are_within_their_error(key):
    mk.check_approx(key, *_run(*key))


@pytest.mark.parametrize(
    "key", list(mk.EXACT) + list(mk.APPROX), ids=lambda k: k[0] + ("-approx" if k[1] else "")
)
def test_each_function_is_its_native_instruction(key):
    opcodes = mk.EXACT[key][:1] if key in mk.EXACT else mk.APPROX[key][0]
    for opcode in opcodes:
        assert _issues(mk.unary, opcode, *_arrays(), *key), opcode


def test_flush_to_zero_forms_flush_subnormals():
    x, y = _run("exp2", False)
    assert y[x == np.inf] == np.inf and y[x == -np.inf] == 0
    x, y = _run("sqrt", True)
    subnormal = (x > 0) & (x < np.finfo(np.float32).tiny)
    assert subnormal.any() and (y[subnormal] == 0).all()  # sqrt of the flushed input
    x, y = _run("sqrt", False)
    assert (y[subnormal] > 0).all()  # sqrt.rn keeps subnormals


def test_exp2_fma_edges_and_error():
    """Exact powers of two at the integers, 0 below 2**-126 and inf from 128, NaN kept, and the
    polynomial's relative error (8.6e-5) over every fraction in a dense sweep of the range."""
    x = np.float32(np.arange(-126, 128))
    assert np.array_equal(mk.exp2_fma_reference(x), np.exp2(x.astype(np.float64)))
    edges = mk.exp2_fma_reference(np.float32([-127, -126.5, -1e30, -np.inf, 128, 1e30, np.inf]))
    assert list(edges) == [0, 0, 0, 0, np.inf, np.inf, np.inf]
    assert mk.bits(mk.exp2_fma_reference(np.float32([np.nan])))[0] == mk.CANONICAL_NAN
    x = np.linspace(-126, 127.999, 100_003, dtype=np.float32)
    error = np.abs(mk.exp2_fma_reference(x) / np.exp2(x.astype(np.float64)) - 1)
    assert 8e-5 < error.max() <= 8.6e-5  # the minimax fit's extremes are reached, not exceeded


def test_exp2_fma_in_a_kernel_is_its_model():
    x = mk.exp2_fma_inputs()
    y = np.zeros_like(x)
    mk.unary.interpret(x, y, "exp2_fma", False)
    mk.check_same(y, mk.exp2_fma_reference(x))


def test_fma_rounds_once():
    # a*b = 1 + 2^-11 + 2^-24 exactly: half a float32 ulp above 1 + 2^-11; c = 2^-60 tips it up.
    # Rounding a*b + c in float64 first loses c, and the float32 tie then goes to even (down).
    a = b = np.float32(1 + 2.0**-12)
    c = np.float32(2.0**-60)
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c))
    assert naive == np.float32(1 + 2.0**-11)
    assert fma_f32(a, b, c) == np.float32(1 + 2.0**-11 + 2.0**-23)
    assert fma_f32(a, b, -c) == np.float32(1 + 2.0**-11)


def test_fma_in_a_kernel_matches_exact_arithmetic():
    rng = np.random.default_rng(7)
    a, b, c = (mk.special_values()[rng.permutation(mk.N)] for _ in range(3))
    a[:3], b[:3], c[:3] = np.float32(1 + 2.0**-12), np.float32(1 + 2.0**-12), np.float32(2.0**-60)
    d = np.zeros_like(a)
    mk.fused.interpret(a, b, c, d)
    mk.check_same(d, mk.fma_reference(a, b, c))
    assert _issues(mk.fused, "fma.rn.f32")


def test_fmax_fmin_follow_the_ptx_nan_and_zero_rules():
    x = mk.special_values()
    a, b = x, np.roll(x, 1)
    a[:4] = [np.nan, np.nan, 1.0, -0.0]
    b[:4] = [np.nan, 2.0, np.nan, 0.0]
    lo, hi = np.zeros_like(a), np.zeros_like(a)
    mk.binary.interpret(a, b, lo, hi)
    with np.errstate(invalid="ignore"):
        assert np.array_equal(mk.bits(lo[4:]), mk.bits(np.fmin(a, b)[4:]))
        assert np.array_equal(mk.bits(hi[4:]), mk.bits(np.fmax(a, b)[4:]))
    assert mk.bits(lo)[0] == mk.bits(hi)[0] == mk.CANONICAL_NAN
    assert lo[1] == hi[1] == 2.0 and lo[2] == hi[2] == 1.0
    assert mk.bits(lo)[3] == 0x80000000 and mk.bits(hi)[3] == 0  # -0 < +0
    assert _issues(mk.binary, "min.f32") and _issues(mk.binary, "max.f32")


# -------------------------------------------------------------------------------- shuffles
@pytest.mark.parametrize("width", [32, 8])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("mode", ["bfly", "down", "up", "idx"])
def test_shuffles_move_values_between_lanes(mode, dtype, width):
    rng = np.random.default_rng(3)
    if dtype == "float32":
        x = mk.special_values()
    else:
        x = rng.integers(0, 2**32, mk.N, dtype=np.uint64).astype(np.uint32).view(dtype)
    b = rng.integers(0, 32, mk.N).astype(np.int32)
    if mode != "idx":
        b = np.repeat(rng.integers(0, 32, mk.N // 32), 32).astype(np.int32)
    y = np.zeros_like(x)
    mk.shuffle.interpret(x, b, y, mode, width)
    assert np.array_equal(
        y.view(np.uint32), mk.shuffle_reference(mode, x, b, width).view(np.uint32)
    )
    assert _issues(mk.shuffle, f"shfl.sync.{mode}.b32", x, b, y, mode, width)


def test_shuffle_clamp_matches_cuda_segments():
    for lane in range(32):
        assert shuffle_source("down", lane, 1, 0x1F) == min(lane + 1, 31) if lane < 31 else lane
        assert shuffle_source("up", lane, 1, 0) == (lane - 1 if lane else 0)
        assert shuffle_source("idx", lane, 37, (32 - 8) << 8 | 0x1F) == lane - lane % 8 + 5


@jittile.kernel
def half_warp_shuffle(x: T.Tensor((32,), "float32"), y: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(1,), block=(32,)))
    i = T.cuda.lane_id()
    if i < 16:
        y[i] = T.cuda.shfl_down(x[i], 8, mask=0xFFFF, width=16)


@jittile.kernel
def reads_outside_mask(x: T.Tensor((32,), "float32"), y: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(1,), block=(32,)))
    i = T.cuda.lane_id()
    if i < 16:
        y[i] = T.cuda.shfl_xor(x[i], 16, mask=0xFFFF)


def test_a_member_mask_lets_part_of_a_warp_shuffle():
    x = np.arange(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    half_warp_shuffle.interpret(x, y)
    assert np.array_equal(y[:16], np.r_[np.arange(8, 16), np.arange(8, 16)])
    with pytest.raises(
        jittile.InterpreterError,
        match=r"reads lane 16, which is not in the "
        r"member mask 0x0000ffff",
    ):
        reads_outside_mask.interpret(x, y)


def test_reduction_with_shfl_xor():
    x = np.random.default_rng(1).standard_normal(mk.N).astype(np.float32)
    y = np.zeros_like(x)
    warp_sum.interpret(x, y)
    want = x.reshape(-1, 32).astype(np.float64).sum(axis=1)
    assert np.allclose(y.reshape(-1, 32), want[:, None], rtol=1e-5, atol=1e-5)
    assert (y.reshape(-1, 32) == y.reshape(-1, 32)[:, :1]).all()  # every lane holds the sum


@jittile.kernel
def warp_sum(x: T.Tensor((mk.N,), "float32"), y: T.Tensor((mk.N,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(mk.N // mk.BLOCK,), block=(mk.BLOCK,)))
    i = T.cuda.thread_idx() + T.cuda.block_idx() * mk.BLOCK
    total = x[i]
    for s in T.unroll(5):
        total = total + T.cuda.shfl_xor(total, 16 >> s)
    y[i] = total


# ---------------------------------------------------------------------------------- errors
@jittile.kernel
def bad_width(x: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(1,), block=(32,)))
    x[0] = T.cuda.shfl_xor(x[0], 1, width=12)


@jittile.kernel
def bad_approx(x: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(1,), block=(32,)))
    x[0] = T.sqrt(x[0], approx=x[1] > 0)


@jittile.kernel
def bad_keyword(x: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(1,), block=(32,)))
    x[0] = T.exp2(x[0], approx=True)


@pytest.mark.parametrize(
    "kernel, message",
    [
        (bad_width, r"width=12 must be a compile-time power of two from 1 to 32"),
        (
            bad_approx,
            r"T.sqrt\(approx=...\) must be a compile-time True or False, got 'x\[1\] > 0'",
        ),
        (bad_keyword, r"unexpected keyword argument 'approx'.*T.exp2\(x: float, /\) -> float"),
    ],
)
def test_math_errors_name_the_line_and_the_rule(kernel, message):
    with pytest.raises(jittile.CompileError, match=message) as info:
        kernel.compile(target="sm_90a")
    assert "test_math.py:" in str(info.value)
