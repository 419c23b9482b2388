"""The tuned GEMMs' configurations on the CPU interpreter (split-K, swap-AB, 64-row tiles, fp8
with promotion), exact on small ragged products of small integers (every partial sum is exact in
fp32 and the result in bf16, so any summation order gives the same bits), split-K's summation
order, the workspace's size, and the pruning rules."""

import re
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def _operands(m, n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 3, (m, k)).astype(dtype)
    b = rng.integers(-2, 3, (n, k)).astype(dtype)
    return a, b, np.full((m, n), np.nan, dtype=ml_dtypes.bfloat16)


def _config(space, **values):
    values = {"CLUSTER": 1, **values}
    (config,) = [c for c in space.configs if all(c.kwargs[k] == v for k, v in values.items())]
    return config


def _product(a, b, scale=1.0):
    return scale * (a.astype(np.float32) @ b.astype(np.float32).T)


@pytest.mark.parametrize(
    "m, n, k, values",
    [
        (24, 136, 264, dict(BM=128, BN=32, SPLIT=2, SWAP=True)),  # swap-AB + split-K, ragged
        (70, 136, 200, dict(BM=64, BN=128, SPLIT=1, SWAP=False)),  # one consumer warpgroup
        (70, 136, 520, dict(BM=64, BN=128, SPLIT=4, SWAP=False)),  # split-K into the workspace
        (9, 72, 72, dict(BM=128, BN=16, SPLIT=1, SWAP=True)),  # swap-AB, stmatrix .trans
        (70, 136, 136, dict(BM=64, BN=128, SPLIT=4, SWAP=False)),  # 3 K-stages: one split is empty
        (130, 136, 520, dict(BM=128, BN=128, SPLIT=8, SWAP=False)),  # 9 K-stages: 5 of 8 splits
        # 8 tiles on 3 CTAs: 6 run whole, the last partial wave's 2 split in two (``job_split``)
        (390, 264, 520, dict(BM=128, BN=256, SPLIT=2, SWAP=False, sms=3)),
        (20, 520, 264, dict(BM=128, BN=16, SPLIT=4, SWAP=True, sms=3)),  # 5 tiles: 3 whole
        (130, 136, 200, dict(BM=128, BN=128, SPLIT=2, SWAP=False)),
        (70, 264, 72, dict(BM=64, BN=256, SPLIT=1, SWAP=False)),
        (70, 264, 520, dict(BM=64, BN=256, SPLIT=2, SWAP=False)),  # 4 parts, 3 past N
        (64, 136, 200, dict(BM=128, BN=64, SPLIT=1, SWAP=True)),
        (130, 200, 136, dict(BM=128, BN=192, SPLIT=1, SWAP=False)),  # 64-column epilogue parts
        # 128x256 split-K: 3 stages, fp32 staging in register budgets set by setmaxnreg
        (130, 264, 520, dict(BM=128, BN=256, SPLIT=2, SWAP=False)),
        # clusters of two CTAs multicasting B: four jobs on two clusters, the rings wrapping
        (390, 136, 200, dict(BM=128, BN=128, SPLIT=1, SWAP=False, CLUSTER=2, sms=4)),
        # three row blocks: the second job's rank-1 tile lies wholly past M (one cluster)
        (260, 136, 136, dict(BM=128, BN=128, SPLIT=1, SWAP=False, CLUSTER=2)),
        (130, 264, 136, dict(BM=64, BN=256, SPLIT=1, SWAP=False, CLUSTER=2)),
        # 64x32 tiles (M <= 64): one row of M, N ragged, a 32-column epilogue part
        (1, 72, 200, dict(BM=64, BN=32, SPLIT=1, SWAP=False)),
        (64, 104, 136, dict(BM=64, BN=32, SPLIT=2, SWAP=False)),
        # shape-fitted tiles: three consumers (192 rows) and widths past the last 64-column
        # part, whose last part overlaps the one before it (``epilogue``), in part past N
        (200, 400, 136, dict(BM=192, BN=176, SPLIT=1, SWAP=False)),
        (130, 256, 200, dict(BM=128, BN=232, SPLIT=1, SWAP=False)),
        (390, 136, 72, dict(BM=192, BN=128, SPLIT=1, SWAP=False)),
        # 256 rows: two consumers of two 64-row fragments each; the second row of tiles has 44
        # rows (its last two blocks wholly past M), the second column 48 columns (its
        # overlapping last part past N)
        (300, 200, 136, dict(BM=256, BN=152, SPLIT=1, SWAP=False)),
        # in clusters of two: B's 152 rows multicast in shares of 72 and 80 (whole swizzle
        # periods); three row blocks, so the second cluster's rank-1 tile lies past M
        (600, 200, 136, dict(BM=256, BN=152, SPLIT=1, SWAP=False, CLUSTER=2)),
    ],
)
def test_bf16_configs_interpreted_are_exact(m, n, k, values):
    import gemm_bf16

    a, b, c = _operands(m, n, k, ml_dtypes.bfloat16)
    sms = values.pop("sms", 2)
    cluster = values.pop("CLUSTER", 1)  # the space's only clustered configs are listed tiles
    config = gemm_bf16.in_clusters(_config(gemm_bf16.BF16_SPACE, GROUP_M=8, **values), cluster)
    workspace = gemm_bf16.new_workspace(c, m, n)
    gemm_bf16.run_config(
        gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k, sms, interpret=True
    )
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b))
    _assert_zero(workspace)  # as the next launch needs it


