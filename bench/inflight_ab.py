"""Per shape and tile, the consumers' wgmma groups in flight side by side on the H200: one (as
examples/gemm_bf16.py writes them: a stage is released once the next stage's group is issued
and its own has completed), two and three (released that many stages later). A small tile's
stage is a short chain of dependent wgmmas on one accumulator (64x32: four m64n32k16, about
128 cycles of tensor-core work), so with one group in flight its time may be the groups'
latency, not the loads' or the MMAs' rate; more groups in flight hide more of that latency,
as long as the ring holds the stages they read. Hot L2 (one operand set), samples interleaved.

    PYTHONPATH=$PWD python3 bench/inflight_ab.py RUN [MxNxK:BMxBN[/SPLIT] ...]

writes bench/results/inflight_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from gemm_ab import time_variants, variant

LOOP = """                    T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous stage's are done
                    if i > 0 and leader:
                        release(empty, T.uint32(it + RING - 1) % ring, CLUSTER)"""
TAIL = """                T.ptx.wgmma.wait_group.sync.aligned(0)
                if leader:
                    release(empty, T.uint32(it + RING - 1) % ring, CLUSTER)"""


def in_flight(groups: int) -> dict:
    """The replacements that keep ``groups`` wgmma groups in flight."""
    loop = f"""                    T.ptx.wgmma.wait_group.sync.aligned({groups})
                    if i > {groups - 1} and leader:
                        release(empty, T.uint32(it + RING - {groups}) % ring, CLUSTER)"""
    tail = ["                T.ptx.wgmma.wait_group.sync.aligned(0)", "                if leader:"]
    for back in range(groups, 0, -1):
        tail.append(f"                    if count > {back - 1}:")
        tail.append(
            f"                        release(empty, T.uint32(it + RING - {back}) % ring, CLUSTER)"
        )
    return {LOOP: loop, TAIL: "\n".join(tail)}


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        variants = (
            ("1 in flight", gemm_bf16, 1),
            ("2 in flight", variant(folder, "gemm_bf16_inflight2", in_flight(2)), 1),
            ("3 in flight", variant(folder, "gemm_bf16_inflight3", in_flight(3)), 1),
        )
        time_variants("inflight_ab", variants)


if __name__ == "__main__":
    main()
