"""FP8 tiles and promotion side by side on the H200 (issue #23: fp8 at 0.82-0.90x
``torch._scaled_mm`` on squares and projections), samples interleaved with cuBLAS's.

Promotion multiplies each K-stage alone and adds it into an fp32 total. Run 81 timed three
schedules of the 128x192 tile: the whole stage waited for and added (the example), the stage as
two 96-wide halves with the first added under the second's MMAs (4-9% slower), and no promotion
at all (the bf16 loop, one group in flight: 17-20% slower, its error twice cuBLAS's). The
stages' loads limit that tile: at 1300 TFLOP/s a 128x192 tile streams 40 KB per 6.3 MFLOP,
8.5 TB/s from L2 over the GPU, as the bf16 128x256 tile does at 760 TFLOP/s. A 128x256 tile
needs 12% fewer bytes per FLOP (run 82: 4096^3 1188 against 1076 TFLOP/s), but two whole 64 x
256 fragments would not fit in a consumer's registers: run 82 promoted its stages in two
128-wide pieces, each waited for (11% behind the unpromoted build, which matches cuBLAS); run
83 had the two consumers take turns issuing them (named barriers, FlashAttention-3's
ping-pong: -2% .. +1%); run 84 multiplied four 64-wide pieces, two buffers alternating, each
added while the next is multiplied: 4-5% slower than two pieces, which the example keeps
(``promoted_piece``). The unsplit fp8 jobs now add each piece once per two K-stages
(gemm_fp8's ``PROMOTION_STAGES``: K = 256 between promotions). Per shape, each tile of ``TILES`` in three
builds:

- ``promoted``: examples/gemm_fp8.py;
- ``per stage``: every tile promoted after each K-stage (K = 128, the interval before);
- ``unpromoted``: no promotion (the accumulator chains through the stages in wgmma's own
  precision, one group in flight): not a product (its error is larger), a reference.

Errors: the largest against the largest product (bf16 rounding dominates it) and the mean
absolute error against the mean absolute product, which the accumulation's own error moves.

    PYTHONPATH=$PWD python3 bench/promotion_ab.py RUN [MxNxK:TILE[,TILE...] ...]
"""

from __future__ import annotations

import sys
import tempfile

from gemm_ab import compare_fp8, fp8_variant

TILES = "128x192,128x256"
DEFAULT = tuple(
    f"{shape}:{TILES}"
    for shape in (
        "8192x8192x8192",
        "4096x4096x4096",
        "8192x14336x4096",
        "4096x11008x4096",
        "8192x4096x14336",
    )
)
PER_STAGE = {"PROMOTION_STAGES = 2\n": "PROMOTION_STAGES = 1\n"}  # in gemm_fp8
UNPROMOTED = {  # the non-swapped tuned call's PROMOTE argument
    """            False,
            PROMOTED_PIECE[BN // 16 - 1],
            True,
            CLUSTER,""": """            False,
            False,
            True,
            CLUSTER,""",
    "            PROMOTED_MMA[BN // 16 - 1],\n            BM,\n            BN,\n            BK,\n"
    "            STAGES,\n            GROUP_M,\n            SPLIT,\n            False,": (
        "            E4M3_MMA[BN // 16 - 1],\n            BM,\n            BN,\n            BK,\n"
        "            STAGES,\n            GROUP_M,\n            SPLIT,\n            False,"
    ),
    "    ANY_SPLIT,\n": "    ANY_SPLIT,\n    E4M3_MMA,\n",
}


def main() -> None:
    import common

    run = int(sys.argv[1])
    specs = sys.argv[2:] or DEFAULT
    with tempfile.TemporaryDirectory() as folder:
        variants = [
            ("promoted", fp8_variant(folder, "promoted", {}, {})),
            ("per stage", fp8_variant(folder, "per_stage", {}, PER_STAGE)),
            ("unpromoted", fp8_variant(folder, "unpromoted", {}, UNPROMOTED)),
        ]
        rows = []
        for spec in specs:
            rows += compare_fp8(variants, spec)
    common.save(f"promotion_ab_run{run:02d}", {"rows": rows})


if __name__ == "__main__":
    main()