@pytest.mark.parametrize("kind", ["bf16 split", "fp8"])
def test_two_fragment_consumers_split_and_promoted_interpreted_are_exact(kind):
    """A 256-row tile's consumers (two 64-row fragments each) outside the space's unsplit bf16
    configs: split in two (each fragment's block meets its splits in ``settle`` on its own), and
    fp8 with promotion (each fragment's piece products added into its own total)."""
    import gemm_bf16
    import gemm_fp8

    import jittile

    m, n, k = (300, 200, 520) if kind == "bf16 split" else (300, 136, 400)
    values = dict(BM=256, BN=152 if kind == "bf16 split" else 128, STAGES=4, GROUP_M=8)
    values.update(SPLIT=2 if kind == "bf16 split" else 1, SWAP=False, CLUSTER=1)
    config = jittile.Config(values, block=384)
    assert gemm_bf16.block_of(values) == 384
    if kind == "fp8":
        a, b, c = _operands(m, n, k, ml_dtypes.float8_e4m3fn, seed=6)
        tuned, extra, scale = gemm_fp8.gemm_fp8_tuned, gemm_fp8.tail_arguments(0.25, 1.0, c), 0.25
    else:
        a, b, c = _operands(m, n, k, ml_dtypes.bfloat16)
        tuned, extra, scale = gemm_bf16.gemm_bf16_tuned, (), 1.0
    workspace = gemm_bf16.new_workspace(c, m, n)
    gemm_bf16.run_config(
        tuned, config, (a, b, c), workspace, m, n, k, 2, extra=extra, interpret=True
    )
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b, scale))
    _assert_zero(workspace)


def _assert_zero(workspace):
    """A split-K launch leaves its counters zero for the next one (its partial sums need no
    zeroing: each is written before it is read)."""
    _, arrivals = workspace
    assert not arrivals.any()


@pytest.mark.parametrize("split, sms", [(4, 2), (4, 3), (4, 4), (8, 5)])
def test_split_k_adds_the_splits_in_split_order_whichever_comes_last(split, sms):
    """The splits' partial sums are 2**24, -2**24, 0.25 (and zeros): in split order they add to
    0.25, while adding the last split's first would lose the 0.25 (2**24 + 0.25 rounds to
    2**24). The persistent grid (``sms`` CTAs) decides which split of a tile comes last; the
    workspace's sums start as NaN (each slot is written before it is read)."""
    import gemm_bf16

    m, n, per = 130, 136, 256  # K-tiles of 64: 4 per split
    k = per * split
    a = np.ones((m, k), ml_dtypes.bfloat16)
    b = np.zeros((n, k), np.float32)
    b[:, :per], b[:, per : 2 * per], b[:, 2 * per : 3 * per] = 2.0**16, -(2.0**16), 2.0**-10
    b = b.astype(ml_dtypes.bfloat16)
    c = np.full((m, n), np.nan, ml_dtypes.bfloat16)
    config = _config(gemm_bf16.BF16_SPACE, BM=128, BN=128, GROUP_M=8, SPLIT=split, SWAP=False)
    workspace = gemm_bf16.new_workspace(c, m, n)
    workspace[0][:] = np.nan
    gemm_bf16.run_config(
        gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k, sms, interpret=True
    )
    np.testing.assert_array_equal(c.astype(np.float32), np.full((m, n), 0.25, np.float32))
    _assert_zero(workspace)


