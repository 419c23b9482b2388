"""GPU tests: run on the H200 (``pytest -m gpu``); skipped with a reason where no device exists.

Inputs are random, outputs are poisoned before each launch, and every comparison is exact unless
the format itself rounds.
"""

import numpy as np
import pytest

from jittile import LaunchError

pytestmark = pytest.mark.gpu

LOAD = "cp.async.bulk.tensor.{r}d.shared::cta.global.tile.mbarrier::complete_tx::bytes"
STORE = "cp.async.bulk.tensor.{r}d.global.shared::cta.tile.bulk_group"
RNG = np.random.default_rng(2026)


def _kernels():
    import gpu_kernels

    return gpu_kernels


def _rand(shape, dtype=np.float32):
    if np.dtype(dtype).kind == "f":
        return RNG.standard_normal(shape).astype(dtype)
    return RNG.integers(-1000, 1000, size=shape).astype(dtype)


# ---------------------------------------------------------------------------------- the spine
def _array_kinds():
    kinds = ["numpy"]
    for name in ("cupy", "torch", "numba"):
        try:
            __import__(name if name != "numba" else "numba.cuda")
            kinds.append(name)
        except Exception:
            continue
    return kinds


def _to(kind, host):
    if kind == "numpy":
        return host
    if kind == "cupy":
        import cupy

        return cupy.asarray(host)
    if kind == "torch":
        import torch

        return torch.from_numpy(host).cuda()
    from numba import cuda

    return cuda.to_device(host)


def _back(kind, dev):
    if kind == "numpy":
        return dev
    if kind == "cupy":
        return dev.get()
    if kind == "torch":
        import torch

        torch.cuda.synchronize()
        return dev.cpu().numpy()
    return dev.copy_to_host()


@pytest.mark.parametrize("kind", _array_kinds())
def test_staged_copy_through_shared(kind):
    k = _kernels()
    a = _rand(4096)
    out = np.full_like(a, np.nan)
    dev_a, dev_out = _to(kind, a), _to(kind, out)
    k.staged_copy(dev_a, dev_out, 4096, 256)
    got = _back(kind, dev_out)
    np.testing.assert_array_equal(got, a.reshape(16, 256)[:, ::-1].ravel())


@pytest.mark.parametrize("kind", _array_kinds())
def test_two_cta_cluster_with_64kb_shared(kind):
    k = _kernels()
    a = _rand(4 * 16384)
    out = np.full_like(a, np.nan)
    rank = np.full(4, -1, dtype=np.int64)
    dev = [_to(kind, x) for x in (a, out, rank)]
    k.cluster_big_smem(*dev)
    got, ranks = _back(kind, dev[1]), _back(kind, dev[2])
    np.testing.assert_array_equal(got, a.reshape(4, 16384)[:, ::-1].ravel())
    np.testing.assert_array_equal(ranks, [0, 1, 0, 1])
    ck = k.cluster_big_smem.compile(a, out, rank)
    assert ck.metadata["dynamic_shared"] and ck.metadata["shared_bytes"] == 65536


def test_seed_example_two_boxes():
    import tma_two_boxes

    x = RNG.integers(0, 2**32, size=(16, 16), dtype=np.uint32)
    out = np.full_like(x, 0xDEADBEEF)
    tma_two_boxes.tma_load(x, out)
    np.testing.assert_array_equal(out, x)


# --------------------------------------------------------------------------------------- TMA
ND_CASES = {
    1: ((300,), (64,), (128,)),
    2: ((40, 72), (8, 32), (16, 8)),
    3: ((6, 20, 36), (2, 4, 16), (3, 8, 16)),
    4: ((4, 5, 6, 40), (2, 2, 3, 8), (1, 2, 2, 16)),
    5: ((3, 4, 5, 6, 24), (2, 2, 2, 2, 8), (1, 1, 2, 3, 8)),
}


@pytest.mark.parametrize("rank", [1, 2, 3, 4, 5])
def test_tma_load_store_ranks(rank):
    shape, box, coords = ND_CASES[rank]
    a = _rand(shape)
    out = np.full_like(a, np.nan)
    _kernels().tma_roundtrip(
        a, out, LOAD.format(r=rank), STORE.format(r=rank), box, coords, int(np.prod(box)) * 4
    )
    region = tuple(slice(c, c + b) for c, b in zip(coords, box))
    expected = np.full_like(a, np.nan)
    expected[region] = a[region]
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(
    "op,dtype", [("add", "int32"), ("min", "int32"), ("max", "int32"), ("add", "float32")]
)
def test_tma_reduce(op, dtype):
    a = _rand((16, 32), dtype)
    out = _rand((32, 64), dtype)
    before = out.copy()
    _kernels().tma_reduce(
        a, out, f"cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group", dtype
    )
    expected = before.copy()
    expected[8:24, 32:64] = _kernels().reduction_reference(op, before[8:24, 32:64], a)
    if dtype == "float32":
        np.testing.assert_allclose(out, expected, rtol=1e-6)
        np.testing.assert_array_equal(out[:8], before[:8])
    else:
        np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("sw,cols", [(1, 8), (2, 16), (3, 32)])
