"""An FP8 GEMM on Hopper tensor cores: ``C = scale_a * scale_b * A @ B.T`` with e4m3 A (M, K) and
B (N, K), per-tensor fp32 scales, fp32 accumulation, bf16 out (``torch._scaled_mm``'s product).

It is ``examples/gemm_bf16.py``'s kernel (``gemm_body``) over e4m3 operands: a stage's K-slice is
128 elements (one 128-byte swizzle row), four ``wgmma.mma_async.m64nNk32.f32.e4m3.e4m3`` per stage.
Hopper's fp8 wgmma adds its products into an accumulator with fewer bits than fp32, so each stage
is multiplied alone (``scale_d = 0``) and added into an fp32 register total (``PROMOTE``, the
promotion CUTLASS and DeepGEMM use, as cuBLAS does without fast accumulation). A stage's product
fragment and the total share a consumer's registers: 128x128 tiles fit in 168, 128x192 and
128x256 raise the consumers' budget to 232 with ``setmaxnreg`` (producer 40), and 128x256 tiles
multiply each stage in two 128-wide pieces (``promoted_piece``: 64 + 128 registers). An unsplit
job sums two stages per promotion (``PROMOTION_STAGES``; ``launch(..., promotion_stages=1)``
sums one, cuBLAS's accuracy, 5-15% slower: runs 91-92; docs/gemm.md). The scales
are one-element float32 arrays read in the kernel (a device array is never synchronized to the
host); the epilogue multiplies the total by their product before rounding to bf16.

Tuning space (``FP8_SPACE``, keyed on M, N, K, pruned as gemm_bf16's; docs/gemm.md): 128x256 (4
stages), 128x192 (5), 128x128 (6, GROUP_M 8 or 16), 64x128 (8) and 64x32 (12, M <= 64) tiles,
clusters of two, split-K 2, 4, 8 with 128x128, 64x128 and 64x32 in one launch as gemm_bf16's
(the scaled partial sums meet through the fp32 workspace; the last split of a block adds them
and rounds them into C), swap-AB for M <= 64.
"""

import math
import numbers

import numpy as np
from gemm_bf16 import (
    ANY_SPLIT,
    PROMOTED_MMA,
    PROMOTED_PIECE,
    ROW_BYTES,
    SMS,
    UNSPLIT,
    Space,
    gemm_body,
    product_shape,
    prune,
    run_tuned,
)

import jittile
from jittile import T

BK = ROW_BYTES  # e4m3: 128 elements per stage
# K-stages an unsplit job's pieces accumulate in the wgmma before each is added into the fp32
# total, by default (``launch(..., promotion_stages=)``): two, K = 256 between promotions, half
# the waits and adds of one stage (K = 128, CUTLASS's and DeepGEMM's interval, whose errors
# equal cuBLAS's): 5-15% faster (runs 91-92), the mean error 1.1% above cuBLAS's
PROMOTION_STAGES = 2
FP8_SPACE = Space(
    1,
    tiles=(
        (128, 128, 6, 8, ANY_SPLIT, True),
        (128, 128, 6, 16, UNSPLIT, False),
        (128, 192, 5, 8, UNSPLIT, True),
        (128, 256, 4, 8, UNSPLIT, True),
        (64, 128, 8, 8, ANY_SPLIT, True),
        (64, 32, 12, 8, ANY_SPLIT, False),
    ),
    swap_tiles=((128, 16, 8), (128, 32, 8), (128, 64, 8)),
    splits=(2, 4, 8),
)


