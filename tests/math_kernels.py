"""Kernels applying one ``T`` math function or warp shuffle per element, and the NumPy references
they are checked against (tests/test_math.py interpreted, tests/test_gpu_math.py on the GPU)."""

from fractions import Fraction

import numpy as np

import jittile
from jittile import T
from jittile.interpreter.math import exp2_fma_f32

N = 1024
BLOCK = 128


@jittile.kernel
def unary(x, y, FN: T.constexpr, APPROX: T.constexpr):
    """``y[i] = T.<FN>(x[i])`` (with ``approx=APPROX`` where the function has the keyword);
    constexprs rather than closures, since they are part of the cache key."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(N // BLOCK,), block=(BLOCK,)))
    i = T.cuda.thread_idx() + T.cuda.block_idx() * BLOCK
    if FN == "exp2":
        y[i] = T.exp2(x[i])
    elif FN == "exp2_fma":
        y[i] = T.exp2_fma(x[i])
    elif FN == "exp":
        y[i] = T.exp(x[i])
    elif FN == "log2":
        y[i] = T.log2(x[i])
    elif FN == "log":
        y[i] = T.log(x[i])
    elif FN == "sqrt":
        y[i] = T.sqrt(x[i], approx=APPROX)
    elif FN == "rsqrt":
        y[i] = T.rsqrt(x[i])
    elif FN == "rcp":
        y[i] = T.rcp(x[i], approx=APPROX)
    else:
        y[i] = T.tanh(x[i])


@jittile.kernel
def binary(
    a: T.Tensor((N,), "float32"),
    b: T.Tensor((N,), "float32"),
    lo: T.Tensor((N,), "float32"),
    hi: T.Tensor((N,), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(N // BLOCK,), block=(BLOCK,)))
    i = T.cuda.thread_idx() + T.cuda.block_idx() * BLOCK
    lo[i] = T.fmin(a[i], b[i])
    hi[i] = T.fmax(a[i], b[i])


@jittile.kernel
def fused(
    a: T.Tensor((N,), "float32"),
    b: T.Tensor((N,), "float32"),
    c: T.Tensor((N,), "float32"),
    d: T.Tensor((N,), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(N // BLOCK,), block=(BLOCK,)))
    i = T.cuda.thread_idx() + T.cuda.block_idx() * BLOCK
    d[i] = T.fma(a[i], b[i], c[i])


@jittile.kernel
def shuffle(x, b, y, MODE: T.constexpr, WIDTH: T.constexpr):
    """``y[i] = T.cuda.shfl_<MODE>(x[i], b[i], width=WIDTH)`` across each warp."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=(N // BLOCK,), block=(BLOCK,)))
    i = T.cuda.thread_idx() + T.cuda.block_idx() * BLOCK
    if MODE == "bfly":
        y[i] = T.cuda.shfl_xor(x[i], b[i], width=WIDTH)
    elif MODE == "down":
        y[i] = T.cuda.shfl_down(x[i], b[i], width=WIDTH)
    elif MODE == "up":
        y[i] = T.cuda.shfl_up(x[i], b[i], width=WIDTH)
    else:
        y[i] = T.cuda.shfl_idx(x[i], b[i], width=WIDTH)


# ------------------------------------------------------------------------------ references
EXACT = {  # (function name, approx) -> (opcode, NumPy float32 reference: IEEE, correctly rounded)
    ("sqrt", False): ("sqrt.rn.f32", np.sqrt),
    ("rcp", False): ("rcp.rn.f32", lambda x: np.float32(1) / x),
}
APPROX = {  # (function name, approx) -> (opcodes, float64 reference, relative tolerance)
    ("exp2", False): (("ex2.approx.ftz.f32",), np.exp2, 2.0**-21),
    ("exp", False): (("mul.rn.ftz.f32", "ex2.approx.ftz.f32"), np.exp, 2.0**-18),
    ("exp2_fma", False): (("add.rm.f32", "fma.rn.f32", "shl.b32", "mul.rn.f32"), np.exp2, 8.6e-5),
    ("log2", False): (("lg2.approx.ftz.f32",), np.log2, 2.0**-21),
    ("log", False): (("lg2.approx.ftz.f32", "mul.rn.ftz.f32"), np.log, 2.0**-21),
    ("sqrt", True): (("sqrt.approx.ftz.f32",), np.sqrt, 2.0**-22),
    ("rsqrt", False): (("rsqrt.approx.ftz.f32",), lambda x: 1 / np.sqrt(x), 2.0**-22),
    ("rcp", True): (("rcp.approx.ftz.f32",), lambda x: 1 / x, 2.0**-22),
    ("tanh", False): (("tanh.approx.f32",), np.tanh, 2.0**-10),
}
# Where an approximation's error is absolute: lg2's results near x = 1 are near 0 (the H200 was
# off by more than a relative 2^-21 there, run 45).
ABSOLUTE = {("log2", False): 2.0**-21, ("log", False): 2.0**-21}
CANONICAL_NAN = 0x7FFFFFFF


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint32)


