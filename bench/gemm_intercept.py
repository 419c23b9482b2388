"""Where a short GEMM's time goes: one M x N output over K = 64 ... 4096, jittile configs (forced,
untuned) and cuBLAS side by side, each sample behind a 1 ms GPU spin (device time only). A line
through time(K) separates the fixed cost of a launch (its intercept: start-up, pipeline fill,
epilogue, drain) from the cost per K-slice (its slope). Run 61 measured 1024^3 at 0.2-0.44x
cuBLAS while the large shapes matched it.

    PYTHONPATH=$PWD python3 bench/gemm_intercept.py RUN [M N [BMxBN[:SPLIT[:CLUSTER]] ...]]

Tiles after M and N replace the default ones (``128x256:2``: 128x256 tiles in two K-splits).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
import common
from gemm_ab import first_config

DEPTHS = (64, 256, 1024, 4096)
TILES = ("128x128", "128x128:1:2", "64x128", "128x256")  # BMxBN[:SPLIT[:CLUSTER]]


def fit(xs, ys) -> tuple:
    """Least-squares (intercept, slope) of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def main() -> None:
    import gemm_bf16
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "0"
    m, n = (int(x) for x in sys.argv[2:4]) if len(sys.argv) > 3 else (1024, 1024)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    configs = {}
    for spec in sys.argv[4:] or TILES:
        tile, *rest = spec.split(":")
        tm, tn = (int(x) for x in tile.split("x"))
        split, cluster = (int(x) for x in (rest + ["1", "1"])[:2])
        configs[spec] = first_config(gemm_bf16.BF16_SPACE, tm, tn, split, cluster)
    rows = []
    for k in DEPTHS:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        exact = a.float() @ b.float().T
        calls = {"cublas": lambda a=a, b=b: torch.matmul(a, b.T)}
        for name, config in configs.items():
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            w = gemm_bf16.new_workspace(c, m, n)  # the split configs' fp32 sums

            def call(config=config, c=c, w=w, a=a, b=b, k=k):
                gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), w, m, n, k, sms)
                return c

            calls[name] = call
        errors = {
            name: ((fn().float() - exact).abs().max() / exact.abs().max()).item()
            for name, fn in calls.items()
        }
        times = common.median_ms(calls, repeat=15)
        row = {"K": k}
        for name, ms in times.items():
            row[name] = {"us": 1e3 * ms, "relative_error": errors[name]}
        rows.append(row)
        print(
            f"{m}x{n}x{k}: " + ", ".join(f"{name} {1e3 * ms:.1f} us" for name, ms in times.items()),
            flush=True,
        )
    lines = {}
    for name in rows[0]:
        if name == "K":
            continue
        intercept, slope = fit([r["K"] for r in rows], [r[name]["us"] for r in rows])
        lines[name] = {"intercept_us": intercept, "us_per_1024_k": 1024 * slope}
        print(f"{name}: {intercept:.1f} us + {1024 * slope:.2f} us per 1024 of K", flush=True)
    common.save(
        f"gemm_intercept_run{int(run):02d}",
        {"M": m, "N": n, "spin_cycles": common.SPIN_CYCLES, "rows": rows, "fits": lines},
    )


if __name__ == "__main__":
    main()
