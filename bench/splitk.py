"""One-launch split-K on the H200 (examples/gemm_bf16.py): every split-capable tile of the bf16
space at SPLIT 1, 2, 4 and 8, forced (untuned, pruning ignored), against the tuned launch and
cuBLAS (``torch.matmul``), on the small-output shapes where split-K matters.

Each sample is one call between CUDA events after a GPU spin (``common.SPIN_CYCLES``, ``torch.cuda._sleep``), so
the host's launch cost is hidden; contenders are interleaved round by round; medians. Inputs
rotate over copies that together exceed the 50 MB L2. Every output is checked against an fp32
product (max |error| / max |reference|), and the split-K workspace must be zero after all the
launches (each launch leaves it so for the next). ``vs_cublas`` is cuBLAS's median over the
contender's (above 1: faster), ``speedup_vs_split1`` the same tile at SPLIT 1 over it. One JSON
file.

    PYTHONPATH=$PWD python3 bench/splitk.py OUT.json [--samples N] [--shapes 1024x1024x1024,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "examples"))
import common  # noqa: E402

SHAPES = [(1024, 1024, 1024), (16, 4096, 4096), (64, 4096, 4096), (512, 4096, 4096)]
SHAPES += [(256, 8192, 8192)]
L2_BYTES = 50 * 2**20
TILES = [(128, 128), (64, 256), (64, 128)]  # the split-capable tiles (GROUP_M 8)


def forced_configs(gemm_bf16, m: int) -> list:
    """The configs to time for an M-row product: swap-AB with the N that covers M where
    M <= 64, the split-capable tiles where M > 32; SPLIT 1, 2, 4, 8 of each."""
    out = []
    for config in gemm_bf16.BF16_SPACE.configs:
        v = config.kwargs
        if v["SWAP"]:
            wanted = m <= 64 and v["BN"] == min(b for b in (16, 32, 64) if b >= m)
        else:
            wanted = m > 32 and (v["BM"], v["BN"]) in TILES
        if wanted and v["GROUP_M"] == 8:
            out.append(config)
    return out


def label(config) -> str:
    v = config.kwargs
    swap = " swap" if v["SWAP"] else ""
    return f"{v['BM']}x{v['BN']}x{v['STAGES']} split{v['SPLIT']}{swap}"


def measure(torch, gemm_bf16, shape, samples: int, sms: int) -> dict:
    m, n, k = shape
    copies = max(1, min(8, -(-L2_BYTES // ((m + n) * k * 2 + m * n * 2))))
    sets = []
    for i in range(copies):
        torch.manual_seed(i)
        a = torch.randn(m, k, device="cuda").to(torch.bfloat16)
        b = torch.randn(n, k, device="cuda").to(torch.bfloat16)
        sets.append((a, b))
    reference = sets[0][0].float() @ sets[0][1].float().T
    scale = reference.abs().max().item()
    workspace = gemm_bf16.new_workspace(sets[0][0], m, n)
    contenders = {
        "cublas": lambda a, b, c: torch.matmul(a, b.T, out=c),
        "tuned": lambda a, b, c: gemm_bf16.launch(a, b, c, sms),
    }
    configs = {}
    for config in forced_configs(gemm_bf16, m):
        configs[label(config)] = config
        contenders[label(config)] = lambda a, b, c, cfg=config: gemm_bf16.run_config(
            gemm_bf16.gemm_bf16_tuned, cfg, (a, b, c), workspace, m, n, k, sms
        )
    outputs = {name: torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for name in contenders}
    row = {"M": m, "N": n, "K": k, "input_copies": copies, "results": {}}
    for name, fn in list(contenders.items()):
        started = time.perf_counter()
        try:
            fn(*sets[0], outputs[name])  # compiles or tunes
            torch.cuda.synchronize()
        except Exception as exc:  # one config failing must not lose the others
            print(f"{shape} {name}: FAILED {exc!r}", flush=True)
            row["results"][name] = {"failed": repr(exc)}
            del contenders[name]
            continue
        error = (outputs[name].float() - reference).abs().max().item() / scale
        row["results"][name] = {
            "first_call_s": round(time.perf_counter() - started, 3),
            "relative_error": error,
            "correct": error <= 0.02,
        }
        if name in configs:
            row["results"][name]["config"] = configs[name].kwargs
    times = {name: [] for name in contenders}
    for step in range(3 + samples):
        for name, fn in contenders.items():
            a, b = sets[step % copies]
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            common.spin(torch)
            start.record()
            fn(a, b, outputs[name])
            stop.record()
            stop.synchronize()
            if step >= 3:
                times[name].append(start.elapsed_time(stop))
    cublas_ms = statistics.median(times["cublas"]) if "cublas" in times else None
    for name, values in times.items():
        ms = statistics.median(values)
        result = row["results"][name]
        result.update(ms=ms, tflops=2 * m * n * k / ms / 1e9, vs_cublas=cublas_ms / ms)
    for name, config in configs.items():
        v = config.kwargs
        base = label(same_tile(gemm_bf16, v, split=1))
        result = row["results"].get(name, {})
        if "ms" in result and "ms" in row["results"].get(base, {}):
            result["speedup_vs_split1"] = row["results"][base]["ms"] / result["ms"]
    row["tuned_config"] = repr(gemm_bf16.gemm_bf16_tuned.best_config)
    row["counters_zero_after"] = bool(not workspace[1].any().item())
    return row


def same_tile(gemm_bf16, values: dict, split: int):
    """The config of the space with ``values`` but ``SPLIT = split``."""
    wanted = {**values, "SPLIT": split}
    return next(c for c in gemm_bf16.BF16_SPACE.configs if c.kwargs == wanted)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--samples", type=int, default=15)
    parser.add_argument("--shapes", default="")
    args = parser.parse_args()
    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    import gemm_bf16
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    report = {
        **common.provenance(),
        "samples": args.samples,
        "spin_cycles": common.SPIN_CYCLES,
        "shapes": [],
    }
    for shape in shapes:
        try:
            row = measure(torch, gemm_bf16, shape, args.samples, sms)
        except Exception as exc:  # a shape failing must not lose the others
            print(f"{shape}: FAILED {exc!r}", flush=True)
            row = {"M": shape[0], "N": shape[1], "K": shape[2], "failed": repr(exc)}
        report["shapes"].append(row)
        for name, r in row.get("results", {}).items():
            shown = {key: r[key] for key in ("ms", "vs_cublas", "speedup_vs_split1") if key in r}
            print(f"{shape} {name}: {shown} correct={r.get('correct')}", flush=True)
        print(f"{shape} counters zero after: {row.get('counters_zero_after')}", flush=True)
        Path(args.out).write_text(json.dumps(report, indent=1, default=str))
        torch.cuda.empty_cache()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
