"""The non-tensor bulk copies on the GPU: every form, exact (tests/bulk_kernels.py)."""

import numpy as np
import pytest

from jittile.patterns.bulk_copy import REDUCTION_TYPES, TYPE_STORAGE

pytestmark = pytest.mark.gpu
RNG = np.random.default_rng(7)


def _kernels():
    import bulk_kernels

    return bulk_kernels


@pytest.mark.parametrize("hinted", [False, True])
@pytest.mark.parametrize("load", ["LOAD_CTA", "LOAD_CLUSTER"])
def test_load_prefetch_and_store_every_form(load, hinted):
    k = _kernels()
    a = RNG.integers(0, 2**32, size=(4, 256), dtype=np.uint32)
    out = np.zeros_like(a)
    k.bulk_roundtrip(a, out, getattr(k, load), k.STORE, hinted)
    np.testing.assert_array_equal(out, a)


def test_runtime_stage_and_runtime_checked_global_address():
    k = _kernels()
    a = RNG.standard_normal((4, 64)).astype(np.float32)
    out = np.zeros_like(a)
    k.bulk_staged(a, out)
    np.testing.assert_array_equal(out, a)
    assert (
        k.bulk_staged.compile(a, out, target="sm_90a")
        .plan[0]
        .plan[0]
        .fields["runtime_alignment_check"]
    )


@pytest.mark.parametrize("cluster", [2, 4])
def test_multicast_reaches_every_cta_of_the_cluster(cluster):
    k = _kernels()
    a = RNG.integers(0, 2**32, size=(4, 256), dtype=np.uint32)
    out = np.zeros((cluster, 256), dtype=np.uint32)
    k.bulk_multicast(a, out, cluster)
    np.testing.assert_array_equal(out, np.broadcast_to(a[1], (cluster, 256)))


REDUCTIONS = [
    (op, type_, dtype)
    for op, types in REDUCTION_TYPES.items()
    for type_ in types
    for dtype in TYPE_STORAGE[type_]
]


@pytest.mark.parametrize(
    "op,type_,dtype", REDUCTIONS, ids=[f"{o}.{t}-{d}" for o, t, d in REDUCTIONS]
)
def test_every_reduction_the_contract_accepts(op, type_, dtype):
    out, expected = _kernels().run_bulk_reduction(op, type_, dtype, RNG)
    np.testing.assert_array_equal(out, expected)