def test_the_workspace_holds_every_config_of_a_shape():
    """``new_workspace``'s default sums cover every split config of both spaces at any shape
    (``split_sums``), and ``workspace_for`` makes what the shape's candidates need."""
    import gemm_bf16
    import gemm_fp8

    for m, n in ((1, 4), (130, 136), (64, 4096), (512, 4096), (1000, 24)):
        sums, arrivals = gemm_bf16.new_workspace(np.zeros((m, n)), m, n)
        for config in gemm_bf16.BF16_SPACE.configs + gemm_fp8.FP8_SPACE.configs:
            assert gemm_bf16.split_sums(config.kwargs, m, n) <= sums.size
        assert not arrivals.any() and arrivals.dtype == np.int32
    assert gemm_bf16.split_sums(dict(SPLIT=2, SWAP=False, BM=128, BN=256), 512, 4096) == (
        2 * 4 * 16 * 128 * 256
    )
    assert gemm_bf16.split_sums(dict(SPLIT=4, SWAP=True, BM=128, BN=16), 16, 4096) == (
        4 * 32 * 128 * 16
    )
    assert gemm_bf16.split_sums(dict(SPLIT=1, SWAP=False, BM=128, BN=256), 512, 4096) == 0
    # over several waves only the last partial wave's tiles split: 561 % 132 = 33 tiles
    tail = dict(SPLIT=4, SWAP=False, BM=128, BN=256)
    assert gemm_bf16.split_sums(tail, 4097, 4104, sms=132) == 4 * 33 * 128 * 256
    assert gemm_bf16.split_sums(tail, 4097, 4104) == 4 * 561 * 128 * 256  # any grid
    c = np.zeros((512, 4096), ml_dtypes.bfloat16)
    sums, _ = gemm_bf16.workspace_for(gemm_bf16.BF16_SPACE, c, 512, 4096, 4096)
    needed = [
        gemm_bf16.split_sums(cfg.kwargs, 512, 4096)
        for cfg in gemm_bf16.BF16_SPACE.candidates(512, 4096, 4096)
    ]
    assert sums.size == max(needed) > 0


def test_the_fp8_kernel_interpreted_is_exact_on_a_ragged_product():
    """Three K-stages of 128 (the last ragged), two 128x128 tiles on 2 CTAs, scales 0.5 * 0.25."""
    import gemm_fp8

    m, n, k = 130, 136, 272  # fp8 rows: 16-byte strides, so K is a multiple of 16
    a, b, c = _operands(m, n, k, ml_dtypes.float8_e4m3fn, seed=3)
    gemm_fp8.gemm_fp8.interpret[(2,), (384,)](
        a, b, c, m, n, k, np.float32([0.5]), np.float32([0.25])
    )
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b, 0.125))


def test_an_fp8_swapped_split_config_interpreted_is_exact():
    """M = 40 takes swap-AB (wgmma N = 64), split-K over four K-stages; scales 2 * 0.5."""
    import gemm_fp8

    m, n, k = 40, 136, 528
    a, b, c = _operands(m, n, k, ml_dtypes.float8_e4m3fn, seed=4)
    config = _config(gemm_fp8.FP8_SPACE, BM=128, BN=64, SPLIT=2, SWAP=True)
    from gemm_bf16 import new_workspace, run_config

    w = new_workspace(c, m, n)

    run_config(
        gemm_fp8.gemm_fp8_tuned,
        config,
        (a, b, c),
        w,
        m,
        n,
        k,
        sms=2,
        interpret=True,
        extra=gemm_fp8.tail_arguments(2.0, 0.5, c),
    )
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b))
    _assert_zero(w)


