"""The shape-fitted tiles' ring against their epilogue buffers on the H200 (issue #23): a 192-row
tile's four stages leave room for one 64x64 epilogue buffer per consumer, three stages for two
(whose parts then alternate, as 128x256's do); examples/gemm_bf16.py beside a variant whose
fitted tiles take at most three stages, with cuBLAS, hot L2, samples interleaved.

    PYTHONPATH=$PWD python3 bench/fitted_ab.py RUN [MxNxK:BMxBN ...]

writes bench/results/fitted_ab_runRUN.json.
"""

from __future__ import annotations

import tempfile

from gemm_ab import time_variants, variant

FITTED_STAGES = "def fitted_stages(tm: int, tn: int, most: int = {})"
THREE = {FITTED_STAGES.format(4): FITTED_STAGES.format(3)}
SPECS = (
    "4097x4104x4096:192x176",
    "4096x4096x4096:192x176",
    "3000x5000x2000:192x152",
    "4097x4104x4096:128x208",
    "4097x4104x4096:128x256/4",
)


def main() -> None:
    import gemm_bf16

    three = variant(tempfile.mkdtemp(), "fitted_three", THREE)
    time_variants("fitted_ab", [("example", gemm_bf16, 1), ("3 stages", three, 1)], SPECS)


if __name__ == "__main__":
    main()
