"""Why short GEMMs lose on the H200 (run 48: 1024^3 took 207 us, M <= 64 about 40 us): for a few
shapes, the host microseconds of one tuned ``gemm_bf16.launch`` (queued behind a long GPU spin,
so nothing waits for the GPU), and the event-timed device time behind a 100 us spin (as
bench/gemm.py's before run 62) and a 2 ms spin (no host leak possible), with one input copy and
with eight rotating copies. A 100 us time above the 2 ms one is host work leaking into the
events; eight copies slower than one is the inputs leaving L2 or per-pointer work.

    PYTHONPATH=$PWD python3 bench/gemm_diagnose.py [--json FILE]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import common

SHAPES = [(1024, 1024, 1024), (16, 4096, 4096), (512, 4096, 4096), (128, 8192, 8192)]
SPINS = {"spin_100us": 200_000, "spin_2ms": 4_000_000}


def device_us(torch, fn_of, copies: int, spin: int, samples: int = 10) -> float:
    values = []
    warm = max(3, copies)  # every copy seen once before the samples (kept TensorMaps)
    for step in range(warm + samples):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        common.spin(torch, spin)
        start.record()
        fn_of(step % copies)()
        stop.record()
        stop.synchronize()
        if step >= warm:
            values.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(values)


def main() -> None:
    import gemm_bf16
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for m, n, k in SHAPES:
        sets = [
            (
                torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
                torch.randn(n, k, device="cuda", dtype=torch.bfloat16),
                torch.empty(m, n, device="cuda", dtype=torch.bfloat16),
            )
            for _ in range(8)
        ]

        def jittile(i):
            return lambda: gemm_bf16.launch(*sets[i], sms)  # noqa: B023

        def cublas(i):
            a, b, c = sets[i]  # noqa: B023
            return lambda: torch.matmul(a, b.T, out=c)

        jittile(0)()  # tunes
        torch.cuda.synchronize()
        row = {
            "shape": f"{m}x{n}x{k}",
            "config": repr(gemm_bf16.gemm_bf16_tuned.best_config),
            "host_us": {
                "jittile": common.host_us(torch, jittile(0)),
                "cublas": common.host_us(torch, cublas(0)),
            },
        }
        for name, fn_of in (("jittile", jittile), ("cublas", cublas)):
            for copies in (1, 8):
                for label, spin in SPINS.items():
                    row[f"{name}_{copies}copies_{label}_us"] = round(
                        device_us(torch, fn_of, copies, spin), 1
                    )
        row["host_us"] = {k: round(v, 1) for k, v in row["host_us"].items()}
        rows.append(row)
        print(json.dumps(row), flush=True)
    if "--json" in sys.argv:
        Path(sys.argv[sys.argv.index("--json") + 1]).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