def test_tma_swizzle_coord_steps_and_subregion(sw, cols):
    a = _rand((96, 2 * cols))
    out = np.full((3, 32, cols), np.nan, np.float32)
    _kernels().tma_swizzled(a, out, sw, cols)
    np.testing.assert_array_equal(out[0], a[0:32, 0:cols])
    np.testing.assert_array_equal(out[1], a[32:64, 0:cols])
    np.testing.assert_array_equal(out[2], a[64:96, cols : 2 * cols])


@pytest.mark.parametrize("fill", [0, 1])
def test_tma_oob_fill(fill):
    a = _rand((40, 40))
    out = np.full((16, 16), 7.0, np.float32)
    _kernels().tma_load_2d(a, out, (16, 16), (32, 32), (1, 1), fill, "float32", (16, 16))
    np.testing.assert_array_equal(out[:8, :8], a[32:40, 32:40])
    edge = np.ones((16, 16), bool)
    edge[:8, :8] = False
    if fill == 0:
        assert np.all(out[edge] == 0.0)
    else:
        assert np.all(np.isnan(out[edge]))


def test_tma_tf32_format():
    a = _rand((32, 32))
    out = np.full((8, 32), np.nan, np.float32)
    _kernels().tma_load_2d(a, out, (8, 32), (0, 0), (1, 1), 0, "tf32", (8, 32))
    np.testing.assert_allclose(out, a[0:8], rtol=2.0**-10)


@pytest.mark.parametrize("cluster", [2, 4])
def test_tma_multicast(cluster):
    a = _rand((64, 32))
    out = np.full((cluster, 16, 32), np.nan, np.float32)
    _kernels().tma_multicast(a, out, cluster)
    for r in range(cluster):
        np.testing.assert_array_equal(out[r], a[16:32])


@pytest.mark.parametrize("cluster", [2, 4])
def test_remote_mbarrier_arrivals_through_mapa(cluster):
    out = np.zeros((cluster, 32), np.int32)
    _kernels().cluster_arrivals(out, cluster)
    np.testing.assert_array_equal(out, np.arange(1, cluster + 1)[:, None].repeat(32, 1))


def test_tma_cache_policy():
    a = _rand((32, 32))
    out = np.full((8, 32), np.nan, np.float32)
    _kernels().tma_cache_hint(a, out)
    np.testing.assert_array_equal(out, a[8:16])


@pytest.mark.parametrize("p", [0, 1])
def test_tma_pred(p):
    a = _rand((8, 32))
    out = np.full((8, 32), np.nan, np.float32)
    _kernels().tma_predicated(a, out, p)
    np.testing.assert_array_equal(out, a if p else np.full_like(a, -1.0))


def test_tma_launch_errors_then_valid_launch():
    cupy = pytest.importorskip("cupy")
    k = _kernels()
    op2 = (LOAD.format(r=2), STORE.format(r=2), (8, 32), (0, 0), 8 * 32 * 4)
    base = cupy.asarray(_rand((64, 64)))
    out = cupy.full((64, 64), np.nan, dtype=cupy.float32)
    misaligned = cupy.ndarray((32, 32), dtype=cupy.float32, memptr=base.data + 4, strides=(256, 4))
    with pytest.raises(LaunchError, match="16-byte aligned"):
        k.tma_roundtrip(misaligned, out[:32, :32], *op2)
    odd = cupy.asarray(_rand((16, 33)))
    with pytest.raises(LaunchError, match="multiple of 16"):
        k.tma_roundtrip(odd, cupy.zeros_like(odd), *op2)
    import tma_two_boxes

    with pytest.raises(LaunchError, match="rank"):
        tma_two_boxes.tma_load(
            cupy.zeros((2, 16, 16), cupy.uint32), cupy.zeros((16, 16), cupy.uint32)
        )
    a = _rand((64, 64))
    host_out = np.full_like(a, np.nan)
    k.tma_roundtrip(a, host_out, *op2)
    np.testing.assert_array_equal(host_out[:8, :32], a[:8, :32])


