"""How fast one SM's tensor cores run the GEMM mainloop's wgmma pattern, with no loads: each CTA
(one per SM) issues STEPS groups of four ``wgmma.m64nNk16`` (bf16, both operands in shared
memory, one 64-row operand per consumer warpgroup), committing each group and waiting for the one
before it (``wgmma.wait_group 1``), as examples/gemm_bf16.py's consumers do. With CHAINS = 2 the
groups alternate between two accumulators, so consecutive groups do not depend on each other.
Run 63 measured a 128x128 GEMM K-stage at about 1130 cycles, as long as a 128x256 one: this
separates the tensor cores' rate from the pipeline's.

    PYTHONPATH=$PWD python3 bench/wgmma_rate.py RUN
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import jittile
from jittile import T
from jittile.layout import swizzle, wgmma_accumulator

MMA = tuple(f"wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16" for n in range(16, 257, 16))


@jittile.kernel
def wgmma_rate(
    Out: T.Tensor((None,), "float32"),
    STEPS: T.constexpr,
    N: T.constexpr,
    CONSUMERS: T.constexpr,
    CHAINS: T.constexpr,
):
    A_s = T.alloc_shared(
        (CONSUMERS, 64, 64),
        "bfloat16",
        layout=swizzle(3, (CONSUMERS, 64, 64), "bfloat16"),
        align=1024,
    )
    B_s = T.alloc_shared((N, 64), "bfloat16", layout=swizzle(3, (N, 64), "bfloat16"), align=1024)
    tid = T.cuda.thread_idx("x")
    for e in range(tid, CONSUMERS * 64 * 64, 128 * CONSUMERS):
        A_s[e // 4096, e // 64 % 64, e % 64] = 0.0
    for e in range(tid, N * 64, 128 * CONSUMERS):
        B_s[e // 64, e % 64] = 0.0
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    half = T.cuda.warp_id() // 4
    acc = T.alloc_local((64, N), "float32", layout=wgmma_accumulator)
    other = T.alloc_local((64, N), "float32", layout=wgmma_accumulator)
    for i in range(STEPS // CHAINS):
        T.ptx.wgmma.fence.sync.aligned()
        T.cuda.tile.apply(T.ptx[MMA[N // 16 - 1]], acc, A_s[half], B_s.T, scale_d=i)
        T.ptx.wgmma.commit_group.sync.aligned()
        T.ptx.wgmma.wait_group.sync.aligned(1)
        if CHAINS == 2:
            T.ptx.wgmma.fence.sync.aligned()
            T.cuda.tile.apply(T.ptx[MMA[N // 16 - 1]], other, A_s[half], B_s.T, scale_d=i)
            T.ptx.wgmma.commit_group.sync.aligned()
            T.ptx.wgmma.wait_group.sync.aligned(1)
    T.ptx.wgmma.wait_group.sync.aligned(0)
    total = 0.0
    for r in T.unroll(N // 2):
        total += acc[r]
        if CHAINS == 2:
            total += other[r]
    Out[T.cuda.block_idx("x") * 128 * CONSUMERS + tid] = total


def main() -> None:
    import common
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "0"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    clock_ghz = 1.98  # the H200's boost clock (nvidia-smi clocks.max.sm)
    steps = 2048
    rows = []
    for n in (64, 128, 256):
        for consumers in (1, 2):
            for chains in (1, 2) if n < 256 else (1,):  # two 64x256 fp32 fragments: 256 registers
                out = torch.zeros(sms * 128 * consumers, device="cuda")
                launch = functools.partial(
                    wgmma_rate[(sms,), (128 * consumers,)], out, steps, n, consumers, chains
                )
                times = common.median_ms({"k": launch}, repeat=7)
                ms = times["k"]
                cycles = ms * 1e-3 * clock_ghz * 1e9 / steps
                ideal = consumers * 4 * 2 * 64 * n * 16 / 4096  # 4096 bf16 FLOP per SM cycle
                row = dict(
                    N=n,
                    consumers=consumers,
                    chains=chains,
                    ms=ms,
                    cycles_per_step=cycles,
                    peak_fraction=ideal / cycles,
                )
                rows.append(row)
                print(
                    f"m64n{n}k16 x4, {consumers} consumer(s), {chains} chain(s): "
                    f"{cycles:.0f} cycles per step ({100 * ideal / cycles:.0f}% of peak)",
                    flush=True,
                )
    common.save(f"wgmma_rate_run{int(run):02d}", {"steps": steps, "rows": rows})


if __name__ == "__main__":
    main()
