"""Per shape, four kernels side by side on the H200: a config without a cluster, the same tile
in clusters of two with the stages released by remote arrivals in the default ``.release.cta``
form (``mbarrier.arrive.shared::cluster``, what the examples issue: a lone SYNCS.ARRIVE in
SASS), and with ``mbarrier.arrive.release.cluster`` arrivals (a copy of examples/gemm_bf16.py
with that one name changed: ptxas puts a ``MEMBAR.ALL.GPU`` before each), and in clusters of
four (each CTA multicasting a quarter of the B tile). Samples interleaved,
each behind a GPU spin; errors against an fp32 product.

    PYTHONPATH=$PWD python3 bench/cluster_arrive_ab.py [MxNxK:BMxBN ...]
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

DEFAULT = ("512x4096x4096:64x256", "4096x4096x4096:128x256")


def release_cluster_copy(folder: str):
    """examples/gemm_bf16.py with .release.cluster remote arrivals, imported under another name."""
    text = (ROOT / "examples" / "gemm_bf16.py").read_text()
    old = "T.ptx.mbarrier.arrive.shared__cluster.b64("
    assert old in text
    path = Path(folder, "gemm_bf16_release_cluster.py")
    path.write_text(text.replace(old, "T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64("))
    spec = importlib.util.spec_from_file_location("gemm_bf16_release_cluster", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gemm_bf16_release_cluster"] = module
    spec.loader.exec_module(module)
    return module


def compare(torch, common, variants, shape: tuple, tile: tuple) -> None:
    m, n, k = shape
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    exact = a.float() @ b.float().T
    runs = {}
    for name, module, cluster in variants:
        base = next(
            c
            for c in module.BF16_SPACE.configs
            if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["SPLIT"], c.kwargs["CLUSTER"])
            == (*tile, 1, 1)
        )
        v = base.kwargs  # the same tile in clusters of ``cluster`` (4: not in the tuned space)
        config = module.Space._config(
            v["BM"], v["BN"], v["STAGES"], v["GROUP_M"], 1, False, cluster
        )
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        runs[name] = (module, config, c, module.new_workspace(c, 1, 4))
    samples = {name: [] for name in runs}
    for step in range(23):
        for name, (module, config, c, w) in runs.items():
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            common.spin(torch)
            start.record()
            module.run_config(module.gemm_bf16_tuned, config, (a, b, c), w, m, n, k)
            stop.record()
            stop.synchronize()
            if step >= 3:
                samples[name].append(start.elapsed_time(stop) * 1e3)
    for name, (_, _, c, _) in runs.items():
        error = ((c.float() - exact).abs().max() / exact.abs().max()).item()
        us = statistics.median(samples[name])
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
        variants = (
            ("no cluster", gemm_bf16, 1),
            ("cluster, .release.cta arrivals", gemm_bf16, 2),
            ("cluster, .release.cluster arrivals", release_cluster_copy(folder), 2),
            ("cluster of 4, .release.cta arrivals", gemm_bf16, 4),
        )
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