def check_same(got: np.ndarray, want: np.ndarray) -> None:
    """Bit for bit, where every NaN is the canonical one."""
    nan = np.isnan(want)
    assert (bits(got)[nan] == CANONICAL_NAN).all()
    assert np.array_equal(bits(got)[~nan], bits(want)[~nan])


def check_exact(key, x: np.ndarray, y: np.ndarray) -> None:
    with np.errstate(all="ignore"):
        check_same(y, EXACT[key][1](x))


def check_approx(key, x: np.ndarray, y: np.ndarray) -> None:
    """Within the tolerance where the result is a normal float32; NaN and infinities exactly."""
    opcodes, reference, tolerance = APPROX[key]
    tiny = np.finfo(np.float32).tiny
    flushed = np.where(
        ("ftz" in opcodes[-1]) & (np.abs(x) < tiny), np.copysign(np.float32(0), x), x
    )
    with np.errstate(all="ignore"):
        want = reference(flushed.astype(np.float64))
    normal = np.isfinite(want) & (np.abs(want) >= tiny) & (np.abs(want) < 3e38)
    assert normal.sum() > N // 4
    assert np.allclose(y[normal], want[normal], rtol=tolerance, atol=ABSOLUTE.get(key, 0.0))
    assert (np.isnan(y) == np.isnan(want)).all() and (bits(y)[np.isnan(y)] == CANONICAL_NAN).all()
    infinite = np.isinf(want)
    assert np.array_equal(y[infinite], want[infinite].astype(np.float32))


def special_values() -> np.ndarray:
    """Zeros, subnormals, extremes, NaN and infinities, then N float32s of every magnitude."""
    tiny = np.finfo(np.float32).tiny
    specials = np.array(
        [
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.5,
            2.0,
            np.inf,
            -np.inf,
            np.nan,
            tiny,
            -tiny,
            tiny / 4,
            -tiny / 4,
            np.finfo(np.float32).max,
            3.0,
            1e-30,
            1e30,
        ],
        dtype=np.float32,
    )
    rng = np.random.default_rng(24)
    random = (rng.standard_normal(N) * 2.0 ** rng.integers(-20, 20, N)).astype(np.float32)
    return np.concatenate([specials, random])[:N]


def exp2_fma_inputs() -> np.ndarray:
    """N float32s for ``T.exp2_fma``: its clamps' edges, integers (exact powers of two), NaN and
    infinities, then the range a softmax uses and beyond, evenly."""
    edges = np.array(
        [-np.inf, np.inf, np.nan, -0.0, 0.0, -127.0, -126.5, -126.0, 127.0, 127.99, 128.0, -1e-30],
        dtype=np.float32,
    )
    return np.concatenate([edges, np.linspace(-130, 130, N - len(edges), dtype=np.float32)])


def exp2_fma_reference(x: np.ndarray) -> np.ndarray:
    """The interpreter's model of ``T.exp2_fma``, which the GPU gives bit for bit."""
    return np.array([exp2_fma_f32(v) for v in x], dtype=np.float32)


def round_to_float32(value: Fraction) -> np.float32:
    """The float32 nearest ``value`` (ties to even), from exact comparisons."""
    with np.errstate(over="ignore"):
        guess = np.float32(float(value))
    if not np.isfinite(guess):
        return guess
    below = guess if Fraction(float(guess)) <= value else np.nextafter(guess, np.float32(-np.inf))
    if below == np.finfo(np.float32).max:  # rounds to max or to inf: ties at max + ulp / 2
        return below if value - Fraction(float(below)) < Fraction(2) ** 103 else np.float32(np.inf)
    above = np.nextafter(below, np.float32(np.inf))
    low, high = value - Fraction(float(below)), Fraction(float(above)) - value
    if low != high:
        return below if low < high else above
    return below if int(below.view(np.uint32)) & 1 == 0 else above


def fma_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    with np.errstate(all="ignore"):
        for k, (x, y, z) in enumerate(zip(a, b, c)):
            if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(z)):
                out[k] = np.float32(np.float64(x) * np.float64(y) + np.float64(z))
                continue
            exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
            result = round_to_float32(exact)
            if result == 0 and exact == 0:  # the sign of an exact zero sum
                result = np.float32(np.float64(x) * np.float64(y) + np.float64(z))
            out[k] = result
    return out


def shuffle_reference(mode: str, x: np.ndarray, b: np.ndarray, width: int) -> np.ndarray:
    """What each lane reads, from the segment rule CUDA documents for ``__shfl_*_sync``."""
    lane = np.arange(len(x)) % 32
    start = lane - lane % width
    if mode == "bfly":
        source = lane ^ (b & 31)
        source = np.where(source < start + width, source, lane)  # earlier segments may be read
    elif mode == "down":
        source = np.where(lane + b < start + width, lane + b, lane)
    elif mode == "up":
        source = np.where(lane - b >= start, lane - b, lane)
    else:
        source = start + (b % width)
    warp = np.arange(len(x)) - lane
    return x[warp + source]
