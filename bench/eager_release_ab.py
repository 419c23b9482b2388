"""Per shape and tile, two kernels side by side on the H200: the consumers as examples/gemm_bf16.py
writes them (one wgmma group in flight: a stage is released once the next stage's group is
issued and its own has completed, so each consumer holds two stages), and a copy that waits for
each stage's group at once and releases it (``wgmma.wait_group 0``: one stage held, no overlap
of consecutive groups). Runs 63-64 found the small tiles' K-stages waiting on their loads with
the tensor cores half idle, which a ring holding fewer stages might feed. Run 67 found it paid
on 128x128 tiles only (two consumers: one's wait leaves the tensor cores to the other); run 123
found 128x128 alone 5% slower with five stages than six, so its loads' latency still shows.

    PYTHONPATH=$PWD python3 bench/eager_release_ab.py RUN [MxNxK:BMxBN ...]

writes bench/results/eager_release_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from gemm_ab import time_variants, variant

DEFAULT = (
    "512x4096x4096:128x128",
    "256x8192x8192:128x128",
    "512x4096x4096:128x128@2",
    "1024x1024x1024:64x128",
    "4096x4096x4096:128x256",
    "8192x8192x8192:128x256",
    "4097x4104x4096:192x176",
    "3000x5000x2000:128x232",
    "3000x5000x2000:256x152",
)
EAGER = {
    """                    T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous stage's are done
                    if i > 0 and leader:
                        release(empty, consumed, T.uint32(it + RING - 1) % ring, CLUSTER)""": """\
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    if leader:
                        release(empty, consumed, s, CLUSTER)""",
    """                T.ptx.wgmma.wait_group.sync.aligned(0)
                if leader:
                    release(empty, consumed, T.uint32(it + RING - 1) % ring, CLUSTER)""": """\
                T.ptx.wgmma.wait_group.sync.aligned(0)""",
}


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        variants = (
            ("pipelined", gemm_bf16, 1),
            ("eager release", variant(folder, "gemm_bf16_eager", EAGER), 1),
        )
        time_variants("eager_release_ab", variants, DEFAULT)


if __name__ == "__main__":
    main()
