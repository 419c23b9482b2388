"""Forced configs of examples/gemm_bf16.py beside cuBLAS on the H200 (hot L2, samples
interleaved): what each tile and split costs on a shape, where the tuner shows only the best.
Specs ``MxNxK:BMxBN[/SPLIT][@CLUSTER]`` as bench/gemm_ab.py reads them.

    PYTHONPATH=$PWD python3 bench/configs_ab.py RUN MxNxK:BMxBN[/SPLIT][@CLUSTER] ...

writes bench/results/configs_ab_runRUN.json.
"""

from __future__ import annotations

from gemm_ab import time_variants


def main() -> None:
    import gemm_bf16

    time_variants("configs_ab", (("example", gemm_bf16, 1),))


if __name__ == "__main__":
    main()
