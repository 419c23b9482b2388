"""Which part of the clustered GEMM protocol hangs on the H200 (run 59: every CLUSTER=2 config
timed out): the 128x128 clustered config launched alone, in its own process with a time limit,
from copies of examples/gemm_bf16.py with one part of the protocol changed each (K of one
stage or many; no final cluster barrier; stages released only locally; B loaded whole by each
CTA instead of multicast). A variant that completes where the original hangs names the part.

    PYTHONPATH=$PWD python3 bench/cluster_variants.py [SECONDS]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = (ROOT / "examples" / "gemm_bf16.py").read_text()
FINAL_SYNC = (
    "    if CLUSTER > 1:  # no CTA leaves while another may still arrive on its barriers\n"
    "        T.cuda.cluster_sync()\n"
)
REMOTE = (
    "        for r in T.unroll(CLUSTER):\n"
    "            T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(\n"
    "                T.ptx.mapa.shared__cluster.u32(empty.ptr_to([s]), T.uint32(r))\n"
    "            )\n"
)
WHOLE_B = "            if CLUSTER == 1:\n                T.cuda.tile.apply(\n                    T.ptx[LOAD],\n                    Q_s[s],"
VARIANTS = {
    "original, 1 K-stage": ([], 64),
    "original, 18 K-stages": ([], 1152),
    "no final cluster barrier": ([(FINAL_SYNC, "")], 1152),
    "stages released locally": (
        [
            (REMOTE, "        T.ptx.mbarrier.arrive.shared.b64(empty.ptr_to([s]))\n"),
            ("T.uint32(consumers * CLUSTER)", "T.uint32(consumers)"),
        ],
        1152,
    ),
    "B whole per CTA, no multicast": ([(WHOLE_B, WHOLE_B.replace("CLUSTER == 1", "True"))], 1152),
    "plain remote arrive": (
        [
            (
                "T.ptx.mbarrier.arrive.release.cluster.shared__cluster.b64(",
                "T.ptx.mbarrier.arrive.relaxed.cluster.shared__cluster.b64(",
            )
        ],
        1152,
    ),
}
CHILD = r"""
import sys, time
folder, k = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, folder)
import torch, gemm_bf16
(config,) = [c for c in gemm_bf16.BF16_SPACE.configs if (c.kwargs["BM"], c.kwargs["BN"],
             c.kwargs["SPLIT"], c.kwargs["CLUSTER"]) == (128, 128, 1, 2)]
m, n = 600, 1032
a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
gemm_bf16.run_config(gemm_bf16.gemm_bf16_tuned, config, (a, b, c), gemm_bf16.new_workspace(c, 1, 4), m, n, k)
torch.cuda.synchronize()
exact = a.float() @ b.float().T
print("completed, relative error", ((c.float() - exact).abs().max() / exact.abs().max()).item())
"""


def main() -> None:
    limit = float(sys.argv[1]) if len(sys.argv) > 1 else 25
    for name, (changes, k) in VARIANTS.items():
        text = SOURCE
        for old, new in changes:
            assert old in text, (name, old)
            text = text.replace(old, new)
        with tempfile.TemporaryDirectory() as folder:
            Path(folder, "gemm_bf16.py").write_text(text)
            try:
                done = subprocess.run(
                    [sys.executable, "-c", CHILD, folder, str(k)],
                    capture_output=True,
                    text=True,
                    timeout=limit,
                    cwd=ROOT,
                )
                tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-2:])
                print(f"{name}: rc {done.returncode}: {tail}", flush=True)
            except subprocess.TimeoutExpired:
                print(f"{name}: TIMEOUT after {limit:.0f} s (hung)", flush=True)


if __name__ == "__main__":
    main()
