"""Per shape and tile, two kernels side by side on the H200: the consumers as examples/gemm_bf16.py
writes them (one wgmma group in flight: a stage is released once the next stage's group is
issued and its own has completed, so each consumer holds two stages), and a copy that waits for
each stage's group at once and releases it (``wgmma.wait_group 0``: one stage held, no overlap
of consecutive groups). Runs 63-64 found the small tiles' K-stages waiting on their loads with
the tensor cores half idle, which a ring holding fewer stages might feed. Run 67.

    PYTHONPATH=$PWD python3 bench/eager_release_ab.py [MxNxK:BMxBN ...]
"""

from __future__ import annotations

import sys
import tempfile

from gemm_ab import compare, variant

DEFAULT = (
    "512x4096x4096:64x256",
    "256x8192x8192:64x256",
    "1024x1024x1024:64x128",
    "1024x1024x4096:128x128",
    "4097x4104x4096:128x128",
    "4096x4096x4096:128x256",
)
EAGER = {
    """                    T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous stage's are done
                    if i > 0 and leader:
                        release(empty, (it + RING - 1) % RING, CLUSTER)""": """\
                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    if leader:
                        release(empty, s, CLUSTER)""",
    """                T.ptx.wgmma.wait_group.sync.aligned(0)
                if leader:
                    release(empty, (it + RING - 1) % RING, CLUSTER)""": """\
                T.ptx.wgmma.wait_group.sync.aligned(0)""",
}


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        variants = (
            ("pipelined", gemm_bf16, 1),
            ("eager release", variant(folder, "gemm_bf16_eager", EAGER), 1),
        )
        for spec in sys.argv[1:] or DEFAULT:
            compare(variants, spec)


if __name__ == "__main__":
    main()
