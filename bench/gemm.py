"""bf16 GEMM on the H200: jittile's examples/gemm_bf16.py vs torch.matmul (cuBLAS) vs a Triton
matmul autotuned over four Hopper configurations, in one run, ``C = A @ B.T`` with A (M, K) and
B (N, K), fp32 accumulation, bf16 out. Sizes: 4096^3, 8192^3 and a ragged 3000x5000x2000.
TFLOP/s from the median of 20 CUDA-event timings after 3 warm-ups, the contenders' samples
interleaved; every output is checked against torch.matmul.

    PYTHONPATH=$PWD python3 bench/gemm.py
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))
import common  # noqa: E402

SIZES = ((4096, 4096, 4096), (8192, 8192, 8192), (3000, 5000, 2000))


def triton_matmul():
    """A classic Triton matmul (one output tile per program, K loop), autotuned."""
    import triton
    import triton.language as tl

    configs = [triton.Config({"BM": bm, "BN": bn, "BK": 64}, num_stages=s, num_warps=w)
               for bm, bn, s, w in ((128, 256, 3, 8), (128, 128, 4, 8), (256, 128, 3, 8),
                                    (128, 128, 3, 4))]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rows = pm * BM + tl.arange(0, BM)
        cols = pn * BN + tl.arange(0, BN)
        ks = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            x = tl.load(a + rows[:, None] * K + (k0 + ks)[None, :],
                        mask=(rows[:, None] < M) & ((k0 + ks)[None, :] < K), other=0.0)
            y = tl.load(b + cols[None, :] * K + (k0 + ks)[:, None],
                        mask=(cols[None, :] < N) & ((k0 + ks)[:, None] < K), other=0.0)
            acc = tl.dot(x, y, acc)
        tl.store(c + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16),
                 mask=(rows[:, None] < M) & (cols[None, :] < N))

    def run(a, b, c):
        m, k = a.shape
        n = b.shape[0]
        kernel[lambda meta: (triton.cdiv(m, meta["BM"]), triton.cdiv(n, meta["BN"]))](
            a, b, c, m, n, k)

    return run


def main() -> None:
    import torch

    import gemm_bf16

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    contenders = {"jittile": lambda a, b, c: gemm_bf16.launch(a, b, c, sms),
                  "torch.matmul": lambda a, b, c: torch.matmul(a, b.T, out=c)}
    try:
        contenders["triton"] = triton_matmul()
    except ImportError as exc:
        print(f"triton unavailable: {exc}")
    results = []
    for m, n, k in SIZES:
        torch.manual_seed(0)
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        reference = torch.matmul(a, b.T)
        row = {"M": m, "N": n, "K": k}
        calls = {}
        for name, fn in contenders.items():
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            fn(a, b, c)
            torch.cuda.synchronize()
            error = (c.float() - reference.float()).abs().max().item()
            scale = reference.float().abs().max().item()
            row[name] = {"max_abs_error": error, "correct": error <= 0.02 * scale}
            calls[name] = (lambda fn, c: lambda: fn(a, b, c))(fn, c)
        for name, ms in common.median_ms(calls).items():
            row[name].update(ms=ms, tflops=2 * m * n * k / ms / 1e9)
        for name in contenders:
            row[name]["vs_cublas"] = row[name]["tflops"] / row["torch.matmul"]["tflops"]
        results.append(row)
        print(f"{m}x{n}x{k}: " + ", ".join(
            f"{name} {row[name]['tflops']:.0f} TFLOP/s ({row[name]['vs_cublas']:.3f}x cuBLAS"
            f"{'' if row[name]['correct'] else ', WRONG'})" for name in contenders), flush=True)
    ck = gemm_bf16.gemm_bf16.compile(a, b, c, m, n, k, target="sm_90a")
    common.save("gemm", {"command": "PYTHONPATH=$PWD python3 bench/gemm.py",
                         "device": common.device(), "versions": common.versions(),
                         "kernel": {**{k: ck.metadata[k] for k in ("registers", "local_bytes",
                                                                   "shared_bytes", "spill_stores",
                                                                   "spill_loads")},
                                    "sass_hgmma": ck.sass.count("HGMMA."),
                                    "sass_warpgroup_depbar": ck.sass.count("WARPGROUP.DEPBAR")},
                         "results": results})


if __name__ == "__main__":
    main()
