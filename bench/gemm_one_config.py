"""Launch one config of the tuned bf16 GEMM a few times, untuned, for Nsight Compute to profile
(``ncu -k regex:gemm_bf16_tuned --launch-skip 3 --launch-count 1 ...``), then cuBLAS on the same
operands (``-k regex:'nvjet|sm90|cutlass'``).

    PYTHONPATH=$PWD python3 bench/gemm_one_config.py M N K BM BN [SPLIT] [CLUSTER]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))


def main() -> None:
    import gemm_bf16
    import torch
    from gemm_ab import first_config

    m, n, k, tm, tn = (int(x) for x in sys.argv[1:6])
    split, cluster = (int(x) for x in (sys.argv[6:8] + ["1", "1"])[:2])
    config = first_config(gemm_bf16.BF16_SPACE, tm, tn, split, cluster)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    workspace = gemm_bf16.new_workspace(c, m, n)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for _ in range(5):
        gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), workspace, m, n, k, sms)
    for _ in range(5):
        torch.matmul(a, b.T)
    torch.cuda.synchronize()
    print(config, "error", ((c.float() - a.float() @ b.float().T).abs().max()).item())


if __name__ == "__main__":
    main()
