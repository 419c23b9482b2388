"""GEMMs on the H200, ``C = A @ B.T`` with A (M, K) and B (N, K), fp32 accumulation, bf16 out:

- bf16: jittile's tuned examples/gemm_bf16.py vs torch.matmul (cuBLAS) vs Triton's persistent
  TMA-descriptor matmul (``tl.make_tensor_descriptor``, autotuned over four Hopper configs);
- fp8 (e4m3, per-tensor scales as device tensors): examples/gemm_fp8.py vs ``torch._scaled_mm``
  (cuBLAS, ``use_fast_accum=False``; ragged shapes zero-padded to its multiples of 16, the
  padding timed with it and noted in the JSON row).

Shapes: squares, LLM projections, skinny (M <= 512) and ragged ones (``SHAPES``). Each contender's
first call tunes (untimed); then ``--samples`` rounds (default 10, after 3 warm-ups) each time
one call of every contender, interleaved, with CUDA events. Before each sample a 1 ms GPU spin
(``torch.cuda._sleep``) lets the host enqueue the call while the GPU is busy, so the events see
device time; each contender's host microseconds per call are reported apart (``host_us``).
Every call takes the next of several input copies, which together exceed the 50 MB L2, so no
call finds its inputs in the L2 from the call before it. Every output is checked
against an fp32 product of the same inputs (max |error| / max |reference|). TFLOP/s, ratios to
cuBLAS and Triton, geometric means; ``bench/results/gemm_runNN.json``.

    PYTHONPATH=$PWD python3 bench/gemm.py RUN [--samples N] [--only bf16|fp8] [--shapes a,b]
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))
import common  # noqa: E402

SHAPES = {
    "square": [(1024, 1024, 1024), (4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192)],
    "projection": [(8192, 14336, 4096), (4096, 11008, 4096), (8192, 4096, 14336)],
    "skinny": [
        (1, 4096, 4096),
        (16, 4096, 4096),
        (64, 4096, 4096),
        (128, 8192, 8192),
        (256, 8192, 8192),
        (512, 4096, 4096),
    ],
    "ragged": [(4097, 4104, 4096), (3000, 5000, 2000)],
}
L2_BYTES = 50 * 2**20


def triton_persistent_matmul():
    """Triton's persistent matmul over TMA tensor descriptors (its tutorial 09's design): one
    program per SM walks the output tiles in GROUP_M bands; autotuned over four configs."""
    import torch
    import triton
    import triton.language as tl

    triton.set_allocator(
        lambda size, align, stream: torch.empty(size, dtype=torch.int8, device="cuda")
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    configs = [
        triton.Config({"BM": bm, "BN": bn, "BK": 64, "GROUP_M": 8}, num_stages=s, num_warps=w)
        for bm, bn, s, w in ((128, 256, 3, 8), (128, 128, 4, 8), (128, 128, 3, 4), (64, 128, 4, 4))
    ]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit
    def kernel(
        a,
        b,
        c,
        M,
        N,
        K,
        BM: tl.constexpr,
        BN: tl.constexpr,
        BK: tl.constexpr,
        GROUP_M: tl.constexpr,
        SMS: tl.constexpr,
    ):
        a_desc = tl.make_tensor_descriptor(a, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(b, shape=[N, K], strides=[K, 1], block_shape=[BN, BK])
        c_desc = tl.make_tensor_descriptor(c, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
        tiles_m = tl.cdiv(M, BM)
        tiles_n = tl.cdiv(N, BN)
        band = GROUP_M * tiles_n
        for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, SMS, flatten=True):
            first = tile // band * GROUP_M
            rows = min(tiles_m - first, GROUP_M)
            pm = first + (tile % band) % rows
            pn = (tile % band) // rows
            acc = tl.zeros((BM, BN), dtype=tl.float32)
            for kt in range(tl.cdiv(K, BK)):
                x = a_desc.load([pm * BM, kt * BK])
                y = b_desc.load([pn * BN, kt * BK])
                acc = tl.dot(x, y.T, acc)
            c_desc.store([pm * BM, pn * BN], acc.to(tl.bfloat16))

    def run(a, b, c):
        m, k = a.shape
        n = b.shape[0]
        kernel[lambda meta: (min(sms, triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"])),)](
            a, b, c, m, n, k, SMS=sms
        )

    return run


def copies_for(nbytes: int) -> int:
    """Input copies to rotate through, every call taking the next (``measure``), so that the
    others touched since a set's last use exceed twice the L2 (16 sets at most; one where a set
    alone does)."""
    if nbytes >= 2 * L2_BYTES:
        return 1
    return min(16, 1 + math.ceil(2 * L2_BYTES / nbytes))


def bf16_contenders(torch, sms):
    """Called as ``fn(a, b, c)``."""
    import gemm_bf16

    out = {
        "jittile": lambda a, b, c: gemm_bf16.launch(a, b, c, sms),
        "cublas": lambda a, b, c: torch.matmul(a, b.T, out=c),
    }
    try:
        out["triton"] = triton_persistent_matmul()
    except Exception as exc:  # Triton missing or too old: the run says so and goes on
        print(f"triton unavailable: {exc!r}", flush=True)
    return out


def padded_scaled_mm(torch, a, b, sa, sb, out=None):
    """``torch._scaled_mm`` (cuBLAS, e4m3 -> bf16, ``use_fast_accum=False``) for any M, N, K: it
    takes only multiples of 16, so ragged operands are zero-padded up to them (the zeros add
    nothing to the sums) and the result cut back; the padding copies are part of its time."""
    m, k = a.shape
    n = b.shape[0]
    up = [-(-x // 16) * 16 for x in (m, n, k)]
    if up == [m, n, k]:
        return torch._scaled_mm(
            a, b.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=False, out=out
        )
    pa = torch.zeros(up[0], up[2], device=a.device, dtype=a.dtype)
    pb = torch.zeros(up[1], up[2], device=b.device, dtype=b.dtype)
    pa[:m, :k] = a
    pb[:n, :k] = b
    full = torch._scaled_mm(
        pa, pb.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, use_fast_accum=False
    )[:m, :n]
    if out is None:
        return full
    out.copy_(full)
    return out


def fp8_contenders(torch, sms):
    """Called as ``fn(a, b, scale_a, scale_b, c)``; cuBLAS on zero-padded operands where a
    dimension is not a multiple of 16 (see ``padded_scaled_mm``)."""
    import gemm_fp8

    def cublas(a, b, sa, sb, c):
        padded_scaled_mm(torch, a, b, sa, sb, out=c)

    return {
        "jittile": lambda a, b, sa, sb, c: gemm_fp8.launch(a, b, c, sa, sb, sms),
        "cublas": cublas,
    }


def inputs(torch, kind, m, n, k, copies):
    """``copies`` sets of (a, b, [scale_a, scale_b]) and the fp32 reference of the first."""
    sets = []
    for i in range(copies):
        torch.manual_seed(i)
        a = torch.randn(m, k, device="cuda")
        b = torch.randn(n, k, device="cuda")
        if kind == "bf16":
            sets.append((a.to(torch.bfloat16), b.to(torch.bfloat16)))
        else:  # e4m3 values near unit scale, scales as device tensors
            sa = torch.tensor(0.5 + i / 8, device="cuda")
            sb = torch.tensor(1.25, device="cuda")
            sets.append((a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn), sa, sb))
    first = sets[0]
    reference = first[0].float() @ first[1].float().T
    if kind == "fp8":
        reference *= first[2] * first[3]
    return sets, reference


def measure(torch, kind, shape, contenders, samples, warmup=3) -> dict:
    m, n, k = shape
    element = 2 if kind == "bf16" else 1
    copies = copies_for((m + n) * k * element + m * n * 2)
    # every input set is seen before the timed samples: what a launch keeps per array (jittile's
    # TensorMap encodings, Triton's descriptors) is then kept, as in a program that reuses its
    # buffers; bench/gemm_host_profile.py times the first sight of new pointers
    warmup = max(warmup, copies)
    sets, reference = inputs(torch, kind, m, n, k, copies)
    scale = reference.abs().max().item()
    row = {"kind": kind, "M": m, "N": n, "K": k, "input_copies": copies}
    if kind == "fp8" and any(x % 16 for x in shape):
        row["cublas_note"] = (
            "torch._scaled_mm on operands zero-padded to multiples of 16, "
            "the padding copies timed with it"
        )
    outputs = {
        name: [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
        for name in contenders
    }
    for name, fn in list(contenders.items()):
        started = time.perf_counter()
        try:
            fn(*sets[0], outputs[name][0])  # tunes where the contender tunes
            torch.cuda.synchronize()
        except Exception as exc:  # a contender that fails here is left out of this shape
            if name == "cublas":
                raise
            print(f"{kind} {shape} {name}: FAILED {exc!r}", flush=True)
            row[name] = {"failed": repr(exc)}
            contenders = {n: f for n, f in contenders.items() if n != name}
            continue
        error = (outputs[name][0].float() - reference).abs().max().item()
        row[name] = {
            "first_call_s": round(time.perf_counter() - started, 3),
            "max_abs_error": error,
            "relative_error": error / scale,
        }
    samples_ms = {name: [] for name in contenders}
    # every call takes the next input set, whichever contender makes it: had the contenders of a
    # round shared one set (runs up to 104), those after the first would find the inputs the
    # first had just read in the L2 (the short products' 32 MB of B fit in it)
    calls = 0
    for step in range(warmup + samples):
        for name, fn in contenders.items():
            i = calls % copies
            calls += 1
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            common.spin(torch)
            start.record()
            fn(*sets[i], outputs[name][i])
            stop.record()
            stop.synchronize()
            if step >= warmup:
                samples_ms[name].append(start.elapsed_time(stop))
    for name, values in samples_ms.items():
        ms = statistics.median(values)
        call = functools.partial(contenders[name], *sets[0], outputs[name][0])
        host = common.host_us(torch, call, 20)
        row[name].update(ms=ms, tflops=2 * m * n * k / ms / 1e9, host_us=host)
    base = row["cublas"]["relative_error"]
    for name in contenders:
        row[name]["vs_cublas"] = row[name]["tflops"] / row["cublas"]["tflops"]
        limit = 0.02 if kind == "bf16" else max(1.05 * base, 1e-3)
        row[name]["correct"] = row[name]["relative_error"] <= limit
    if "triton" in contenders and "jittile" in contenders:
        row["jittile"]["vs_triton"] = row["jittile"]["tflops"] / row["triton"]["tflops"]
    return row


def geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def summary(rows, kind) -> dict:
    mine = [r for r in rows if r["kind"] == kind and "tflops" in r["jittile"]]
    out = {
        "shapes": len(mine),
        "geomean_vs_cublas": geomean(r["jittile"]["vs_cublas"] for r in mine),
        "min_vs_cublas": min((r["jittile"]["vs_cublas"] for r in mine), default=None),
        "all_correct": all(
            r[n]["correct"]
            for r in mine
            for n in r
            if isinstance(r[n], dict) and "failed" not in r[n]
        ),
        "failed": [
            f"{r['M']}x{r['N']}x{r['K']}" for r in rows if r["kind"] == kind and r not in mine
        ],
    }
    if mine and "vs_triton" in mine[0]["jittile"]:
        out["geomean_vs_triton"] = geomean(r["jittile"]["vs_triton"] for r in mine)
    return out


def print_row(row, names) -> None:
    cells = [f"{row['kind']:4} {row['M']:>5}x{row['N']:>5}x{row['K']:>5}"]
    for name in names:
        r = row[name]
        if "failed" in r:
            cells.append(f"{name} FAILED")
            continue
        flag = "" if r["correct"] else " WRONG"
        cells.append(
            f"{name} {r['tflops']:7.1f} ({r['vs_cublas']:.3f}x, err {r['relative_error']:.1e}"
            f"{flag})"
        )
    if "first_call_s" in row["jittile"]:
        cells.append(f"{row['jittile']['first_call_s']:.1f} s to tune")
    print(" | ".join(cells), flush=True)


def main() -> None:
    import gemm_bf16
    import gemm_fp8
    import torch

    parser = argparse.ArgumentParser()
    parser.add_argument("run", nargs="?", default=os.environ.get("RUN", "0"))
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--only", choices=("bf16", "fp8"))
    parser.add_argument("--shapes", help="comma-separated groups of SHAPES")
    args = parser.parse_args()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    groups = args.shapes.split(",") if args.shapes else list(SHAPES)
    shapes = [s for g in groups for s in SHAPES[g]]
    rows = []
    path = common.RESULTS / f"gemm_run{int(args.run):02d}.json"
    header = {
        **common.provenance(),
        "samples": args.samples,
        "spin_cycles": common.SPIN_CYCLES,
    }
    for kind in ("bf16", "fp8"):
        if args.only and kind != args.only:
            continue
        contenders = (bf16_contenders if kind == "bf16" else fp8_contenders)(torch, sms)
        tuned = gemm_bf16.gemm_bf16_tuned if kind == "bf16" else gemm_fp8.gemm_fp8_tuned
        for shape in shapes:
            tuned.timings = {}  # filled again only if this shape's first call tunes
            try:
                row = measure(torch, kind, shape, contenders, args.samples)
            except Exception as exc:  # one shape failing must not lose the others' results
                print(f"{kind} {shape}: FAILED {exc!r}", flush=True)
                rows.append(
                    {"kind": kind, "M": shape[0], "N": shape[1], "K": shape[2], "failed": repr(exc)}
                )
                continue
            if "failed" not in row["jittile"]:
                row["jittile"]["config"] = repr(tuned.best_config)
                # every candidate's time as the tuner measured it (empty when the tuning was
                # cached): which tiles lose where
                row["jittile"]["tuning_ms"] = {repr(c): t for c, t in tuned.timings.items()}
            rows.append(row)
            print_row(row, contenders)
            save(path, header, rows)  # after every shape: a run cut short keeps its results
            torch.cuda.empty_cache()
    for kind, s in save(path, header, rows).items():
        print(f"{kind}: {s}", flush=True)
    print(f"wrote {path}")


def save(path: Path, header: dict, rows: list) -> dict:
    """Write the results so far with their summaries; returns the summaries."""
    good = [r for r in rows if "failed" not in r]
    summaries = {kind: summary(good, kind) for kind in ("bf16", "fp8")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        json.dumps({**header, "summary": summaries, "results": rows}, indent=1, default=str)
    )
    return summaries


if __name__ == "__main__":
    main()
