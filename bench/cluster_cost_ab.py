"""Where a cluster's time goes, and the short shapes' untried tiles, beside cuBLAS on the GPU
(hot L2, samples interleaved; issue #23). Clusters of two run 10-22% slower than the same tile
alone on 128x128 and 128x192 tiles (run 120's tunings: 8192^3 128x128 2.01 against 1.65 ms),
where cuBLAS's 128x128 2x1 clusters win at 256 and 512 rows. Variants of
examples/gemm_bf16.py:

- ``example``: as it is (in clusters where the spec says ``@2``);
- ``no multicast``: each CTA of a cluster loads its whole B tile itself, the release protocol
  (every consumer arriving at every CTA's empty barriers) unchanged: the cost of the coupling
  alone, without multicast;
- ``more tiles``: the space with 128x64 (two consumers, eight stages), 64x64 (twelve stages)
  and 64x32 with sixteen stages (cuBLAS's ``nvjet_sm90_tst_64x32_64x16_1x2`` at 64x4096^2 and
  ``128x64_64x8_1x2`` at 1024^3, run 121).

    PYTHONPATH=$PWD python3 bench/cluster_cost_ab.py RUN

writes bench/results/cluster_cost_ab_runRUN.json.
"""

from __future__ import annotations

import sys
import tempfile

from gemm_ab import compare, variant

# the 128x128 tiles the cluster A/B scripts time alone and in clusters (cuBLAS's 2x1 clusters
# win at 256 and 512 rows; 8192^3: many waves)
CLUSTERED_128 = ("512x4096x4096:128x128", "256x8192x8192:128x128", "8192x8192x8192:128x128")
NO_MULTICAST = {
    "            if CLUSTER == 1:\n                T.cuda.tile.apply(\n": (
        "            if CLUSTER >= 1:\n                T.cuda.tile.apply(\n"
    )
}
MORE_TILES = {
    "        (64, 32, 12, 8, ANY_SPLIT, False),\n": (
        "        (64, 32, 16, 8, ANY_SPLIT, False),\n"
        "        (128, 64, 8, 8, ANY_SPLIT, True),\n"
        "        (64, 64, 12, 8, ANY_SPLIT, False),\n"
    )
}


def main() -> None:
    import common
    import gemm_bf16

    run = int(sys.argv[1])
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        no_multicast = variant(folder, "gemm_bf16_no_multicast", NO_MULTICAST)
        more = variant(folder, "gemm_bf16_more_tiles", MORE_TILES)
        coupling = (
            ("alone", gemm_bf16, 1),
            ("cluster", gemm_bf16, 2),
            ("cluster, no multicast", no_multicast, 2),
        )
        for spec in (
            "8192x8192x8192:128x128",
            "8192x8192x8192:128x256",
            "512x4096x4096:128x128",
            "256x8192x8192:128x128",
        ):
            rows += compare(coupling, spec)
        tiles = (("example", gemm_bf16, 1),)
        for spec in ("64x4096x4096:64x32", "1024x1024x1024:64x128", "512x4096x4096:64x256"):
            rows += compare(tiles, spec)
        for spec in (
            "64x4096x4096:64x32",
            "64x4096x4096:64x64",
            "64x4096x4096:64x64/2",
            "1024x1024x1024:128x64",
            "1024x1024x1024:128x64@2",
            "1024x1024x1024:64x64",
            "512x4096x4096:128x64",
            "256x8192x8192:64x64",
        ):
            rows += compare((("more tiles", more, 1),), spec)
    common.save(f"cluster_cost_ab_run{run:02d}", {"rows": rows})


if __name__ == "__main__":
    main()
