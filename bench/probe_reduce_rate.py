"""Hardware probe: how long split-K's fp32 partial sums take to reach global memory as TMA
reduce-adds (``cp.reduce.async.bulk.tensor...add``, what examples/gemm_bf16.py's split-K
epilogue issues) against plain TMA stores of the same boxes.

Run 74 (``bench/gemm_intercept.py`` at 512x4096) found split-K's fixed cost 18 us above the
unsplit kernel's at 128x256 (and 19 us at 128x128) while its cost per K halved as it should;
this probe times the reduce-adds of that shape alone: 128 CTAs, two per 128x256 block of a
(512, 4096) fp32 workspace, each writing its block in 64x64 boxes, all issued by one thread and
waited for (``cp.async.bulk.wait_group 0``), as the epilogue does.

    PYTHONPATH=$PWD python3 bench/probe_reduce_rate.py [RUN]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jittile
from jittile import T

REDUCE = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group"
STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
M, N, BLOCK_M, BLOCK_N, BOX = 512, 4096, 128, 256, 64
SPLIT = 2  # CTAs writing each block


@jittile.kernel
def write_blocks(W: T.Tensor((None, None), "float32"), ADD: T.constexpr):
    """Each CTA writes ones over its BLOCK_M x BLOCK_N block of W (``blockIdx.x // SPLIT``), in
    BOX x BOX boxes: reduce-adds where ADD, else stores."""
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    S = T.alloc_shared((BOX, BOX), "float32", align=1024)
    tid = T.cuda.thread_idx("x")
    for i in range(tid, BOX * BOX, 128):
        S[i // BOX, i % BOX] = 1.0
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    block = T.cuda.block_idx("x") // SPLIT
    row0 = (block // (N // BLOCK_N)) * BLOCK_M
    col0 = (block % (N // BLOCK_N)) * BLOCK_N
    if tid == 0:
        for r in T.unroll(BLOCK_M // BOX):
            for c in T.unroll(BLOCK_N // BOX):
                if ADD:
                    T.cuda.tile.apply(
                        T.ptx[REDUCE], W, S, box=(BOX, BOX), coords=(row0 + BOX * r, col0 + BOX * c)
                    )
                else:
                    T.cuda.tile.apply(
                        T.ptx[STORE], W, S, box=(BOX, BOX), coords=(row0 + BOX * r, col0 + BOX * c)
                    )
        T.ptx.cp.async_.bulk.commit_group()
        T.ptx.cp.async_.bulk.wait_group(0)


def main() -> None:
    import common
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "00"
    ctas = (M // BLOCK_M) * (N // BLOCK_N) * SPLIT
    w = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    write_blocks[(ctas,), (128,)](w, True)
    torch.cuda.synchronize()
    exact = bool((w == SPLIT).all().item())  # every element added to by both CTAs of its block
    calls = {
        "reduce_add": lambda: write_blocks[(ctas,), (128,)](w, True),
        "store": lambda: write_blocks[(ctas,), (128,)](w, False),
    }
    times = common.median_ms(calls, repeat=30)
    megabytes = ctas * BLOCK_M * BLOCK_N * 4 / 1e6
    results = {name: {"us": 1e3 * ms, "GB_per_s": megabytes / ms} for name, ms in times.items()}
    for name, row in results.items():
        print(f"{name}: {row['us']:.1f} us, {row['GB_per_s']:.0f} GB/s of fp32 boxes", flush=True)
    common.save(
        f"probe_reduce_rate_run{run}",
        {"ctas": ctas, "megabytes": megabytes, "reduce_exact": exact, "results": results},
    )


if __name__ == "__main__":
    main()
