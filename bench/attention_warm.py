"""Compile every build of examples/attention_fwd.py that bench/attention.py and the GPU tests
launch, one process per build, all at once (each launches its build once on a small input), so
that those runs find the cubins in the disk cache: a build takes ~10 s to compile, and the
builds then take about as long as the slowest of them instead of their sum. The tests read the
disk cache only with ``JITTILE_CACHE=1`` set (tests/conftest.py turns it off otherwise).

    PYTHONPATH=$PWD python3 bench/attention_warm.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "examples"))


def launch_one(head_dim: int, causal: bool, options: dict) -> None:
    """Launch one build on a (1, 2, 300, D) input with grouped K/V heads."""
    import attention_fwd
    import torch

    q = torch.randn(1, 2, 300, head_dim, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(1, 1, 300, head_dim, device="cuda", dtype=torch.bfloat16) for _ in "kv")
    attention_fwd.attention(q, k, v, causal=causal, **options)
    torch.cuda.synchronize()


def main() -> None:
    if sys.argv[1:2] == ["--one"]:
        launch_one(*json.loads(sys.argv[2]))
        return
    import attention_fwd

    builds = [
        (head_dim, causal, options)
        for head_dim in attention_fwd.HEAD_DIMS
        for causal in (False, True)
        for options in [{}, *attention_fwd.other_builds(head_dim, causal)]
    ]
    started = time.perf_counter()
    workers = [
        (build, subprocess.Popen([sys.executable, __file__, "--one", json.dumps(build)]))
        for build in builds
    ]
    failed = [build for build, worker in workers if worker.wait() != 0]
    print(
        f"{len(builds)} attention builds launched in {time.perf_counter() - started:.1f} s; "
        f"failed: {failed or 'none'}"
    )
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
