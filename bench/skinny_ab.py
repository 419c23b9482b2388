"""Where the short GEMMs' time goes (M <= 64, N = K = 4096: 0.74-0.76x cuBLAS in run 104), on the
H200, samples interleaved with cuBLAS, each spec timed hot (one operand set) and cold (every call,
whichever contender's, taking the next of several operand copies that exceed the 50 MB L2, as
bench/gemm.py has them since run 106; run 105's cold rows shared a copy per round, the first
contender's reads warming the L2 for the others):

- ``example``: examples/gemm_bf16.py's config of the spec's tile;
- ``no mma``: the same kernel with the consumers' wgmma removed (the ring streams and is
  released as before): the time of the loads and the pipeline alone, the product's share the
  difference;
- ``wider``: the space with 64x64 tiles (12 stages) and 64-row swapped tiles (64x16, 12 stages)
  added, so that 64 rows of output read A half as often as 64x32 tiles do without a
  cluster, and a swapped split-2 product has 64-row jobs;
- short-K specs (K = 64, 512) time the kernels' fixed cost beside cuBLAS's.

    PYTHONPATH=$PWD python3 bench/skinny_ab.py RUN [MxNxK:BMxBN[/SPLIT]:label,label ...]

writes bench/results/skinny_ab_runRUN.json.
"""

from __future__ import annotations

import sys
import tempfile

from gemm import copies_for
from gemm_ab import first_config, variant

NO_MMA = {
    "                    T.cuda.tile.apply(T.ptx[MMA_OP], acc, R_s[s, half], Q_s[s].T, "
    "scale_d=i)\n": "                    pass\n"
}
WIDER = {
    "        (64, 32, 12, 8, ANY_SPLIT, False),\n": "        (64, 32, 12, 8, ANY_SPLIT, False),\n"
    "        (64, 64, 12, 8, ANY_SPLIT, False),\n",
    "swap_tiles=((128, 16, 8), (128, 32, 8), (128, 64, 8)),": "swap_tiles=((128, 16, 8), "
    "(128, 32, 8), (128, 64, 8), (64, 16, 12)),",
}
SPECS = (
    "64x4096x4096:64x32:example,no mma",
    "64x4096x4096:64x64:wider",
    "64x4096x4096:64x64/2:wider",
    "64x4096x4096:128x64/4:example",
    "16x4096x4096:128x16/4:example,no mma",
    "16x4096x4096:64x16/2:wider",
    "1x4096x4096:128x16/2:example,no mma",
    "1x4096x4096:64x16/2:wider",
    "64x4096x64:64x32:example",
    "64x4096x512:64x32:example",
    "16x4096x512:128x16/4:example",
)


def compare(modules: dict, spec: str, cold: bool) -> list:
    """One spec's contenders and cuBLAS; ``cold``: each call takes the next of several operand
    copies, which together exceed the L2."""
    import common
    import torch

    shape, tile, labels = spec.split(":")
    m, n, k = (int(x) for x in shape.split("x"))
    tile, _, split = tile.partition("/")
    split = int(split or 1)
    tm, tn = (int(x) for x in tile.split("x"))
    copies = copies_for(2 * (m + n) * k) if cold else 1
    operands = [
        (
            torch.randn(m, k, device="cuda", dtype=torch.bfloat16),
            torch.randn(n, k, device="cuda", dtype=torch.bfloat16),
        )
        for _ in range(copies)
    ]
    a0, b0 = operands[0]
    exact = a0.float() @ b0.float().T

    turn = [0]  # one sequence over every contender's calls: none finds the last call's inputs

    def rotating(call):
        def step():
            a, b = operands[turn[0] % copies]
            turn[0] += 1
            call(a, b)

        return step

    outputs = {"cuBLAS": torch.empty(m, n, device="cuda", dtype=torch.bfloat16)}
    calls = {"cuBLAS": lambda a, b: torch.mm(a, b.T, out=outputs["cuBLAS"])}
    calls["read B"] = lambda a, b: b.sum(dtype=torch.float32)
    for label in labels.split(","):
        module = modules[label]
        config = first_config(module.BF16_SPACE, tm, tn, split)
        c = outputs[label] = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        w = module.new_workspace(c, m, n)
        calls[label] = lambda a, b, module=module, config=config, c=c, w=w: module.run_config(
            module.gemm_bf16_tuned, config, (a, b, c), w, m, n, k
        )
    for call in calls.values():  # every output from the first operand set, for the errors
        call(a0, b0)
    torch.cuda.synchronize()
    errors = {
        name: ((c.float() - exact).abs().max() / exact.abs().max()).item()
        for name, c in outputs.items()
    }
    times = common.median_ms({name: rotating(call) for name, call in calls.items()}, repeat=25)
    rows = []
    for name in calls:
        us = 1e3 * times[name]
        rows.append(
            {
                "shape": shape,
                "tile": tile + (f"/{split}" if split > 1 else ""),
                "l2": "cold" if cold else "hot",
                "contender": name,
                "us": us,
                "tflops": 2 * m * n * k / us / 1e6,
                "vs_cublas": times["cuBLAS"] / times[name],
                "relative_error": errors.get(name),
            }
        )
        print(
            f"{shape} {rows[-1]['tile']} {rows[-1]['l2']:4} {name:8}: {us:6.1f} us "
            f"{rows[-1]['vs_cublas']:.3f}x cuBLAS, relative error {errors.get(name)}",
            flush=True,
        )
    return rows


def main() -> None:
    import common
    import gemm_bf16

    run = int(sys.argv[1])
    with tempfile.TemporaryDirectory() as folder:
        modules = {
            "example": gemm_bf16,
            "no mma": variant(folder, "gemm_bf16_no_mma", NO_MMA),
            "wider": variant(folder, "gemm_bf16_wider", WIDER),
        }
        rows = []
        for spec in sys.argv[2:] or SPECS:
            for cold in (False, True):
                rows += compare(modules, spec, cold)
    common.save(f"skinny_ab_run{run:02d}", {"rows": rows})


if __name__ == "__main__":
    main()