@jittile.kernel
def gemm_fp8(
    A: T.Tensor((None, None), "float8_e4m3fn"),
    B: T.Tensor((None, None), "float8_e4m3fn"),
    C: T.Tensor((None, None), "bfloat16"),
    M: T.int32,
    N: T.int32,
    K: T.int32,
    S_a: T.Tensor((1,), "float32"),
    S_b: T.Tensor((1,), "float32"),
):
    """The 128x128 configuration alone (no tuning)."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=132, block=384))
    gemm_body(
        A,
        B,
        C,
        C,
        C,
        S_a[0] * S_b[0],
        M,
        N,
        K,
        "float8_e4m3fn",
        PROMOTED_MMA[128 // 16 - 1],
        128,
        128,
        BK,
        6,
        8,
        1,
        False,
        PROMOTED_PIECE[128 // 16 - 1],
        True,
        1,
        PROMOTION_STAGES,
    )


@jittile.autotune(
    configs=FP8_SPACE.configs,
    key=["M", "N", "K", "PROMOTION"],
    prune_configs_by={"early_config_prune": prune(FP8_SPACE)},
)
@jittile.kernel
def gemm_fp8_tuned(
    A: T.Tensor((None, None), "float8_e4m3fn"),
    B: T.Tensor((None, None), "float8_e4m3fn"),
    C: T.Tensor((None, None), "bfloat16"),
    W: T.Tensor((None,), "float32"),
    Arrivals: T.Tensor((None,), "int32"),
    M: T.int32,
    N: T.int32,
    K: T.int32,
    S_a: T.Tensor((1,), "float32"),
    S_b: T.Tensor((1,), "float32"),
    PROMOTION: T.constexpr,  # K-stages per promotion of an unsplit job: 1 or 2
    BM: T.constexpr,
    BN: T.constexpr,
    STAGES: T.constexpr,
    GROUP_M: T.constexpr,
    SPLIT: T.constexpr,
    SWAP: T.constexpr,
    CLUSTER: T.constexpr,
):
    """gemm_fp8 over the tuning space (split-K: see gemm_bf16_tuned)."""
    if SWAP:
        gemm_body(
            B,
            A,
            C,
            W,
            Arrivals,
            S_a[0] * S_b[0],
            N,
            M,
            K,
            "float8_e4m3fn",
            PROMOTED_MMA[BN // 16 - 1],
            BM,
            BN,
            BK,
            STAGES,
            GROUP_M,
            SPLIT,
            True,
            PROMOTED_PIECE[BN // 16 - 1],
            True,
            CLUSTER,
            PROMOTION,
        )
    else:
        gemm_body(
            A,
            B,
            C,
            W,
            Arrivals,
            S_a[0] * S_b[0],
            M,
            N,
            K,
            "float8_e4m3fn",
            PROMOTED_MMA[BN // 16 - 1],
            BM,
            BN,
            BK,
            STAGES,
            GROUP_M,
            SPLIT,
            False,
            PROMOTED_PIECE[BN // 16 - 1],
            True,
            CLUSTER,
            PROMOTION,
        )


def scale_array(scale, like, name: str = "scale"):
    """A per-tensor scale as the one-element float32 array the kernel reads: device arrays as
    they are (never read on the host), Python floats copied next to ``like``; a ValueError
    naming the scale for anything else."""
    if hasattr(scale, "shape"):
        if math.prod(scale.shape) == 1:
            return scale.reshape(1)
    elif isinstance(scale, numbers.Real):
        if hasattr(like, "new_empty"):
            import torch

            return torch.full((1,), float(scale), dtype=torch.float32, device=like.device)
        return np.full((1,), scale, np.float32)
    shape = f" of shape {tuple(scale.shape)}" if hasattr(scale, "shape") else ""
    raise ValueError(
        f"gemm_fp8: {name} must be a Python float or a one-element float32 array, got "
        f"{type(scale).__name__}{shape}"
    )


def tail_arguments(scale_a, scale_b, c, promotion_stages: int = PROMOTION_STAGES) -> tuple:
    """The tuned kernel's arguments after K: the scales as arrays beside ``c`` and the K-stages
    per promotion (1 or 2)."""
    if promotion_stages not in (1, 2):
        raise ValueError(f"gemm_fp8: promotion_stages must be 1 or 2, not {promotion_stages!r}")
    return scale_array(scale_a, c, "scale_a"), scale_array(scale_b, c, "scale_b"), promotion_stages


def launch(
    a,
    b,
    c,
    scale_a=1.0,
    scale_b=1.0,
    sms: int = SMS,
    promotion_stages: int = PROMOTION_STAGES,
) -> None:
    """``c = scale_a * scale_b * a @ b.T`` (bf16) for e4m3 ``a`` (M, K) and ``b`` (N, K): device
    arrays (torch float8_e4m3fn), tuned per (M, N, K); without a GPU on the CPU interpreter
    (ml_dtypes.float8_e4m3fn NumPy arrays) with the shape's first candidate config.
    ``promotion_stages=1`` adds each 128-element K-stage into the fp32 total alone (cuBLAS's
    error, slower); the default 2 adds pairs of stages. Any shape and strides (``stage``)."""
    m, n, k = product_shape(a, b, c)
    extra = tail_arguments(scale_a, scale_b, c, promotion_stages)
    run_tuned(gemm_fp8_tuned, FP8_SPACE, (a, b, c), c, m, n, k, sms, extra)


def main() -> None:
    ck = gemm_fp8.compile(target="sm_90a")
    hgmma = [
        line.split(";")[0].split("*/")[-1].strip()
        for line in ck.sass.splitlines()
        if "GMMA." in line
    ]
    print(
        f"gemm_fp8: {len(hgmma)} QGMMA per stage ({hgmma[0]}), {ck.metadata['registers']} "
        f"registers, {ck.metadata['local_bytes']} bytes of local memory"
    )
    from jittile.runtime import driver

    if not driver.available():
        print(
            "gemm_fp8: no GPU here; compiled only (launch(a, b, c, scale_a, scale_b) runs it on "
            "the CPU interpreter, ml_dtypes.float8_e4m3fn NumPy arrays in)"
        )
        return
    import torch

    for m, n, k in ((512, 768, 320), (300, 520, 208), (16, 4096, 4096)):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        launch(a, b, c, 0.5, 2.0)
        expected = a.float() @ b.float().T
        error = (c.float() - expected).abs().max().item()
        assert error <= 0.02 * expected.abs().max().item(), error
        print(
            f"gemm_fp8 {m}x{n}x{k}: OK on the GPU with {gemm_fp8_tuned.best_config} "
            f"(max |error| {error:.3g})"
        )


if __name__ == "__main__":
    main()
