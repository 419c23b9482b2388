"""64-row tiles in clusters of two side by side along N, multicasting their shared A tile
(cuBLAS's ``nvjet_sm90_tst_64x32_64x16_1x2`` at 64x4096x4096, run 121), now that a relay thread
carries a cluster's releases (run 126). Run 96 measured this sharing slower than alone, when
the consumers still arrived at the other CTA's barriers themselves. A variant of
examples/gemm_bf16.py whose clusters stack along N (``job_origin``, the cluster's tile count)
and whose producers multicast half of the A tile each and load their own B tile; beside the
example alone and cuBLAS, hot L2, samples interleaved.

    PYTHONPATH=$PWD python3 bench/share_a_ab.py RUN

writes bench/results/share_a_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from cluster_cost_ab import NO_MULTICAST
from gemm_ab import time_variants, variant

SHARE_A = {
    **NO_MULTICAST,
    "    pairs_m = (tiles_m + CLUSTER - 1) // CLUSTER\n"
    "    m0, n0 = tile_origin(tile, pairs_m, tiles_n, CLUSTER * TILE_M, TILE_N, GROUP)\n"
    "    return m0 + rank * TILE_M, n0\n": (
        "    pairs_n = (tiles_n + CLUSTER - 1) // CLUSTER\n"
        "    m0, n0 = tile_origin(tile, tiles_m, pairs_n, TILE_M, CLUSTER * TILE_N, GROUP)\n"
        "    return m0, n0 + rank * TILE_N\n"
    ),
    "    tiles = (tiles_m + CLUSTER - 1) // CLUSTER * tiles_n": (
        "    tiles = tiles_m * ((tiles_n + CLUSTER - 1) // CLUSTER)"
    ),
    "            else:\n"
    "                T.cuda.tile.apply(\n"
    "                    T.ptx[LOAD],\n"
    "                    R_s[s, 0],\n": (
        "            elif CLUSTER > 1:\n"
        "                for r in T.unroll(CLUSTER):\n"
        "                    if rank == r:\n"
        "                        a_lo = r * TILE_M // CLUSTER // 8 * 8\n"
        "                        a_hi = (r + 1) * TILE_M // CLUSTER // 8 * 8\n"
        "                        T.cuda.tile.apply(\n"
        "                            T.ptx[MULTICAST_LOAD],\n"
        "                            R_s[s, 0, a_lo:a_hi],\n"
        "                            R,\n"
        "                            box=(a_hi - a_lo, TILE_K),\n"
        "                            coords=(m0 + a_lo, k0),\n"
        "                            swizzle=3,\n"
        "                            l2_promotion=L2_PROMOTION,\n"
        "                            cta_mask=T.uint16((1 << CLUSTER) - 1),\n"
        "                            mbar=full.ptr_to([s]),\n"
        "                        )\n"
        "            else:\n"
        "                T.cuda.tile.apply(\n"
        "                    T.ptx[LOAD],\n"
        "                    R_s[s, 0],\n"
    ),
}


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        share_a = variant(folder, "gemm_bf16_share_a", SHARE_A)
        variants = (("alone", gemm_bf16, 1), ("sharing A", share_a, 2))
        time_variants(
            "share_a_ab",
            variants,
            (
                "64x4096x4096:64x32",
                "64x4096x4096:64x128",
                "128x8192x8192:64x128",
                "1024x1024x1024:64x128",
                "512x4096x4096:64x256",
                "256x8192x8192:64x256",
            ),
        )


if __name__ == "__main__":
    main()
