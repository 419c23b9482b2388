"""The GEMM operand loads' L2 promotion (examples/gemm_bf16.py ``L2_PROMOTION``: what a TMA load
that misses the L2 fetches from the DRAM) A/B on the H200: the example with each promotion
(0 none, 2 128 bytes, 3 256 bytes) as a variant, one forced config per shape, inputs rotating
over copies that exceed the L2 (as bench/gemm.py's), samples interleaved with cuBLAS behind
the 1 ms spin, errors against an fp32 product.

    PYTHONPATH=$PWD python3 bench/l2_promotion_ab.py RUN
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common
import gemm
from gemm_ab import first_config, variant

PROMOTIONS = (0, 2, 3)
# shape, tile (BM, BN, SPLIT): each the tuned choice of run 87 or 88 (``first_config``: the
# space's deepest ring of that tile, GROUP_M 8, no cluster; swap-AB for the 16-wide one)
SPECS = (
    ((1, 4096, 4096), (128, 16, 2)),
    ((64, 4096, 4096), (64, 32, 1)),
    ((512, 4096, 4096), (64, 256, 1)),
    ((512, 4096, 4096), (128, 128, 1)),
    ((256, 8192, 8192), (64, 256, 1)),
    ((3000, 5000, 2000), (128, 256, 1)),
    ((4096, 4096, 4096), (128, 256, 1)),
)


def time_shape(torch, modules: dict, shape: tuple, tile: tuple) -> list:
    """One row per contender: cuBLAS and each promotion's forced ``tile`` on ``shape``."""
    m, n, k = shape
    copies = gemm.copies_for((m + n) * k * 2 + m * n * 2)
    sets, reference = gemm.inputs(torch, "bf16", m, n, k, copies)
    outputs, runs = {}, {}  # runs[label](i): the product of input set i into the output
    for label, promotion in [("cuBLAS", None)] + [(f"promotion {p}", p) for p in PROMOTIONS]:
        c = outputs[label] = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        if promotion is None:
            runs[label] = lambda i, c=c: torch.matmul(sets[i][0], sets[i][1].T, out=c)
            continue
        module = modules[promotion]
        config = first_config(module.BF16_SPACE, *tile)
        w = module.new_workspace(c, m, n)
        runs[label] = lambda i, module=module, config=config, c=c, w=w: module.run_config(
            module.gemm_bf16_tuned, config, (*sets[i], c), w, m, n, k
        )
    for run_set in runs.values():  # every input set seen (TensorMaps encoded) before timing
        for i in range(copies):
            run_set(i)
    turns = {label: iter(range(1 << 30)) for label in runs}
    times = common.median_ms(
        {label: lambda label=label: runs[label](next(turns[label]) % copies) for label in runs},
        repeat=20,
    )
    rows = []
    for label, c in outputs.items():
        runs[label](0)
        torch.cuda.synchronize()
        error = ((c.float() - reference).abs().max() / reference.abs().max()).item()
        us = 1e3 * times[label]
        row = {
            "shape": f"{m}x{n}x{k}",
            "config": "x".join(str(x) for x in tile),
            "contender": label,
            "us": us,
            "tflops": 2 * m * n * k / us / 1e6,
            "vs_cublas": times["cuBLAS"] / times[label],
            "relative_error": error,
        }
        rows.append(row)
        print(
            f"{row['shape']} {row['config']} {label}: {us:.1f} us, {row['tflops']:.0f} "
            f"TFLOP/s, {row['vs_cublas']:.3f}x cuBLAS, relative error {error:.2g}",
            flush=True,
        )
    return rows


def main() -> None:
    import torch

    run = sys.argv[1] if len(sys.argv) > 1 else "0"
    folder = tempfile.mkdtemp()
    modules = {
        p: variant(folder, f"gemm_l2_{p}", {"L2_PROMOTION = 0": f"L2_PROMOTION = {p}"})
        for p in PROMOTIONS
    }
    rows = []
    for shape, tile in SPECS:
        rows += time_shape(torch, modules, shape, tile)
    common.save(f"l2_promotion_ab_run{int(run):02d}", {"rows": rows})


if __name__ == "__main__":
    main()
