"""Host microseconds one ``gemm_bf16.launch`` costs on a machine without a GPU, the tuning
already chosen: the driver calls are bench/launch_host_cpu.py's stand-ins, so what is timed is
jittile's and the example's own Python work per call (the tuned key lookup, the workspace, the
argument packing). bench/gemm.py hides up to ~1 ms of host work behind a GPU spin; more
than that would show up as device time.

    PYTHONPATH=$PWD python3 bench/gemm_host_cpu.py
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))
from launch_host_cpu import CupyLike, fake_driver  # noqa: E402

CALLS = 2000


def per_call_us(fn) -> float:
    samples = []
    for _ in range(5):
        fn()
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        samples.append((time.perf_counter() - start) / CALLS * 1e6)
    return statistics.median(samples)


def main() -> None:
    calls = fake_driver()
    import gemm_bf16

    tuned = gemm_bf16.gemm_bf16_tuned
    gemm_bf16.current_stream = lambda c: 0  # the stand-ins' stream (no CuPy here)
    gemm_bf16.new_workspace = lambda c, m, n, sums=None: (  # what the example would allocate
        CupyLike(0x7300_0000_0000, (max(sums or 4, 4),), np.float32),
        CupyLike(0x7400_0000_0000, (gemm_bf16.arrival_slots(m, n),), np.int32),
    )
    results = {}
    for m, n, k in ((1024, 1024, 1024), (16, 4096, 4096), (4096, 4096, 4096)):
        a = CupyLike(0x7000_0000_0000, (m, k), ml_dtypes.bfloat16)
        b = CupyLike(0x7100_0000_0000, (n, k), ml_dtypes.bfloat16)
        c = CupyLike(0x7200_0000_0000, (m, n), ml_dtypes.bfloat16)
        for config in gemm_bf16.BF16_SPACE.candidates(m, n, k)[:3]:
            tuned._tune = lambda *args, chosen=config: chosen  # the tuning already made
            tuned.reset()
            label = f"{m}x{n}x{k} {config!r}"
            results[label] = round(per_call_us(lambda: gemm_bf16.launch(a, b, c)), 1)  # noqa: B023
            print(f"{label}: {results[label]} us", flush=True)
    print(json.dumps({"us_per_launch_without_driver": results, "driver_calls": calls}))


if __name__ == "__main__":
    main()