@pytest.mark.parametrize(
    "tile_m, tile_n, split, m", [(64, 128, 2, 70), (128, 128, 4, 130), (64, 32, 1, 17)]
)
def test_an_fp8_split_k_config_interpreted_is_exact(tile_m, tile_n, split, m):
    """Promotion and split-K together: one consumer warpgroup split in two, two consumers
    split in four (four K-stages of 128, the last ragged); and an unsplit 64x32 tile (M <= 64)."""
    import gemm_fp8
    from gemm_bf16 import new_workspace, run_config

    n, k = 136, 400 if split in (1, 2) else 496
    a, b, c = _operands(m, n, k, ml_dtypes.float8_e4m3fn, seed=6)
    config = _config(gemm_fp8.FP8_SPACE, BM=tile_m, BN=tile_n, SPLIT=split, SWAP=False)
    w = new_workspace(c, m, n)
    run_config(
        gemm_fp8.gemm_fp8_tuned,
        config,
        (a, b, c),
        w,
        m,
        n,
        k,
        sms=2,
        interpret=True,
        extra=gemm_fp8.tail_arguments(0.25, 1.0, c),
    )
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b, 0.25))
    _assert_zero(w)


@pytest.mark.parametrize("width", [192, 256])
@pytest.mark.parametrize("cluster", [1, 2])
def test_the_fp8_wide_configs_with_register_budgets_interpreted_are_exact(cluster, width):
    """128x192 and 128x256 tiles: a stage's product fragment and the fp32 total per consumer,
    which the setmaxnreg budgets (producer 40, consumers 232) make room for (256: the stage in
    two 128-wide pieces, so 64 + 128 registers); N ragged, three K-stages; in clusters of two,
    the CTAs multicast halves of B's rows."""
    import gemm_fp8
    from gemm_bf16 import new_workspace, run_config

    m, n, k = 130, 200, 272
    a, b, c = _operands(m, n, k, ml_dtypes.float8_e4m3fn, seed=7)
    config = _config(gemm_fp8.FP8_SPACE, BM=128, BN=width, SPLIT=1, SWAP=False, CLUSTER=cluster)
    w = new_workspace(c, 1, 4)  # the placeholder of shapes without split-K
    run_config(
        gemm_fp8.gemm_fp8_tuned,
        config,
        (a, b, c),
        w,
        m,
        n,
        k,
        sms=2,
        interpret=True,
        extra=gemm_fp8.tail_arguments(0.5, 0.5, c),
    )
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b, 0.25))


def test_fp8_tiles_promote_every_two_stages_exactly():
    """128x256 tiles add each piece into the fp32 total once per PROMOTION_STAGES (two)
    K-stages: nine K-stages become ten (the tenth past K, loaded as zeros), the pairs wrap the
    4-stage ring, and one CTA runs both tiles' jobs."""
    import gemm_fp8
    from gemm_bf16 import new_workspace, run_config

    assert gemm_fp8.PROMOTION_STAGES == 2
    m, n, k = 130, 200, 1040
    a, b, c = _operands(m, n, k, ml_dtypes.float8_e4m3fn, seed=11)
    config = _config(gemm_fp8.FP8_SPACE, BM=128, BN=256, SPLIT=1, SWAP=False, CLUSTER=1)
    run_config(
        gemm_fp8.gemm_fp8_tuned,
        config,
        (a, b, c),
        new_workspace(c, 1, 4),
        m,
        n,
        k,
        sms=1,
        interpret=True,
        extra=gemm_fp8.tail_arguments(1.0, 0.5, c),
    )
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b, 0.5))


def test_fp8_promotion_stages_are_one_or_two():
    """``promotion_stages`` (the K-stages per promotion) of 1 adds every stage alone; the tuned
    kernel keys its tunings by it; any other value is refused before a launch."""
    import gemm_fp8

    c = np.zeros((1, 1), ml_dtypes.bfloat16)
    assert gemm_fp8.tail_arguments(1.0, 2.0, c, 1)[2] == 1
    assert gemm_fp8.tail_arguments(1.0, 2.0, c)[2] == gemm_fp8.PROMOTION_STAGES == 2
    assert "PROMOTION" in gemm_fp8.gemm_fp8_tuned.key
    with pytest.raises(ValueError, match="promotion_stages must be 1 or 2, not 4"):
        gemm_fp8.tail_arguments(1.0, 2.0, c, 4)


