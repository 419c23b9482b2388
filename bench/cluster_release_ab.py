"""Which part of the clusters' release protocol costs (issue #23; run 123: 128x128 tiles in
clusters of two run 8-21% slower than alone, the unclustered kernel launched in clusters only
0-2% at one wave, and five stages in clusters as fast as six: a rate, not the ring's latency).
Variants of examples/gemm_bf16.py, every one without multicast (each CTA loads its whole B
tile), beside the example alone and cuBLAS, hot L2, samples interleaved:

- ``remote release``: each consumer's leader arrives at the stage's empty barrier of every CTA
  of the cluster, one remote arrival after the other (the example's protocol; run 122);
- ``local release``: each consumer arrives at its own CTA's barrier only (the CTAs do not wait
  for each other: what the cluster's tile mapping costs without the coupling);
- ``lane release``: lanes 0 and 1 of the consumer's first warp each arrive at one CTA's
  barrier, in one instruction (CUTLASS's signalling threads, one per destination CTA).

    PYTHONPATH=$PWD python3 bench/cluster_release_ab.py RUN

writes bench/results/cluster_release_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from cluster_cost_ab import CLUSTERED_128, NO_MULTICAST
from gemm_ab import time_variants, variant

LOCAL_RELEASE = {
    **NO_MULTICAST,
    "T.uint32(consumers * CLUSTER))": "T.uint32(consumers))",
    "    if CLUSTER == 1:\n        T.ptx.mbarrier.arrive.shared.b64(": (
        "    if CLUSTER >= 1:\n        T.ptx.mbarrier.arrive.shared.b64("
    ),
}
LANE_RELEASE = {
    **NO_MULTICAST,
    "@jittile.func\ndef produce(": (
        "@jittile.func\n"
        "def release_lane(empty, s, CLUSTER):\n"
        "    if CLUSTER == 1:\n"
        "        T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([s]))\n"
        "    else:\n"
        "        T.ptx.mbarrier.arrive.shared__cluster.b64(\n"
        "            T.ptx.mapa.shared__cluster.u32(\n"
        '                empty.ptr_to([s]), T.uint32(T.cuda.thread_idx("x") % 128)\n'
        "            )\n"
        "        )\n"
        "\n\n"
        "@jittile.func\ndef produce("
    ),
    '    leader = T.cuda.thread_idx("x") % 128 == 0\n': (
        '    leader = T.cuda.thread_idx("x") % 128 == 0\n'
        '    signals = T.cuda.thread_idx("x") % 128 < CLUSTER\n'
    ),
    "                    if i > 0 and leader:\n"
    "                        release(empty, T.uint32(it + RING - 1) % ring, CLUSTER)\n": (
        "                    if i > 0 and signals:\n"
        "                        release_lane(empty, T.uint32(it + RING - 1) % ring, CLUSTER)\n"
    ),
}


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        remote = variant(folder, "gemm_bf16_remote_release", NO_MULTICAST)
        local = variant(folder, "gemm_bf16_local_release", LOCAL_RELEASE)
        lane = variant(folder, "gemm_bf16_lane_release", LANE_RELEASE)
        variants = (
            ("alone", gemm_bf16, 1),
            ("remote release", remote, 2),
            ("local release", local, 2),
            ("lane release", lane, 2),
        )
        time_variants(
            "cluster_release_ab",
            variants,
            CLUSTERED_128,
        )


if __name__ == "__main__":
    main()
