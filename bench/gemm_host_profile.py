"""Where the host time of a tuned ``gemm_bf16.launch`` goes on the GPU machine: microseconds per
call with one input set, with eight rotating sets (other pointers every call) and on arrays
never launched on before (TensorMaps encoded), the GPU kept busy by short spins so that no call
waits for it and the launch queue never fills, then a cProfile of the rotating case (its top
functions by own time).

    PYTHONPATH=$PWD python3 bench/gemm_host_profile.py [--json FILE]
"""

from __future__ import annotations

import cProfile
import io
import json
import pstats
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

BATCH = 40  # calls per spin: far fewer than the launch queue holds


def per_call_us(torch, fn, batches: int = 25) -> float:
    samples = []
    for _ in range(batches):
        torch.cuda._sleep(20_000_000)  # ~10 ms of GPU work ahead of the batch
        start = time.perf_counter()
        for _ in range(BATCH):
            fn()
        samples.append((time.perf_counter() - start) / BATCH * 1e6)
        torch.cuda.synchronize()
    return statistics.median(samples)


def first_sight_us(torch, gemm_bf16, sms: int, m: int, n: int, k: int, calls: int = 24) -> float:
    """Host time of a launch on arrays never launched on before (their TensorMaps encoded)."""
    fresh = [
        (
            torch.empty(m, k, device="cuda", dtype=torch.bfloat16),
            torch.empty(n, k, device="cuda", dtype=torch.bfloat16),
            torch.empty(m, n, device="cuda", dtype=torch.bfloat16),
        )
        for _ in range(calls)
    ]
    torch.cuda._sleep(20_000_000)
    times = []
    for arrays in fresh:
        start = time.perf_counter()
        gemm_bf16.launch(*arrays, sms)
        times.append((time.perf_counter() - start) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(times)


def shape_row(torch, gemm_bf16, sms: int, m: int, n: int, k: int) -> dict:
    sets = [
        (
            torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
            torch.randn(n, k, device="cuda", dtype=torch.bfloat16),
            torch.empty(m, n, device="cuda", dtype=torch.bfloat16),
        )
        for _ in range(8)
    ]
    gemm_bf16.launch(*sets[0], sms)
    torch.cuda.synchronize()
    state = [0]

    def rotating():
        state[0] = (state[0] + 1) % 8
        gemm_bf16.launch(*sets[state[0]], sms)

    a, b, c = sets[0]
    row = {
        "config": repr(gemm_bf16.gemm_bf16_tuned.best_config),
        "tuned_1_set_us": per_call_us(torch, lambda: gemm_bf16.launch(a, b, c, sms)),
        "tuned_8_sets_us": per_call_us(torch, rotating),
        "cublas_1_set_us": per_call_us(torch, lambda: torch.matmul(a, b.T, out=c)),
        "tuned_first_sight_us": first_sight_us(torch, gemm_bf16, sms, m, n, k),
    }
    profile = cProfile.Profile()
    profile.enable()
    per_call_us(torch, rotating, batches=10)
    profile.disable()
    text = io.StringIO()
    pstats.Stats(profile, stream=text).sort_stats("tottime").print_stats(25)
    row["profile_8_sets"] = text.getvalue().splitlines()[:45]
    return row


def main() -> None:
    import gemm_bf16
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = {}
    for m, n, k in ((1024, 1024, 1024), (16, 4096, 4096)):
        row = out[f"{m}x{n}x{k}"] = shape_row(torch, gemm_bf16, sms, m, n, k)
        print(json.dumps({k: v for k, v in row.items() if k != "profile_8_sets"}), flush=True)
        print("\n".join(row["profile_8_sets"]), flush=True)
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