def test_the_fp8_launch_takes_python_float_scales_on_the_interpreter():
    """launch(a, b, c, scale_a, scale_b) where there is no GPU: the shape's first candidate,
    its K-stages promoted in pairs (the default) or one by one."""
    import gemm_fp8

    from jittile.runtime import driver

    if driver.available():
        pytest.skip("a GPU is present: tests/test_gpu_gemm.py launches the example there")
    m, n, k = 20, 72, 400
    a, b, c = _operands(m, n, k, ml_dtypes.float8_e4m3fn, seed=5)
    for stages in (2, 1):
        c[:] = 0
        gemm_fp8.launch(a, b, c, 0.5, 4.0, promotion_stages=stages)
        np.testing.assert_array_equal(c.astype(np.float32), _product(a, b, 2.0))


# (M, N, K, B given as a transposed view, C a view into a wider array)
UNALIGNED = [
    (5, 17, 7, False, False),  # K and N off the 16-byte rows: A, B and C staged
    (2, 3, 1, False, False),
    (33, 40, 64, True, False),  # aligned, but B's elements a column apart
    (20, 24, 32, False, True),  # C's rows 54 bytes apart
    (9, 16, 40, True, True),
    (4, 8, 0, False, False),  # no K: C is zeros
]


@pytest.mark.parametrize("m, n, k, transposed, inside", UNALIGNED)
@pytest.mark.parametrize("kind", ["bf16", "fp8"])
def test_launch_stages_operands_tma_cannot_describe(kind, m, n, k, transposed, inside):
    """Exact on the interpreter, whatever the strides: the staged copies change nothing but
    the layout, and a C inside a wider array leaves the array's other columns as they were."""
    import gemm_bf16
    import gemm_fp8

    from jittile.runtime import driver

    if driver.available():
        pytest.skip("a GPU is present: tests/test_gpu_gemm.py launches the example there")
    dtype = ml_dtypes.bfloat16 if kind == "bf16" else ml_dtypes.float8_e4m3fn
    a, b, _ = _operands(m, n, k, dtype, seed=m + n + k)
    if transposed:
        b = np.ascontiguousarray(b.T).T
    wide = np.full((m, n + 3), 7.0, ml_dtypes.bfloat16)
    c = wide[:, 1 : n + 1] if inside else np.full((m, n), np.nan, ml_dtypes.bfloat16)
    if kind == "bf16":
        gemm_bf16.launch(a, b, c)
    else:
        gemm_fp8.launch(a, b, c, 0.5, 2.0)
    np.testing.assert_array_equal(c.astype(np.float32), _product(a, b))
    if inside:
        np.testing.assert_array_equal(wide[:, [0, n + 1, n + 2]].astype(np.float32), 7.0)


@pytest.mark.parametrize(
    "a, b, c",
    [((8, 16), (8, 17), (8, 8)), ((8, 16), (8, 16), (8, 9)), ((2, 8, 16), (8, 16), (8, 8))],
)
def test_launch_names_shapes_that_do_not_multiply(a, b, c):
    import gemm_bf16

    arrays = (np.zeros(shape, ml_dtypes.bfloat16) for shape in (a, b, c))
    with pytest.raises(ValueError, match=r"a \(M, K\), b \(N, K\) and c \(M, N\): got a"):
        gemm_bf16.launch(*arrays)


@pytest.mark.parametrize(
    "scale, message",
    [("x", "got str"), (np.zeros(2, np.float32), r"got ndarray of shape \(2,\)"), ([1.0], "list")],
)
def test_fp8_scales_that_are_not_one_value_are_named(scale, message):
    import gemm_fp8

    a, b, c = _operands(16, 16, 32, ml_dtypes.float8_e4m3fn)
    with pytest.raises(
        ValueError, match=f"scale_b must be a Python float or a one-element.*{message}"
    ):
        gemm_fp8.launch(a, b, c, 1.0, scale)


def test_an_empty_product_writes_nothing():
    import gemm_bf16

    c = np.zeros((0, 8), ml_dtypes.bfloat16)
    gemm_bf16.launch(np.zeros((0, 8), ml_dtypes.bfloat16), np.zeros((8, 8), ml_dtypes.bfloat16), c)
    assert c.shape == (0, 8)


@pytest.mark.parametrize(
    "cols, element_bytes, width", [(7, 2, 8), (8, 2, 8), (0, 2, 8), (17, 1, 32), (4097, 2, 4104)]
)
def test_aligned_widths_are_the_fewest_16_byte_rows(cols, element_bytes, width):
    import gemm_bf16

    assert gemm_bf16.aligned_width(cols, element_bytes) == width


