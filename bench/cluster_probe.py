"""Each clustered GEMM config (and the 128x256 one without a cluster) launched alone on the H200
in its own process with a time limit: whether it completes, its error against an fp32 product,
and its registers as ptxas reported them and as the driver loaded them. Finds a config that
hangs (a GPU-side deadlock shows as a timeout) without stopping the others.

    PYTHONPATH=$PWD python3 bench/cluster_probe.py [SECONDS]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import sys, time
sys.path.insert(0, "examples")
import torch, gemm_bf16, gemm_fp8
from cuda.bindings import driver as drv
kind, index = sys.argv[1], int(sys.argv[2])
space, tuned = (gemm_bf16.BF16_SPACE, gemm_bf16.gemm_bf16_tuned) if kind == "bf16" else (
    gemm_fp8.FP8_SPACE, gemm_fp8.gemm_fp8_tuned)
config = space.configs[index]
m, n, k = 600, 1032, 1152
dtype = torch.bfloat16 if kind == "bf16" else torch.float8_e4m3fn
a = torch.randn(m, k, device="cuda").to(dtype)
b = torch.randn(n, k, device="cuda").to(dtype)
c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
extra = () if kind == "bf16" else gemm_fp8.tail_arguments(1.0, 1.0, c)
workspace = gemm_bf16.new_workspace(c, 1, 4)
t = time.perf_counter()
gemm_bf16.run_config(tuned, config, (a, b, c), workspace, m, n, k, extra=extra)
torch.cuda.synchronize()
ms = (time.perf_counter() - t) * 1e3
ck = tuned.kernel.compile(a, b, c, *workspace, m, n, k, *extra, **config.kwargs)
function = ck.launcher().function
attribute = drv.CUfunction_attribute.CU_FUNC_ATTRIBUTE_NUM_REGS
_, loaded = drv.cuFuncGetAttribute(attribute, function)
exact = a.float() @ b.float().T
error = ((c.float() - exact).abs().max() / exact.abs().max()).item()
print(f"done in {ms:.0f} ms, relative error {error:.2g}, registers {ck.metadata['registers']} "
      f"(loaded {loaded}), resident clusters {gemm_bf16.resident_clusters(132, 2)}", flush=True)
"""


def main() -> None:
    sys.path.insert(0, str(ROOT / "examples"))
    import gemm_bf16
    import gemm_fp8

    limit = float(sys.argv[1]) if len(sys.argv) > 1 else 30
    for kind, space in (("bf16", gemm_bf16.BF16_SPACE), ("fp8", gemm_fp8.FP8_SPACE)):
        for index, config in enumerate(space.configs):
            v = config.kwargs
            if v["CLUSTER"] == 1 and (v["BM"], v["BN"], v["GROUP_M"], v["STAGES"]) not in (
                (128, 256, 8, 4),
                (128, 192, 8, 5),
            ):
                continue
            try:
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, kind, str(index)],
                    capture_output=True,
                    text=True,
                    timeout=limit,
                    cwd=ROOT,
                )
                tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
                print(f"{kind} {config}: rc {done.returncode}: " + " | ".join(tail), flush=True)
            except subprocess.TimeoutExpired:
                print(f"{kind} {config}: TIMEOUT after {limit:.0f} s (hung)", flush=True)


if __name__ == "__main__":
    main()
