"""Variants of examples/gemm_bf16.py side by side on the H200, for A/B measurements of one change
to the kernel's text: a copy of the example with some lines replaced, imported under another
name, and the timing of one config of each variant on the same operands (samples interleaved,
each behind a 1 ms GPU spin, errors against an fp32 product)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))


# the short and mid-size products' tiles the A/B scripts time by default (runs 101, 103)
SPECS = (
    "64x4096x4096:64x32",
    "16x4096x4096:128x16/4",
    "1x4096x4096:128x16/2",
    "128x8192x8192:64x128",
    "512x4096x4096:64x256",
    "256x8192x8192:64x256",
    "1024x1024x1024:64x128",
    "512x4096x4096:128x128",
)


def variant(folder: str, name: str, replacements: dict, example: str = "gemm_bf16.py"):
    """examples/``example`` with each ``old`` text replaced by ``new``, imported as ``name``."""
    text = (ROOT / "examples" / example).read_text()
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    path = Path(folder, f"{name}.py")
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def first_config(space, tm: int, tn: int, split: int = 1, cluster: int = 1):
    """The space's first config of a BM x BN tile with this SPLIT and CLUSTER (its deepest ring,
    GROUP_M 8)."""
    return next(
        c
        for c in space.configs
        if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["SPLIT"], c.kwargs["CLUSTER"])
        == (tm, tn, split, cluster)
    )


def compare(variants, spec: str) -> list:
    """Time ``variants`` ((label, module, cluster size) each) and cuBLAS (``torch.mm``) on one
    ``MxNxK:BMxBN[/SPLIT][@CLUSTER]`` spec: the space's first config of that tile (swapped where
    the space swaps it) split SPLIT ways (default 1), in clusters of CLUSTER CTAs where the spec
    names it, else of the variant's size. Returns one row per contender."""
    import common
    import torch

    shape, tile = spec.split(":")
    m, n, k = (int(x) for x in shape.split("x"))
    tile, _, clustered = tile.partition("@")
    tile, _, split = tile.partition("/")
    split = int(split or 1)
    tm, tn = (int(x) for x in tile.split("x"))
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    exact = a.float() @ b.float().T
    outputs = {"cuBLAS": torch.empty(m, n, device="cuda", dtype=torch.bfloat16)}
    calls = {"cuBLAS": lambda: torch.mm(a, b.T, out=outputs["cuBLAS"])}
    for label, module, cluster in variants:
        v = first_config(
            module.BF16_SPACE, tm, tn, split
        ).kwargs  # the same tile in clusters of ``cluster`` (4: not in the tuned space)
        size = int(clustered or cluster)
        config = module.Space._config(tm, tn, v["STAGES"], v["GROUP_M"], split, v["SWAP"], size)
        c = outputs[label] = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        w = module.new_workspace(c, m, n)
        calls[label] = lambda module=module, config=config, c=c, w=w: module.run_config(
            module.gemm_bf16_tuned, config, (a, b, c), w, m, n, k
        )
    times = common.median_ms(calls, repeat=20)
    rows = []
    for label, c in outputs.items():
        error = ((c.float() - exact).abs().max() / exact.abs().max()).item()
        us = 1e3 * times[label]
        rows.append(
            {
                "shape": shape,
                "tile": tile
                + (f"/{split}" if split > 1 else "")
                + (f"@{clustered}" if clustered else ""),
                "contender": label,
                "us": us,
                "tflops": 2 * m * n * k / us / 1e6,
                "vs_cublas": times["cuBLAS"] / times[label],
                "relative_error": error,
            }
        )
        print(
            f"{m}x{n}x{k} {tm}x{tn}/{split}@{clustered or cluster} {label}: {us:.1f} us, "
            f"{2 * m * n * k / us / 1e6:.0f} TFLOP/s, {rows[-1]['vs_cublas']:.3f}x cuBLAS, "
            f"relative error {error:.2g}",
            flush=True,
        )
    return rows


def time_variants(name: str, variants, specs: tuple = SPECS) -> None:
    """``compare`` the ``variants`` on each spec the command line names after RUN (default
    ``specs``), saving the rows as bench/results/NAME_runRUN.json."""
    import common

    run = int(sys.argv[1])
    rows = []
    for spec in sys.argv[2:] or specs:
        rows += compare(variants, spec)
    common.save(f"{name}_run{run:02d}", {"rows": rows})


def fp8_variant(folder: str, name: str, body: dict, fp8: dict):
    """examples/gemm_fp8.py with the ``fp8`` replacements over a variant of gemm_bf16.py (its
    ``body`` replacements, imported as ``name``_body), imported as ``name``."""
    variant(folder, f"{name}_body", body)
    imports = {"from gemm_bf16 import": f"from {name}_body import"}
    return variant(folder, name, {**imports, **fp8}, "gemm_fp8.py")


def compare_fp8(variants, spec: str, repeat: int = 20) -> list:
    """Time ``variants`` ((label, gemm_fp8 module) each) and ``torch._scaled_mm`` on one
    ``MxNxK:TILE[,TILE...]`` spec (e4m3 in, unit scales, bf16 out), a TILE ``BMxBN`` or
    ``BMxBN/CLUSTER``: the space's first unsplit config of each tile, per variant. Returns one
    row per contender."""
    import common
    import torch

    shape, tiles = spec.split(":")
    m, n, k = (int(x) for x in shape.split("x"))
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((1,), device="cuda", dtype=torch.float32)
    exact = a.float() @ b.float().T
    outputs = {"cuBLAS": torch.empty(m, n, device="cuda", dtype=torch.bfloat16)}
    calls = {
        "cuBLAS": lambda: torch._scaled_mm(
            a, b.T, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=outputs["cuBLAS"]
        )
    }
    for tile in tiles.split(","):
        size, _, cluster = tile.partition("/")
        tm, tn = (int(x) for x in size.split("x"))
        for label, module in variants:
            body = sys.modules[module.run_tuned.__module__]  # its gemm_bf16
            config = first_config(module.FP8_SPACE, tm, tn, 1, int(cluster or 1))
            name = f"{label} {tile}"
            c = outputs[name] = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            w = body.new_workspace(c, 1, 4)
            tail = module.tail_arguments(one, one, c)
            calls[name] = (
                lambda body=body, kernel=module.gemm_fp8_tuned, config=config, c=c, w=w, tail=tail: (
                    body.run_config(kernel, config, (a, b, c), w, m, n, k, extra=tail)
                )
            )
    times = common.median_ms(calls, repeat=repeat)
    rows = []
    for name, c in outputs.items():
        error = ((c.float() - exact).abs().max() / exact.abs().max()).item()
        mean_error = ((c.float() - exact).abs().mean() / exact.abs().mean()).item()
        us = 1e3 * times[name]
        rows.append(
            {
                "shape": shape,
                "contender": name,
                "us": us,
                "tflops": 2 * m * n * k / us / 1e6,
                "vs_cublas": times["cuBLAS"] / times[name],
                "relative_error": error,
                "mean_relative_error": mean_error,
            }
        )
        print(
            f"{shape} {name}: {us:.1f} us, {rows[-1]['tflops']:.0f} TFLOP/s, "
            f"{rows[-1]['vs_cublas']:.3f}x cuBLAS, relative error {error:.2g}, "
            f"mean relative error {mean_error:.4g}",
            flush=True,
        )
    return rows