class _DeviceArray:
    """A 16 x 8 float16 device array as ``__cuda_array_interface__`` tells it (never read)."""

    def __init__(self, address, strides):
        self.__cuda_array_interface__ = {
            "shape": (16, 8),
            "typestr": "<f2",
            "data": (address, False),
            "strides": strides,
            "version": 2,
        }


def test_tma_ready_needs_unit_inner_strides_and_16_byte_rows():
    import gemm_bf16

    from jittile.runtime.arrays import device_view

    def ready(x):
        return gemm_bf16.tma_ready(device_view(x))

    # host arrays: their uploads are contiguous, only the rows' width counts
    assert ready(np.zeros((16, 24), ml_dtypes.bfloat16)[:, 1:9])
    assert ready(np.zeros((24, 16), ml_dtypes.bfloat16).T)
    assert not ready(np.zeros((16, 12), ml_dtypes.bfloat16))  # 24-byte rows
    assert ready(np.zeros((1, 8), ml_dtypes.bfloat16))
    # device arrays as they lie
    assert ready(_DeviceArray(0x10000, (48, 2)))
    assert not ready(_DeviceArray(0x10002, (48, 2)))  # 2 bytes past 16
    assert not ready(_DeviceArray(0x10000, (2, 32)))  # a transposed view
    assert not ready(_DeviceArray(0x10000, (48, 4)))  # every other element
    assert not ready(_DeviceArray(0x10000, (8, 2)))  # rows overlapping
    assert not ready(_DeviceArray(0x10000, (0, 2)))  # one row broadcast


