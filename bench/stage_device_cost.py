"""What a staged ``gemm_bf16.launch`` costs on the GPU: 4096 x 4096 products whose operands TMA
takes as they are, against ones it cannot (K = 4100: A and B copied with K padded to 4104; B a
transposed view: B copied; N = 4100: C padded and copied back), beside cuBLAS on the same
operands, device time (``common.median_ms``: interleaved, behind a GPU spin), errors checked.

    PYTHONPATH=$PWD python3 bench/stage_device_cost.py RUN
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import common

CASES = {  # name -> (M, N, K, B as a transposed view)
    "aligned 4096^3": (4096, 4096, 4096, False),
    "K 4100": (4096, 4096, 4100, False),
    "N 4100": (4096, 4100, 4096, False),
    "B transposed": (4096, 4096, 4096, True),
}


def main() -> None:
    import gemm_bf16
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "0"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = {}
    for name, (m, n, k, transposed) in CASES.items():
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        if transposed:
            b = b.T.contiguous().T
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        gemm_bf16.launch(a, b, c, sms)  # tuned
        exact = a.float() @ b.float().T
        error = (c.float() - exact).abs().max().item()
        times = common.median_ms(
            {
                "jittile": lambda a=a, b=b, c=c: gemm_bf16.launch(a, b, c, sms),
                "cublas": lambda a=a, b=b, c=c: torch.matmul(a, b.T, out=c),
            }
        )
        rows[name] = {
            "shape": [m, n, k],
            "jittile_us": 1e3 * times["jittile"],
            "cublas_us": 1e3 * times["cublas"],
            "vs_cublas": times["cublas"] / times["jittile"],
            "max_abs_error": error,
            "correct": error <= 0.02 * exact.abs().max().item(),
            "config": repr(gemm_bf16.gemm_bf16_tuned.best_config),
        }
        print(f"{name}: " + ", ".join(f"{key} {value}" for key, value in rows[name].items()))
    common.save(f"stage_device_cost_run{int(run):02d}", rows)


if __name__ == "__main__":
    main()
