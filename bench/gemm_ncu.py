"""One launch of a tuned GEMM config for Nsight Compute to profile on the GPU machine (the
per-tile costs that CUDA events cannot separate): the fp8 and bf16 kernels with their tuned
configs at 4096^3 and 8192^3.

    ncu --clock-control none -k regex:gemm_ --launch-skip 2 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats python3 bench/gemm_ncu.py fp8 4096
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main() -> None:
    import torch

    kind, size = sys.argv[1], int(sys.argv[2])
    a = torch.randn(size, size, device="cuda")
    b = torch.randn(size, size, device="cuda")
    c = torch.empty(size, size, device="cuda", dtype=torch.bfloat16)
    if kind == "fp8":
        import gemm_fp8

        a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        for _ in range(3):
            gemm_fp8.launch(a, b, c, 1.0, 1.0)
        print(gemm_fp8.gemm_fp8_tuned.best_config)
    else:
        import gemm_bf16

        a, b = a.to(torch.bfloat16), b.to(torch.bfloat16)
        for _ in range(3):
            gemm_bf16.launch(a, b, c)
        print(gemm_bf16.gemm_bf16_tuned.best_config)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
