"""The bf16 consumers' warpgroup index as a warp-uniform value (``shfl_idx`` from lane 0, as
examples/gemm_bf16.py computes it) against the same index per thread (``warp_id() // 4 - 1``),
side by side on the H200 with cuBLAS. With the per-thread index every wgmma's A descriptor is
computed in vector registers and moved into uniform ones (R2UR); the uniform index puts the
consumer loop on the uniform datapath (81 SASS instructions per K-stage at 128x128, 95
without). Hot L2 (one operand set), samples interleaved.

    PYTHONPATH=$PWD python3 bench/uniform_ab.py RUN [MxNxK:BMxBN[/SPLIT] ...]

writes bench/results/uniform_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from gemm_ab import time_variants, variant

UNIFORM = "    half = T.cuda.shfl_idx(T.int32(T.cuda.warp_id() // 4 - 1), 0)\n"
PER_THREAD = "    half = T.cuda.warp_id() // 4 - 1\n"


def main() -> None:
    import gemm_bf16

    with tempfile.TemporaryDirectory() as folder:
        variants = (
            ("uniform index", gemm_bf16, 1),
            ("per-thread index", variant(folder, "gemm_bf16_per_thread", {UNIFORM: PER_THREAD}), 1),
        )
        time_variants("uniform_ab", variants)


if __name__ == "__main__":
    main()
