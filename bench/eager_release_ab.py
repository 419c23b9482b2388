"""Per shape and tile, two kernels side by side on the H200: the consumers as examples/gemm_bf16.py
writes them (one wgmma group in flight: a stage is released once the next stage's group is
issued and its own has completed, so each consumer holds two stages), and a copy that waits for
each stage's group at once and releases it (``wgmma.wait_group 0``: one stage held, no overlap
of consecutive groups). Runs 63-64 found the small tiles' K-stages waiting on their loads with
the tensor cores half idle, which a ring holding fewer stages might feed. Samples interleaved,
each behind a 1 ms GPU spin; errors against an fp32 product.

    PYTHONPATH=$PWD python3 bench/eager_release_ab.py [MxNxK:BMxBN ...]
"""

from __future__ import annotations

import importlib.util
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT = (
    "512x4096x4096:64x256",
    "256x8192x8192:64x256",
    "1024x1024x1024:64x128",
    "1024x1024x4096:128x128",
    "4097x4104x4096:128x128",
    "4096x4096x4096:128x256",
)
PIPELINED = """                    T.ptx.wgmma.wait_group.sync.aligned(1)  # the previous stage's are done
                    if i > 0 and leader:
                        release(empty, (it + RING - 1) % RING, CLUSTER)"""
EAGER = """                    T.ptx.wgmma.wait_group.sync.aligned(0)
                    if leader:
                        release(empty, s, CLUSTER)"""
TAIL = """                T.ptx.wgmma.wait_group.sync.aligned(0)
                if leader:
                    release(empty, (it + RING - 1) % RING, CLUSTER)"""
EAGER_TAIL = """                T.ptx.wgmma.wait_group.sync.aligned(0)"""


def eager_copy(folder: str):
    """examples/gemm_bf16.py with eager stage releases, imported under another name."""
    text = (ROOT / "examples" / "gemm_bf16.py").read_text()
    assert PIPELINED in text and TAIL in text
    path = Path(folder, "gemm_bf16_eager.py")
    path.write_text(text.replace(PIPELINED, EAGER).replace(TAIL, EAGER_TAIL))
    spec = importlib.util.spec_from_file_location("gemm_bf16_eager", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gemm_bf16_eager"] = module
    spec.loader.exec_module(module)
    return module


def compare(torch, common, variants, shape: tuple, tile: tuple) -> None:
    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    exact = a.float() @ b.float().T
    runs = {}
    for name, module in variants:
        config = next(
            c
            for c in module.BF16_SPACE.configs
            if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["SPLIT"], c.kwargs["CLUSTER"])
            == (*tile, 1, 1)
        )
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        runs[name] = (module, config, c, module.new_workspace(c, 1, 4))
    calls = {
        name: (
            lambda module=module, config=config, c=c, w=w: module.run_config(
                module.gemm_bf16_tuned, config, (a, b, c), w, m, n, k
            )
        )
        for name, (module, config, c, w) in runs.items()
    }
    times = common.median_ms(calls, repeat=15)
    for name, (_, _, c, _) in runs.items():
        error = ((c.float() - exact).abs().max() / exact.abs().max()).item()
        us = 1e3 * times[name]
        print(
            f"{m}x{n}x{k} {tile[0]}x{tile[1]} {name}: {us:.1f} us, "
            f"{2 * m * n * k / us / 1e6:.0f} TFLOP/s, relative error {error:.2g}",
            flush=True,
        )


def main() -> None:
    import common
    import gemm_bf16
    import torch

    with tempfile.TemporaryDirectory() as folder:
        variants = (("pipelined", gemm_bf16), ("eager release", eager_copy(folder)))
        for spec in sys.argv[1:] or DEFAULT:
            shape, tile = spec.split(":")
            compare(
                torch,
                common,
                variants,
                tuple(int(x) for x in shape.split("x")),
                tuple(int(x) for x in tile.split("x")),
            )


if __name__ == "__main__":
    main()
