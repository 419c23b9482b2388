"""The host time ``examples/gemm_bf16.py``'s ``stage`` adds to a tuned launch: its layout checks
alone on aligned torch operands, and whole launches with it and with a pass-through in its place
(alternating batches, ``gemm_host_profile.per_call_us``: the GPU kept busy), microseconds,
medians, at 64 x 4096 x 4096 and 1024^3.

    PYTHONPATH=$PWD python3 bench/stage_host_cost.py RUN
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import common
from gemm_host_profile import per_call_us


def passing(a, b, c) -> tuple:
    """``stage`` for operands known to need no copy."""
    return (a, b, c), None


def main() -> None:
    import gemm_bf16
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "0"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    staged = gemm_bf16.stage
    rows = {}
    for m, n, k in ((64, 4096, 4096), (1024, 1024, 1024)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        checks = []
        for _ in range(2000):
            start = time.perf_counter()
            staged(a, b, c)
            checks.append(time.perf_counter() - start)
        gemm_bf16.launch(a, b, c, sms)  # tuned once
        torch.cuda.synchronize()
        times = {"stage": [], "pass-through": []}

        def call(a=a, b=b, c=c):
            gemm_bf16.launch(a, b, c, sms)

        for _ in range(6):
            for name, function in (("stage", staged), ("pass-through", passing)):
                gemm_bf16.stage = function
                times[name].append(per_call_us(torch, call))
        gemm_bf16.stage = staged
        row = {"check_us": 1e6 * statistics.median(checks[200:])}
        row.update({f"launch_{name}_us": statistics.median(t) for name, t in times.items()})
        rows[f"{m}x{n}x{k}"] = row
        print(f"{m}x{n}x{k}: " + ", ".join(f"{key} {v:.2f}" for key, v in row.items()), flush=True)
    common.save(f"stage_host_cost_run{int(run):02d}", rows)


if __name__ == "__main__":
    main()
