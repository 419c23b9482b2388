"""FP8 tiles and promotion side by side on the H200 (issue #23: fp8 at 0.82-0.90x
``torch._scaled_mm`` on squares and projections), samples interleaved with cuBLAS's.

Promotion multiplies each K-stage alone (``wait_group 0``) and adds it into an fp32 total.
Run 81 timed three schedules of the 128x192 tile: the whole stage waited for and added (the
example), the stage as two 96-wide halves with the first added under the second's MMAs (4-9%
slower), and no promotion at all (the bf16 loop, one group in flight: 17-20% slower, its error
twice cuBLAS's): the promotion's waits are not what holds fp8 back. The stages' loads are: at
1300 TFLOP/s a 128x192 tile streams 40 KB per 6.3 MFLOP, 8.5 TB/s from L2 over the GPU, as
the bf16 128x256 tile does at 760 TFLOP/s. A 128x256 tile needs 12% fewer bytes per FLOP; with
promotion its stages go in two 128-wide pieces (``promoted_piece``), as two whole 64 x 256
fragments would not fit in a consumer's registers. Per shape, each tile of ``TILES`` in three
builds:

- ``promoted``: examples/gemm_fp8.py;
- ``turns``: the two consumer warpgroups take turns issuing a piece (named barriers 3 and 4,
  FlashAttention-3's ping-pong), so one's wait and adds run under the other's MMAs instead of
  both waiting at once;
- ``unpromoted``: no promotion (the accumulator chains through the stages in wgmma's own
  precision, one group in flight): not a product (its error is larger), a reference.

    PYTHONPATH=$PWD python3 bench/promotion_ab.py RUN [MxNxK:TILE[,TILE...] ...]
"""

from __future__ import annotations

import sys
import tempfile

from gemm_ab import compare_fp8, fp8_variant

TILES = "128x192,128x256,128x256/2"
DEFAULT = tuple(
    f"{shape}:{TILES}" for shape in ("8192x8192x8192", "4096x4096x4096", "8192x14336x4096")
)
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

TURNS = {  # the two consumers take turns issuing a piece (FlashAttention-3's ping-pong)
    """                        T.cuda.tile.apply(
                            T.ptx[MMA_OP],
                            part,""": """                        if TILE_M == 128:  # this warpgroup's turn
                            T.ptx.bar.sync(3 + half, 256)
                        T.cuda.tile.apply(
                            T.ptx[MMA_OP],
                            part,""",
    """                        T.ptx.wgmma.commit_group.sync.aligned()
                        T.ptx.wgmma.wait_group.sync.aligned(0)
                        if piece == TILE_N // PROMOTE - 1:""": """                        T.ptx.wgmma.commit_group.sync.aligned()
                        if TILE_M == 128:  # the other's turn
                            T.ptx.bar.arrive(4 - half, 256)
                        T.ptx.wgmma.wait_group.sync.aligned(0)
                        if piece == TILE_N // PROMOTE - 1:""",
    """    it = 0
    rank = cluster_rank(CLUSTER)
    job = T.cuda.block_idx("x") // CLUSTER
    while job < jobs:""": """    it = 0
    rank = cluster_rank(CLUSTER)
    job = T.cuda.block_idx("x") // CLUSTER
    if PROMOTE:
        if TILE_M == 128:
            if half == 1:  # the first turn is consumer 0's
                T.ptx.bar.arrive(3, 256)
    while job < jobs:""",
    """        job += T.cuda.grid_dim("x") // CLUSTER
    if leader:""": """        job += T.cuda.grid_dim("x") // CLUSTER
    if PROMOTE:
        if TILE_M == 128:
            if half == 0:  # consumer 1's last hand-over
                T.ptx.bar.sync(3, 256)
    if leader:""",
}


def main() -> None:
    import common

    run = int(sys.argv[1])
    specs = sys.argv[2:] or DEFAULT
    with tempfile.TemporaryDirectory() as folder:
        variants = [
            ("promoted", fp8_variant(folder, "promoted", {}, {})),
            ("turns", fp8_variant(folder, "turns", TURNS, {})),
            ("unpromoted", fp8_variant(folder, "unpromoted", {}, UNPROMOTED)),
        ]
        rows = []
        for spec in specs:
            rows += compare_fp8(variants, spec)
    common.save(f"promotion_ab_run{run:02d}", {"rows": rows})


if __name__ == "__main__":
    main()
