"""Which kernels cuBLAS runs for a product, their grids and durations (torch's profiler, whose
trace records each launch's grid and block): what tile, cluster and decomposition NVIDIA's
heuristics pick for a shape jittile is slower on.

    PYTHONPATH=$PWD python3 bench/cublas_kernels.py RUN MxNxK ...

writes bench/results/cublas_kernels_runRUN.json.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def kernels(m: int, n: int, k: int) -> list:
    """The device kernels of the fourth to sixth bf16 ``torch.mm`` of an (m, k) by (k, n)
    product: name, grid, block, duration in us."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        torch.mm(a, b.T)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            torch.mm(a, b.T)
        torch.cuda.synchronize()
    trace = Path(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(str(trace))
    events = json.loads(trace.read_text())["traceEvents"]
    return [
        {
            "name": e["name"],
            "grid": e.get("args", {}).get("grid"),
            "block": e.get("args", {}).get("block"),
            "shared_bytes": e.get("args", {}).get("shared memory"),
            "registers": e.get("args", {}).get("registers per thread"),
            "us": e.get("dur"),
        }
        for e in events
        if e.get("cat") == "kernel"
    ]


def main() -> None:
    import common

    run = int(sys.argv[1])
    rows = {}
    for shape in sys.argv[2:]:
        m, n, k = (int(x) for x in shape.split("x"))
        rows[shape] = kernels(m, n, k)
        for r in rows[shape]:
            print(shape, r, flush=True)
    common.save(f"cublas_kernels_run{run:02d}", {"shapes": rows})


if __name__ == "__main__":
    main()
