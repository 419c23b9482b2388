"""What of a cluster's cost is the launch (issue #23; run 122: 128x128 tiles in clusters of two
run 12-21% slower than alone whether or not B is multicast). Variants of examples/gemm_bf16.py
beside cuBLAS, hot L2, samples interleaved:

- ``alone`` and ``cluster``: the example, unclustered and in clusters of two;
- ``cluster launch only``: the unclustered kernel (no remote arrivals, no multicast) launched in
  clusters of two, so that only the CTAs' placement changes;
- ``ring 5``: the 128x128 tile with five stages instead of six, alone and in clusters: how near
  the pipeline is to being bound by the latency of a stage's round trip.

    PYTHONPATH=$PWD python3 bench/cluster_launch_ab.py RUN

writes bench/results/cluster_launch_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from cluster_cost_ab import CLUSTERED_128
from gemm_ab import time_variants, variant

LAUNCH_ONLY = {'                "CLUSTER": cluster,\n': '                "CLUSTER": 1,\n'}
RING_5 = {
    "        (128, 128, 6, 8, ANY_SPLIT, True),\n": "        (128, 128, 5, 8, ANY_SPLIT, True),\n"
}


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        launch_only = variant(folder, "gemm_bf16_launch_only", LAUNCH_ONLY)
        ring_5 = variant(folder, "gemm_bf16_ring_5", RING_5)
        variants = (
            ("alone", gemm_bf16, 1),
            ("cluster", gemm_bf16, 2),
            ("cluster launch only", launch_only, 2),
            ("ring 5 alone", ring_5, 1),
            ("ring 5 cluster", ring_5, 2),
        )
        time_variants(
            "cluster_launch_ab",
            variants,
            CLUSTERED_128,
        )


if __name__ == "__main__":
    main()
