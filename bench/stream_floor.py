"""The floor under the skinny GEMMs: how long reading a 4096 x 4096 bf16 B (32 MB, from the
DRAM: eight copies in rotation, each past the L2 when its turn comes) takes the GPU's own
kernels, beside cuBLAS's 1 x 4096 x 4096 GEMM and GEMV on the same copies. Medians of
spin-gated samples (device time only), interleaved.

    PYTHONPATH=$PWD python3 bench/stream_floor.py RUN
"""

from __future__ import annotations

import sys
from itertools import cycle
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common

COPIES = 8


def main() -> None:
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "0"
    bs = [torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) for _ in range(COPIES)]
    x = torch.randn(1, 4096, device="cuda", dtype=torch.bfloat16)
    turns = {name: cycle(bs) for name in ("sum", "amax", "gemv", "gemm 1x4096x4096", "copy")}
    out = torch.empty_like(bs[0])
    calls = {
        "sum": lambda: torch.sum(next(turns["sum"]), dtype=torch.float32),
        "amax": lambda: torch.amax(next(turns["amax"])),
        "gemv": lambda: torch.mv(next(turns["gemv"]), x[0]),
        "gemm 1x4096x4096": lambda: torch.matmul(x, next(turns["gemm 1x4096x4096"]).T),
        "copy": lambda: out.copy_(next(turns["copy"])),
    }
    times = common.median_ms(calls, repeat=40)
    moved = {"copy": 2 * bs[0].nbytes}
    rows = {}
    for name, ms in times.items():
        rows[name] = {"us": 1e3 * ms, "TB_per_s": moved.get(name, bs[0].nbytes) / ms / 1e9}
        print(f"{name}: {1e3 * ms:.2f} us, {rows[name]['TB_per_s']:.2f} TB/s", flush=True)
    common.save(f"stream_floor_run{int(run):02d}", {"bytes": bs[0].nbytes, "rows": rows})


if __name__ == "__main__":
    main()