@pytest.mark.parametrize(
    "m, n, k, expect",
    [
        (1, 4096, 4096, dict(SWAP=True, BN=16)),
        (48, 4096, 4096, dict(BN=64)),
        # M <= 64: 64x32 tiles fill the GPU over all of K (cuBLAS's choice, run 85)
        (64, 4096, 4096, dict(BM=64, BN=32, SPLIT=1, SWAP=False)),
        (1, 4096, 4096, dict(BM=64, BN=32, SPLIT=1, SWAP=False)),
        (8192, 8192, 8192, dict(SPLIT=1, BM=128)),
        # 128-row tiles leave SMs idle: 64-row tiles beyond M = 512 (run 63: 1024^3 in 9.9 us
        # with 64x128 against 15.5 with 128x128), and 128x256 split in two
        (1024, 1024, 1024, dict(BM=64, BN=128, SPLIT=1)),
        (1024, 1024, 1024, dict(BM=128, BN=256, SPLIT=2)),
        (256, 8192, 8192, dict(BM=128, BN=256, SPLIT=2)),
        # 561 tiles of 128x256: four waves of 132 and 33 tiles, which split in four fill a fifth,
        # or 660 tiles of 128x208 make five waves of smaller tiles (run 111: 194.7 us against
        # 205.7 split in four)
        (4097, 4104, 4096, dict(BM=128, BN=256, SPLIT=4)),
        (4097, 4104, 4096, dict(BM=128, BN=208, SPLIT=1)),
        (3000, 5000, 2000, dict(BM=128, BN=232, SPLIT=1)),  # 528 tiles: 4 waves, not 3.6
        (3000, 5000, 2000, dict(BM=256, BN=152, SPLIT=1)),  # 396 tiles: 3 waves (cuBLAS's)
        (4096, 11008, 4096, dict(BM=128, BN=256, SPLIT=2)),  # 1376 tiles: 56 past 10 waves
    ],
)
def test_pruning_keeps_the_shapes_configs(m, n, k, expect):
    import gemm_bf16

    kept = gemm_bf16.BF16_SPACE.candidates(m, n, k)
    assert 0 < len(kept) <= 16  # docs/gemm.md: 4 to 16
    assert any(all(c.kwargs[key] == v for key, v in expect.items()) for c in kept)
    if m > 1024:  # no swap; split-K only for the last partial wave of 128x256 tiles
        assert not any(c.kwargs["SWAP"] for c in kept)
        for c in (c for c in kept if c.kwargs["SPLIT"] > 1):
            tail = (-(-m // 128) * -(-n // 256)) % gemm_bf16.SMS
            assert c.kwargs["BN"] == 256 and 0 < tail * c.kwargs["SPLIT"] <= gemm_bf16.SMS
    if m <= 32:  # swap-AB, or the narrow 64x32 tiles
        assert all(c.kwargs["SWAP"] or c.kwargs["BN"] == 32 for c in kept)


@pytest.mark.parametrize(
    "m, n, fitted",
    [
        # 192x176: 528 tiles, 4 waves; 128x208: 660, 5; 256x136: 527, 4
        (4097, 4104, {(192, 176), (128, 208), (256, 136)}),
        # 528 tiles each: 4 waves; 256x152: 396, 3
        (3000, 5000, {(128, 232), (192, 152), (256, 152)}),
        (1920, 6848, {(192, 176), (128, 200), (256, 144)}),  # 390 tiles: 3 waves; 525: 4
        (4096, 4096, set()),  # 512 tiles of 128x256, 3.9 waves: none fits better
        (64, 4096, set()),  # no fitted tile has fewer rows than M
        (256, 8192, set()),  # 64 tiles of 128x256: no partial wave to fit
    ],
)
def test_fitted_tiles_are_the_cheapest_waves_below_128x256s(m, n, fitted):
    """The shape-fitted tiles a shape keeps: the two of 128 or 192 rows and the one of 256 whose
    waves of tiles on 132 SMs cost least (a wave's time: a tile's area plus 100 per operand row,
    ``TILE_EDGE_COST``, times 1.05 for 192 rows, ``ROWS_COST``), those cheaper than 128x256's
    waves only, only tiles with fewer rows than M, and only over more than a wave of 128x256
    tiles. The expected sets are the rule computed by hand: at 4097x4104, 192x176 makes
    22 x 24 = 528 tiles, 4 waves of (192 x 176 + 100 x 368) x 1.05 = 74121.6, 296486.4 in all;
    128x208 33 x 20 = 660, 5 waves of 128 x 208 + 100 x 336 = 60224 (301120); 128x216
    33 x 19 = 627, 5 waves of 62048 (310240, third); 256x136 17 x 31 = 527, 4 waves of 74016
    (296064); 128x256 561 tiles, 5 waves of 71168 (355840). At 3000x5000, 128x232: 24 x 22 =
    528 tiles, 4 waves of 65696 (262784); 192x152 16 x 33 = 528, 4 waves of 63584 x 1.05
    (267052.8); 128x240 24 x 21 = 504, 4 waves of 67520 (270080, third); 256x152: 12 x 33 =
    396, 3 waves of 79712 (239136), 256x160 12 x 32 = 384, 3 waves of 82560 (247680, second of
    256 rows)."""
    import gemm_bf16

    space = gemm_bf16.BF16_SPACE
    kept = {
        (c.kwargs["BM"], c.kwargs["BN"])
        for c in space.candidates(m, n, 4096)
        if (c.kwargs["BM"], c.kwargs["BN"]) in space.fitted
    }
    assert kept == fitted
    for tm, tn in kept:  # unsplit, unclustered, GROUP_M 8, the deepest ring that fits
        (config,) = [c for c in space.configs if (c.kwargs["BM"], c.kwargs["BN"]) == (tm, tn)]
        assert config.kwargs["SPLIT"] == 1 and config.kwargs["CLUSTER"] == 1
        consumers = {128: 2, 192: 3, 256: 2}[tm]
        assert config.block == 128 * (1 + consumers)
        stage = (tm + tn) * 128
        ring = config.kwargs["STAGES"]
        room = gemm_bf16.SHARED_LIMIT - 1024 - consumers * 8192  # and an epilogue buffer each
        assert ring * stage <= room
        assert ring == 4 or (ring + 1) * stage > room


def test_fitted_tiles_cover_the_widths_the_registers_allow():
    """128-row tiles of every width from 136 to 240 in steps of 8 (but 192, listed otherwise),
    192-row ones from 128 to 176 and 192: a 512-thread block launches with 128 registers per
    thread, and 208 columns need 134 (ptxas C7602), 184 and 200 spill; 256-row ones from 128
    to 160, the widths with 4 stages; the wgmma forms cover every multiple of 8."""
    import gemm_bf16

    space = gemm_bf16.BF16_SPACE
    assert {tn for tm, tn in space.fitted if tm == 128} == set(range(136, 241, 8)) - {192}
    assert {tn for tm, tn in space.fitted if tm == 192} == {*range(128, 177, 8), 192}
    assert {tn for tm, tn in space.fitted if tm == 256} == set(range(128, 161, 8))
    mma = gemm_bf16.BF16_MMA[176 // 8 - 1]
    assert mma == "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16"


@pytest.mark.parametrize("tm, tn", [(128, 240), (192, 176), (192, 192), (256, 160)])
def test_the_widest_fitted_tiles_compile_within_their_blocks_registers(tm, tn):
    """The widest fitted tiles for sm_90a, built for their launch block (ptxas then keeps
    within 65536 / block registers per thread): no local memory, no warning."""
    import warnings

    import gemm_bf16

    from jittile import JittileWarning, T

    spec = T.Tensor((None, None), "bfloat16")
    work = (T.Tensor((None,), "float32"), T.Tensor((None,), "int32"))
    config = _config(gemm_bf16.BF16_SPACE, BM=tm, BN=tn, SPLIT=1, GROUP_M=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JittileWarning)
        ck = gemm_bf16.gemm_bf16_tuned.kernel.compile(
            spec,
            spec,
            spec,
            *work,
            *(np.int32(1),) * 3,
            target="sm_90a",
            launch=T.cuda.LaunchConfig(grid=1, block=config.block),
            **config.kwargs,
        )
    assert ck.metadata["local_bytes"] == 0
    assert ck.metadata["registers"] <= 65536 // config.block
    if tm == 256:  # the consumers' two fragments live in the budget setmaxnreg raises them to
        assert "USETMAXREG.TRY_ALLOC.CTAPOOL UP0, 0xe8" in ck.sass  # 232
        used = max(int(r) for r in re.findall(r"\bR(\d+)\b", ck.sass))
        assert 65536 // config.block < used < 232


@pytest.mark.parametrize("m", [64, 100, 128, 129, 4096])
def test_clustered_candidates_need_a_row_block_per_cta(m):
    """A cluster's CTAs take stacked row blocks: clustered configs are kept only where M has
    as many row blocks of their tile, over half a wave of tiles, never with split-K or
    swap-AB."""
    import gemm_bf16

    kept = gemm_bf16.BF16_SPACE.candidates(m, 16384, 4096)
    clustered = [c for c in kept if c.kwargs["CLUSTER"] > 1]
    for config in clustered:
        v = config.kwargs
        assert config.cluster == (2, 1, 1) and v["SPLIT"] == 1
        assert not v["SWAP"] and -(-m // v["BM"]) >= 2
        assert 2 * -(-m // v["BM"]) * (16384 // v["BN"]) > gemm_bf16.SMS
    assert bool(clustered) == (m > 64)  # 65..128 rows: two 64-row blocks
    # 1024^2 in 128-row tiles (64 of 128 x 128, 32 of 128 x 256) is under half a wave: those
    # split; its 128 tiles of 64 x 128 may run in clusters
    small = gemm_bf16.BF16_SPACE.candidates(1024, 1024, 1024)
    clustered = {(c.kwargs["BM"], c.kwargs["BN"]) for c in small if c.kwargs["CLUSTER"] > 1}
    assert clustered == {(64, 128)}


def test_the_consumers_wgmma_descriptors_are_uniform_32_bit_words():
    """Between a K-stage's wgmmas, the 128x128 consumer computes the next A and B descriptors in
    uniform registers and in 32 bits: no move from per-thread registers (R2UR) and no 64-bit
    shift, which made its loop 102 SASS instructions per stage, 81 now (runs 102-103)."""
    import gemm_bf16

    from jittile import T

    spec = T.Tensor((None, None), "bfloat16")
    work = (T.Tensor((None,), "float32"), T.Tensor((None,), "int32"))
    config = _config(gemm_bf16.BF16_SPACE, BM=128, BN=128, SPLIT=1, GROUP_M=8)
    ck = gemm_bf16.gemm_bf16_tuned.kernel.compile(
        spec, spec, spec, *work, *(np.int32(1),) * 3, target="sm_90a", **config.kwargs
    )
    sass = [line for line in ck.sass.splitlines() if "*/" in line]
    first = next(i for i, line in enumerate(sass) if "HGMMA" in line)
    end = next(i for i in range(first, len(sass)) if "WARPGROUP.DEPBAR" in sass[i])
    stage = sass[first:end]
    assert sum("HGMMA" in line for line in stage) == 4
    assert not [line for line in stage if "R2UR" in line or ".U64" in line], "\n".join(stage)
