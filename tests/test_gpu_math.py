"""GPU tests: ``T.exp2`` ... ``T.tanh`` and ``T.cuda.shfl_*`` on the H200 against NumPy, the
same references as the interpreter's (tests/math_kernels.py): bit for bit for the exact forms
(``sqrt.rn``, ``rcp.rn``, ``fma.rn``, ``max``/``min``) and the shuffles, within a tolerance for
the approximate forms, which the differential run (``JITTILE_DIFFERENTIAL=1``, a bit-for-bit
comparison with the interpreter) leaves out: their GPU and interpreter bits may differ.

Run on the H200 with ``pytest -m gpu tests/test_gpu_math.py``; without a device the kernels are
interpreted against the same references.
"""

import os

import math_kernels as mk
import numpy as np
import pytest

pytestmark = pytest.mark.gpu


def _launch(function, approx):
    x = mk.special_values()
    y = np.full_like(x, 7.0)
    mk.unary(x, y, function, approx)
    return x, y


@pytest.mark.parametrize("key", mk.EXACT, ids=lambda k: mk.EXACT[k][0])
def test_exact_forms_on_the_gpu(key):
    mk.check_exact(key, *_launch(*key))


@pytest.mark.skipif(
    os.environ.get("JITTILE_DIFFERENTIAL") == "1",
    reason="approximate forms are not bit-equal between GPU and interpreter",
)
@pytest.mark.parametrize("key", mk.APPROX, ids=lambda k: "-".join(mk.APPROX[k][0]))
def test_approximate_forms_on_the_gpu(key):
    mk.check_approx(key, *_launch(*key))


def test_exp2_fma_on_the_gpu_is_the_interpreters_result():
    """Every step of T.exp2_fma is IEEE-defined, so the GPU gives the model's bits."""
    x = mk.exp2_fma_inputs()
    y = np.zeros_like(x)
    mk.unary(x, y, "exp2_fma", False)
    mk.check_same(y, mk.exp2_fma_reference(x))


def test_fma_fmin_fmax_on_the_gpu():
    rng = np.random.default_rng(11)
    a, b, c = (mk.special_values()[rng.permutation(mk.N)] for _ in range(3))
    a[:3], b[:3], c[:3] = (
        np.float32(1 + 2.0**-12),
        np.float32(1 + 2.0**-12),
        np.float32(2.0**-60),
    )  # a tie that rounding twice gets wrong
    d = np.zeros_like(a)
    mk.fused(a, b, c, d)
    mk.check_same(d, mk.fma_reference(a, b, c))
    a[:4], b[:4] = [np.nan, np.nan, 1.0, -0.0], [np.nan, 2.0, np.nan, 0.0]
    lo, hi = np.zeros_like(a), np.zeros_like(a)
    mk.binary(a, b, lo, hi)
    with np.errstate(invalid="ignore"):
        mk.check_same(lo[4:], np.fmin(a, b)[4:])
        mk.check_same(hi[4:], np.fmax(a, b)[4:])
    assert mk.bits(lo)[0] == mk.bits(hi)[0] == mk.CANONICAL_NAN
    assert lo[1] == hi[1] == 2.0 and lo[2] == hi[2] == 1.0
    assert mk.bits(lo)[3] == 0x80000000 and mk.bits(hi)[3] == 0


@pytest.mark.parametrize("width", [32, 16, 4])
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("mode", ["bfly", "down", "up", "idx"])
def test_shuffles_on_the_gpu(mode, dtype, width):
    rng = np.random.default_rng(5)
    if dtype == "float32":
        x = mk.special_values()
    else:
        x = rng.integers(0, 2**32, mk.N, dtype=np.uint64).astype(np.uint32).view(dtype)
    b = rng.integers(0, 32, mk.N).astype(np.int32)  # per lane: idx and xor sources may differ
    if mode in ("down", "up"):
        b = np.repeat(rng.integers(0, 32, mk.N // 32), 32).astype(np.int32)
    y = np.zeros_like(x)
    mk.shuffle(x, b, y, mode, width)
    assert np.array_equal(mk.bits(y), mk.bits(mk.shuffle_reference(mode, x, b, width)))
