"""One shape, three kernels side by side on the H200: the 64x256 config without a cluster, in
clusters of two with the stages released by ``mbarrier.arrive.release.cluster`` (what the
examples issue: ptxas puts a ``MEMBAR.ALL.GPU`` before each remote arrive), and the same with
``.relaxed.cluster`` arrivals (a copy of examples/gemm_bf16.py with that one word changed).
Samples interleaved, each behind a GPU spin; errors against an fp32 product.

    PYTHONPATH=$PWD python3 bench/cluster_arrive_ab.py [M N K]
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


def relaxed_copy(folder: str):
    """examples/gemm_bf16.py with relaxed remote arrivals, imported under another name."""
    text = (ROOT / "examples" / "gemm_bf16.py").read_text()
    old = "mbarrier.arrive.release.cluster.shared__cluster.b64("
    assert old in text
    path = Path(folder, "gemm_bf16_relaxed.py")
    path.write_text(text.replace(old, "mbarrier.arrive.relaxed.cluster.shared__cluster.b64("))
    spec = importlib.util.spec_from_file_location("gemm_bf16_relaxed", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gemm_bf16_relaxed"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    import common
    import gemm_bf16
    import torch

    m, n, k = (int(x) for x in sys.argv[1:4]) if len(sys.argv) > 3 else (512, 4096, 4096)
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    exact = a.float() @ b.float().T
    with tempfile.TemporaryDirectory() as folder:
        relaxed = relaxed_copy(folder)
        runs = {}
        for name, module, cluster in (
            ("no cluster", gemm_bf16, 1),
            ("cluster, release arrivals", gemm_bf16, 2),
            ("cluster, relaxed arrivals", relaxed, 2),
        ):
            (config,) = [
                c
                for c in module.BF16_SPACE.configs
                if (c.kwargs["BM"], c.kwargs["BN"], c.kwargs["SPLIT"], c.kwargs["CLUSTER"])
                == (64, 256, 1, cluster)
            ]
            c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
            w = module.new_workspace(c, 1, 4)
            runs[name] = (module, config, c, w)
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
                f"{m}x{n}x{k} {name}: {us:.1f} us, {2 * m * n * k / us / 1e6:.0f} TFLOP/s, "
                f"relative error {error:.2g}",
                flush=True,
            )


if __name__ == "__main__":
    main()