def test_benchmark_copy_kernels_are_exact():
    """The kernels bench/tma_copy.py times, on a smaller matrix: swizzled 64x64 tiles as two boxes,
    and one unswizzled 32x256 box per CTA."""
    cupy = pytest.importorskip("cupy")
    from bench import tma_copy as bench_copy

    a = cupy.asarray(_rand((1024, 2048)))
    out = cupy.full_like(a, np.nan)
    bench_copy.tma_copy[(2048 // 64, 1024 // 64), 32](a, out)
    assert bool((out == a).all())
    out.fill(np.nan)
    bench_copy.tma_copy_box[(2048 // 256, 1024 // 32), 32](a, out, 32, 256, 0)
    assert bool((out == a).all())
    # Persistent rings over a rows-of-256 view: 256 tiles over 20 CTAs, so rounds end part-full.
    rows_a, rows_out = a.reshape(-1, 256), out.reshape(-1, 256)
    for ring in (bench_copy.tma_copy_ring, bench_copy.tma_copy_ring_lagged):
        for stages in (2, 3):
            out.fill(np.nan)
            ring[20, 32](rows_a, rows_out, 32, 256, 1, rows_a.shape[0] // 32, stages)
            assert bool((out == a).all()), (ring.__name__, stages)


@pytest.mark.parametrize("es", [(2, 1), (4, 1)])
def test_tma_element_strides(es):
    """Outer element strides subsample rows; the innermost step is always one (the contract
    rejects others: on the H200 an inner stride is ignored by the hardware)."""
    a = _rand((64, 128))
    box = (16, 64)
    img = (16 // es[0], 64 // es[1])
    out = np.full(img, np.nan, np.float32)
    _kernels().tma_load_2d(a, out, box, (8, 16), es, 0, "float32", img)
    np.testing.assert_array_equal(out, a[8 : 24 : es[0], 16 : 80 : es[1]])


@pytest.mark.parametrize("interleave,sw", [(1, 0), (2, 1)])
def test_tma_interleave_three_channel_slices(interleave, sw):
    ci = 8 * interleave
    a = RNG.integers(0, 2**16, size=(2, 3, 8, ci), dtype=np.uint16)
    out = np.zeros((3, 8, ci), np.uint16)
    _kernels().tma_interleaved(a, out, interleave, sw)
    np.testing.assert_array_equal(out, a[1])


def test_target_newer_than_the_device_is_a_launch_error():
    from jittile.runtime import driver

    capability = driver.current_device_capability()
    if capability[0] >= 10:
        pytest.skip("this device runs sm_100a code")
    out = np.zeros(32, np.float32)
    with pytest.raises(LaunchError, match="compiled for sm_100a"):
        _kernels().blackwell_only(out)
    _kernels().staged_copy(_rand(4096), np.zeros(4096, np.float32), 4096, 256)


def test_a_disk_hit_launches_from_the_recorded_ir(tmp_path, monkeypatch):
    """A kernel compiled into the disk cache, then loaded as a fresh kernel object (as in a new
    process): the hit restores the TensorMap specs and the cluster launch from the entry."""
    import importlib.util
    import inspect

    monkeypatch.setenv("JITTILE_CACHE", "1")
    monkeypatch.setenv("JITTILE_CACHE_DIR", str(tmp_path / "cache"))
    source = "import jittile\nfrom jittile import T\n\n\n" + inspect.getsource(
        _kernels().tma_multicast.pyfunc
    )
    a = _rand((64, 32))
    caches = []
    for copy in range(2):
        path = tmp_path / f"hit_kernel_{copy}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        out = np.full((4, 16, 32), np.nan, np.float32)
        module.tma_multicast(a, out, 4)
        for r in range(4):
            np.testing.assert_array_equal(out[r], a[16:32])
        caches.append(module.tma_multicast.compile(a, out, 4).metadata["cache"])
    assert caches == ["stored", "hit"]


def test_tma_through_a_helper():
    a = _rand((24, 32))
    out = np.full((16, 32), np.nan, np.float32)
    _kernels().tma_with_helper(a, out)
    np.testing.assert_array_equal(out, a[8:24])


def test_tma_into_a_runtime_stage():
    a = _rand((64, 32))
    out = np.full_like(a, np.nan)
    _kernels().tma_runtime_stage(a, out)
    np.testing.assert_array_equal(out, a)


def _reduction_cases():
    from jittile.patterns.tma import REDUCTION_TYPES

    return [
        (op, dtype) for op, dtypes in sorted(REDUCTION_TYPES.items()) for dtype in sorted(dtypes)
    ]


@pytest.mark.parametrize("op, dtype", _reduction_cases())
def test_every_reduction_the_contract_accepts(op, dtype):
    """Each operator x element type of the reduction table computes, on the hardware, what the
    PTX ISA defines (bfloat16 as ml_dtypes arrays)."""
    out, expected = _kernels().run_reduction(op, dtype, RNG)
    np.testing.assert_array_equal(out, expected)
