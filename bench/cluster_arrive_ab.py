"""Per shape, four kernels side by side on the H200: a config without a cluster, the same tile
in clusters of two with the stages released by remote arrivals in the default ``.release.cta``
form (``mbarrier.arrive.shared::cluster``, what the examples issue: a lone SYNCS.ARRIVE in
SASS), with ``mbarrier.arrive.release.cluster`` arrivals (a copy of examples/gemm_bf16.py with
that one name changed: ptxas puts a ``MEMBAR.ALL.GPU`` before each), and in clusters of four
(each CTA multicasting a quarter of the B tile). Run 62.

    PYTHONPATH=$PWD python3 bench/cluster_arrive_ab.py [MxNxK:BMxBN ...]
"""

from __future__ import annotations

import sys
import tempfile

from gemm_ab import compare, variant

DEFAULT = ("512x4096x4096:64x256", "4096x4096x4096:128x256")
RELEASE_CLUSTER = {
    "T.ptx.mbarrier.arrive.shared__cluster.b64(": (
        "T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64("
    )
}


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        release_cluster = variant(folder, "gemm_bf16_release_cluster", RELEASE_CLUSTER)
        variants = (
            ("no cluster", gemm_bf16, 1),
            ("cluster, .release.cta arrivals", gemm_bf16, 2),
            ("cluster, .release.cluster arrivals", release_cluster, 2),
            ("cluster of 4, .release.cta arrivals", gemm_bf16, 4),
        )
        for spec in sys.argv[1:] or DEFAULT:
            compare(variants, spec)


if __name__ == "__main__":
    main()
